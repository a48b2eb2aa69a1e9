package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/quotakit/quotakit"
	"github.com/quotakit/quotakit/evaluator"
	"github.com/quotakit/quotakit/kube"
	kubemanager "github.com/quotakit/quotakit/kube/manager"
)

// drainTimeout bounds how long the webhook waits, once it stops
// accepting, for the reviews it is serving. It is above webhookTimeout,
// by which every review has its answer.
const drainTimeout = 15 * time.Second

// Timeouts of the webhook's server: a client that sends its request
// slowly, or reads the answer slowly, or keeps a connection idle, does
// not hold a connection and a goroutine for ever. The idle timeout is
// above the 90 seconds after which kube-apiserver's client drops an idle
// connection, so that it is the client that closes it, never the server
// under a request the client has just sent.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 30 * time.Second
	writeTimeout      = 60 * time.Second
	idleTimeout       = 120 * time.Second
)

// env is what runWith takes from outside the command line: the API
// clients, where the command's own series go, and how the webhook
// listens.
type env struct {
	// clients serve the controller.
	clients kube.Clients
	// election serves the lease; it defaults to clients. Of its own, as
	// kube-controller-manager gives leader election a client of its
	// own: the controller's lists at start cannot hold up a lease
	// renewal behind the same rate limiter.
	election kube.Clients
	// admission serves the webhook: its quota cache, live reads and
	// status writes. It is required with -webhook-addr.
	admission kube.Clients
	// config is the manager's: its metrics filter reviews scrapers'
	// tokens with it unless auth is set. The manager's own clients make
	// no other request in this command (its cache holds no informer, the
	// lease goes through election). It defaults to a config that reaches
	// no server.
	config *rest.Config
	// auth, with -metrics-secure, serves the reviews of scrapers' tokens
	// (TokenReview, SubjectAccessReview): a client of its own, so that a
	// flood of scrapes cannot hold up the controller.
	auth *rest.Config
	// reg takes the command's own series: the controller's queues and
	// counts, the webhook's denials and connections, the lease's slow
	// path. It defaults to controller-runtime's metrics.Registry, which
	// /metrics serves with controller-runtime's own series (the leader
	// status, the webhook's requests, client-go's requests) and the Go
	// runtime's and the process's.
	reg prometheus.Registerer
	// applied writes the AppliedClusterQuota copies: a dynamic client
	// whose rate limiter is its own. It defaults to clients' Dynamic.
	applied dynamic.Interface
	// listen opens the webhook's listener; it defaults to net.Listen on
	// TCP. Tests listen in memory.
	listen func(addr string) (net.Listener, error)
}

// runWith runs the controller, the endpoints and the webhook cfg asks for
// in a controller-runtime manager until ctx is done or the lease is lost,
// then shuts down in the order the package documentation gives, and
// returns once everything it started has stopped and the lease, if held,
// is released. A lost lease, or a controller that fails, is its error.
func runWith(ctx context.Context, cfg config, e env) error {
	log := logr.FromContextOrDiscard(ctx)
	if e.reg == nil {
		e.reg = crmetrics.Registry
	}
	if e.config == nil {
		e.config = &rest.Config{Host: "https://manager.invalid"}
	}
	if e.listen == nil {
		e.listen = func(addr string) (net.Listener, error) { return net.Listen("tcp", addr) }
	}
	if e.election.Typed == nil {
		e.election = e.clients
	}
	if cfg.webhookAddr != "" && e.admission.Typed == nil {
		return errors.New("the webhook needs a typed client of its own")
	}
	metrics, err := kube.NewMetricsProvider(e.reg)
	if err != nil {
		return err
	}

	var lock *leaseLock
	if cfg.controller && cfg.leaderElect {
		// The lease's Events (became leader, stopped leading) go through
		// the election's client too.
		events := record.NewBroadcaster()
		events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: e.election.Typed.CoreV1().Events("")})
		// After the manager has released the lease, which records an
		// Event.
		defer events.Shutdown()
		recorder := events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "quotakit-controller"})
		if lock, err = newLeaseLock(cfg, e.election, recorder, e.reg, crmetrics.Registry); err != nil {
			return err
		}
	}
	var hook *webhook
	if cfg.webhookAddr != "" {
		if hook, err = newWebhook(cfg, kube.New(e.admission, quotakit.Options{}), e.reg); err != nil {
			return err
		}
		log.Info("the webhook's callers are trusted by", "callerTrust", cfg.callerTrust, "clientAllowedNames", cfg.clientAllowedNames)
		if err := hook.listen(e.listen); err != nil {
			return err
		}
		// A manager that fails, or stops before the webhook starts,
		// leaves the listener to close; closing it twice does no harm.
		defer hook.ln.Close()
	}
	// Listens on -health-probe-bind-address now, so that a taken port
	// fails at once.
	mgr, err := newManager(ctx, cfg, e, lock)
	if err != nil {
		return err
	}
	tracked := &runnables{}
	// What the manager stops when ctx is done or the lease is lost, it
	// stops in turn: the webhook (it needs no election) before the
	// controller; every probe and the metrics after both.
	m := trackingManager{Manager: mgr, runs: tracked}

	if hook != nil {
		if err := m.Add(hook); err != nil {
			return err
		}
	}
	var ctrl *quotakit.Controller
	if cfg.controller {
		events := record.NewBroadcaster()
		// The quotas' Events, in their namespaces: the controller's own
		// client.
		events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: e.clients.Typed.CoreV1().Events("")})
		defer events.Shutdown()
		opts := controllerOptions(cfg, metrics, events, log)
		// The controller needs leader election: the manager runs it on
		// the replica it elects only, and releases the lease once it has
		// stopped. kube/manager adds its liveness and readiness checks.
		if ctrl, err = kubemanager.AddClient(m, kube.New(e.clients, opts), opts); err != nil {
			return err
		}
		if err := kube.RegisterControllerMetrics(e.reg, ctrl); err != nil {
			return err
		}
		if cfg.clusterQuotas {
			if e.applied == nil {
				e.applied = e.clients.Dynamic
			}
			if err := addTenantView(m, cfg, ctrl, e.applied, e.reg); err != nil {
				return err
			}
		}
	}
	live, ready := probeChecks(ctx, cfg, ctrl, lock, hook)
	for name, check := range live {
		if err := mgr.AddHealthzCheck(name, check); err != nil {
			return err
		}
	}
	for name, check := range ready {
		if err := mgr.AddReadyzCheck(name, check); err != nil {
			return err
		}
	}

	err = mgr.Start(ctx)
	// On a lost lease the manager returns without waiting for what it
	// ran: the controller still stops, and the webhook answers the
	// reviews in flight, before the process exits.
	tracked.wait()
	if ctx.Err() == nil && err == nil {
		err = errors.New("the manager stopped")
	}
	return err
}

