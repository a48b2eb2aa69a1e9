// Command webhook is a validating admission webhook that enforces
// namespaced ResourceQuota with quotakit's admission engine, for an API
// server whose own ResourceQuota plugin is off (an extension API server, a
// virtual cluster). It is built on package kube's client and informers
// alone, and so links no controller-runtime package: a test of package
// kube checks that with go list -deps.
//
//	webhook -kubeconfig=... -tls-cert-file=... -tls-private-key-file=... -addr=:9443
//
// The controller that keeps the quotas' status.used runs elsewhere (the
// quotakit-controller command, or a controller-runtime manager through
// package kube/manager): admission only charges.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/quotakit/quotakit/admission"
	"github.com/quotakit/quotakit/kube"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "webhook:", err)
		os.Exit(1)
	}
}

func run() error {
	kubeconfig := flag.String("kubeconfig", "", "path of a kubeconfig; empty: the pod's service account")
	addr := flag.String("addr", ":9443", "address to serve the webhook on, over TLS, at /validate")
	certFile := flag.String("tls-cert-file", "", "PEM certificate of the webhook")
	keyFile := flag.String("tls-private-key-file", "", "PEM private key of the webhook's certificate")
	enforced := flag.String("enforced-namespaces", "quotakit.io/enforce=true", "label selector of the namespaces enforced: the webhook configuration's namespaceSelector")
	flag.Parse()
	selector, err := labels.Parse(*enforced)
	if err != nil {
		return fmt.Errorf("-enforced-namespaces: %w", err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return err
	}
	// No controller runs here: the client needs no controller options.
	client, err := kube.NewForConfig(cfg)
	if err != nil {
		return err
	}
	quotas, namespaces := client.QuotaInformer(""), client.NamespaceInformer()
	synced := func() bool { return quotas.HasSynced() && namespaces.HasSynced() }
	engine, err := admission.NewEvaluator(
		admission.NewAccessor(kube.QuotaLister(quotas), quotas.HasSynced, client, admission.AccessorOptions{}),
		admission.Options{Enforced: admission.SelectedNamespaces(selector, client.NamespaceGetter(namespaces))},
	)
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go quotas.Run(ctx)
	go namespaces.Run(ctx)
	go func() { _ = engine.Run(ctx) }()

	mux := http.NewServeMux()
	mux.Handle("/validate", &admission.Handler{Evaluator: engine})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !synced() {
			http.Error(w, "caches not synced", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	srv := &http.Server{Addr: *addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.ListenAndServeTLS(*certFile, *keyFile); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
