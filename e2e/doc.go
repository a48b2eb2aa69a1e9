// Package e2e holds quotakit's end-to-end tests, which run the library
// against a real kube-apiserver and etcd that TestMain builds from the Go
// module proxy and starts on loopback (see internal/cluster): the informer
// through watch cuts, compaction and restarts; the quota controller
// through the kube bridge, checked against a recount and against
// kube-apiserver's own quota admission; the admission Handler as a
// validating webhook; the parts together (exact_test.go: the controller's
// charge window beside kube-apiserver's plugin, two webhook replicas on an
// API server without it; churn_test.go: creators racing a random deleter
// beside the plugin, counted at every resourceVersion, and charges no
// object follows released within one window); the shipped install (install_test.go: the
// webhook's scope with every replica down, a rolling restart, client
// certificates, pod resize, no double charge); quota across namespaces
// (clusterquota_test.go: the CRD, exact admission across a tenant,
// relabelling); and the quotakit-controller command with leader election.
// Run them with make e2e from the repository root.
package e2e
