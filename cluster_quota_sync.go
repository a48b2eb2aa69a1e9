package quotakit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/quotakit/quotakit/clusterquota"
	"github.com/quotakit/quotakit/internal/charges"
	"github.com/quotakit/quotakit/quota"
)

// clusterAccount is the name of the ledger account of a ClusterQuota in
// each namespace it selects; no ResourceQuota has a slash in its name.
func clusterAccount(name string) string { return "clusterquota/" + name }

func (*clusterQuotas) String() string { return "cluster quota" }

// get returns the cached ClusterQuota name, and an error until both
// informers have synced: a selection computed from a partial list of
// namespaces would release the usage of those not listed yet.
func (cq *clusterQuotas) get(name string) (quotaObject, error) {
	if !cq.hasSynced() {
		return nil, errors.New("quotakit: the ClusterQuota and namespace informers have not synced")
	}
	q, err := cq.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return q, nil
}

// deleted drops the ledger accounts of the deleted ClusterQuota name and
// its conditions' counts.
func (cq *clusterQuotas) deleted(name string) {
	cq.c.forgetClusterQuota(name, nil)
	cq.c.forgetProblems(name)
}

func (*clusterQuotas) used(q quotaObject) corev1.ResourceList {
	return q.(*clusterquota.ClusterQuota).Status.Total.Used
}

func (cq *clusterQuotas) write(ctx context.Context, q quotaObject) (quotaObject, error) {
	out, err := cq.c.client.UpdateStatus(ctx, clusterQuotasGVR, q.(*clusterquota.ClusterQuota))
	if written := asClusterQuota(out); written != nil {
		return written, err
	}
	return nil, err
}

// compute computes the next status of the ClusterQuota q:
// status.total.hard is spec.quota.hard, status.total.used the sum over the
// selected namespaces of what their objects charge under spec.quota, plus
// admission's charges in flight (the same rule as ResourceQuotas'),
// status.namespaces the per-namespace usage, bounded
// ([clusterquota.ClusterQuotaStatus.SetNamespaceStatuses]), and its
// conditions. When any namespace's usage cannot be computed, nothing is
// written: the last status stands, and the error is returned (logged, and
// retried). A quota whose spec is invalid gets its conditions only
// ([Controller.invalid]).
func (cq *clusterQuotas) compute(ctx context.Context, name string, obj quotaObject) (*computation, error) {
	c := cq.c
	q := obj.(*clusterquota.ClusterQuota)
	if verr := clusterquota.ValidateSpec(q); verr != nil {
		// Skipped, loudly: its Valid condition, a log line, a count.
		return c.invalid(ctx, q, verr), nil
	}
	nss, ok := cq.index.Namespaces(q)
	if !ok {
		// The index has not been fed this spec yet: the handler that
		// feeds it queues the quota again once it has.
		logr.FromContextOrDiscard(ctx).V(4).Info("cluster quota's selection not indexed yet", "clusterQuota", name)
		return nil, nil
	}
	hard := q.Spec.Quota.Hard.DeepCopy()
	hardNames := quota.ResourceNames(hard)
	account := clusterAccount(name)
	perNS := map[string]corev1.ResourceList{}
	// parts are the ledger accounts of the namespaces, from which the
	// charge book counts arrivals namespace by namespace: a namespace
	// that joins brings usage that admission never charged.
	parts := map[string]charges.Part{}
	total := corev1.ResourceList{}
	var selected, unenforced []string
	for _, nsName := range nss {
		m, err := cq.nsLister.Get(nsName)
		if apierrors.IsNotFound(err) {
			continue // deleted: the index is told next
		}
		if err != nil {
			return nil, err
		}
		selected = append(selected, m.Name)
		if !c.enforced(m.Labels) {
			unenforced = append(unenforced, m.Name)
		}
		rq := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: m.Name, Name: account}, Spec: *q.Spec.Quota.DeepCopy()}
		used, part, err := c.calculateUsage(ctx, rq)
		if err != nil {
			return nil, fmt.Errorf("quotakit: cluster quota %s, namespace %s: %w", name, m.Name, err)
		}
		used = quota.Mask(used, hardNames)
		perNS[m.Name] = used
		parts[m.Name] = part
		total = quota.Add(total, used)
	}
	for _, n := range hardNames {
		if _, ok := total[n]; !ok && c.chargedByAny(n) {
			total[n] = resource.Quantity{Format: resource.DecimalSI}
		}
	}
	updated := q.DeepCopy()
	if err := updated.Status.SetNamespaceStatuses(perNS); err != nil {
		return nil, fmt.Errorf("quotakit: cluster quota %s: %w", name, err)
	}
	now := time.Now()
	slices.Sort(unenforced)
	c.setValidity(ctx, updated, nil, now)
	c.setEnforcement(ctx, updated, unenforced, now)
	return &computation{
		sighting: charges.Sighting{Status: q.Status.Total.Used, RV: q.ResourceVersion, Usage: total, Parts: parts},
		next: func(settled corev1.ResourceList) (quotaObject, bool, bool) {
			used := corev1.ResourceList{}
			for n, v := range settled {
				used[n] = readable(v, hard[n])
			}
			updated.Status.Total = corev1.ResourceQuotaStatus{Hard: hard, Used: quota.Mask(used, hardNames)}
			changed := !equality.Semantic.DeepEqual(updated.Status, q.Status)
			return updated, changed, clusterOnlyReleases(q, updated)
		},
		done: func() { c.forgetClusterQuota(name, selected) },
	}, nil
}

// asClusterQuota returns what a Client's UpdateStatus returned as a
// ClusterQuota: typed, or converted from unstructured; nil if neither.
func asClusterQuota(obj runtime.Object) *clusterquota.ClusterQuota {
	switch o := obj.(type) {
	case *clusterquota.ClusterQuota:
		return o
	case *unstructured.Unstructured:
		if o == nil {
			return nil
		}
		out := &clusterquota.ClusterQuota{}
		if runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, out) != nil {
			return nil
		}
		return out
	}
	return nil
}
