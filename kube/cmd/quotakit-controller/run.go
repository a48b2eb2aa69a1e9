package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"

	"github.com/quotakit/quotakit"
	"github.com/quotakit/quotakit/admission"
	"github.com/quotakit/quotakit/cache"
	"github.com/quotakit/quotakit/kube"
)

// leaderHealthTolerance is how long past the lease duration a leader that
// has not renewed still passes /healthz, as kube-controller-manager.
const leaderHealthTolerance = 20 * time.Second

// webhookTimeout bounds a quota check of the webhook, under the
// timeoutSeconds of its ValidatingWebhookConfiguration.
const webhookTimeout = 8 * time.Second

// runWith runs the controller, the endpoints and the webhook cfg asks for
// over clients until ctx is done, and returns once everything it started
// has stopped and the lease, if held, is released.
func runWith(ctx context.Context, cfg config, clients kube.Clients) error {
	log := logr.FromContextOrDiscard(ctx)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics, err := kube.NewMetricsProvider(reg)
	if err != nil {
		return err
	}
	opts := quotakit.Options{
		Namespace:       cfg.namespace,
		Workers:         cfg.workers,
		ResyncPeriod:    cfg.resync,
		WholeObjects:    cfg.wholeObjects,
		Logger:          log,
		MetricsProvider: metrics,
	}
	client := kube.New(clients, opts)
	ctrl, err := quotakit.NewController(client, opts)
	if err != nil {
		return err
	}
	var hook *webhook
	if cfg.webhookAddr != "" {
		if hook, err = newWebhook(cfg, client); err != nil {
			return err
		}
	}
	var elector *elector
	if cfg.leaderElect {
		if elector, err = newElector(cfg, clients, ctrl); err != nil {
			return err
		}
	}

	// Listen before anything runs, so that a taken port fails at once.
	var servers []*server
	if cfg.metricsAddr != "0" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		servers = append(servers, &server{name: "metrics", addr: cfg.metricsAddr, handler: mux})
	}
	if cfg.probeAddr != "0" {
		servers = append(servers, &server{name: "health probes", addr: cfg.probeAddr, handler: probes(cfg, ctrl, elector, hook)})
	}
	if hook != nil {
		servers = append(servers, &server{name: "webhook", addr: cfg.webhookAddr, handler: hook.mux(), tls: hook.tls})
	}
	for i, s := range servers {
		if err := s.listen(); err != nil {
			for _, started := range servers[:i] {
				started.ln.Close()
			}
			return err
		}
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Go(func() { s.serve(ctx, log) })
	}
	if hook != nil {
		wg.Go(func() { hook.run(ctx, log) })
	}
	var runErr error
	if elector != nil {
		runErr = elector.run(ctx)
	} else {
		runErr = ctrl.Run(ctx)
	}
	cancel()
	wg.Wait()
	return runErr
}

// probes returns the handler of /healthz and /readyz.
//
// /healthz fails only when this replica leads and has not renewed its
// lease for longer than the lease duration plus a tolerance: a stuck
// leader is restarted. /readyz fails while the controller's informers have
// not synced on the leader (standbys pass: they run no controller), and
// while the webhook's quota cache has not synced.
func probes(cfg config, ctrl *quotakit.Controller, el *elector, hook *webhook) http.Handler {
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
		err := ctrl.Ready(r)
		if errors.Is(err, quotakit.ErrNotRunning) && cfg.leaderElect {
			// A standby, or a leader about to start.
			err = nil
		}
		if hook != nil && !hook.informer.HasSynced() {
			err = errors.Join(err, errors.New("the webhook's ResourceQuota cache has not synced"))
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
}

func (s *server) listen() error {
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("%s: %w", s.name, err)
	}
	if s.tls != nil {
		ln = tls.NewListener(ln, s.tls)
	}
	s.ln = ln
	return nil
}

// serve serves until ctx is done, then shuts down within five seconds.
func (s *server) serve(ctx context.Context, log logr.Logger) {
	srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}()
	log.Info("serving", "endpoint", s.name, "address", s.ln.Addr().String())
	if err := srv.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error(err, "server failed", "endpoint", s.name)
	}
	<-done
}

// elector runs the controller while this replica holds the lease.
type elector struct {
	le     *leaderelection.LeaderElector
	health *leaderelection.HealthzAdaptor
	events record.EventBroadcaster
	sink   record.EventSink
	ctrl   *quotakit.Controller

	mu sync.Mutex
	// stopping is set once the controller must not start any more.
	// guarded by mu
	stopping bool
	// running is closed when the controller's Run has returned; nil
	// before it starts.
	// guarded by mu
	running chan struct{}
	// stop ends the run of the controller.
	// guarded by mu
	stop context.CancelFunc
}

func newElector(cfg config, clients kube.Clients, ctrl *quotakit.Controller) (*elector, error) {
	if clients.Typed == nil {
		return nil, errors.New("leader election needs the typed client")
	}
	host, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("leader election identity: %w", err)
	}
	e := &elector{
		health: leaderelection.NewLeaderHealthzAdaptor(leaderHealthTolerance),
		events: record.NewBroadcaster(),
		sink:   &typedcorev1.EventSinkImpl{Interface: clients.Typed.CoreV1().Events("")},
		ctrl:   ctrl,
	}
	recorder := e.events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "quotakit-controller"})
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: cfg.leaseNamespace, Name: cfg.leaseName},
		Client:     clients.Typed.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: host + "_" + string(uuid.NewUUID()), EventRecorder: recorder},
	}
	e.le, err = leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		Name:            cfg.leaseName,
		LeaseDuration:   cfg.leaseDuration,
		RenewDeadline:   cfg.renewDeadline,
		RetryPeriod:     cfg.retryPeriod,
		ReleaseOnCancel: true,
		WatchDog:        e.health,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: e.lead,
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("leader election: %w", err)
	}
	return e, nil
}

