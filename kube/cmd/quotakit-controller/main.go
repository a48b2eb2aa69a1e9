// Command quotakit-controller keeps the status of every ResourceQuota of a
// cluster, as kube-controller-manager's resource quota controller does,
// with quotakit's controller; and, with -webhook-addr, enforces quota as a
// validating admission webhook.
//
// Replicas elect a leader through a coordination.k8s.io Lease, with
// kube-controller-manager's timings (15s lease, 10s renew deadline, 2s
// retry period); only the leader runs the controller, every replica serves
// the webhook. On SIGTERM or SIGINT the leader stops the controller, then
// releases the lease, so that a standby takes over at once rather than
// after the lease expires. A leader that loses its lease exits with code 1,
// as kube-controller-manager does; bad flags exit with code 2.
//
// Endpoints: /metrics (the controller's queues under client-go's workqueue
// metric names, leader_election_master_status and
// leader_election_slowpath_total as kube-controller-manager exposes them,
// and Go runtime and process metrics) on -metrics-bind-address; /healthz and /readyz on
// -health-probe-bind-address. /readyz passes on a standby, and on the
// leader once the informers have synced (see quotakit.Controller.Ready);
// with the webhook, only once the webhook's quota cache has synced.
//
// The deploy directory of this module installs it; its README says how.
//
// Usage:
//
//	quotakit-controller [flags]
//
// Run quotakit-controller -h for the flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/klog/v2"

	"github.com/quotakit/quotakit/kube"
)

func main() {
	os.Exit(mainExit(os.Args[1:], os.Stderr))
}

// mainExit runs the command with args and returns its exit code: 0 after
// a clean shutdown or -h, 2 for bad flags, 1 for any other failure.
func mainExit(args []string, errOut io.Writer) int {
	cfg, err := parseFlags(args, errOut)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := logr.FromSlogHandler(slog.NewJSONHandler(errOut, nil))
	// client-go logs through klog; its leader election logs matter.
	klog.SetLogger(log)
	ctx = logr.NewContext(ctx, log)
	if err := run(ctx, cfg); err != nil {
		log.Error(err, "exiting")
		return 1
	}
	return 0
}

// run builds the clients from the kubeconfig and runs until ctx is done.
func run(ctx context.Context, cfg config) error {
	restCfg, err := loadConfig(cfg.kubeconfig)
	if err != nil {
		return err
	}
	restCfg.QPS, restCfg.Burst = float32(cfg.qps), cfg.burst
	restCfg = rest.AddUserAgent(restCfg, "quotakit-controller")
	clients, err := kube.NewClients(restCfg)
	if err != nil {
		return err
	}
	reg := newRegistry()
	leader, err := newLeaderMetrics(reg)
	if err != nil {
		return err
	}
	leaderelection.SetProvider(leader)
	return runWith(ctx, cfg, clients, reg)
}

// loadConfig loads the kubeconfig at path, else $KUBECONFIG, else
// ~/.kube/config, else the pod's service account.
func loadConfig(path string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading the client configuration: %w", err)
	}
	return cfg, nil
}
