package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/quotakit/quotakit/admission"
	"github.com/quotakit/quotakit/cache"
	"github.com/quotakit/quotakit/kube"
)

// webhookTimeout bounds a quota check of the webhook, under the
// timeoutSeconds of its ValidatingWebhookConfiguration.
const webhookTimeout = 8 * time.Second

// webhookPath is where the webhook serves, and its label in the metrics.
const webhookPath = "/validate"

// webhook is the validating admission webhook.
type webhook struct {
	// caches are the caches of the quotas the webhook enforces (and of
	// the namespaces, for cluster quotas); none when it enforces none.
	caches    []*cache.SharedIndexInformer
	evaluator *admission.Evaluator
	tls       *tls.Config
	// handler answers reviews: admission's Handler, with its limits,
	// measured.
	handler http.Handler
	// maxConns bounds the connections open to the webhook's listener;
	// evictedConns counts the idle ones closed to make room for new
	// ones, refusedConns the new ones closed over it.
	maxConns                   int
	evictedConns, refusedConns prometheus.Counter
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
	h := &webhook{tls: tlsCfg}
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
	// reviews being evaluated, which a slow sender cannot hold.
	h.handler = m.instrument(webhookPath, &admission.Handler{Evaluator: h.evaluator, MaxConcurrentReviews: cfg.maxConcurrentReviews})
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

func (h *webhook) mux() http.Handler {
	mux := http.NewServeMux()
	mux.Handle(webhookPath, h.handler)
	return mux
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

// listener returns ln accepting at most -max-webhook-connections
// connections open at once, and the server's ConnState hook that it
// needs (see limitConns).
func (h *webhook) listener(ln net.Listener) (net.Listener, func(net.Conn, http.ConnState)) {
	return limitConns(ln, h.maxConns, h.evictedConns.Inc, h.refusedConns.Inc)
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
