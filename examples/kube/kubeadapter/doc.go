// Package kubeadapter lets quotakit's ResourceQuota controller run against
// a real API server through client-go.
//
// quotakit itself never imports client-go; it asks for a
// [github.com/quotakit/quotakit.Client], which [Client] provides over a
// typed clientset and a dynamic client:
//
//   - the core/v1 resources the controller's evaluators read (pods,
//     services, persistentvolumeclaims, configmaps, secrets,
//     replicationcontrollers and resourcequotas) go through the typed
//     clientset, so informers hold *corev1.Pod, *corev1.ResourceQuota and
//     so on;
//   - every other resource (count/<resource>.<group> quotas) goes through
//     the dynamic client and is listed and watched as
//     *unstructured.Unstructured.
//
// Errors from the API server are wrapped with %w, so apierrors.IsConflict,
// apierrors.IsResourceExpired and friends still see them.
package kubeadapter
