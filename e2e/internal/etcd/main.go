// Command etcd is the etcd server the end-to-end tests start: etcd's own
// entry point, built from the etcd server module at the version Kubernetes
// pins, so that no prebuilt binary is downloaded. It runs as a separate
// process rather than embedded in the test binary so that the test binary
// stays small and race-instrumented builds do not include etcd, and so that
// the tests stop it the same way they stop kube-apiserver: by process id.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
