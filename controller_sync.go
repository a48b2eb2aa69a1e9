package quotakit

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/quotakit/quotakit/cache"
	"github.com/quotakit/quotakit/generic"
	"github.com/quotakit/quotakit/quota"
)

// addQuota queues a quota that was created, or whose limits changed: on
// the priority queue when its status does not reflect its spec yet or
// lacks a used value that some evaluator computes, so that admission can
// enforce it soon; on the primary queue otherwise.
func (c *Controller) addQuota(rq *corev1.ResourceQuota) {
	key := quotaKey(rq)
	if c.needsUsage(rq) {
		c.priority.Add(key)
		return
	}
	c.primary.Add(key)
}

// needsUsage reports whether rq's status is missing something the
// controller computes: status.hard is not spec.hard, or a hard limit that
// an evaluator charges has no used value.
func (c *Controller) needsUsage(rq *corev1.ResourceQuota) bool {
	if !equality.Semantic.DeepEqual(rq.Spec.Hard, rq.Status.Hard) {
		return true
	}
	for name := range rq.Status.Hard {
		if _, ok := rq.Status.Used[name]; ok {
			continue
		}
		for _, e := range c.registry.List() {
			if len(e.MatchingResources([]corev1.ResourceName{name})) > 0 {
				return true
			}
		}
	}
	return false
}

// updateQuota queues a quota whose spec.hard, scopes or scope selector
// changed, and one whose last status write conflicted. Other status-only
// updates, including the controller's own, are ignored. Kubernetes ignores
// scope selector changes until the next full resync, and retries a
// conflict only after its rate limiter's backoff.
func (c *Controller) updateQuota(oldRQ, newRQ *corev1.ResourceQuota) {
	if _, ok := c.conflicted.LoadAndDelete(quotaKey(newRQ)); ok {
		c.priority.Add(quotaKey(newRQ))
		return
	}
	if quota.Equals(oldRQ.Spec.Hard, newRQ.Spec.Hard) &&
		equality.Semantic.DeepEqual(oldRQ.Spec.Scopes, newRQ.Spec.Scopes) &&
		equality.Semantic.DeepEqual(oldRQ.Spec.ScopeSelector, newRQ.Spec.ScopeSelector) {
		return
	}
	c.addQuota(newRQ)
}

// syncQuota brings the status of the quota with key up to date. A quota
// that no longer exists needs nothing.
func (c *Controller) syncQuota(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil // not a key the controller queued; nothing to retry
	}
	rq, err := c.quotas.ByNamespace(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return c.syncResourceQuota(ctx, rq)
}

// syncResourceQuota computes rq's status and writes it when it changed:
// status.hard is spec.hard, and status.used holds the usage of every hard
// resource that an evaluator computed, the previous value of those whose
// evaluator failed or has not synced, and nothing for resources no longer
// limited. The errors of failed evaluators are returned with any write
// error, after the status was written.
//
// rq comes from the informer, which may not have delivered the controller's
// own last write yet; the status is then compared with, and written over,
// that write (see [Controller.freshest]). Kubernetes compares with the
// cached status: when the informer lags, it can skip a write that the
// stored status needs, and the quota stays wrong until the next full
// resync.
func (c *Controller) syncResourceQuota(ctx context.Context, rq *corev1.ResourceQuota) error {
	key := quotaKey(rq)
	cur := c.freshest(key, rq)
	// A status never written is written, unless there is nothing to write:
	// an API server drops empty maps, so a quota without limits would
	// otherwise be written on every sync.
	dirty := !equality.Semantic.DeepEqual(cur.Spec.Hard, cur.Status.Hard) ||
		len(cur.Spec.Hard) > 0 && (cur.Status.Hard == nil || cur.Status.Used == nil)

	used := corev1.ResourceList{}
	for name, q := range cur.Status.Used {
		used[name] = q.DeepCopy()
	}
	hard := cur.Spec.Hard.DeepCopy()
	newUsage, calcErr := quota.CalculateUsage(cur.Namespace, cur.Spec.Scopes, hard, c.syncedRegistry(), cur.Spec.ScopeSelector)
	for name, q := range newUsage {
		used[name] = q
	}
	used = quota.Mask(used, quota.ResourceNames(hard))

	updated := cur.DeepCopy()
	updated.Status = corev1.ResourceQuotaStatus{Hard: hard, Used: used}
	dirty = dirty || !quota.Equals(updated.Status.Used, cur.Status.Used)
	var writeErr error
	if dirty {
		out, err := c.client.UpdateStatus(ctx, resourceQuotas, updated)
		switch {
		case err == nil:
			if written, ok := out.(*corev1.ResourceQuota); ok && written != nil {
				c.recordWrite(key, cur.ResourceVersion, written)
			}
		case apierrors.IsConflict(err):
			c.forgetWrites(key)
			c.conflicted.Store(key, struct{}{})
		}
		if err != nil {
			writeErr = fmt.Errorf("quotakit: updating the status of resource quota %s: %w", key, err)
		}
	}
	if calcErr != nil {
		calcErr = fmt.Errorf("quotakit: resource quota %s: %w", key, calcErr)
	}
	return errors.Join(calcErr, writeErr)
}

