package quotakit

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit/cache"
	"github.com/quotakit/quotakit/generic"
	"github.com/quotakit/quotakit/internal/reslist"
	"github.com/quotakit/quotakit/quota"
)

// syncQuota brings the status of the quota with key up to date. A quota
// that no longer exists needs nothing.
func (c *Controller) syncQuota(ctx context.Context, key string) error {
	if c.cluster != nil && isClusterKey(key) {
		return c.syncClusterQuota(ctx, key)
	}
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
// that write (see [writeLog.freshest]). Kubernetes compares with the
// cached status: when the informer lags, it can skip a write that the
// stored status needs, and the quota stays wrong until the next full
// resync.
func (c *Controller) syncResourceQuota(ctx context.Context, rq *corev1.ResourceQuota) error {
	key := quotaKey(rq)
	cur := c.writes.freshest(key, rq)
	// A status never written is written, unless there is nothing to write:
	// an API server drops empty maps, so a quota without limits would
	// otherwise be written on every sync.
	dirty := !quota.Equals(cur.Spec.Hard, cur.Status.Hard) ||
		len(cur.Spec.Hard) > 0 && (cur.Status.Hard == nil || cur.Status.Used == nil)

	used := corev1.ResourceList{}
	for name, q := range cur.Status.Used {
		used[name] = q.DeepCopy()
	}
	hard := cur.Spec.Hard.DeepCopy()
	newUsage, part, calcErr := c.calculateUsage(ctx, cur)
	if calcErr != nil {
		calcErr = fmt.Errorf("quotakit: resource quota %s: %w", key, calcErr)
	}
	now := time.Now()
	settled := c.charges.settle(now, key, sighting{
		status: cur.Status.Used, rv: cur.ResourceVersion, usage: newUsage,
		parts: map[string]usagePart{"": part},
	})
	for name, q := range settled.used {
		used[name] = readable(q, hard[name])
	}
	used = quota.Mask(used, quota.ResourceNames(hard))

	updated := cur.DeepCopy()
	updated.Status = corev1.ResourceQuotaStatus{Hard: hard, Used: used}
	dirty = dirty || !quota.Equals(updated.Status.Used, cur.Status.Used)
	var writeErr error
	if dirty {
		if c.putOff(key, now, onlyReleases(cur.Status, updated.Status)) {
			// Nothing written, nothing settled: the sync the write is
			// put off to settles again.
			return calcErr
		}
		out, err := c.client.UpdateStatus(ctx, resourceQuotas, updated)
		switch {
		case err == nil:
			c.writes.wrote(key, cur.ResourceVersion, asResourceQuota(out), now)
		case apierrors.IsConflict(err):
			c.writes.conflict(key)
			c.conflicts.Add(1)
		}
		if err != nil {
			writeErr = fmt.Errorf("quotakit: updating the status of resource quota %s: %w", key, err)
		}
	}
	if writeErr == nil {
		c.settled(ctx, settled, used, now)
	}
	if calcErr != nil {
		return errors.Join(calcErr, writeErr)
	}
	return expected(writeErr)
}

// asResourceQuota returns what a Client's UpdateStatus returned as a
// ResourceQuota, nil when it is not one.
func asResourceQuota(obj runtime.Object) *corev1.ResourceQuota {
	rq, _ := obj.(*corev1.ResourceQuota)
	return rq
}

// settled keeps the charges in flight that s computed, now that used is
// the quota's stored status.used, queues the quota's next recheck when
// some are still in flight, and reports what s released.
func (c *Controller) settled(ctx context.Context, s settlement, used corev1.ResourceList, now time.Time) {
	if at := c.charges.commit(now, s, used); !at.IsZero() {
		c.changes.AddAfter(change{quota: s.key, at: at.UnixNano()}, at.Sub(now))
	}
	if len(s.released) == 0 {
		return
	}
	c.releases.Add(1)
	logr.FromContextOrDiscard(ctx).Info("released quota charges that no object followed within the charge window",
		"quota", s.key, "released", reslist.String(s.released), "window", c.opts.ChargeWindow)
}

// calculateUsage computes what [quota.CalculateUsage] computes for rq over
// the evaluators that have synced, from the ledger, and returns it with
// the ledger's part of it: its usage and count of arrivals, for the
// charge book. After a full resync started, the first calculation of
// each quota sums the caches instead, compares, and returns the truth; a
// difference while the ledger holds exactly the cached versions of the
// namespace's objects is drift, logged at error level and counted by
// [Controller.Drifts], and the quota's totals are built again.
//
// The caches run ahead of the ledger, which their event handlers keep: a
// recalculation from the caches may count an object whose arrival the
// ledger counts only later. The part returned is the ledger's even then,
// so that the charge book counts each arrival once, from one account.
func (c *Controller) calculateUsage(ctx context.Context, rq *corev1.ResourceQuota) (corev1.ResourceList, usagePart, error) {
	registry := c.syncedRegistry()
	ledgered := c.ledgeredEvaluators()
	usage, arrived, err := c.ledger.Calculate(rq, registry, func(e quota.Evaluator) bool { return ledgered[e.GroupResource()] != nil })
	part := usagePart{usage: usage, arrived: arrived}
	gen := c.resyncs.Load()
	if gen == 0 || !c.ledger.CheckDue(rq, gen) {
		return usage, part, err
	}
	full, fullErr := quota.CalculateUsage(rq.Namespace, rq.Spec.Scopes, rq.Spec.Hard, registry, rq.Spec.ScopeSelector)
	if err == nil && fullErr == nil && !quota.Equals(full, usage) && c.ledgerInSync(rq.Namespace, registry, ledgered) {
		c.drifts.Add(1)
		c.ledger.Reset(rq.Namespace, rq.Name)
		logr.FromContextOrDiscard(ctx).Error(fmt.Errorf("quotakit: resource quota %s: usage kept from events %v, recalculated %v", quotaKey(rq), usage, full),
			"usage kept from events drifted from the caches; writing the recalculated usage", "quota", quotaKey(rq))
		// The totals are rebuilt: their count of arrivals starts again,
		// from the recalculation.
		part = usagePart{usage: full}
	}
	return full, part, fullErr
}

// ledgeredEvaluators returns the monitors whose usage the ledger keeps, by
// resource.
func (c *Controller) ledgeredEvaluators() map[schema.GroupResource]*monitor {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := map[schema.GroupResource]*monitor{}
	for _, m := range c.monitorsLocked() {
		if m.ledgered {
			out[m.gvr.GroupResource()] = m
		}
	}
	return out
}

// ledgerInSync reports whether the ledger holds exactly the cached
// objects of namespace, at their cached versions, for every ledgered
// evaluator of registry.
func (c *Controller) ledgerInSync(namespace string, registry quota.Registry, ledgered map[schema.GroupResource]*monitor) bool {
	for _, e := range registry.List() {
		m := ledgered[e.GroupResource()]
		if m == nil {
			continue
		}
		objs, err := listFunc(m.informer, m.gvr.GroupResource(), true)(namespace)
		if err != nil || !c.ledger.InSync(namespace, m.gvr.GroupResource(), objs) {
			return false
		}
	}
	return true
}

// readable returns q written in the format of the quota's limit, so that a
// used value is always written the same way, whatever order its objects
// were summed in: a sum takes the format of its first non-zero term, and so
// Kubernetes writes the same usage as 3328Mi one time and 3489660928 the
// next.
func readable(q, limit resource.Quantity) resource.Quantity {
	out := resource.Quantity{}
	out.Add(q)
	if limit.Format != "" {
		out.Format = limit.Format
	} else {
		out.Format = resource.DecimalSI
	}
	return out
}

// syncedRegistry returns the evaluators whose informers, and the informers
// of everything they read, have synced: the others would report an empty
// cache as zero usage.
func (c *Controller) syncedRegistry() quota.Registry {
	c.mu.RLock()
	monitors := c.monitorsLocked()
	c.mu.RUnlock()
	synced := make([]quota.Evaluator, 0, len(monitors))
	all := true
	for _, m := range monitors {
		if m.evaluator == nil {
			continue
		}
		if m.synced() {
			synced = append(synced, m.evaluator)
		} else {
			all = false
		}
	}
	if all {
		// The usual case once started: the registry of every evaluator,
		// built once, rather than a new one for each sync — unless a
		// monitor was added since the snapshot above.
		if r := c.currentRegistry(); len(r.List()) == len(synced) {
			return r
		}
	}
	return generic.NewRegistry(synced...)
}
