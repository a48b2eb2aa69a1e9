// Command admission is a validating admission webhook that enforces
// ResourceQuota with quotakit's admission package, over quotas kept in
// memory: every namespace gets one quota, "default", with the limits of
// -hard. It answers AdmissionReviews on /validate over TLS and shows the
// quotas on /quotas.
//
//	admission -tls-cert-file=tls.crt -tls-private-key-file=tls.key -hard=pods=10,requests.cpu=4
//
// README.md shows the ValidatingWebhookConfiguration that sends it
// requests. A real deployment reads and writes the cluster's ResourceQuotas
// through admission.NewAccessor over an informer's lister and a client.
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/quotakit/quotakit/admission"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	onListen := func(addr net.Addr) { log.Printf("serving AdmissionReviews on https://%s/validate", addr) }
	err := run(ctx, os.Args[1:], os.Stderr, onListen)
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
	case errors.As(err, new(usageError)):
		// As the flag package and kube's binaries: 2 for a bad command line.
		log.Print(err)
		os.Exit(2)
	default:
		log.Print(err)
		os.Exit(1)
	}
}

// usageError is a command line that cannot be run.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// config is what the flags say.
type config struct {
	addr, certFile, keyFile, configFile string
	hard                                corev1.ResourceList
	timeout                             time.Duration
}

func parseFlags(args []string, errOut io.Writer) (config, error) {
	var c config
	var hard string
	fs := flag.NewFlagSet("admission", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.StringVar(&c.addr, "addr", ":8443", "address to serve HTTPS on")
	fs.StringVar(&c.certFile, "tls-cert-file", "", "PEM certificate (required)")
	fs.StringVar(&c.keyFile, "tls-private-key-file", "", "PEM private key of the certificate (required)")
	fs.StringVar(&hard, "hard", "pods=10", "hard limits of each namespace's quota, name=quantity,…")
	fs.StringVar(&c.configFile, "admission-config", "", "kube-apiserver's ResourceQuotaConfiguration file (limited resources), optional")
	fs.DurationVar(&c.timeout, "timeout", 8*time.Second, "how long a request may wait for its quota check; keep it under the webhook's timeoutSeconds")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.certFile == "" || c.keyFile == "" {
		return c, errors.New("-tls-cert-file and -tls-private-key-file are required")
	}
	var err error
	if c.hard, err = parseHard(hard); err != nil {
		return c, err
	}
	return c, nil
}

// parseHard parses "pods=10,requests.cpu=4".
func parseHard(s string) (corev1.ResourceList, error) {
	out := corev1.ResourceList{}
	for _, kv := range strings.Split(s, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		name, value, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("-hard: %q is not name=quantity", kv)
		}
		q, err := resource.ParseQuantity(value)
		if err != nil {
			return nil, fmt.Errorf("-hard: %s: %w", name, err)
		}
		out[corev1.ResourceName(name)] = q
	}
	return out, nil
}

// newServer returns the webhook's routes over an Evaluator it returns for
// the caller to run.
func newServer(c config) (http.Handler, *admission.Evaluator, error) {
	var limited admission.Configuration
	if c.configFile != "" {
		f, err := os.Open(c.configFile)
		if err != nil {
			return nil, nil, err
		}
		cfg, err := admission.LoadConfiguration(f)
		f.Close()
		if err != nil {
			return nil, nil, err
		}
		limited = *cfg
	}
	mem := newMemory(c.hard)
	// The memory is the quotas' only store, complete from the start: it
	// has always synced.
	synced := func() bool { return true }
	e, err := admission.NewEvaluator(admission.NewAccessor(mem.list, synced, mem, admission.AccessorOptions{}), admission.Options{
		LimitedResources: limited.LimitedResources,
		Timeout:          c.timeout,
	})
	if err != nil {
		return nil, nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("POST /validate", &admission.Handler{Evaluator: e})
	mux.HandleFunc("GET /quotas", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(mem.snapshot())
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	return mux, e, nil
}

// run serves until ctx is done; onListen is called with the address once
// the server listens.
func run(ctx context.Context, args []string, errOut io.Writer, onListen func(net.Addr)) error {
	c, err := parseFlags(args, errOut)
	if err != nil {
		return usageError{err}
	}
	handler, e, err := newServer(c)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	evalDone := make(chan error, 1)
	go func() { evalDone <- e.Run(ctx) }()

	// Load the key pair before listening, so that a bad one fails at once.
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return errors.Join(err, stopEvaluator(cancel, evalDone))
	}
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return errors.Join(err, stopEvaluator(cancel, evalDone))
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
	}
	srvDone := make(chan error, 1)
	go func() { srvDone <- srv.ServeTLS(ln, "", "") }()
	onListen(ln.Addr())

	select {
	case <-ctx.Done():
		shutdownCtx, stop := context.WithTimeout(context.Background(), 10*time.Second)
		defer stop()
		err = srv.Shutdown(shutdownCtx)
		<-srvDone
	case err = <-srvDone:
	}
	return errors.Join(ignoreClosed(err), stopEvaluator(cancel, evalDone))
}

// stopEvaluator stops the Evaluator's Run and waits for it.
func stopEvaluator(cancel context.CancelFunc, done <-chan error) error {
	cancel()
	return <-done
}

func ignoreClosed(err error) error {
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
