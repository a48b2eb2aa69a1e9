// Package cluster builds, starts and stops the real servers the
// end-to-end tests run against: etcd and kube-apiserver, and
// kube-controller-manager as the reference for quotakit's controller,
// built from the Go module proxy at the versions Kubernetes 1.37.1 uses
// (see [Build]), on loopback only, with certificates, keys and a token
// made for the run.
//
// # Processes
//
// Every process the package starts (the servers, the go commands that
// build them, [Start]ed programs) runs in a process group of its own
// (Setpgid) and is stopped by signalling that group, by its id: never by
// name, and never anything this package did not start. Three layers make
// sure none outlives the tests:
//
//   - [StopAll], which TestMain calls when the tests end, stops what is
//     still running, and [Verify] then fails the run if any group started
//     still has a member;
//   - [HandleSignals] does the same on SIGINT, SIGTERM and SIGHUP;
//   - every child gets Pdeathsig SIGKILL from the kernel when the test
//     binary dies without running any Go code: a panic, go test's
//     -timeout, SIGKILL.
//
// # Servers
//
// [StartEtcd] and [StartAPIServer] return once the server answers its
// health or readiness endpoint. kube-apiserver runs with ResourceQuota
// admission on and ServiceAccount admission off (nothing would create the
// tokens it requires), RBAC with one system:masters token, and no endpoint
// reconciler. [APIServer.Restart] restarts it with the same flags, and
// [Etcd.Compact] compacts etcd's history, to make the API answer 410.
// [StartControllerManager] starts kube-controller-manager against an API
// server, with the controllers of its options (the ResourceQuota
// controller alone by default), and
// [ControllerManager.Requests] reads the requests it has made from its
// metrics. [Proxy] sits between a client and the API server and can cut
// its connections or hold new ones.
package cluster
