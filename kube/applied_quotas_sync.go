package kube

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/quotakit/quotakit/clusterquota"
)

// indexLag is how long a sync waits for the index to see the version of
// a ClusterQuota that the informer's store holds: its handler runs apart
// from the writer's, a moment later.
const indexLag = 50 * time.Millisecond

// processNext syncs the next quota of the queue, and reports whether the
// queue is still running.
func (w *AppliedQuotaWriter) processNext(ctx context.Context) bool {
	name, shutdown := w.queue.Get()
	if shutdown {
		return false
	}
	defer w.queue.Done(name)
	log := logr.FromContextOrDiscard(ctx).WithValues("clusterQuota", name)
	// The interval is kept here as well as when the quota is added:
	// an event while its copies were written makes it dirty, and the
	// queue hands it out again at once.
	w.mu.Lock()
	wait := time.Until(w.last[name].Add(w.opts.Interval))
	w.mu.Unlock()
	if wait > 0 {
		w.queue.AddAfter(name, wait)
		return true
	}
	retry, err := w.sync(ctx, name)
	switch {
	case err != nil:
		log.Error(err, "writing the copies of a cluster quota in its namespaces")
		w.queue.AddRateLimited(name)
	case retry:
		w.queue.AddAfter(name, indexLag)
	default:
		w.queue.Forget(name)
	}
	return true
}

// sync makes the copies of the quota name what they should be: one in
// each namespace that the quota, if valid, selects, and no other. It
// reports retry when the index has not yet seen the quota's version.
func (w *AppliedQuotaWriter) sync(ctx context.Context, name string) (retry bool, err error) {
	cq, err := w.quota(name)
	if err != nil {
		return false, err
	}
	held := w.index.Get(name)
	if (cq == nil) != (held == nil) || (cq != nil && held.ResourceVersion != cq.ResourceVersion) {
		return true, nil
	}
	w.mu.Lock()
	hinted := w.hints[name]
	delete(w.hints, name)
	w.mu.Unlock()
	want, err := w.desired(cq, hinted)
	if err != nil {
		return false, err
	}
	have, err := w.copies.GetIndexer().ByIndex(byQuota, name)
	if err != nil {
		return false, fmt.Errorf("kube: copies of %s: %w", name, err)
	}

	var errs []error
	wrote := false
	write := func(f func() error) {
		if !wrote {
			wrote = true
			w.mu.Lock()
			w.last[name] = time.Now()
			w.mu.Unlock()
		}
		if err := f(); err != nil {
			w.failures.Add(1)
			errs = append(errs, err)
		}
	}
	for _, obj := range have {
		a, ok := obj.(*clusterquota.AppliedClusterQuota)
		if !ok || a.Labels[clusterquota.AppliedLabel] != "true" {
			continue // not the writer's: never touched
		}
		if want[a.Namespace] == nil {
			write(func() error { return w.delete(ctx, a) })
			continue
		}
		if w.stale(a.Namespace+"/"+a.Name, a.ResourceVersion) {
			retry = true
		} else if !sameCopy(a, want[a.Namespace]) {
			next := want[a.Namespace]
			next.ResourceVersion = a.ResourceVersion
			write(func() error { return w.update(ctx, next) })
		}
		delete(want, a.Namespace)
	}
	for _, a := range want {
		if w.stale(a.Namespace+"/"+a.Name, "") {
			retry = true
			continue
		}
		write(func() error { return w.create(ctx, a) })
	}
	if cq == nil && len(have) == 0 {
		w.mu.Lock()
		delete(w.last, name)
		w.mu.Unlock()
	}
	// The namespaces hinted are looked at again at the next sync if this
	// one failed.
	if len(errs) > 0 && len(hinted) > 0 {
		w.mu.Lock()
		if w.hints[name] == nil {
			w.hints[name] = hinted
		} else {
			for ns := range hinted {
				w.hints[name][ns] = struct{}{}
			}
		}
		w.mu.Unlock()
	}
	return retry, errors.Join(errs...)
}

// wrote records a write of a, from version before to after, for stale.
// A write that did not change the version (a fake API) is not recorded.
func (w *AppliedQuotaWriter) wrote(a *clusterquota.AppliedClusterQuota, before, after string) {
	if before == after {
		return
	}
	w.mu.Lock()
	w.written[a.Namespace+"/"+a.Name] = writtenCopy{before: before, at: time.Now()}
	w.mu.Unlock()
}

// stale reports whether the cache still shows the copy key at rv, the
// version it showed before the writer's last write of it ("" when the
// write created it and the cache has not shown it since); once the cache
// shows another version, the record is dropped.
func (w *AppliedQuotaWriter) stale(key, rv string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.written[key]
	if ok && e.before == rv && time.Since(e.at) < writtenWait {
		return true
	}
	delete(w.written, key)
	return false
}

