package quotakit

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/quotakit/quotakit/cache"
	"github.com/quotakit/quotakit/internal/charges"
	"github.com/quotakit/quotakit/quota"
)

// resourceQuotaKind is the ResourceQuota kind of quota: its quotas are read
// from the controller's ResourceQuota informer, under the key
// namespace/name.
type resourceQuotaKind struct{ c *Controller }

func (resourceQuotaKind) String() string { return "resource quota" }

// ref returns the reference of rq.
func (k resourceQuotaKind) ref(rq *corev1.ResourceQuota) quotaRef {
	return quotaRef{kind: k, key: quotaKey(rq)}
}

func (k resourceQuotaKind) get(key string) (quotaObject, error) {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil, nil // not a key the controller queued; nothing to retry
	}
	rq, err := k.c.quotas.ByNamespace(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return rq, nil
}

func (k resourceQuotaKind) deleted(key string) {
	if ns, name, err := cache.SplitMetaNamespaceKey(key); err == nil {
		k.c.ledger.Forget(ns, name)
	}
}

func (resourceQuotaKind) used(q quotaObject) corev1.ResourceList {
	return q.(*corev1.ResourceQuota).Status.Used
}

func (k resourceQuotaKind) write(ctx context.Context, q quotaObject) (quotaObject, error) {
	out, err := k.c.client.UpdateStatus(ctx, resourceQuotas, q.(*corev1.ResourceQuota))
	if rq, ok := out.(*corev1.ResourceQuota); ok && rq != nil {
		return rq, err
	}
	return nil, err
}

// compute computes rq's next status: status.hard is spec.hard, and
// status.used holds the usage of every hard resource that an evaluator
// computed, the previous value of those whose evaluator failed or has not
// synced, and nothing for resources no longer limited. The errors of
// failed evaluators are returned, after the status was written, as the
// computation's partial error.
func (k resourceQuotaKind) compute(ctx context.Context, key string, q quotaObject) (*computation, error) {
	cur := q.(*corev1.ResourceQuota)
	// A status never written is written, unless there is nothing to write:
	// an API server drops empty maps, so a quota without limits would
	// otherwise be written on every sync.
	dirty := !quota.Equals(cur.Spec.Hard, cur.Status.Hard) ||
		len(cur.Spec.Hard) > 0 && (cur.Status.Hard == nil || cur.Status.Used == nil)
	usage, part, calcErr := k.c.calculateUsage(ctx, cur)
	if calcErr != nil {
		calcErr = fmt.Errorf("quotakit: resource quota %s: %w", key, calcErr)
	}
	hard := cur.Spec.Hard.DeepCopy()
	return &computation{
		sighting: charges.Sighting{
			Status: cur.Status.Used, RV: cur.ResourceVersion, Usage: usage,
			Parts: map[string]charges.Part{"": part},
		},
		next: func(settled corev1.ResourceList) (quotaObject, bool, bool) {
			used := corev1.ResourceList{}
			for name, q := range cur.Status.Used {
				used[name] = q.DeepCopy()
			}
			for name, q := range settled {
				used[name] = readable(q, hard[name])
			}
			used = quota.Mask(used, quota.ResourceNames(hard))
			updated := cur.DeepCopy()
			updated.Status = corev1.ResourceQuotaStatus{Hard: hard, Used: used}
			changed := dirty || !quota.Equals(updated.Status.Used, cur.Status.Used)
			return updated, changed, onlyReleases(cur.Status, updated.Status)
		},
		partial: calcErr,
	}, nil
}
