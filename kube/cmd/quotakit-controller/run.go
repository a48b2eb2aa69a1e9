package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/quotakit/quotakit"
	"github.com/quotakit/quotakit/evaluator"
	"github.com/quotakit/quotakit/kube"
)

// drainTimeout bounds how long the servers wait, once they stop
// accepting, for the requests they are serving. It is above
// webhookTimeout, by which every review has its answer.
const drainTimeout = 15 * time.Second

// Timeouts of every HTTP server: a client that sends its request slowly,
// or reads the answer slowly, or keeps a connection idle, does not hold a
// connection and a goroutine for ever. The idle timeout is above the 90
// seconds after which kube-apiserver's client drops an idle connection,
// so that it is the client that closes it, never the server under a
// request the client has just sent.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 30 * time.Second
	writeTimeout      = 60 * time.Second
	idleTimeout       = 120 * time.Second
)

// env is what runWith takes from outside the command line: the API
// clients, the registry /metrics serves, and how to listen.
type env struct {
	// clients serve the controller.
	clients kube.Clients
	// election serves leader election, and auth, with -metrics-secure,
	// the reviews of metrics scrapers' tokens; each defaults to clients.
	// Of their own, as kube-controller-manager gives leader election a
	// client of its own: a flood of scrapes, or the controller's lists
	// at start, cannot hold up a lease renewal behind the same rate
	// limiter.
	election, auth kube.Clients
	// admission serves the webhook: its quota cache, live reads and
	// status writes. It is required with -webhook-addr.
	admission kube.Clients
	reg       *prometheus.Registry
	// listen opens the listener of an endpoint; it defaults to
	// net.Listen on TCP. Tests listen in memory.
	listen func(addr string) (net.Listener, error)
}

// newRegistry returns the registry /metrics serves, with the Go runtime
// and process collectors.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// runWith runs the controller, the endpoints and the webhook cfg asks for
// until ctx is done or the lease is lost, then shuts down in the order
// the package documentation gives, and returns once everything it started
// has stopped and the lease, if held, is released. A lost lease, or a
// controller that fails, is its error.
func runWith(ctx context.Context, cfg config, e env) error {
	log := logr.FromContextOrDiscard(ctx)
	if e.reg == nil {
		return errors.New("no metrics registry")
	}
	if e.listen == nil {
		e.listen = func(addr string) (net.Listener, error) { return net.Listen("tcp", addr) }
	}
	if e.election.Typed == nil {
		e.election = e.clients
	}
	if e.auth.Typed == nil {
		e.auth = e.clients
	}
	metrics, err := kube.NewMetricsProvider(e.reg)
	if err != nil {
		return err
	}
	var ctrl *quotakit.Controller
	var events record.EventBroadcaster
	if cfg.controller {
		events = record.NewBroadcaster()
		if ctrl, err = newController(cfg, e, metrics, events, log); err != nil {
			return err
		}
		if err := kube.RegisterControllerMetrics(e.reg, ctrl); err != nil {
			return err
		}
	}
	var hook *webhook
	if cfg.webhookAddr != "" {
		if e.admission.Typed == nil {
			return errors.New("the webhook needs a typed client of its own")
		}
		if hook, err = newWebhook(cfg, kube.New(e.admission, quotakit.Options{}), e.reg); err != nil {
			return err
		}
		log.Info("the webhook's callers are trusted by", "callerTrust", cfg.callerTrust, "clientAllowedNames", cfg.clientAllowedNames)
	}
	var el *elector
	if ctrl != nil && cfg.leaderElect {
		leader, err := newLeaderMetrics(e.reg)
		if err != nil {
			return err
		}
		if el, err = newElector(cfg, e.election, ctrl, leader); err != nil {
			return err
		}
	}

	var shuttingDown atomic.Bool
	var servers []*server
	if cfg.metricsAddr != "0" {
		s, err := newMetricsServer(cfg, e.auth, e.reg)
		if err != nil {
			return err
		}
		servers = append(servers, s)
	}
	if cfg.probeAddr != "0" {
		servers = append(servers, &server{name: "health probes", addr: cfg.probeAddr, handler: probes(cfg, ctrl, el, hook, &shuttingDown)})
	}
	if hook != nil {
		servers = append(servers, &server{name: "webhook", addr: cfg.webhookAddr, handler: hook.mux(), tls: hook.tls, wrap: hook.listener})
	}
	// Listen before anything runs, so that a taken port fails at once.
	for i, s := range servers {
		if err := s.listen(e.listen); err != nil {
			for _, started := range servers[:i] {
				started.ln.Close()
			}
			return err
		}
	}

	// Each stage stops on a context of its own, cancelled in turn below;
	// all keep ctx's values (the logger).
	base := context.WithoutCancel(ctx)
	var serving sync.WaitGroup
	for _, s := range servers {
		s.init(base, log)
		serving.Go(func() { s.serve(log) })
	}
	hookCtx, stopHook := context.WithCancel(base)
	defer stopHook()
	var hookDone sync.WaitGroup
	if hook != nil {
		hookDone.Go(func() { hook.run(hookCtx, log) })
	}
	ctrlCtx, stopCtrl := context.WithCancel(base)
	defer stopCtrl()
	ctrlDone := make(chan error, 1)
	go func() {
		switch {
		case ctrl == nil:
			// The webhook alone: nothing to run until shutdown.
			<-ctrlCtx.Done()
			ctrlDone <- nil
			return
		case el != nil:
			ctrlDone <- el.run(ctrlCtx)
		default:
			ctrlDone <- ctrl.Run(ctrlCtx)
		}
	}()
	if events != nil {
		// The quotas' Events, in their namespaces: the controller's
		// own client.
		events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: e.clients.Typed.CoreV1().Events("")})
		defer events.Shutdown()
	}

	var runErr error
	ctrlStopped := false
	select {
	case <-ctx.Done():
		log.Info("shutting down: readiness fails from now on")
	case runErr = <-ctrlDone:
		// The lease was lost or the controller failed: the process
		// exits, after the same drain as on SIGTERM.
		ctrlStopped = true
		if runErr == nil {
			runErr = errors.New("the controller stopped")
		}
		log.Error(runErr, "shutting down: readiness fails from now on")
	}
	shuttingDown.Store(true)
	if hook != nil && cfg.shutdownDelay > 0 {
		// kube-apiserver routes reviews to this replica until its
		// endpoints' removal reaches it: keep answering them.
		log.Info("shutting down: serving on while the endpoints are removed", "delay", cfg.shutdownDelay.String())
		time.Sleep(cfg.shutdownDelay)
	}
	log.Info("shutting down: the servers stop accepting and drain")
	var draining sync.WaitGroup
	for _, s := range servers {
		draining.Go(func() { s.shutdown(base, log) })
	}
	draining.Wait()
	serving.Wait()
	// No review is being served any more: the evaluator has no request
	// to answer with "quota evaluator stopped".
	stopHook()
	hookDone.Wait()
	log.Info("shutting down: stopping the controller")
	stopCtrl()
	if !ctrlStopped {
		runErr = <-ctrlDone
	}
	return runErr
}