// quota returns the ClusterQuota name from the informer's store, or nil.
func (w *AppliedQuotaWriter) quota(name string) (*clusterquota.ClusterQuota, error) {
	obj, ok, err := w.quotas.GetStore().GetByKey(name)
	if err != nil || !ok {
		return nil, err
	}
	cq, ok := obj.(*clusterquota.ClusterQuota)
	if !ok {
		return nil, fmt.Errorf("kube: ClusterQuota %s cached as %T", name, obj)
	}
	return cq, nil
}

// desired returns the copies cq should have, by namespace: none when cq
// is nil or invalid; else one in each namespace the index says it
// selects, the namespaces hinted judged from their own cached objects
// (the index may not have seen them yet). A namespace being deleted gets
// none: the API server refuses new objects in it.
func (w *AppliedQuotaWriter) desired(cq *clusterquota.ClusterQuota, hinted map[string]struct{}) (map[string]*clusterquota.AppliedClusterQuota, error) {
	out := map[string]*clusterquota.AppliedClusterQuota{}
	if cq == nil {
		return out, nil
	}
	names, ok := w.index.Namespaces(cq)
	if !ok {
		return out, nil
	}
	selected := make(map[string]bool, len(names)+len(hinted))
	for _, ns := range names {
		selected[ns] = true
	}
	for ns := range hinted {
		selected[ns] = false
		if obj := w.namespace(ns); obj != nil {
			for _, q := range w.index.Lookup(obj).Names {
				if q == cq.Name {
					selected[ns] = true
				}
			}
		}
	}
	for ns, yes := range selected {
		if !yes {
			continue
		}
		if obj := w.namespace(ns); obj == nil || obj.GetDeletionTimestamp() != nil {
			continue
		}
		a, err := clusterquota.Applied(cq, ns)
		if err != nil {
			return nil, err
		}
		out[ns] = a
	}
	return out, nil
}

// namespace returns the namespace name from the informer's store, or nil.
func (w *AppliedQuotaWriter) namespace(name string) metav1.Object {
	obj, ok, err := w.namespaces.GetStore().GetByKey(name)
	if err != nil || !ok {
		return nil
	}
	m, _ := obj.(metav1.Object)
	return m
}

// sameCopy reports whether have, a copy the API server holds, is want in
// every field the writer sets.
func sameCopy(have, want *clusterquota.AppliedClusterQuota) bool {
	return have.Labels[clusterquota.AppliedLabel] == "true" &&
		equality.Semantic.DeepEqual(have.OwnerReferences, want.OwnerReferences) &&
		equality.Semantic.DeepEqual(have.Spec, want.Spec) &&
		equality.Semantic.DeepEqual(have.Status, want.Status)
}

func (w *AppliedQuotaWriter) create(ctx context.Context, a *clusterquota.AppliedClusterQuota) error {
	u, err := appliedContent(a)
	if err != nil {
		return err
	}
	out, err := w.client.Namespace(a.Namespace).Create(ctx, u, metav1.CreateOptions{})
	if err == nil {
		w.wrote(a, "", out.GetResourceVersion())
	}
	switch {
	case apierrors.IsNotFound(err) || isTerminating(err):
		return nil // the namespace is gone or going: its event follows
	case err != nil:
		return fmt.Errorf("kube: create appliedclusterquota %s/%s: %w", a.Namespace, a.Name, err)
	}
	w.creates.Add(1)
	return nil
}

func (w *AppliedQuotaWriter) update(ctx context.Context, a *clusterquota.AppliedClusterQuota) error {
	u, err := appliedContent(a)
	if err != nil {
		return err
	}
	out, err := w.client.Namespace(a.Namespace).Update(ctx, u, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("kube: update appliedclusterquota %s/%s: %w", a.Namespace, a.Name, err)
	}
	w.wrote(a, a.ResourceVersion, out.GetResourceVersion())
	w.updates.Add(1)
	return nil
}

// delete deletes a, the version the writer's cache holds: the UID as a
// precondition, so that a copy deleted and written again meanwhile
// stays.
func (w *AppliedQuotaWriter) delete(ctx context.Context, a *clusterquota.AppliedClusterQuota) error {
	err := w.client.Namespace(a.Namespace).Delete(ctx, a.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &a.UID}})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("kube: delete appliedclusterquota %s/%s: %w", a.Namespace, a.Name, err)
	}
	w.deletes.Add(1)
	return nil
}

// appliedContent returns a as the dynamic client writes it.
func appliedContent(a *clusterquota.AppliedClusterQuota) (*unstructured.Unstructured, error) {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(a)
	if err != nil {
		return nil, fmt.Errorf("kube: converting AppliedClusterQuota %s/%s: %w", a.Namespace, a.Name, err)
	}
	return &unstructured.Unstructured{Object: content}, nil
}

// isTerminating reports whether err is the API server's refusal to create
// an object in a namespace being deleted.
func isTerminating(err error) bool {
	return apierrors.IsForbidden(err) && apierrors.HasStatusCause(err, "NamespaceTerminating")
}
