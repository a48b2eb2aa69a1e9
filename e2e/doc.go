// Package e2e holds quotakit's end-to-end tests, which run the library
// against a real kube-apiserver and etcd that TestMain builds from the Go
// module proxy and starts on loopback (see internal/cluster): the informer
// through watch cuts, compaction and restarts; the quota controller
// through the kube bridge, checked against a recount and against
// kube-apiserver's own quota admission; the admission Handler as a
// validating webhook; and the quotakit-controller command with leader
// election. Run them with make e2e from the repository root.
package e2e
