package e2e_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/quotakit/quotakit/e2e/internal/cluster"
)

// env is the cluster every test of the package shares: one etcd and one
// kube-apiserver, started by TestMain. Tests use namespaces of their own.
var env struct {
	dir  string
	bins cluster.Binaries
	etcd *cluster.Etcd
	api  *cluster.APIServer
}

// TestMain builds the servers, starts them, runs the tests and stops
// every process it started, by process group, whether the tests pass,
// fail or panic: a panicking test runs the deferred calls here no more
// than it runs its own, so the children also carry Pdeathsig (see
// package cluster), and ^C or SIGTERM stop them through HandleSignals.
// It then checks that no process it started is left, and fails the run if
// one is.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) (code int) {
	cluster.HandleSignals()
	defer func() {
		cluster.StopAll()
		if err := cluster.Verify(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: processes left running:", err)
			code = 1
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	var err error
	if env.dir, err = os.MkdirTemp("", "quotakit-e2e-"); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer func() {
		if code != 0 {
			fmt.Fprintln(os.Stderr, "e2e: server logs kept in", env.dir)
			return
		}
		os.RemoveAll(env.dir)
	}()
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "e2e: "+format+"\n", args...) }
	if err := setUp(ctx, logf); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	return m.Run()
}

func setUp(ctx context.Context, logf func(string, ...any)) error {
	var err error
	if env.bins, err = cluster.Build(ctx, filepath.Join(env.dir, "bin"), logf); err != nil {
		return err
	}
	ca, err := cluster.NewCA()
	if err != nil {
		return err
	}
	start := time.Now()
	if env.etcd, err = cluster.StartEtcd(ctx, env.bins.Etcd, env.dir); err != nil {
		return err
	}
	logf("etcd ready in %v (pid %d)", time.Since(start).Round(time.Millisecond), env.etcd.Pid())
	start = time.Now()
	env.api, err = cluster.StartAPIServer(ctx, env.bins.APIServer, env.etcd, ca, env.dir, cluster.APIServerOptions{
		// Secrets are served without the watch cache, straight from
		// etcd, and everything else through it, so that the informer
		// tests see both of kube-apiserver's watch implementations on
		// one server.
		Args: []string{"--watch-cache-sizes=secrets#0"},
	})
	if err != nil {
		return err
	}
	logf("kube-apiserver ready in %v (pid %d)", time.Since(start).Round(time.Millisecond), env.api.Pid())
	return nil
}
