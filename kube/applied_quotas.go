package kube

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/quotakit/quotakit/cache"
	"github.com/quotakit/quotakit/clusterquota"
	"github.com/quotakit/quotakit/workqueue"
)

// DefaultAppliedQuotaInterval is the least time between two rounds of
// writes of one ClusterQuota's copies, when
// [AppliedQuotaWriterOptions.Interval] is zero.
const DefaultAppliedQuotaInterval = 5 * time.Second

// AppliedQuotaWriterOptions configures an [AppliedQuotaWriter]. The zero
// value means the defaults.
type AppliedQuotaWriterOptions struct {
	// Interval is the least time between two rounds of writes of one
	// ClusterQuota's copies: the changes of a quota within it go out
	// together, at its end. A quota's status changes with every
	// admitted object, and each change is one write per selected
	// namespace, so the interval bounds what a busy tenant costs.
	// Defaults to [DefaultAppliedQuotaInterval].
	Interval time.Duration
	// Workers is the number of ClusterQuotas whose copies are written at
	// once. Defaults to 2.
	Workers int
	// ResyncPeriod is how often every ClusterQuota's copies are compared
	// with what they should be, whatever the events said. A round that
	// finds nothing to change makes no request. Defaults to 10 minutes.
	ResyncPeriod time.Duration
}

// AppliedQuotaStats counts what an [AppliedQuotaWriter] has done since it
// was built.
type AppliedQuotaStats struct {
	// Creates, Updates and Deletes count the copies created, updated and
	// deleted.
	Creates, Updates, Deletes int64
	// Failures counts the requests that failed; each ClusterQuota with a
	// failure is tried again, with a growing delay.
	Failures int64
}

// AppliedQuotaWriter keeps, in every namespace that a valid ClusterQuota
// selects, one [clusterquota.AppliedClusterQuota] of that quota (see
// [clusterquota.Applied]), and no other: it creates the copy when a
// namespace joins the selection or a quota appears, updates it when the
// quota's spec or status changes, and deletes it when the namespace
// leaves, the quota goes or turns invalid. It lists, changes and deletes
// only objects labelled [clusterquota.AppliedLabel]=true, so that it
// never touches an object someone else wrote.
//
// # Why a written copy
//
// A tenant refused with "exceeded quota: clusterquota/team-a" must be
// able to read team-a, and no other tenant's quota, with the namespaced
// permissions it has. There are three ways; at 10,000 namespaces (5,000
// tenants of two namespaces, one quota each) they cost:
//
//   - A copy written in each selected namespace (this type): 10,000
//     objects of about 1.3 KB of JSON, 13 MB in etcd and in the API
//     server's watch cache. Each change of a quota's status costs one
//     update per namespace it selects (two for a tenant of two), at most
//     once per Interval: a tenant admitting objects without pause costs
//     2 writes every 5 s, all 5,000 at once 2,000 writes a second; the
//     writer's client rate limit (give it a client of its own) caps that,
//     and a quota that waits in the queue takes up its further changes,
//     so the copies then lag rather than the writes grow. One watcher
//     sees every copy: the writer; a tenant who watches sees its own
//     namespace. Tenants read them with ordinary namespaced RBAC: the
//     shipped ClusterRole aggregated to view grants get, list and watch.
//   - A view served on each read (OpenShift's
//     AppliedClusterResourceQuota): no writes and no objects, but an
//     aggregated API server, with k8s.io/apiserver, its own deployment,
//     certificates and an APIService whose outage breaks discovery for
//     every client of the cluster. quotakit keeps k8s.io/apiserver out.
//   - A ClusterRole naming the quota (resourceNames) bound to the
//     tenant's users: no writes, but the controller does not know a
//     tenant's users, a cluster-scoped grant needs a ClusterRoleBinding
//     per tenant subject kept in step with every relabelling, and list
//     and watch cannot be narrowed to names a user does not already know.
//
// The copies are information only: admission and the controller never
// read them, and nothing waits for them, so the writer never holds a
// tenant back. They may lag the quota by Interval, and more when the
// writer's rate limit binds.
//
// # Running
//
// The writer reads the ClusterQuotas and namespaces from informers that
// the caller runs and shares (such as [Client.ClusterQuotaInformer] and
// [Client.NamespaceInformer]), and which quotas select which namespace
// from a [clusterquota.Index] fed by them ([ClusterQuotaIndex]). It keeps
// an informer of its own copies, which [AppliedQuotaWriter.Run] runs. It
// needs list, watch, create, update and delete of appliedclusterquotas in
// every namespace. Build it with [NewAppliedQuotaWriter]; it is safe for
// concurrent use.
type AppliedQuotaWriter struct {
	client             dynamic.NamespaceableResourceInterface
	quotas, namespaces *cache.SharedIndexInformer
	index              *clusterquota.Index
	copies             *cache.SharedIndexInformer
	queue              *workqueue.RateLimitingQueue[string]
	opts               AppliedQuotaWriterOptions
	running            atomic.Bool

	creates, updates, deletes, failures atomic.Int64

	mu sync.Mutex
	// last is when each quota's copies were last written.
	// guarded by mu
	last map[string]time.Time
	// hints holds, per quota, the namespaces whose selection by it may
	// have changed since its last sync: the index is fed by handlers of
	// its own, which may not have seen the namespace's event yet when the
	// quota's sync reads it.
	// guarded by mu
	hints map[string]map[string]struct{}
	// written holds, for each copy ("namespace/name") the writer has
	// written and its cache does not show yet, the resourceVersion the
	// cache showed before the write ("" for a creation) and when: while
	// the cache still shows it, for up to writtenWait, a sync waits
	// rather than write again from a stale version and conflict.
	// guarded by mu
	written map[string]writtenCopy
}

