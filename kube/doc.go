// Package kube connects quotakit to a Kubernetes API server through
// client-go: a [Client] that serves the controller's informers with the
// cheapest client that gives each evaluator what it reads, discovery, and
// status writes; a Prometheus [MetricsProvider] that exposes the
// controller's queues under the names, labels, help strings and buckets
// of client-go's workqueue metrics; and the caches of a webhook built on
// the admission package ([Client.QuotaInformer], [QuotaLister],
// [Client.ClusterQuotaInformer], [ClusterQuotaIndex],
// [Client.NamespaceInformer], [Client.NamespaceGetter]); and what lets
// tenants and operators see quota across namespaces: the
// [AppliedQuotaWriter], which keeps a read-only copy of each ClusterQuota
// in the namespaces it selects, and the [ClusterQuotaCollector] of how
// full each one is. Package
// kube/manager adds the controller to a controller-runtime manager in one
// call; it is apart so that a webhook built on this package links no
// controller-runtime package.
//
// It is a module of its own, so that the library never requires client-go,
// controller-runtime or Prometheus. The command quotakit-controller, in
// cmd/quotakit-controller, runs the controller with leader election, and
// deploy/ holds the manifests that install it.
//
// # Embedding
//
// In a controller-runtime manager, one call adds the controller with the
// manager's logger, metrics registry, leader election and health checks
// (package kube/manager):
//
//	if _, err := manager.Add(mgr); err != nil {
//		...
//	}
//
// Elsewhere, build the client from a *rest.Config with the same
// [quotakit.Options] as the controller:
//
//	opts := quotakit.Options{Logger: log}
//	client, err := kube.NewForConfig(cfg, opts)
//	...
//	ctrl, err := quotakit.NewController(client, opts)
//	...
//	err = ctrl.Run(ctx)
//
// This package links no controller-runtime package (a test checks it with
// go list -deps). Package kube/manager does: controller-runtime's metrics
// package then sets, when the program starts, client-go's process-wide
// leader election, workqueue and REST client metrics providers to its own
// registry; a program that wants those metrics elsewhere measures them
// itself, as quotakit-controller does for the leader election metrics.
//
// # Webhooks
//
// A validating webhook built on the admission package needs no controller
// options: [NewForConfig] without them gives the live reads and status
// writes of [admission.NewAccessor], and [Client.QuotaInformer] with
// [QuotaLister] its cache. A replica that serves such a webhook is ready
// only once that cache has synced, whether or not it leads.
//
// # Rate limits
//
// [NewForConfig] gives a rest.Config with zero QPS and Burst
// kube-controller-manager's 20 and 30 requests a second ([DefaultQPS],
// [DefaultBurst]) rather than client-go's 5 and 10, at which the first
// lists of a large cluster take minutes.
package kube
