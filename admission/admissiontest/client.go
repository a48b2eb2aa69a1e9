// Package admissiontest serves the admission package's clients over the
// in-memory API of package cache/cachetest, so that a test or a demo of
// an admission program needs no adapter of its own: [Client] is an
// admission.QuotaClient and an admission.ClusterQuotaClient, with the
// API's resourceVersion preconditions, its fault injection and its
// request log.
//
// The API must serve ClusterQuotas for the cluster quota methods:
// register them with [RegisterClusterQuotas] (cachetest serves the core
// resources, ResourceQuotas and namespaces included, from the start).
package admissiontest

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/quotakit/quotakit/admission"
	"github.com/quotakit/quotakit/cache/cachetest"
	"github.com/quotakit/quotakit/clusterquota"
)

var (
	resourceQuotas = corev1.SchemeGroupVersion.WithResource("resourcequotas")
	clusterQuotas  = clusterquota.SchemeGroupVersion.WithResource("clusterquotas")
)

// Client is the admission package's quota clients over a cachetest API.
// Its zero value has no API and fails every call. It is safe for
// concurrent use.
type Client struct {
	// API serves the quotas.
	API *cachetest.Server
}

var (
	_ admission.QuotaClient        = Client{}
	_ admission.ClusterQuotaClient = Client{}
)

// New returns the clients of api.
func New(api *cachetest.Server) Client { return Client{API: api} }

// RegisterClusterQuotas has api serve ClusterQuotas
// (quota.quotakit.io/v1alpha1), as installing the CRD does on a cluster.
func RegisterClusterQuotas(api *cachetest.Server) error {
	if api == nil {
		return errNoAPI
	}
	return api.Register(cachetest.Resource{GVR: clusterQuotas, NewList: func() runtime.Object { return &clusterquota.ClusterQuotaList{} }})
}

var errNoAPI = errors.New("admissiontest: no API")

// ListQuotas lists the ResourceQuotas of namespace.
func (c Client) ListQuotas(ctx context.Context, namespace string) ([]corev1.ResourceQuota, error) {
	if c.API == nil {
		return nil, errNoAPI
	}
	obj, err := c.API.List(ctx, resourceQuotas, namespace, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	l, ok := obj.(*corev1.ResourceQuotaList)
	if !ok {
		return nil, fmt.Errorf("admissiontest: listing resourcequotas returned a %T", obj)
	}
	return l.Items, nil
}

// UpdateQuotaStatus writes q's status with q's resourceVersion as a
// precondition and returns the quota as stored.
func (c Client) UpdateQuotaStatus(ctx context.Context, q *corev1.ResourceQuota) (*corev1.ResourceQuota, error) {
	if c.API == nil {
		return nil, errNoAPI
	}
	obj, err := c.API.UpdateStatus(ctx, resourceQuotas, q)
	if err != nil {
		return nil, err
	}
	return as[*corev1.ResourceQuota](obj)
}

// ListClusterQuotas lists the ClusterQuotas.
func (c Client) ListClusterQuotas(ctx context.Context) ([]clusterquota.ClusterQuota, error) {
	if c.API == nil {
		return nil, errNoAPI
	}
	obj, err := c.API.List(ctx, clusterQuotas, "", metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	l, ok := obj.(*clusterquota.ClusterQuotaList)
	if !ok {
		return nil, fmt.Errorf("admissiontest: listing clusterquotas returned a %T", obj)
	}
	return l.Items, nil
}

// GetClusterQuota reads the ClusterQuota called name.
func (c Client) GetClusterQuota(ctx context.Context, name string) (*clusterquota.ClusterQuota, error) {
	if c.API == nil {
		return nil, errNoAPI
	}
	obj, err := c.API.Get(ctx, clusterQuotas, "", name)
	if err != nil {
		return nil, err
	}
	return as[*clusterquota.ClusterQuota](obj)
}

// UpdateClusterQuotaStatus writes cq's status with cq's resourceVersion
// as a precondition and returns the object as stored.
func (c Client) UpdateClusterQuotaStatus(ctx context.Context, cq *clusterquota.ClusterQuota) (*clusterquota.ClusterQuota, error) {
	if c.API == nil {
		return nil, errNoAPI
	}
	obj, err := c.API.UpdateStatus(ctx, clusterQuotas, cq)
	if err != nil {
		return nil, err
	}
	return as[*clusterquota.ClusterQuota](obj)
}

// Namespace reads the namespace called name: an admission.NamespaceGetter
// that reads the API itself, for a program without a namespace cache.
func (c Client) Namespace(name string) (*corev1.Namespace, error) {
	if c.API == nil {
		return nil, errNoAPI
	}
	obj, err := c.API.Get(context.Background(), corev1.SchemeGroupVersion.WithResource("namespaces"), "", name)
	if err != nil {
		return nil, err
	}
	return as[*corev1.Namespace](obj)
}

// as returns obj as a T, or an error naming what it is.
func as[T runtime.Object](obj runtime.Object) (T, error) {
	t, ok := obj.(T)
	if !ok {
		var zero T
		return zero, fmt.Errorf("admissiontest: the API returned a %T, want a %T", obj, zero)
	}
	return t, nil
}
