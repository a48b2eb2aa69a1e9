package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"

	"github.com/quotakit/quotakit/admission"
	"github.com/quotakit/quotakit/cache"
	"github.com/quotakit/quotakit/kube"
)

// webhookTimeout bounds a quota check of the webhook, under the
// timeoutSeconds of its ValidatingWebhookConfiguration.
const webhookTimeout = 8 * time.Second

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
