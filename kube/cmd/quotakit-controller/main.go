// Command quotakit-controller keeps the status of every ResourceQuota of a
// cluster, as kube-controller-manager's resource quota controller does,
// with quotakit's controller; and, with -webhook-addr, serves a validating
// admission webhook. With -controller=false it serves the webhook alone:
// no controller, no Lease, and so none of their permissions, which is how
// the shipped install runs the webhook, in a Deployment and under a
// ServiceAccount of its own.
//
// It runs in a controller-runtime manager, which serves /metrics (with
// its authentication and authorization filter under -metrics-secure),
// /healthz and /readyz, elects the leader and runs the controller and the
// webhook as its Runnables. This command is a Go module of its own
// (kube/cmd/quotakit-controller/go.mod), because the metrics filter needs
// k8s.io/apiserver, which users of the kube module must not inherit.
//
// Replicas elect a leader through a coordination.k8s.io Lease, with
// kube-controller-manager's timings (15s lease, 10s renew deadline, 2s
// retry period), through a client of its own; only the leader runs the
// controller, every replica serves the webhook. A leader that loses its
// lease exits with code 1, as kube-controller-manager does, once the
// controller has stopped and the webhook has answered the reviews in
// flight; bad flags exit with code 2.
//
// The controller lists and watches only what it counts: Secrets only with
// -count-secrets, and a resource that a quota names and that it may not
// list is reported on that quota (a Warning Event, an error log,
// quotakit_resourcequota_uncounted_quotas and
// quotakit_resourcequota_forbidden_resources) without keeping the
// controller from being ready.
//
// # The webhook
//
// In a cluster whose kube-apiserver runs its ResourceQuota admission
// plugin (every usual one), namespaced ResourceQuota is already enforced
// there, and a webhook enforcing it again would charge each admitted
// request twice. So the webhook enforces namespaced ResourceQuota only
// with -enforce-namespaced-quota, meant for API servers whose plugin is
// off (extension API servers, virtual clusters); without it, and with no
// other kind of quota to enforce, it allows every request it is sent.
//
// With -client-ca-file it accepts only clients whose certificate that
// bundle verifies: a review from anyone else fails in the TLS handshake,
// reaches no handler and charges nothing. Its quota status writes and
// reads go through a client of their own (-admission-kube-api-qps,
// -admission-kube-api-burst, as kube-apiserver's loopback client), not
// the controller's.
//
// Under load, whoever can reach the webhook's port holds only what these
// bound: at most -max-webhook-connections connections are open at once
// (a new one takes the place of the oldest that has sent no request, or
// of the one idle longest, and is closed at once only when every one is
// serving a request); a review's body must
// arrive within 5 seconds (admission.DefaultBodyReadTimeout), or it is
// answered 408; the bodies held at once take at most 64 MiB
// (admission.DefaultMaxBytesInFlight); and at most
// -max-concurrent-reviews reviews are evaluated at once, a slot being
// taken only once a body has been read and decoded, so that a slow sender
// holds none. A review over a limit gets HTTP 429 at once. kube-apiserver
// handles a 408 or 429 as a failed call, by the webhook's failurePolicy:
// with failurePolicy: Fail, as deployed, the request being admitted is
// refused, as a denial would refuse it.
//
// # Shutting down
//
// On SIGTERM or SIGINT, in this order: /readyz fails; the webhook keeps
// serving for -shutdown-delay, so that the removal of this replica from
// the Service's endpoints reaches every kube-apiserver before it stops
// accepting; the webhook stops accepting and waits for the reviews it is
// serving (a review in flight is answered on its merits, never "quota
// evaluator stopped"); the webhook's quota evaluator and cache stop; the
// controller stops; /metrics and the probes stop; and the lease is
// released (the manager's LeaderElectionReleaseOnCancel), so that a
// standby takes over at once rather than after the lease expires. The
// manager stops the webhook, which needs no election, before the
// controller, and waits for both however long they take. The pod's
// terminationGracePeriodSeconds must cover the delay, the drain (at most
// 15s) and the controller's stop.
//
// # Endpoints
//
// /metrics on -metrics-bind-address, localhost only by default, or over
// HTTPS (HTTP/1.1, a self-signed certificate made at start) with
// -metrics-secure, behind controller-runtime's filter: a TokenReview of
// the scraper's bearer token and a SubjectAccessReview of get on the
// non-resource URL /metrics, through a client of their own, decisions
// kept as kube-apiserver's delegating authenticator and authorizer keep
// them (a token for a minute, an allowed scrape for five, a refused one
// for thirty seconds). No token, or a token of another scheme, is 401; a
// token the TokenReview does not authenticate is 500, as controller-
// runtime's filter answers it; a user not allowed is 403. It serves:
// the controller's queues under client-go's workqueue metric names;
// controller-runtime's leader_election_master_status{name} (0 again once
// the lease is released) and leader_election_slowpath_total{name}, as
// kube-controller-manager exposes them; the webhook's requests, latency
// and in-flight reviews measured by controller-runtime's own webhook
// instrumentation (controller_runtime_webhook_requests_total{webhook,code},
// refusals such as 408 and 429 included,
// controller_runtime_webhook_latency_seconds{webhook},
// controller_runtime_webhook_requests_in_flight{webhook}); its denials by
// reason (quotakit_webhook_denials_total{reason}), the connections it
// closed over its cap (quotakit_webhook_connections_refused_total,
// quotakit_webhook_connections_evicted_total); client-go's requests
// (rest_client_*); and Go runtime and process
// metrics. No series was renamed with the manager; the two leader
// election series lost the "[ALPHA] " prefix of their help strings, which
// controller-runtime writes without it; controller-runtime's other series
// (rest_client_*, certwatcher_*, its webhook panic and conversion
// counters) are new.
//
// /healthz and /readyz on -health-probe-bind-address, the manager's
// probes. /healthz fails only when this replica leads and has not renewed
// its lease in time (check leaderElection). /readyz fails once shutdown
// has begun (shutdown); on the leader, until the controller's informers
// have synced, and without leader election until the controller runs
// (resourcequota, controller; see quotakit.Controller.Ready; a standby
// runs no controller and passes); and on any replica whose webhook
// enforces quota, leader or standby, until its quota cache has synced,
// which it cannot while the API server is unreachable (webhook).
//
// The webhook is served by this command's own server, not
// controller-runtime's webhook.Server, which reads its client CA once,
// offers HTTP/2 and bounds only the time to read a request's headers.
//
// Logs go to standard error through log/slog, as JSON or text
// (-log-format), with logr V levels up to -v.
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
	"runtime/debug"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/quotakit/quotakit/kube"
)

