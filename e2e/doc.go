// Package e2e holds quotakit's end-to-end tests, which run the library
// against a real kube-apiserver and etcd that TestMain builds from the Go
// module proxy and starts on loopback (see internal/cluster), beside
// kube-controller-manager, which TestMain builds too, as the reference for
// quotakit's controller (and, in tenant_test.go, for its ClusterRole
// aggregation): the informer through watch cuts, compaction and
// restarts; the quota controller through the kube bridge, checked against
// a recount and against kube-apiserver's own quota admission; the
// admission Handler as a validating webhook; the parts together
// (exact_test.go: the controller's charge window beside kube-apiserver's
// plugin, two webhook replicas on an API server without it; churn_test.go:
// creators racing a random deleter beside the plugin, counted at every
// resourceVersion, with quotakit's controller and then with
// kube-controller-manager's, side by side, and charges no object follows
// released within one window); the shipped install (install_test.go: the
// webhook's scope with every replica down, a rolling restart, client
// certificates, pod resize, no double charge); quota across namespaces
// (clusterquota_test.go: the CRD, exact admission across a tenant,
// relabelling); and the quotakit-controller command with leader election.
// Run them with make e2e from the repository root.
//
// # Build budget
//
// TestMain builds etcd, kube-apiserver and kube-controller-manager (see
// cluster.Build) before any test runs, at nice 19, one after the other.
// With an empty build cache that is the longest part of a cold make test
// (on two cores, about 10 minutes for kube-apiserver);
// kube-controller-manager, built once kube-apiserver's packages are in
// the cache, adds about 1.5 to 2.5 minutes (96 s at load 2-3, 141 s at
// load 10). With the cache warm the three take a few seconds, copies
// included. QUOTAKIT_E2E_BIN names a directory of prebuilt executables
// instead.
package e2e