// writtenCopy is an entry of AppliedQuotaWriter.written.
type writtenCopy struct {
	before string
	at     time.Time
}

// writtenWait bounds how long a sync waits for its cache to show a copy
// it wrote, in case the cache never shows that version (a copy deleted
// at once by someone else).
const writtenWait = 10 * time.Second

// byQuota is the copies' index by name, the name of their ClusterQuota.
const byQuota = "quota"

// NewAppliedQuotaWriter returns a writer of the copies of the
// ClusterQuotas of quotas (an informer of *clusterquota.ClusterQuota)
// into the namespaces of namespaces (an informer of namespaces, typed or
// metadata), as index says which select which. It writes through dyn, the
// dynamic client. It starts nothing: see [AppliedQuotaWriter.Run].
func NewAppliedQuotaWriter(dyn dynamic.Interface, quotas, namespaces *cache.SharedIndexInformer, index *clusterquota.Index, opts AppliedQuotaWriterOptions) (*AppliedQuotaWriter, error) {
	if dyn == nil || quotas == nil || namespaces == nil || index == nil {
		return nil, errors.New("kube: NewAppliedQuotaWriter: nil client, informer or index")
	}
	if opts.Interval < 0 || opts.Workers < 0 || opts.ResyncPeriod < 0 {
		return nil, fmt.Errorf("kube: NewAppliedQuotaWriter: negative option in %+v", opts)
	}
	if opts.Interval == 0 {
		opts.Interval = DefaultAppliedQuotaInterval
	}
	if opts.Workers == 0 {
		opts.Workers = 2
	}
	if opts.ResyncPeriod == 0 {
		opts.ResyncPeriod = 10 * time.Minute
	}
	client := dyn.Resource(clusterquota.AppliedClusterQuotas)
	lw := adapt(clusterquota.AppliedClusterQuotas, labelled{client})
	copies := cache.NewSharedIndexInformer(lw, &clusterquota.AppliedClusterQuota{}, cache.SharedIndexInformerOptions{})
	// A new informer has not started, and has only the namespace index:
	// neither call can fail.
	_ = copies.SetTransform(asAppliedQuota)
	_ = copies.AddIndexers(cache.Indexers{byQuota: func(obj any) ([]string, error) {
		a, ok := obj.(*clusterquota.AppliedClusterQuota)
		if !ok {
			return nil, fmt.Errorf("kube: indexing %T as an AppliedClusterQuota", obj)
		}
		return []string{a.Name}, nil
	}})
	return &AppliedQuotaWriter{
		client: client, quotas: quotas, namespaces: namespaces, index: index, copies: copies, opts: opts,
		queue: workqueue.NewRateLimiting[string](nil, workqueue.Options{Name: "applied_cluster_quotas"}),
		last:  map[string]time.Time{}, hints: map[string]map[string]struct{}{}, written: map[string]writtenCopy{},
	}, nil
}

// labelled lists and watches only the copies a writer wrote.
type labelled struct {
	dynamic.NamespaceableResourceInterface
}

func (l labelled) List(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	opts.LabelSelector = clusterquota.AppliedLabel + "=true"
	return l.NamespaceableResourceInterface.List(ctx, opts)
}

func (l labelled) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.LabelSelector = clusterquota.AppliedLabel + "=true"
	return l.NamespaceableResourceInterface.Watch(ctx, opts)
}

// asAppliedQuota converts what the dynamic client returns.
func asAppliedQuota(obj any) (any, error) {
	switch o := obj.(type) {
	case cache.DeletedFinalStateUnknown, *clusterquota.AppliedClusterQuota:
		return o, nil
	case interface{ UnstructuredContent() map[string]any }:
		a := &clusterquota.AppliedClusterQuota{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.UnstructuredContent(), a); err != nil {
			return nil, fmt.Errorf("kube: converting AppliedClusterQuota: %w", err)
		}
		return a, nil
	default:
		return nil, fmt.Errorf("kube: got %T, want an AppliedClusterQuota", obj)
	}
}

// Stats returns what the writer has done so far.
func (w *AppliedQuotaWriter) Stats() AppliedQuotaStats {
	return AppliedQuotaStats{Creates: w.creates.Load(), Updates: w.updates.Load(), Deletes: w.deletes.Load(), Failures: w.failures.Load()}
}

// HasSynced reports whether the writer's informer of its copies holds
// their first complete list.
func (w *AppliedQuotaWriter) HasSynced() bool { return w.copies.HasSynced() }