// newController returns the ResourceQuota controller cfg asks for, over
// e's clients, recording its Events through events.
func newController(cfg config, e env, metrics *kube.MetricsProvider, events record.EventBroadcaster, log logr.Logger) (*quotakit.Controller, error) {
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
	return quotakit.NewController(kube.New(e.clients, opts), opts)
}

// probes returns the handler of /healthz and /readyz.
//
// /healthz fails only when this replica leads and has not renewed its
// lease for longer than the lease duration plus a tolerance: a stuck
// leader is restarted. /readyz fails once shutdown has begun; while the
// controller's informers have not synced on the leader (standbys pass:
// they run no controller); and while the quota cache of a webhook that
// enforces quota has not synced, on every replica.
func probes(cfg config, ctrl *quotakit.Controller, el *elector, hook *webhook, shuttingDown *atomic.Bool) http.Handler {
	check := func(w http.ResponseWriter, err error) {
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "ok")
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		var err error
		if el != nil {
			err = el.health.Check(r)
		}
		check(w, err)
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if shuttingDown != nil && shuttingDown.Load() {
			check(w, errors.New("shutting down"))
			return
		}
		var err error
		if ctrl != nil {
			err = ctrl.Ready(r)
			if errors.Is(err, quotakit.ErrNotRunning) && cfg.leaderElect {
				// A standby, or a leader about to start.
				err = nil
			}
		}
		if hook != nil && !hook.synced() {
			err = errors.Join(err, errors.New("the webhook's quota caches have not synced"))
		}
		check(w, err)
	})
	return mux
}

// server is one HTTP endpoint.
type server struct {
	name    string
	addr    string
	handler http.Handler
	tls     *tls.Config
	ln      net.Listener
	srv     *http.Server
	// wrap, if set, wraps the listener, under TLS, and may return the
	// server's ConnState hook.
	wrap      func(net.Listener) (net.Listener, func(net.Conn, http.ConnState))
	connState func(net.Conn, http.ConnState)
}

func (s *server) listen(listen func(addr string) (net.Listener, error)) error {
	ln, err := listen(s.addr)
	if err != nil {
		return fmt.Errorf("%s: %w", s.name, err)
	}
	if s.wrap != nil {
		ln, s.connState = s.wrap(ln)
	}
	if s.tls != nil {
		ln = tls.NewListener(ln, s.tls)
	}
	s.ln = ln
	return nil
}

// init builds the server. Handlers get base as their requests' parent
// context: the logger, and no cancellation but their client's.
func (s *server) init(base context.Context, log logr.Logger) {
	s.srv = &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		ConnState:         s.connState,
		BaseContext:       func(net.Listener) context.Context { return base },
		// Failed TLS handshakes (a client without a trusted
		// certificate) and other connection errors, at V(1).
		ErrorLog: stdlog.New(logWriter{log.WithValues("endpoint", s.name).V(1)}, "", 0),
	}
}

// serve serves until shutdown.
func (s *server) serve(log logr.Logger) {
	log.Info("serving", "endpoint", s.name, "address", s.ln.Addr().String())
	if err := s.srv.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error(err, "server failed", "endpoint", s.name)
	}
}

// shutdown stops accepting and waits, up to drainTimeout, for the
// requests being served; then it closes the connections left.
func (s *server) shutdown(base context.Context, log logr.Logger) {
	ctx, cancel := context.WithTimeout(base, drainTimeout)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		log.Error(err, "requests still served after the drain timeout; closing their connections", "endpoint", s.name)
		s.srv.Close()
	}
}

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