// newManager returns the manager of cfg's endpoints and election, over
// e's config, electing with lock (nil: no election).
func newManager(ctx context.Context, cfg config, e env, lock *leaseLock) (manager.Manager, error) {
	// Go runtime and process series, which controller-runtime registers
	// only where its controllers are linked.
	for _, c := range []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if err := crmetrics.Registry.Register(c); err != nil && !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
			return nil, err
		}
	}
	metricsOpts := metricsserver.Options{BindAddress: cfg.metricsAddr}
	if cfg.metricsSecure {
		// HTTPS, a self-signed certificate made at start, and
		// authentication (TokenReview) and authorization
		// (SubjectAccessReview) of every scrape, through e.auth.
		metricsOpts.SecureServing = true
		metricsOpts.FilterProvider = func(c *rest.Config, hc *http.Client) (metricsserver.Filter, error) {
			if e.auth != nil {
				c = e.auth
				var err error
				if hc, err = rest.HTTPClientFor(c); err != nil {
					return nil, err
				}
			}
			return filters.WithAuthenticationAndAuthorization(c, hc)
		}
		metricsOpts.TLSOpts = []func(*tls.Config){func(c *tls.Config) {
			// HTTP/1.1 only, as the webhook, since HTTP/2's rapid
			// reset attacks.
			c.NextProtos = []string{"http/1.1"}
			c.MinVersion = tls.VersionTLS12
		}}
	}
	// Wait for the runnables however long they take: the lease is
	// released only once the controller has stopped, and the webhook's
	// drain is bounded by its own timeouts.
	forever := time.Duration(-1)
	base := context.WithoutCancel(ctx)
	opts := manager.Options{
		Logger:                  logr.FromContextOrDiscard(ctx),
		BaseContext:             func() context.Context { return base },
		Metrics:                 metricsOpts,
		HealthProbeBindAddress:  cfg.probeAddr,
		GracefulShutdownTimeout: &forever,
	}
	if lock != nil {
		opts.LeaderElection = true
		opts.LeaderElectionResourceLockInterface = lock
		// The name of the leader_election_master_status series.
		opts.LeaderElectionID = cfg.leaseName
		opts.LeaderElectionReleaseOnCancel = true
		opts.LeaseDuration = &cfg.leaseDuration
		opts.RenewDeadline = &cfg.renewDeadline
		opts.RetryPeriod = &cfg.retryPeriod
	}
	mgr, err := manager.New(e.config, opts)
	if err != nil {
		return nil, fmt.Errorf("manager: %w", err)
	}
	return mgr, nil
}