// Run adds the writer's event handlers to the informers, runs the
// informer of its copies, waits for every informer and the index to
// sync, and writes copies until ctx is done; it returns once its
// goroutines have exited and its handlers are removed. It fails at once
// when a handler cannot be added, and when it is called twice.
func (w *AppliedQuotaWriter) Run(ctx context.Context) error {
	if !w.running.CompareAndSwap(false, true) {
		return errors.New("kube: AppliedQuotaWriter.Run called twice")
	}
	var regs []func()
	defer func() {
		for _, remove := range regs {
			remove()
		}
	}()
	for _, h := range []struct {
		inf *cache.SharedIndexInformer
		h   cache.ResourceEventHandler
	}{
		{w.quotas, cache.ResourceEventHandlerFuncs[*clusterquota.ClusterQuota]{
			AddFunc:    func(cq *clusterquota.ClusterQuota, _ bool) { w.enqueue(cq.Name) },
			UpdateFunc: func(_, cq *clusterquota.ClusterQuota) { w.enqueue(cq.Name) },
			DeleteFunc: func(d cache.DeletedObject[*clusterquota.ClusterQuota]) { w.enqueue(d.Key) },
		}},
		{w.namespaces, cache.ResourceEventHandlerFuncs[metav1.Object]{
			AddFunc:    func(ns metav1.Object, _ bool) { w.namespaceChanged(nil, ns, "") },
			UpdateFunc: func(old, ns metav1.Object) { w.namespaceChanged(old, ns, "") },
			DeleteFunc: func(d cache.DeletedObject[metav1.Object]) { w.namespaceChanged(nil, nil, d.Key) },
		}},
		{w.copies, cache.ResourceEventHandlerFuncs[*clusterquota.AppliedClusterQuota]{
			AddFunc:    func(a *clusterquota.AppliedClusterQuota, _ bool) { w.enqueue(a.Name) },
			UpdateFunc: func(_, a *clusterquota.AppliedClusterQuota) { w.enqueue(a.Name) },
			DeleteFunc: func(d cache.DeletedObject[*clusterquota.AppliedClusterQuota]) {
				if _, name, err := cache.SplitMetaNamespaceKey(d.Key); err == nil {
					w.enqueue(name)
				}
			},
		}},
	} {
		reg, err := h.inf.AddEventHandler(h.h)
		if err != nil {
			return fmt.Errorf("kube: AppliedQuotaWriter: %w", err)
		}
		inf := h.inf
		regs = append(regs, func() { _ = inf.RemoveEventHandler(reg) })
	}

	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { w.copies.Run(ctx) })
	wg.Go(func() {
		<-ctx.Done()
		w.queue.ShutDown()
	})
	if !cache.WaitForCacheSync(ctx, w.quotas.HasSynced, w.namespaces.HasSynced, w.copies.HasSynced, w.index.HasSynced) {
		return nil
	}
	for range w.opts.Workers {
		wg.Go(func() {
			for w.processNext(ctx) {
			}
		})
	}
	resync := time.NewTicker(w.opts.ResyncPeriod)
	defer resync.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-resync.C:
			for _, name := range w.quotas.GetStore().ListKeys() {
				w.enqueue(name)
			}
			for _, name := range w.copies.GetIndexer().ListIndexFuncValues(byQuota) {
				w.enqueue(name)
			}
		}
	}
}

// enqueue adds the quota name to the queue, after what is left of its
// interval.
func (w *AppliedQuotaWriter) enqueue(name string) {
	w.mu.Lock()
	next := w.last[name].Add(w.opts.Interval)
	w.mu.Unlock()
	w.queue.AddAfter(name, time.Until(next))
}

// namespaceChanged enqueues the quotas whose selection of a namespace
// may have changed: those that select old or ns (each as given, whatever
// the index has seen yet), and, for a deleted namespace (key set), those
// with a copy in it. Each is hinted to look at the namespace itself.
func (w *AppliedQuotaWriter) namespaceChanged(old, ns metav1.Object, key string) {
	names := map[string]struct{}{}
	var nsName string
	if old != nil {
		for _, q := range w.index.Lookup(old).Names {
			names[q] = struct{}{}
		}
	}
	if ns != nil {
		nsName = ns.GetName()
		for _, q := range w.index.Lookup(ns).Names {
			if _, both := names[q]; both {
				delete(names, q) // selected before and after: nothing changed
			} else {
				names[q] = struct{}{}
			}
		}
	}
	if key != "" {
		nsName = key
		copies, _ := w.copies.GetIndexer().ByIndex(cache.NamespaceIndex, key)
		for _, obj := range copies {
			if a, ok := obj.(*clusterquota.AppliedClusterQuota); ok {
				names[a.Name] = struct{}{}
			}
		}
	}
	if len(names) == 0 {
		return
	}
	w.mu.Lock()
	for q := range names {
		if w.hints[q] == nil {
			w.hints[q] = map[string]struct{}{}
		}
		w.hints[q][nsName] = struct{}{}
	}
	w.mu.Unlock()
	for q := range names {
		w.enqueue(q)
	}
}