func main() {
	os.Exit(mainExit(os.Args[1:], os.Stdout, os.Stderr))
}

// mainExit runs the command with args and returns its exit code: 0 after
// a clean shutdown, -h or -version, 2 for bad flags, 1 for any other
// failure. -version prints to out; usage, errors and logs go to errOut.
func mainExit(args []string, out, errOut io.Writer) int {
	cfg, err := parseFlags(args, errOut)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2
	}
	if cfg.version {
		fmt.Fprintln(out, "quotakit-controller", version())
		return 0
	}
	if limit := goMemoryLimit(cfg.memoryLimit, os.Getenv("GOMEMLIMIT")); limit > 0 {
		debug.SetMemoryLimit(limit)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := newLogger(errOut, cfg.logFormat, cfg.verbosity)
	// client-go's own logs (leader election's, the REST client's
	// warnings) go through klog, and controller-runtime's through its
	// own process-wide logger; send both to the same logger.
	klog.SetLogger(log)
	ctrllog.SetLogger(log)
	ctx = logr.NewContext(ctx, log)
	if err := run(ctx, cfg); err != nil {
		log.Error(err, "exiting")
		return 1
	}
	return 0
}

// memoryHeadroom is the share of the container's memory limit left out of
// the Go runtime's soft limit: what the runtime does not count against it
// (thread stacks, memory held outside the heap) must fit there, or the
// kernel kills the container before the collector has worked harder.
const memoryHeadroom = 0.10

// goMemoryLimit returns the soft memory limit for a container limited to
// containerLimit bytes: 90% of it, or 0 (leave the runtime's) when there
// is no limit or GOMEMLIMIT is set, which the runtime reads itself.
func goMemoryLimit(containerLimit int64, gomemlimit string) int64 {
	if containerLimit <= 0 || gomemlimit != "" {
		return 0
	}
	return int64(float64(containerLimit) * (1 - memoryHeadroom))
}

