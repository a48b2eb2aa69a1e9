package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/quotakit/quotakit/admission"
	"github.com/quotakit/quotakit/cache"
	"github.com/quotakit/quotakit/kube"
)

// webhookTimeout bounds a quota check of the webhook, under the
// timeoutSeconds of its ValidatingWebhookConfiguration.
const webhookTimeout = 8 * time.Second

// webhookPath is where the webhook serves, and its label in the metrics.
const webhookPath = "/validate"

// webhook is the validating admission webhook: a manager Runnable that
// runs on every replica, leader or standby, and serves with its own
// http.Server rather than controller-runtime's webhook.Server, which reads
// its client CA once, offers HTTP/2 and bounds only the time to read a
// request's headers. Its server reloads the client CA bundle, speaks
// HTTP/1.1 only, bounds reads, writes and idle connections, and caps its
// connections (limitConns), reviews and bodies in flight
// (admission.Handler).
type webhook struct {
	// caches are the caches of the quotas the webhook enforces (and of
	// the namespaces, for cluster quotas); none when it enforces none.
	caches    []*cache.SharedIndexInformer
	evaluator *admission.Evaluator
	tls       *tls.Config
	// handler serves reviews at webhookPath: admission's Handler, with its
	// limits, measured.
	handler *http.ServeMux
	// maxConns bounds the connections open to the webhook's listener;
	// evictedConns counts the idle ones closed to make room for new
	// ones, refusedConns the new ones closed over it.
	maxConns                   int
	evictedConns, refusedConns prometheus.Counter
	addr                       string
	shutdownDelay              time.Duration
	// ln is the listener [webhook.listen] opened, under TLS; connState
	// is the server's hook that the connection cap needs.
	ln        net.Listener
	connState func(net.Conn, http.ConnState)
}

// newWebhook builds the webhook over client, its own, with its metrics in
// reg. It loads the certificate and the client CAs now, so that a bad
// file fails at start.
func newWebhook(cfg config, client *kube.Client, reg prometheus.Registerer) (*webhook, error) {
	tlsCfg, err := webhookTLS(cfg)
	if err != nil {
		return nil, err
	}
	// Answer before kube-apiserver's webhook timeout gives up on the
	// webhook.
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
	h := &webhook{tls: tlsCfg, addr: cfg.webhookAddr, shutdownDelay: cfg.shutdownDelay}
	var accessor admission.QuotaAccessor = noQuotas{}
	var nss *cache.SharedIndexInformer
	if cfg.enforceNamespacedQuota || cfg.clusterQuotas {
		// The namespaces' labels say which are enforced: a review for any
		// other is allowed without a read, a charge or an answer that
		// names a quota, whoever sent it.
		nss = client.NamespaceInformer()
		h.caches = append(h.caches, nss)
		opts.Enforced = admission.SelectedNamespaces(cfg.enforced, client.NamespaceGetter(nss))
	}
	if cfg.enforceNamespacedQuota {
		quotas := client.QuotaInformer(cfg.namespace)
		h.caches = append(h.caches, quotas)
		accessor = admission.NewAccessor(kube.QuotaLister(quotas), quotas.HasSynced, client, admission.AccessorOptions{})
	}
	if cfg.clusterQuotas {
		var namespaced admission.QuotaAccessor
		if cfg.enforceNamespacedQuota {
			namespaced = accessor
		}
		cqs := client.ClusterQuotaInformer()
		h.caches = append(h.caches, cqs)
		// The index of which cluster quotas select which namespace, kept
		// from both informers' events; its HasSynced waits for both.
		index, err := kube.ClusterQuotaIndex(cqs, nss)
		if err != nil {
			return nil, fmt.Errorf("webhook: %w", err)
		}
		accessor = admission.NewClusterAccessor(namespaced, index, client.NamespaceGetter(nss), func() bool { return cqs.HasSynced() && nss.HasSynced() }, client)
	}
	if h.evaluator, err = admission.NewEvaluator(accessor, opts); err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	m, err := newWebhookMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("webhook: metrics: %w", err)
	}
	if err := kube.RegisterAdmissionMetrics(reg, h.evaluator); err != nil {
		return nil, fmt.Errorf("webhook: metrics: %w", err)
	}
	if ca, ok := accessor.(*admission.ClusterAccessor); ok {
		if err := kube.RegisterClusterAccessorMetrics(reg, ca); err != nil {
			return nil, fmt.Errorf("webhook: metrics: %w", err)
		}
	}
	// The Handler's own defaults bound the body's deadline and the bytes
	// of bodies held at once; -max-concurrent-reviews is its cap on
	// reviews being evaluated, which a slow sender cannot hold. The
	// webhook.Server is never started: registering the handler with it
	// wraps it in controller-runtime's own instrumentation, into the mux
	// this webhook serves. Every request counts by its HTTP code,
	// refusals without a review (429 over a limit, 408 for a body too
	// slow, 400) included.
	h.handler = http.NewServeMux()
	crwebhook.NewServer(crwebhook.Options{WebhookMux: h.handler}).Register(webhookPath,
		&denialCounter{next: &admission.Handler{Evaluator: h.evaluator, MaxConcurrentReviews: cfg.maxConcurrentReviews}, denials: m.denials})
	h.maxConns, h.evictedConns, h.refusedConns = cfg.maxWebhookConns, m.evictedConns, m.refusedConns
	return h, nil
}

