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
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/quotakit/quotakit"
	"github.com/quotakit/quotakit/kube"
)

// newRegistry returns the registry /metrics serves, with the Go runtime
// and process collectors.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// runWith runs the controller, the endpoints and the webhook cfg asks for
// over clients until ctx is done, serving reg on /metrics with the
// controller's queue metrics added, and returns once everything it
// started has stopped and the lease, if held, is released.
func runWith(ctx context.Context, cfg config, clients kube.Clients, reg *prometheus.Registry) error {
	log := logr.FromContextOrDiscard(ctx)
	metrics, err := kube.NewMetricsProvider(reg)
	if err != nil {
		return err
	}
	opts := quotakit.Options{
		Namespace:       cfg.namespace,
		Workers:         cfg.workers,
		ResyncPeriod:    cfg.resync,
		StartGrace:      cfg.startGrace,
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
