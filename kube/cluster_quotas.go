package kube

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/quotakit/quotakit/admission"
	"github.com/quotakit/quotakit/cache"
	"github.com/quotakit/quotakit/clusterquota"
)

var (
	clusterQuotas = clusterquota.SchemeGroupVersion.WithResource("clusterquotas")
	namespaces    = corev1.SchemeGroupVersion.WithResource("namespaces")
)

var _ admission.ClusterQuotaClient = (*Client)(nil)

// ListClusterQuotas lists the ClusterQuotas from the API server through
// the dynamic client, for [admission.NewClusterAccessor]'s live reads.
func (c *Client) ListClusterQuotas(ctx context.Context) ([]clusterquota.ClusterQuota, error) {
	if c.clients.Dynamic == nil {
		return nil, fmt.Errorf("%w clusterquotas: the dynamic client is nil", errNoClient)
	}
	list, err := c.clients.Dynamic.Resource(clusterQuotas).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("kube: list clusterquotas: %w", err)
	}
	out := make([]clusterquota.ClusterQuota, len(list.Items))
	for i := range list.Items {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(list.Items[i].Object, &out[i]); err != nil {
			return nil, fmt.Errorf("kube: converting ClusterQuota %s: %w", list.Items[i].GetName(), err)
		}
	}
	return out, nil
}

// GetClusterQuota reads the ClusterQuota called name from the API server
// through the dynamic client, for [admission.NewClusterAccessor]'s live
// read of a cluster quota whose status write conflicted.
func (c *Client) GetClusterQuota(ctx context.Context, name string) (*clusterquota.ClusterQuota, error) {
	if c.clients.Dynamic == nil {
		return nil, fmt.Errorf("%w clusterquotas: the dynamic client is nil", errNoClient)
	}
	obj, err := c.clients.Dynamic.Resource(clusterQuotas).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("kube: get clusterquota %s: %w", name, err)
	}
	return asClusterQuota(obj)
}

// UpdateClusterQuotaStatus writes cq's status, with cq's resourceVersion
// as a precondition, for [admission.NewClusterAccessor]; it is
// [Client.UpdateStatus] of clusterquotas.
func (c *Client) UpdateClusterQuotaStatus(ctx context.Context, cq *clusterquota.ClusterQuota) (*clusterquota.ClusterQuota, error) {
	if cq == nil {
		return nil, errors.New("kube: UpdateClusterQuotaStatus: nil ClusterQuota")
	}
	cq = cq.DeepCopy()
	cq.APIVersion, cq.Kind = clusterquota.SchemeGroupVersion.String(), "ClusterQuota"
	out, err := c.UpdateStatus(ctx, clusterQuotas, cq)
	if err != nil {
		return nil, err
	}
	return asClusterQuota(out)
}

// asClusterQuota converts what the dynamic client returns.
func asClusterQuota(obj any) (*clusterquota.ClusterQuota, error) {
	switch o := obj.(type) {
	case *clusterquota.ClusterQuota:
		return o, nil
	case *unstructured.Unstructured:
		if o == nil {
			return nil, errors.New("kube: nil unstructured ClusterQuota")
		}
		cq := &clusterquota.ClusterQuota{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, cq); err != nil {
			return nil, fmt.Errorf("kube: converting ClusterQuota %s: %w", o.GetName(), err)
		}
		return cq, nil
	default:
		return nil, fmt.Errorf("kube: got %T, want a ClusterQuota", obj)
	}
}

// ClusterQuotaInformer returns an informer of the ClusterQuotas, typed,
// and NamespaceInformer one of the namespaces' metadata, for a webhook
// that enforces cluster quotas: [ClusterQuotaIndex] keeps the index
// [admission.NewClusterAccessor] reads from their events, and
// [Client.NamespaceGetter] reads the namespaces' cache; a readiness check
// waits for both to sync. They start nothing: run each with its Run(ctx)
// for as long as the webhook serves.
func (c *Client) ClusterQuotaInformer() *cache.SharedIndexInformer {
	inf := cache.NewSharedIndexInformer(c.ListerWatcher(clusterQuotas, ""), &clusterquota.ClusterQuota{}, cache.SharedIndexInformerOptions{})
	// A new informer has not started: SetTransform cannot fail.
	_ = inf.SetTransform(func(obj any) (any, error) {
		if _, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			return obj, nil
		}
		return asClusterQuota(obj)
	})
	return inf
}

