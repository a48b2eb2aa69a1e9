package main

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// memory keeps ResourceQuotas in memory, as an API server would: status
// writes carry a resourceVersion precondition and get a new version. Every
// namespace has one quota, named "default", with the same hard limits,
// created when the namespace is first read. It is the QuotaClient and the
// lister of the webhook's admission.Accessor.
type memory struct {
	hard corev1.ResourceList

	mu sync.Mutex
	// guarded by mu
	quotas map[string]*corev1.ResourceQuota // by namespace
	// guarded by mu
	rv uint64
}

func newMemory(hard corev1.ResourceList) *memory {
	return &memory{hard: hard, quotas: make(map[string]*corev1.ResourceQuota)}
}

// quotaLocked returns the quota of namespace, creating it with zero usage.
// m.mu must be held.
func (m *memory) quotaLocked(namespace string) *corev1.ResourceQuota {
	q, ok := m.quotas[namespace]
	if !ok {
		used := corev1.ResourceList{}
		for name := range m.hard {
			used[name] = resource.MustParse("0")
		}
		m.rv++
		q = &corev1.ResourceQuota{
			ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: namespace, ResourceVersion: strconv.FormatUint(m.rv, 10)},
			Spec:       corev1.ResourceQuotaSpec{Hard: m.hard.DeepCopy()},
			Status:     corev1.ResourceQuotaStatus{Hard: m.hard.DeepCopy(), Used: used},
		}
		m.quotas[namespace] = q
	}
	return q
}

// list is the lister: the quota of namespace.
func (m *memory) list(namespace string) ([]*corev1.ResourceQuota, error) {
	if len(m.hard) == 0 {
		return nil, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return []*corev1.ResourceQuota{m.quotaLocked(namespace).DeepCopy()}, nil
}

// ListQuotas is the live read; the lister has always synced, so the
// accessor never calls it.
func (m *memory) ListQuotas(ctx context.Context, namespace string) ([]corev1.ResourceQuota, error) {
	qs, err := m.list(namespace)
	out := make([]corev1.ResourceQuota, len(qs))
	for i, q := range qs {
		out[i] = *q
	}
	return out, err
}

// UpdateQuotaStatus writes q's status if q's resourceVersion is current.
func (m *memory) UpdateQuotaStatus(ctx context.Context, q *corev1.ResourceQuota) (*corev1.ResourceQuota, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.quotas[q.Namespace]
	if !ok || cur.Name != q.Name {
		return nil, apierrors.NewNotFound(corev1.Resource("resourcequotas"), q.Name)
	}
	if cur.ResourceVersion != q.ResourceVersion {
		return nil, apierrors.NewConflict(corev1.Resource("resourcequotas"), q.Name,
			errString("the object has been modified; please apply your changes to the latest version and try again"))
	}
	m.rv++
	cur.Status = *q.Status.DeepCopy()
	cur.ResourceVersion = strconv.FormatUint(m.rv, 10)
	return cur.DeepCopy(), nil
}

// snapshot returns every quota, by namespace.
func (m *memory) snapshot() []corev1.ResourceQuota {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]corev1.ResourceQuota, 0, len(m.quotas))
	for _, q := range m.quotas {
		out = append(out, *q.DeepCopy())
	}
	slices.SortFunc(out, func(a, b corev1.ResourceQuota) int { return cmp.Compare(a.Namespace, b.Namespace) })
	return out
}

type errString string

func (e errString) Error() string { return string(e) }