// noQuotas is the quota accessor of a webhook that enforces no namespaced
// quota: every namespace has none, so the Evaluator allows every request
// (no resource is limited without -enforce-namespaced-quota) and writes
// nothing.
type noQuotas struct{}

func (noQuotas) GetQuotas(context.Context, string) ([]corev1.ResourceQuota, error) {
	return nil, nil
}

func (noQuotas) UpdateQuotaStatus(context.Context, *corev1.ResourceQuota) (*corev1.ResourceQuota, error) {
	return nil, errors.New("webhook: no namespaced quota is enforced")
}

// synced reports whether every cache of the webhook has synced.
func (h *webhook) synced() bool {
	for _, c := range h.caches {
		if !c.HasSynced() {
			return false
		}
	}
	return true
}

// mux returns the handler of the webhook's requests.
func (h *webhook) mux() http.Handler { return h.handler }

// NeedLeaderElection reports that the webhook serves on every replica.
func (h *webhook) NeedLeaderElection() bool { return false }

// listen opens the webhook's listener, capped and under TLS, with listen,
// so that a taken port fails before anything runs.
func (h *webhook) listen(listen func(addr string) (net.Listener, error)) error {
	ln, err := listen(h.addr)
	if err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	ln, h.connState = limitConns(ln, h.maxConns, h.evictedConns.Inc, h.refusedConns.Inc)
	h.ln = tls.NewListener(ln, h.tls)
	return nil
}

// Start serves reviews on the listener [webhook.listen] opened, with the
// quota caches and evaluator running, until ctx is done; then, in this
// order, it keeps serving for -shutdown-delay, so that the removal of
// this replica from the Service's endpoints reaches every kube-apiserver
// (/readyz fails from the moment ctx is done); stops accepting and waits
// up to drainTimeout for the reviews being served, which get their real
// answers; and only then stops the evaluator and caches. It returns once
// all have stopped. The manager cancels ctx before it stops the
// controller, so that the controller outlives every review.
func (h *webhook) Start(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	if h.ln == nil {
		return errors.New("webhook: not listening")
	}
	// Reviews and the evaluator get a context of their own: the
	// logger, and no cancellation but their client's and the one below.
	base := context.WithoutCancel(ctx)
	var running sync.WaitGroup
	defer running.Wait()
	runCtx, stop := context.WithCancel(base)
	defer stop()
	running.Go(func() { h.run(runCtx, log) })
	srv := &http.Server{
		Handler:           h.handler,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		ConnState:         h.connState,
		BaseContext:       func(net.Listener) context.Context { return base },
		// Failed TLS handshakes (a client without a trusted
		// certificate) and other connection errors, at V(1).
		ErrorLog: stdlog.New(logWriter{log.WithValues("endpoint", "webhook").V(1)}, "", 0),
	}
	served := make(chan error, 1)
	log.Info("serving", "endpoint", "webhook", "address", h.ln.Addr().String())
	go func() { served <- srv.Serve(h.ln) }()
	select {
	case <-ctx.Done():
	case err := <-served:
		return fmt.Errorf("webhook: %w", err)
	}
	if h.shutdownDelay > 0 {
		// kube-apiserver routes reviews to this replica until its
		// endpoints' removal reaches it: keep answering them.
		log.Info("shutting down: the webhook serves on while the endpoints are removed", "delay", h.shutdownDelay.String())
		time.Sleep(h.shutdownDelay)
	}
	log.Info("shutting down: the webhook stops accepting and drains")
	drainCtx, cancel := context.WithTimeout(base, drainTimeout)
	defer cancel()
	if err := srv.Shutdown(drainCtx); err != nil {
		log.Error(err, "reviews still served after the drain timeout; closing their connections")
		srv.Close()
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error(err, "the webhook's server failed")
	}
	// No review is being served any more: the evaluator has no request
	// to answer with "quota evaluator stopped".
	stop()
	return nil
}