// maxOwnWrites bounds the writes remembered for one quota while the
// informer lags.
const maxOwnWrites = 16

// ownWrites are the controller's consecutive status writes of one quota:
// the resourceVersion each was written over and the one it produced, and
// the last version written.
type ownWrites struct {
	rvs  []string
	last *corev1.ResourceQuota
}

// freshest returns the newer of rq, the cached quota with key, and the
// controller's own last write of it. While the informer shows a version
// the controller wrote over, or an earlier write of its own, the last
// write is newer. Any other version is newer than every write remembered
// (another writer would have made the controller's next write conflict),
// and so is the last write itself once delivered: then the writes are
// forgotten.
func (c *Controller) freshest(key string, rq *corev1.ResourceQuota) *corev1.ResourceQuota {
	c.writesMu.Lock()
	defer c.writesMu.Unlock()
	w := c.writes[key]
	if w == nil {
		return rq
	}
	if i := slices.Index(w.rvs, rq.ResourceVersion); i >= 0 && i < len(w.rvs)-1 {
		return w.last
	}
	delete(c.writes, key)
	return rq
}

// recordWrite remembers that the status of the quota with key was written
// over version from, producing written.
func (c *Controller) recordWrite(key, from string, written *corev1.ResourceQuota) {
	c.writesMu.Lock()
	defer c.writesMu.Unlock()
	if from == "" || written.ResourceVersion == "" {
		// Without resourceVersions (some fake clients) versions cannot be
		// told apart: trust the cache.
		delete(c.writes, key)
		return
	}
	w := c.writes[key]
	if w == nil || w.rvs[len(w.rvs)-1] != from {
		w = &ownWrites{rvs: []string{from}}
		c.writes[key] = w
	}
	w.rvs = append(w.rvs, written.ResourceVersion)
	if len(w.rvs) > maxOwnWrites {
		w.rvs = slices.Delete(w.rvs, 0, len(w.rvs)-maxOwnWrites)
	}
	w.last = written
}

// forgetWrites forgets the writes remembered for the quota with key.
func (c *Controller) forgetWrites(key string) {
	c.writesMu.Lock()
	defer c.writesMu.Unlock()
	delete(c.writes, key)
}

// syncedRegistry returns the evaluators whose informers have synced: the
// others would report an empty cache as zero usage.
func (c *Controller) syncedRegistry() quota.Registry {
	synced := make([]quota.Evaluator, 0, len(c.monitors))
	for _, m := range c.monitors {
		if m.informer.HasSynced() {
			synced = append(synced, m.evaluator)
		}
	}
	if len(synced) == len(c.monitors) {
		return c.registry
	}
	return generic.NewRegistry(synced...)
}
