// Package kube connects quotakit to a Kubernetes API server through
// client-go: a [Client] that serves the controller's informers with the
// cheapest client that gives each evaluator what it reads, discovery, and
// status writes; and a Prometheus [MetricsProvider] that exposes the
// controller's queues under the names, labels, help strings and buckets
// of client-go's workqueue metrics.
//
// It is a module of its own, so that the library never requires client-go,
// controller-runtime or Prometheus. The command quotakit-controller, in
// cmd/quotakit-controller, runs the controller with leader election, and
// deploy/ holds the manifests that install it.
//
// # Embedding
//
// Build the client from a *rest.Config, with the same [quotakit.Options]
// as the controller:
//
//	opts := quotakit.Options{Logger: log}
//	client, err := kube.NewForConfig(cfg, opts)
//	...
//	ctrl, err := quotakit.NewController(client, opts)
//	...
//	err = ctrl.Run(ctx)
//
// In a controller-runtime manager, add the controller with mgr.Add: it is
// a Runnable that needs leader election. The package example shows the
// manager's logger, metrics registry and readiness check wired in.
//
// # Rate limits
//
// [NewForConfig] gives a rest.Config with zero QPS and Burst
// kube-controller-manager's 20 and 30 requests a second ([DefaultQPS],
// [DefaultBurst]) rather than client-go's 5 and 10, at which the first
// lists of a large cluster take minutes.
package kube
