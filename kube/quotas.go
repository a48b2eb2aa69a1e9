package kube

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/quotakit/quotakit/admission"
	"github.com/quotakit/quotakit/cache"
)

var _ admission.QuotaClient = (*Client)(nil)

// ListQuotas lists the ResourceQuotas of namespace from the API server,
// through the typed client, for [admission.NewAccessor]'s live reads.
func (c *Client) ListQuotas(ctx context.Context, namespace string) ([]corev1.ResourceQuota, error) {
	if c.clients.Typed == nil {
		return nil, fmt.Errorf("%w resourcequotas: the typed client is nil", errNoClient)
	}
	list, err := c.clients.Typed.CoreV1().ResourceQuotas(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("kube: list resourcequotas of %q: %w", namespace, err)
	}
	return list.Items, nil
}

// UpdateQuotaStatus writes q's status, with q's resourceVersion as a
// precondition, for [admission.NewAccessor]; it is [Client.UpdateStatus]
// of resourcequotas.
func (c *Client) UpdateQuotaStatus(ctx context.Context, q *corev1.ResourceQuota) (*corev1.ResourceQuota, error) {
	out, err := c.UpdateStatus(ctx, resourceQuotas, q)
	if err != nil {
		return nil, err
	}
	return out.(*corev1.ResourceQuota), nil
}

// QuotaInformer returns an informer of the ResourceQuotas of namespace
// ("" for every namespace), for a webhook built on the admission package:
// [QuotaLister] reads its cache, and its HasSynced tells
// [admission.NewAccessor] when to stop reading quotas live, and a
// readiness check when the webhook can answer from its cache, which it
// cannot while the API server is unreachable. The informer holds
// *corev1.ResourceQuota objects, also when they come through the dynamic
// client (a Client without a typed one). It starts nothing: run it with
// its Run(ctx) for as long as the webhook serves.
//
//	client, err := kube.NewForConfig(cfg)
//	...
//	quotas := client.QuotaInformer("")
//	accessor := admission.NewAccessor(kube.QuotaLister(quotas), quotas.HasSynced, client, admission.AccessorOptions{})
func (c *Client) QuotaInformer(namespace string) *cache.SharedIndexInformer {
	inf := cache.NewSharedIndexInformer(c.ListerWatcher(resourceQuotas, namespace), &corev1.ResourceQuota{}, cache.SharedIndexInformerOptions{})
	// A new informer has not started: SetTransform cannot fail.
	_ = inf.SetTransform(typedQuota)
	return inf
}

// typedQuota converts an unstructured ResourceQuota, as the dynamic client
// serves it, to the typed object; other objects pass unchanged, and the
// informer refuses any that is not a *corev1.ResourceQuota.
func typedQuota(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	if u == nil {
		return nil, errors.New("kube: nil unstructured ResourceQuota")
	}
	rq := &corev1.ResourceQuota{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, rq); err != nil {
		return nil, fmt.Errorf("kube: converting ResourceQuota %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return rq, nil
}

// QuotaLister returns the [admission.QuotaLister] of inf's cache, an
// informer of ResourceQuotas such as [Client.QuotaInformer] returns: the
// quotas of a namespace, which must not be modified. A nil inf gives a
// lister that fails every call; an object of another type in the cache is
// an error, not a panic.
func QuotaLister(inf *cache.SharedIndexInformer) admission.QuotaLister {
	if inf == nil {
		return func(string) ([]*corev1.ResourceQuota, error) {
			return nil, errors.New("kube: QuotaLister: nil informer")
		}
	}
	lister := cache.NewLister[*corev1.ResourceQuota](inf.GetIndexer(), resourceQuotas.GroupResource())
	return func(namespace string) ([]*corev1.ResourceQuota, error) {
		return lister.ByNamespace(namespace).List(nil)
	}
}
