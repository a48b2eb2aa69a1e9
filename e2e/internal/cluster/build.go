package cluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The packages the servers are built from. kube-apiserver and
// kube-controller-manager come from k8s.io/kubernetes at the version the
// e2e module requires (v1.37.1; v1.37.2 is not downloadable), with every
// k8s.io staging module replaced by its matching v0.37.1; etcd from the
// etcd server module at the version that k8s.io/kubernetes v1.37.1 pins,
// through a main package of this module that calls etcd's own entry point.
const (
	apiserverPackage         = "k8s.io/kubernetes/cmd/kube-apiserver"
	controllerManagerPackage = "k8s.io/kubernetes/cmd/kube-controller-manager"
	etcdPackage              = "github.com/quotakit/quotakit/e2e/internal/etcd"
)

// Binaries are the paths of the servers' executables.
type Binaries struct {
	Etcd      string
	APIServer string
	// ControllerManager is kube-controller-manager, which the tests run
	// with one controller at a time: its ResourceQuota controller, as
	// the reference that quotakit's controller is compared with, or its
	// ClusterRole aggregation controller, which builds the view role a
	// tenant is bound to.
	ControllerManager string
}

// tools pairs each field of b with the package it is built from, in the
// order [Build] builds them; the executable's name is the package's last
// element.
func (b *Binaries) tools() []struct {
	pkg  string
	path *string
} {
	return []struct {
		pkg  string
		path *string
	}{
		{etcdPackage, &b.Etcd},
		{apiserverPackage, &b.APIServer},
		{controllerManagerPackage, &b.ControllerManager},
	}
}

// Build builds etcd, kube-apiserver and kube-controller-manager, copies
// them into dir and returns their paths. All three are tools of the e2e
// module (its go.mod names them with tool directives), built with go tool
// -n, which builds a tool once, keeps the executable in the Go build cache
// and prints its path; later runs find the executables there and neither
// compile nor link. The builds run at the lowest CPU priority (nice 19)
// when nice exists, so that a shared machine stays usable, and without
// -race or any other flag of the test binary: the servers are the judge
// and the reference, not the code under test.
//
// Their budget, measured with an empty build cache on the two cores of an
// AMD EPYC VM at nice 19 (load average 2-9, other builds and tests
// running): etcd 43 s, kube-apiserver 9 min 18 s (10 min 17 s in an
// earlier sitting at load 10-13). kube-controller-manager, built after
// kube-apiserver, shares most of its packages and adds 96 s (load 2-3;
// 141 s at load 10): its own controllers, cadvisor, the CSI and CRI
// APIs. That is what it adds to a cold make test. With the cache warm, go
// tool -n answers in about 1.5 s for each, and the copy takes a few
// seconds more.
//
// The environment variable QUOTAKIT_E2E_BIN names a directory that already
// holds the three executables (etcd, kube-apiserver and
// kube-controller-manager), to skip the builds.
func Build(ctx context.Context, dir string, log func(format string, args ...any)) (Binaries, error) {
	var b Binaries
	if pre := os.Getenv("QUOTAKIT_E2E_BIN"); pre != "" {
		for _, t := range b.tools() {
			*t.path = filepath.Join(pre, filepath.Base(t.pkg))
			if _, err := os.Stat(*t.path); err != nil {
				return Binaries{}, fmt.Errorf("cluster: QUOTAKIT_E2E_BIN: %w", err)
			}
		}
		return b, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Binaries{}, fmt.Errorf("cluster: %w", err)
	}
	// One build after the other: two links of this size at once would
	// only compete for the same two cores and the same memory.
	for _, t := range b.tools() {
		start := time.Now()
		cached, err := goTool(ctx, t.pkg)
		if err != nil {
			return Binaries{}, err
		}
		// A copy, so that nothing that trims the build cache while
		// the tests run can take the executable away.
		*t.path = filepath.Join(dir, filepath.Base(t.pkg))
		if err := copyFile(cached, *t.path); err != nil {
			return Binaries{}, err
		}
		log("built %s in %v", t.pkg, time.Since(start).Round(time.Millisecond))
	}
	return b, nil
}

// goTool builds the tool pkg with go tool -n, from the current
// directory, which is inside the e2e module so that its go.mod (and its
// replace directives) select the versions, and returns the path of the
// executable in the build cache.
func goTool(ctx context.Context, pkg string) (string, error) {
	args := []string{"go", "tool", "-n", pkg}
	if nice, err := exec.LookPath("nice"); err == nil {
		args = append([]string{nice, "-n", "19"}, args...)
	}
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	// Cancelling ends the whole build, compilers and linker included,
	// not only the go command.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	p, err := start("go tool -n "+pkg, cmd)
	if err != nil {
		return "", err
	}
	<-p.done
	p.stop(0) // reaps anything the go command left in its group
	if p.err != nil {
		return "", fmt.Errorf("cluster: go tool -n %s: %w", pkg, p.err)
	}
	path := strings.TrimSpace(out.String())
	if path == "" || strings.Contains(path, "\n") {
		return "", fmt.Errorf("cluster: go tool -n %s printed %q, not a path", pkg, out.String())
	}
	return path, nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("cluster: copy %s: %w", from, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	return nil
}