// newLogger returns a logger that writes to w through log/slog, as JSON
// or text, logging V levels up to verbosity (logr's V(n) is slog's level
// -n).
func newLogger(w io.Writer, format string, verbosity int) logr.Logger {
	opts := &slog.HandlerOptions{Level: slog.Level(-verbosity)}
	var h slog.Handler
	if format == "text" {
		h = slog.NewTextHandler(w, opts)
	} else {
		h = slog.NewJSONHandler(w, opts)
	}
	return logr.FromSlogHandler(h)
}

// stampedVersion is the version `make controller` (and so `make image`)
// links into the binary with -ldflags -X main.stampedVersion=...: the tag
// of the image the manifests name. Empty in any other build.
var stampedVersion string

// version returns the version stamped into the binary, else that of the
// module it was built from as the Go toolchain recorded it, with the VCS
// revision when there is one.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		if stampedVersion != "" {
			return stampedVersion
		}
		return "(unknown)"
	}
	v := info.Main.Version
	if stampedVersion != "" {
		v = stampedVersion
	}
	if v == "" {
		v = "(devel)"
	}
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = ", modified"
			}
		}
	}
	if rev != "" {
		v += " (" + rev + modified + ")"
	}
	return v
}

// run builds the clients from the kubeconfig and runs until ctx is done.
func run(ctx context.Context, cfg config) error {
	restCfg, err := loadConfig(cfg.kubeconfig)
	if err != nil {
		return err
	}
	controllerCfg := rest.CopyConfig(restCfg)
	controllerCfg.QPS, controllerCfg.Burst = float32(cfg.qps), cfg.burst
	controllerCfg = rest.AddUserAgent(controllerCfg, "quotakit-controller")
	clients, err := kube.NewClients(controllerCfg)
	if err != nil {
		return err
	}
	e := env{clients: clients, config: kube.WithDefaults(controllerCfg)}
	// Leader election and the metrics' token reviews get clients, and
	// rate limiters, of their own, at the same limits.
	if cfg.leaderElect {
		c := ownConfig(restCfg, cfg, "leader-election")
		// As controller-runtime's own lock client: a request that
		// hangs cannot outlast half the renew deadline.
		c.Timeout = max(cfg.renewDeadline/2, time.Second)
		typed, err := kubernetes.NewForConfig(c)
		if err != nil {
			return fmt.Errorf("the leader election client: %w", err)
		}
		e.election = kube.Clients{Typed: typed}
	}
	if cfg.metricsSecure {
		e.auth = ownConfig(restCfg, cfg, "metrics-auth")
	}
	if cfg.appliedClusterQuotas {
		// The copies' writes have a rate limiter of their own, at the
		// controller's limits: a quota selecting many namespaces is as
		// many writes, which must not hold up its status writes.
		dyn, err := dynamic.NewForConfig(ownConfig(restCfg, cfg, "applied-cluster-quotas"))
		if err != nil {
			return fmt.Errorf("the applied cluster quotas' client: %w", err)
		}
		e.applied = dyn
	}
	if cfg.webhookAddr != "" {
		// The webhook's own client: its status writes are not queued
		// behind the controller's lists and writes, nor the controller's
		// behind a burst of admissions.
		admissionCfg := rest.CopyConfig(restCfg)
		admissionCfg.QPS, admissionCfg.Burst = float32(cfg.admissionQPS), cfg.admissionBurst
		admissionCfg = rest.AddUserAgent(admissionCfg, "quotakit-controller/admission")
		if e.admission, err = kube.NewClients(admissionCfg); err != nil {
			return err
		}
	}
	return runWith(ctx, cfg, e)
}

// ownConfig returns a config of its own over restCfg, at the controller's
// rate limits, its user agent suffixed with agent.
func ownConfig(restCfg *rest.Config, cfg config, agent string) *rest.Config {
	c := rest.CopyConfig(restCfg)
	c.QPS, c.Burst = float32(cfg.qps), cfg.burst
	return kube.WithDefaults(rest.AddUserAgent(c, "quotakit-controller/"+agent))
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