// controllerOptions returns the options of the ResourceQuota controller
// cfg asks for, recording its Events through events.
func controllerOptions(cfg config, metrics *kube.MetricsProvider, events record.EventBroadcaster, log logr.Logger) quotakit.Options {
	opts := quotakit.Options{
		Namespace:     cfg.namespace,
		Workers:       cfg.workers,
		ResyncPeriod:  cfg.resync,
		ChargeWindow:  cfg.chargeWindow,
		ClusterQuotas: cfg.clusterQuotas,
		// What the webhook enforces, for the ClusterQuotas' conditions.
		EnforcedNamespaces: cfg.enforced,
		StartGrace:         cfg.startGrace,
		WholeObjects:       cfg.wholeObjects,
		Logger:             log,
		MetricsProvider:    metrics,
		// A quota naming what the controller does not count, or may
		// not list, gets a Warning Event.
		Events: events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "quotakit-controller"}),
	}
	if !cfg.countSecrets {
		// Never watched: a quota that names them is reported as
		// uncounted, and the role needs no access to Secrets.
		opts.IgnoredResources = evaluator.DefaultIgnoredResources()
		opts.IgnoredResources[schema.GroupResource{Resource: "secrets"}] = struct{}{}
	}
	return opts
}

// probeChecks returns the checks of /healthz and /readyz that the
// command adds to kube/manager's (which pass while the controller serves,
// and, once it runs, when its informers have synced; a standby passes).
//
// /healthz fails only when this replica leads and has not renewed its
// lease for longer than the lease duration plus a tolerance: a stuck
// leader is restarted. /readyz fails once ctx is done (SIGTERM), first
// of all; without leader election, while the controller does not run;
// and while the quota cache of a webhook that enforces quota has not
// synced, on every replica.
func probeChecks(ctx context.Context, cfg config, ctrl *quotakit.Controller, lock *leaseLock, hook *webhook) (live, ready map[string]healthz.Checker) {
	live, ready = map[string]healthz.Checker{}, map[string]healthz.Checker{}
	if lock != nil {
		live["leaderElection"] = lock.check
	}
	ready["shutdown"] = func(*http.Request) error {
		if ctx.Err() != nil {
			return errors.New("shutting down")
		}
		return nil
	}
	if ctrl != nil && !cfg.leaderElect {
		ready["controller"] = func(r *http.Request) error {
			if err := ctrl.Ready(r); errors.Is(err, quotakit.ErrNotRunning) {
				return err
			}
			return nil
		}
	}
	if hook != nil {
		ready["webhook"] = func(*http.Request) error {
			if !hook.synced() {
				return errors.New("the webhook's quota caches have not synced")
			}
			return nil
		}
	}
	return live, ready
}

// trackingManager is a manager whose Add keeps track of the runs of what
// it adds (see [runnables]).
type trackingManager struct {
	manager.Manager
	runs *runnables
}

// Add adds r to the manager, tracked, in the group r's NeedLeaderElection
// picks (true when r has none, as the manager's default).
func (m trackingManager) Add(r manager.Runnable) error {
	leader := true
	if le, ok := r.(manager.LeaderElectionRunnable); ok {
		leader = le.NeedLeaderElection()
	}
	return m.Manager.Add(trackedRunnable{r: r, runs: m.runs, leader: leader})
}

// runnables tracks the runs of the command's runnables, so that runWith
// returns only after each has returned, even when the manager does not
// wait for them (on a lost lease it cancels them and returns at once).
// It is safe for concurrent use.
type runnables struct {
	mu sync.Mutex
	// closed is set by wait: a runnable the manager starts after it
	// does not run.
	// guarded by mu
	closed bool
	wg     sync.WaitGroup
}

// wait waits for the runs started so far, and keeps any other from
// starting.
func (t *runnables) wait() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.wg.Wait()
}

// trackedRunnable is a runnable whose run [runnables] tracks.
type trackedRunnable struct {
	r      manager.Runnable
	runs   *runnables
	leader bool
}

// Start runs the runnable. A runnable that returns while ctx is not done
// has stopped for good: that is an error, and the process exits.
func (t trackedRunnable) Start(ctx context.Context) error {
	t.runs.mu.Lock()
	if t.runs.closed {
		t.runs.mu.Unlock()
		return nil
	}
	t.runs.wg.Add(1)
	t.runs.mu.Unlock()
	defer t.runs.wg.Done()
	err := t.r.Start(ctx)
	if err == nil && ctx.Err() == nil {
		err = fmt.Errorf("%T stopped", t.r)
	}
	return err
}

// NeedLeaderElection reports whether the runnable runs on the leader
// only.
func (t trackedRunnable) NeedLeaderElection() bool { return t.leader }

// logWriter writes each line of the standard logger of an http.Server to
// a logr.Logger.
type logWriter struct{ log logr.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	w.log.Info(string(trimNewline(p)))
	return len(p), nil
}

func trimNewline(p []byte) []byte {
	if n := len(p); n > 0 && p[n-1] == '\n' {
		return p[:n-1]
	}
	return p
}