// lead runs the controller until leaderCtx ends (the lease is lost or
// released) or [elector.run] stops it.
func (e *elector) lead(leaderCtx context.Context) {
	e.mu.Lock()
	if e.stopping {
		e.mu.Unlock()
		return
	}
	ctx, stop := context.WithCancel(leaderCtx)
	done := make(chan struct{})
	e.running, e.stop = done, stop
	e.mu.Unlock()
	defer close(done)
	defer stop()
	logr.FromContextOrDiscard(ctx).Info("leading: starting the controller")
	if err := e.ctrl.Run(ctx); err != nil {
		logr.FromContextOrDiscard(ctx).Error(err, "controller failed")
	}
}

// run takes part in the election until ctx is done or the lease is lost.
// When ctx ends it stops the controller first and then releases the
// lease, so that no two replicas write statuses at once. A lost lease is
// an error: the caller exits, as kube-controller-manager does.
func (e *elector) run(ctx context.Context) error {
	e.events.StartRecordingToSink(e.sink)
	defer e.events.Shutdown()
	electCtx, cancelElect := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelElect()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-ctx.Done():
		case <-electCtx.Done():
		}
		e.stopController()
		cancelElect()
	}()
	e.le.Run(electCtx)
	cancelElect()
	<-stopped
	if ctx.Err() == nil {
		// The elector returns before ctx ends only when the lease was
		// lost.
		return errors.New("leader election lost")
	}
	return nil
}

// stopController stops the controller, or keeps it from starting, and
// waits for its Run to return.
func (e *elector) stopController() {
	e.mu.Lock()
	e.stopping = true
	running, stop := e.running, e.stop
	e.mu.Unlock()
	if running != nil {
		stop()
		<-running
	}
}

// webhook is the validating admission webhook.
type webhook struct {
	informer  *cache.SharedIndexInformer
	evaluator *admission.Evaluator
	tls       *tls.Config
}

func newWebhook(cfg config, client *kube.Client) (*webhook, error) {
	certs := &certLoader{certFile: cfg.tlsCertFile, keyFile: cfg.tlsKeyFile}
	if _, err := certs.get(nil); err != nil {
		return nil, err
	}
	// Answer before kube-apiserver's webhook timeout (10s in deploy/)
	// gives up on the webhook.
	opts := admission.Options{Timeout: webhookTimeout}
	if cfg.admissionConfig != "" {
		f, err := os.Open(cfg.admissionConfig)
		if err != nil {
			return nil, fmt.Errorf("webhook: %w", err)
		}
		conf, err := admission.LoadConfiguration(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("webhook: %s: %w", cfg.admissionConfig, err)
		}
		opts.LimitedResources = conf.LimitedResources
	}
	rqs := corev1.SchemeGroupVersion.WithResource("resourcequotas")
	inf := cache.NewSharedIndexInformer(client.ListerWatcher(rqs, cfg.namespace), &corev1.ResourceQuota{}, cache.SharedIndexInformerOptions{})
	lister := cache.NewLister[*corev1.ResourceQuota](inf.GetIndexer(), rqs.GroupResource())
	accessor := admission.NewAccessor(func(ns string) ([]*corev1.ResourceQuota, error) {
		return lister.ByNamespace(ns).List(nil)
	}, client, admission.AccessorOptions{HasSynced: inf.HasSynced})
	ev, err := admission.NewEvaluator(accessor, opts)
	if err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	return &webhook{
		informer:  inf,
		evaluator: ev,
		tls:       &tls.Config{GetCertificate: certs.get, MinVersion: tls.VersionTLS12},
	}, nil
}

func (h *webhook) mux() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/validate", &admission.Handler{Evaluator: h.evaluator})
	return mux
}

// run runs the webhook's quota informer and evaluator until ctx is done.
func (h *webhook) run(ctx context.Context, log logr.Logger) {
	var wg sync.WaitGroup
	wg.Go(func() { h.informer.Run(ctx) })
	wg.Go(func() {
		if err := h.evaluator.Run(ctx); err != nil {
			log.Error(err, "admission evaluator failed")
		}
	})
	wg.Wait()
}

// certLoader serves the webhook's certificate from its files, loading them
// again when the certificate file changes, so that a renewed certificate
// (cert-manager rewrites the Secret, kubelet the mounted files) is served
// without a restart. A renewal that fails to load keeps the previous
// certificate and is retried at the next handshake.
type certLoader struct {
	certFile, keyFile string

	mu sync.Mutex
	// cert is the certificate last loaded and modTime the certificate
	// file's modification time then.
	// guarded by mu
	cert    *tls.Certificate
	modTime time.Time
}

// get returns the current certificate; its signature is
// tls.Config.GetCertificate's.
func (l *certLoader) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	info, err := os.Stat(l.certFile)
	if err == nil && l.cert != nil && info.ModTime().Equal(l.modTime) {
		return l.cert, nil
	}
	cert, loadErr := tls.LoadX509KeyPair(l.certFile, l.keyFile)
	if err == nil && loadErr == nil {
		l.cert, l.modTime = &cert, info.ModTime()
		return l.cert, nil
	}
	if l.cert != nil {
		return l.cert, nil
	}
	return nil, fmt.Errorf("webhook: loading the serving certificate: %w", errors.Join(err, loadErr))
}