// run runs the webhook's quota cache and evaluator until ctx is done. It
// must be cancelled only once no review is being served: the evaluator
// answers the reviews still waiting when it stops with
// admission.ErrStopped, a denial.
func (h *webhook) run(ctx context.Context, log logr.Logger) {
	var wg sync.WaitGroup
	for _, c := range h.caches {
		wg.Go(func() { c.Run(ctx) })
	}
	wg.Go(func() {
		if err := h.evaluator.Run(ctx); err != nil {
			log.Error(err, "admission evaluator failed")
		}
	})
	wg.Wait()
}

// webhookTLS returns the TLS configuration of the webhook's listener:
// its certificate, reloaded when the file changes, and with
// -client-ca-file the verification of client certificates.
func webhookTLS(cfg config) (*tls.Config, error) {
	certs := &certLoader{certFile: cfg.tlsCertFile, keyFile: cfg.tlsKeyFile}
	if _, err := certs.get(nil); err != nil {
		return nil, err
	}
	// No NextProtos: the webhook speaks HTTP/1.1 only, as kubebuilder's
	// scaffold has controller-runtime's webhook server do since HTTP/2's
	// rapid reset attacks; kube-apiserver's client speaks both.
	base := &tls.Config{GetCertificate: certs.get, MinVersion: tls.VersionTLS12}
	if cfg.clientCAFile == "" {
		return base, nil
	}
	cas := &caLoader{file: cfg.clientCAFile}
	if _, err := cas.get(); err != nil {
		return nil, err
	}
	// A client without a certificate, or with one the bundle does not
	// verify, or whose certificate names no allowed name, fails the
	// handshake: its review reaches no handler.
	base.ClientAuth = tls.RequireAndVerifyClientCert
	base.VerifyConnection = allowNames(cfg.clientAllowedNames)
	outer := base.Clone()
	outer.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		pool, err := cas.get()
		if err != nil {
			return nil, err
		}
		c := base.Clone()
		c.ClientCAs = pool
		return c, nil
	}
	return outer, nil
}

// allowNames returns a tls.Config.VerifyConnection that accepts a client
// whose verified certificate has one of names as its common name or among
// its DNS names, as kube-apiserver's --requestheader-allowed-names does for
// its front proxy; it runs after the chain is verified, and refuses a
// connection without a verified chain.
func allowNames(names []string) func(tls.ConnectionState) error {
	allowed := map[string]bool{}
	for _, n := range names {
		allowed[n] = true
	}
	return func(cs tls.ConnectionState) error {
		if len(cs.VerifiedChains) == 0 || len(cs.PeerCertificates) == 0 {
			return errors.New("webhook: no verified client certificate")
		}
		leaf := cs.PeerCertificates[0]
		if allowed[leaf.Subject.CommonName] {
			return nil
		}
		for _, n := range leaf.DNSNames {
			if allowed[n] {
				return nil
			}
		}
		return fmt.Errorf("webhook: the client certificate of %q is not among -client-allowed-names", leaf.Subject.CommonName)
	}
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

// caLoader serves the pool of client CAs from a PEM bundle, loading it
// again when the file changes (a CA rotation adds the new CA to the
// bundle before clients switch). A bundle that fails to load, or holds
// no certificate, keeps the previous pool.
type caLoader struct {
	file string

	mu sync.Mutex
	// pool is the pool last loaded and modTime the file's modification
	// time then.
	// guarded by mu
	pool    *x509.CertPool
	modTime time.Time
}

func (l *caLoader) get() (*x509.CertPool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	info, err := os.Stat(l.file)
	if err == nil && l.pool != nil && info.ModTime().Equal(l.modTime) {
		return l.pool, nil
	}
	var b []byte
	if err == nil {
		b, err = os.ReadFile(l.file)
	}
	if err == nil {
		pool := x509.NewCertPool()
		if pool.AppendCertsFromPEM(b) {
			l.pool, l.modTime = pool, info.ModTime()
			return l.pool, nil
		}
		err = errors.New("no PEM certificate in the file")
	}
	if l.pool != nil {
		return l.pool, nil
	}
	return nil, fmt.Errorf("webhook: loading the client CA bundle %s: %w", l.file, err)
}
