package quotakit

import (
	"context"
	"errors"
	"fmt"

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
// changed. Status-only updates, including the controller's own, are
// ignored. Kubernetes ignores scope selector changes until the next full
// resync.
func (c *Controller) updateQuota(oldRQ, newRQ *corev1.ResourceQuota) {
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
func (c *Controller) syncResourceQuota(ctx context.Context, rq *corev1.ResourceQuota) error {
	// A status never written is written, unless there is nothing to write:
	// an API server drops empty maps, so a quota without limits would
	// otherwise be written on every sync.
	dirty := !equality.Semantic.DeepEqual(rq.Spec.Hard, rq.Status.Hard) ||
		len(rq.Spec.Hard) > 0 && (rq.Status.Hard == nil || rq.Status.Used == nil)

	used := corev1.ResourceList{}
	for name, q := range rq.Status.Used {
		used[name] = q.DeepCopy()
	}
	hard := rq.Spec.Hard.DeepCopy()
	newUsage, calcErr := quota.CalculateUsage(rq.Namespace, rq.Spec.Scopes, hard, c.syncedRegistry(), rq.Spec.ScopeSelector)
	for name, q := range newUsage {
		used[name] = q
	}
	used = quota.Mask(used, quota.ResourceNames(hard))

	updated := rq.DeepCopy()
	updated.Status = corev1.ResourceQuotaStatus{Hard: hard, Used: used}
	dirty = dirty || !quota.Equals(updated.Status.Used, rq.Status.Used)
	var writeErr error
	if dirty {
		if _, err := c.client.UpdateStatus(ctx, resourceQuotas, updated); err != nil {
			writeErr = fmt.Errorf("quotakit: updating the status of resource quota %s/%s: %w", rq.Namespace, rq.Name, err)
		}
	}
	if calcErr != nil {
		calcErr = fmt.Errorf("quotakit: resource quota %s/%s: %w", rq.Namespace, rq.Name, calcErr)
	}
	return errors.Join(calcErr, writeErr)
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
