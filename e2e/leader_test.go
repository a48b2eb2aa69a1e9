package e2e_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quotakit/quotakit/e2e/internal/cluster"
)

// TestLeaderElection runs the quotakit-controller command as two
// processes with leader election over one Lease. The one that takes the
// lease keeps the quotas right through churn; then it is killed with
// SIGKILL, so that it cannot release the lease, the other takes the lease
// over once it expires, and keeps the quotas right through more churn.
func TestLeaderElection(t *testing.T) {
	ctx := t.Context()
	// Built in its own module's directory, as the install tests build it.
	bin := quotakitController(t)
	e := newControllerEnv(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.api.Kubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	const lease = "quotakit-e2e"
	start := func(i int) *cluster.Program {
		p, err := cluster.Start(fmt.Sprintf("quotakit-controller-%d", i), bin, filepath.Join(t.TempDir(), "controller.log"),
			"--kubeconfig="+kubeconfig,
			"--namespace="+e.ns,
			"--leader-elect-resource-namespace="+e.ns,
			"--leader-elect-resource-name="+lease,
			"--leader-elect-lease-duration=4s",
			"--leader-elect-renew-deadline=3s",
			"--leader-elect-retry-period=500ms",
			"--metrics-bind-address=0",
			"--health-probe-bind-address=0",
			// The quotas of newControllerEnv count Secrets, which the
			// binary watches only when told to.
			"--count-secrets",
		)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			p.Stop(10 * time.Second)
			if t.Failed() {
				t.Logf("controller %d (pid %d) log:\n%s", i, p.Pid(), p.Log())
			}
		})
		return p
	}
	procs := []*cluster.Program{start(0), start(1)}

	holder := func() string {
		l, err := e.cs.CoordinationV1().Leases(e.ns).Get(ctx, lease, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	// leading returns the processes whose logs say they acquired the
	// lease: the log is the only place a process's identity shows.
	leading := func() []int {
		var idx []int
		for i, p := range procs {
			if strings.Contains(strings.ToLower(p.Log()), "successfully acquired lease") {
				idx = append(idx, i)
			}
		}
		return idx
	}
	var first string
	if !poll(30*time.Second, func() bool {
		first = holder()
		return first != "" && len(leading()) == 1
	}) {
		for i, p := range procs {
			exited, err := p.Exited()
			t.Logf("controller %d: exited %v (%v), log:\n%s", i, exited, err, p.Log())
		}
		t.Fatalf("no leader after 30s; lease holder %q", first)
	}
	leader := leading()[0]
	t.Logf("controller %d (pid %d) leads as %s", leader, procs[leader].Pid(), first)

	w := newWorld(t, e.ns, e.cs, e.dyn, 3)
	e.rc.waitQuotasRight(t, e.ns, 30*time.Second, "under the first leader")
	for range 50 {
		w.step()
	}
	e.rc.waitQuotasRight(t, e.ns, 60*time.Second, "after churn under the first leader")

	procs[leader].Kill()
	for range 50 {
		w.step() // while nobody leads, then under the new leader
	}
	waitFor(t, 30*time.Second, "the other controller to take the lease", func() bool {
		h := holder()
		return h != "" && h != first && len(leading()) == 2
	})
	t.Logf("controller %d took over as %s", 1-leader, holder())
	if exited, err := procs[1-leader].Exited(); exited {
		t.Fatalf("the new leader exited: %v", err)
	}
	e.rc.waitQuotasRight(t, e.ns, 60*time.Second, "after the leader was killed")
	for range 30 {
		w.step()
	}
	e.rc.waitQuotasRight(t, e.ns, 60*time.Second, "after churn under the new leader")
	t.Logf("%d creations admitted, %d refused by quota", w.created, w.refused)
}
