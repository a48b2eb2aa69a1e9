package kube_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoControllerRuntime checks that package kube, and a webhook program
// built on its client and informers and the admission package
// (examples/webhook), link no controller-runtime package: its init hooks
// take over client-go's process-wide metrics providers, which a webhook
// author has not asked for. Package kube/manager is where the manager
// glue lives.
func TestNoControllerRuntime(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	for _, pkg := range []string{".", "./examples/webhook"} {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 10 {
			t.Fatalf("go list -deps %s listed %d packages: %q", pkg, len(deps), deps)
		}
		for _, d := range deps {
			if strings.HasPrefix(d, "sigs.k8s.io/controller-runtime") {
				t.Errorf("%s links %s", pkg, d)
			}
		}
	}
}
