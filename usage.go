package quotakit

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit/generic"
	"github.com/quotakit/quotakit/internal/charges"
	"github.com/quotakit/quotakit/quota"
)

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
func (c *Controller) calculateUsage(ctx context.Context, rq *corev1.ResourceQuota) (corev1.ResourceList, charges.Part, error) {
	registry := c.syncedRegistry()
	ledgered := c.ledgeredEvaluators()
	usage, arrived, err := c.ledger.Calculate(rq, registry, func(e quota.Evaluator) bool { return ledgered[e.GroupResource()] != nil })
	part := charges.Part{Usage: usage, Arrived: arrived}
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
		part = charges.Part{Usage: full}
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