// NamespaceInformer returns an informer of the namespaces' metadata: see
// [Client.ClusterQuotaInformer].
func (c *Client) NamespaceInformer() *cache.SharedIndexInformer {
	return cache.NewSharedIndexInformer(c.ListerWatcher(namespaces, ""), &metav1.PartialObjectMetadata{}, cache.SharedIndexInformerOptions{})
}

// ClusterQuotaIndex returns a [clusterquota.Index] kept from the events of
// quotas, an informer of ClusterQuotas such as
// [Client.ClusterQuotaInformer] returns, and of namespaces, an informer
// of namespaces (typed or metadata) such as [Client.NamespaceInformer]
// returns: [admission.NewClusterAccessor] finds a namespace's cluster
// quotas in it with one map read. Its HasSynced waits for both event
// handlers to have handled their informer's initial list, which the
// accessor asks before it reads the index. It fails only when a handler
// cannot be added (an informer stopped already).
func ClusterQuotaIndex(quotas, namespaces *cache.SharedIndexInformer) (*clusterquota.Index, error) {
	if quotas == nil || namespaces == nil {
		return nil, errors.New("kube: ClusterQuotaIndex: nil informer")
	}
	x := &clusterquota.Index{}
	if err := indexClusterQuotas(x, quotas); err != nil {
		return nil, err
	}
	reg, err := namespaces.AddEventHandler(cache.ResourceEventHandlerFuncs[metav1.Object]{
		AddFunc:    func(ns metav1.Object, _ bool) { x.SetNamespace(ns) },
		UpdateFunc: func(_, ns metav1.Object) { x.SetNamespace(ns) },
		DeleteFunc: func(d cache.DeletedObject[metav1.Object]) { x.DeleteNamespace(d.Key) },
	})
	if err != nil {
		return nil, fmt.Errorf("kube: ClusterQuotaIndex: %w", err)
	}
	x.AddSynced(reg.HasSynced)
	return x, nil
}

// indexClusterQuotas feeds x from inf's ClusterQuota events.
func indexClusterQuotas(x *clusterquota.Index, inf *cache.SharedIndexInformer) error {
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs[*clusterquota.ClusterQuota]{
		AddFunc:    func(cq *clusterquota.ClusterQuota, _ bool) { x.SetClusterQuota(cq) },
		UpdateFunc: func(_, cq *clusterquota.ClusterQuota) { x.SetClusterQuota(cq) },
		DeleteFunc: func(d cache.DeletedObject[*clusterquota.ClusterQuota]) { x.DeleteClusterQuota(d.Key) },
	})
	if err != nil {
		return fmt.Errorf("kube: indexing ClusterQuotas: %w", err)
	}
	x.AddSynced(reg.HasSynced)
	return nil
}

// NamespaceGetter returns the [admission.NamespaceGetter] of inf's cache,
// an informer such as [Client.NamespaceInformer] returns, holding
// namespaces as metadata or typed. A namespace the cache does not hold
// yet (created a moment ago: its first pods often follow at once) is read
// live through the typed client, so that its requests are checked rather
// than refused. A nil inf gives a getter that fails every call.
func (c *Client) NamespaceGetter(inf *cache.SharedIndexInformer) admission.NamespaceGetter {
	if inf == nil {
		return func(string) (*corev1.Namespace, error) { return nil, errors.New("kube: NamespaceGetter: nil informer") }
	}
	lister := cache.NewGenericLister(inf.GetIndexer(), namespaces.GroupResource())
	return func(name string) (*corev1.Namespace, error) {
		obj, err := lister.Get(name)
		if apierrors.IsNotFound(err) && c.clients.Typed != nil {
			ctx, cancel := context.WithTimeout(context.Background(), liveNamespaceTimeout)
			defer cancel()
			return c.clients.Typed.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		}
		if err != nil {
			return nil, err
		}
		switch o := obj.(type) {
		case *corev1.Namespace:
			return o, nil
		case *metav1.PartialObjectMetadata:
			return &corev1.Namespace{ObjectMeta: o.ObjectMeta}, nil
		default:
			return nil, fmt.Errorf("kube: namespace %s cached as %T", name, obj)
		}
	}
}

// liveNamespaceTimeout bounds the live read of a namespace the cache does
// not hold yet, under the webhook's own timeout.
const liveNamespaceTimeout = 2 * time.Second
