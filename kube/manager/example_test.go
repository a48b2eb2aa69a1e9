package manager_test

import (
	"fmt"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/quotakit/quotakit/kube/manager"
)

// Run the controller in a controller-runtime manager. Add gives
// it the manager's logger, its metrics registry (the queue series join
// controller-runtime's own), its leader election and a liveness and a
// readiness check (a standby is ready); LeaderElectionReleaseOnCancel
// hands the lease over at once when the process stops. It needs a
// cluster, so it is compiled, not run; TestManager runs the same call in
// a manager with leader election over fake clients.
func ExampleAdd() {
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		LeaderElection:                true,
		LeaderElectionID:              "quotakit-controller",
		LeaderElectionNamespace:       "quotakit-system",
		LeaderElectionReleaseOnCancel: true,
		HealthProbeBindAddress:        ":8081",
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if _, err := manager.Add(mgr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
