package kube

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quotakit/quotakit/admission"
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
