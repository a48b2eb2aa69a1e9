package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/quotakit/quotakit/kube"
)

// config is what the command line says.
type config struct {
	kubeconfig   string
	namespace    string
	workers      int
	resync       time.Duration
	startGrace   time.Duration
	qps          float64
	burst        int
	wholeObjects bool

	leaderElect    bool
	leaseName      string
	leaseNamespace string
	leaseDuration  time.Duration
	renewDeadline  time.Duration
	retryPeriod    time.Duration

	metricsAddr string
	probeAddr   string

	webhookAddr     string
	tlsCertFile     string
	tlsKeyFile      string
	admissionConfig string
}

// serviceAccountNamespace is where a pod finds its own namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// parseFlags parses and checks args, writing usage and errors to errOut.
// Every bad flag is an error naming it; the caller exits with code 2. -h
// and -help return flag.ErrHelp after printing the usage.
func parseFlags(args []string, errOut io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("quotakit-controller", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "path of a kubeconfig; defaults to $KUBECONFIG, then ~/.kube/config, then the pod's service account")
	fs.StringVar(&c.namespace, "namespace", "", "keep the quotas of this namespace only; defaults to every namespace")
	fs.IntVar(&c.workers, "workers", 5, "quota syncs that run at once on each of the two queues (kube-controller-manager's --concurrent-resource-quota-syncs)")
	fs.DurationVar(&c.resync, "resync-period", 5*time.Minute, "how often every quota is recalculated from scratch (--resource-quota-sync-period); a negative value turns it off")
	fs.DurationVar(&c.startGrace, "start-grace", 5*time.Second, "how long the workers wait at start for the informers of the core resources before writing statuses with what has synced; a negative value does not wait")
	fs.Float64Var(&c.qps, "kube-api-qps", kube.DefaultQPS, "requests per second to the API server")
	fs.IntVar(&c.burst, "kube-api-burst", kube.DefaultBurst, "burst of requests to the API server")
	fs.BoolVar(&c.wholeObjects, "whole-objects", false, "cache whole objects of resources that are only counted, instead of their metadata")
	fs.BoolVar(&c.leaderElect, "leader-elect", true, "run the controller only on the replica that holds the lease")
	fs.StringVar(&c.leaseName, "leader-elect-resource-name", "quotakit-controller", "name of the Lease")
	fs.StringVar(&c.leaseNamespace, "leader-elect-resource-namespace", "", "namespace of the Lease; defaults to the pod's own namespace")
	fs.DurationVar(&c.leaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long standbys wait after the last renewal before taking the lease")
	fs.DurationVar(&c.renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader tries to renew before it stops leading")
	fs.DurationVar(&c.retryPeriod, "leader-elect-retry-period", 2*time.Second, "how long to wait between attempts to take or renew the lease")
	fs.StringVar(&c.metricsAddr, "metrics-bind-address", ":8080", "address of the /metrics endpoint; 0 turns it off")
	fs.StringVar(&c.probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz; 0 turns it off")
	fs.StringVar(&c.webhookAddr, "webhook-addr", "", "address to serve the validating admission webhook on, over TLS, at /validate; empty turns it off")
	fs.StringVar(&c.tlsCertFile, "tls-cert-file", "", "PEM certificate of the webhook")
	fs.StringVar(&c.tlsKeyFile, "tls-private-key-file", "", "PEM private key of the webhook's certificate")
	fs.StringVar(&c.admissionConfig, "admission-config", "", "kube-apiserver's ResourceQuotaConfiguration file (limited resources) for the webhook, optional")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		err := fmt.Errorf("unexpected arguments: %q", fs.Args())
		fmt.Fprintln(errOut, err)
		return c, err
	}
	if c.leaderElect && c.leaseNamespace == "" {
		if b, err := os.ReadFile(serviceAccountNamespace); err == nil {
			c.leaseNamespace = strings.TrimSpace(string(b))
		}
	}
	if err := c.validate(); err != nil {
		fmt.Fprintln(errOut, err)
		return c, err
	}
	return c, nil
}

// validate checks the values together, as client-go's leader election
// would later, so that a bad combination fails at start with the flag's
// name.
func (c *config) validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.workers < 1 {
		bad("-workers must be at least 1, got %d", c.workers)
	}
	if !(c.qps > 0) || math.IsInf(c.qps, 1) { // NaN is neither
		bad("-kube-api-qps must be positive and finite, got %v", c.qps)
	}
	if c.namespace != "" {
		if msgs := validation.IsDNS1123Label(c.namespace); len(msgs) > 0 {
			bad("-namespace %q is not a namespace name: %s", c.namespace, strings.Join(msgs, "; "))
		}
	}
	if c.burst < 1 {
		bad("-kube-api-burst must be at least 1, got %d", c.burst)
	}
	if c.resync == 0 {
		bad("-resync-period must not be 0 (use a negative value to turn resyncs off)")
	}
	if c.startGrace == 0 {
		bad("-start-grace must not be 0 (use a negative value not to wait)")
	}
	if c.leaderElect {
		if c.leaseName == "" {
			bad("-leader-elect-resource-name must not be empty")
		}
		if c.leaseNamespace == "" {
			bad("-leader-elect-resource-namespace is required outside a pod")
		}
		switch {
		case c.leaseDuration <= 0 || c.renewDeadline <= 0 || c.retryPeriod <= 0:
			bad("-leader-elect-lease-duration, -leader-elect-renew-deadline and -leader-elect-retry-period must be positive")
		case c.leaseDuration <= c.renewDeadline:
			bad("-leader-elect-lease-duration (%v) must be greater than -leader-elect-renew-deadline (%v)", c.leaseDuration, c.renewDeadline)
		case float64(c.renewDeadline) <= 1.2*float64(c.retryPeriod):
			// client-go's JitterFactor.
			bad("-leader-elect-renew-deadline (%v) must be greater than 1.2 × -leader-elect-retry-period (%v)", c.renewDeadline, c.retryPeriod)
		}
	}
	for _, a := range []struct{ flag, addr string }{{"metrics-bind-address", c.metricsAddr}, {"health-probe-bind-address", c.probeAddr}, {"webhook-addr", c.webhookAddr}} {
		if a.addr == "" || a.addr == "0" {
			continue
		}
		if _, _, err := net.SplitHostPort(a.addr); err != nil {
			bad("-%s: %v", a.flag, err)
		}
	}
	if c.metricsAddr == "" {
		bad("-metrics-bind-address must not be empty (0 turns it off)")
	}
	if c.probeAddr == "" {
		bad("-health-probe-bind-address must not be empty (0 turns it off)")
	}
	if c.webhookAddr != "" && (c.tlsCertFile == "" || c.tlsKeyFile == "") {
		bad("-webhook-addr needs -tls-cert-file and -tls-private-key-file")
	}
	if c.webhookAddr == "" && (c.tlsCertFile != "" || c.tlsKeyFile != "" || c.admissionConfig != "") {
		bad("-tls-cert-file, -tls-private-key-file and -admission-config need -webhook-addr")
	}
	return errors.Join(errs...)
}
