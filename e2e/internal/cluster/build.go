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

// The packages the servers are built from. kube-apiserver comes from
// k8s.io/kubernetes at the version the e2e module requires (v1.37.1;
// v1.37.2 is not downloadable), with every k8s.io staging module replaced
// by its matching v0.37.1; etcd from the etcd server module at the version
// that k8s.io/kubernetes v1.37.1 pins, through a main package of this
// module that calls etcd's own entry point.
const (
	apiserverPackage = "k8s.io/kubernetes/cmd/kube-apiserver"
	etcdPackage      = "github.com/quotakit/quotakit/e2e/internal/etcd"
)

// Binaries are the paths of the servers' executables.
type Binaries struct {
	Etcd      string
	APIServer string
}

// Build builds etcd and kube-apiserver, copies them into dir and returns
// their paths. Both are tools of the e2e module (its go.mod names them
// with tool directives), built with go tool -n, which builds a tool once,
// keeps the executable in the Go build cache and prints its path: the
// first build takes about 20 minutes of two cores, later runs find the
// executables there and neither compile nor link. The builds run at the
// lowest CPU priority (nice 19) when nice exists, so that a shared machine
// stays usable, and without -race or any other flag of the test binary:
// the servers are the judge, not the code under test.
//
// The environment variable QUOTAKIT_E2E_BIN names a directory that already
// holds both executables (etcd and kube-apiserver), to skip the builds.
func Build(ctx context.Context, dir string, log func(format string, args ...any)) (Binaries, error) {
	if pre := os.Getenv("QUOTAKIT_E2E_BIN"); pre != "" {
		b := Binaries{Etcd: filepath.Join(pre, "etcd"), APIServer: filepath.Join(pre, "kube-apiserver")}
		for _, p := range []string{b.Etcd, b.APIServer} {
			if _, err := os.Stat(p); err != nil {
				return Binaries{}, fmt.Errorf("cluster: QUOTAKIT_E2E_BIN: %w", err)
			}
		}
		return b, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Binaries{}, fmt.Errorf("cluster: %w", err)
	}
	b := Binaries{Etcd: filepath.Join(dir, "etcd"), APIServer: filepath.Join(dir, "kube-apiserver")}
	// One build after the other: two links of this size at once would
	// only compete for the same two cores and the same memory.
	for _, t := range []struct{ pkg, out string }{{etcdPackage, b.Etcd}, {apiserverPackage, b.APIServer}} {
		start := time.Now()
		cached, err := goTool(ctx, t.pkg)
		if err != nil {
			return Binaries{}, err
		}
		// A copy, so that nothing that trims the build cache while
		// the tests run can take the executable away.
		if err := copyFile(cached, t.out); err != nil {
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
