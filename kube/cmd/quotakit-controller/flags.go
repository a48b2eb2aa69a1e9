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

	"k8s.io/apimachinery/pkg/labels"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/quotakit/quotakit"
	"github.com/quotakit/quotakit/admission"
	"github.com/quotakit/quotakit/kube"
)

// config is what the command line says.
type config struct {
	kubeconfig   string
	namespace    string
	workers      int
	resync       time.Duration
	chargeWindow time.Duration
	startGrace   time.Duration
	qps          float64
	burst        int
	wholeObjects bool
	// controller runs the ResourceQuota controller; false serves the
	// webhook alone.
	controller   bool
	countSecrets bool

	leaderElect    bool
	leaseName      string
	leaseNamespace string
	leaseDuration  time.Duration
	renewDeadline  time.Duration
	retryPeriod    time.Duration

	metricsAddr   string
	metricsSecure bool
	probeAddr     string
	shutdownDelay time.Duration

	webhookAddr            string
	tlsCertFile            string
	tlsKeyFile             string
	clientCAFile           string
	clientAllowedNames     []string
	callerTrust            string
	admissionConfig        string
	enforceNamespacedQuota bool
	clusterQuotas          bool
	appliedClusterQuotas   bool
	appliedInterval        time.Duration
	clusterQuotaMaxSeries  int
	enforcedNamespaces     string
	enforced               labels.Selector
	admissionQPS           float64
	admissionBurst         int
	maxConcurrentReviews   int
	maxWebhookConns        int

	// memoryLimit is the container's memory limit in bytes, or 0.
	memoryLimit int64

	verbosity int
	logFormat string
	version   bool
}

// Defaults of the flags that differ from kube-controller-manager's or
// have no counterpart there.
const (
	defaultMetricsAddr   = "127.0.0.1:8080"
	defaultShutdownDelay = 10 * time.Second
	// kube-apiserver's loopback client, through which its own admission
	// plugins write quota status: 50 requests a second, burst 100.
	defaultAdmissionQPS   = 50
	defaultAdmissionBurst = 100
	// defaultMaxConcurrentReviews bounds the reviews the webhook
	// evaluates at once; more are refused with 429, which kube-apiserver
	// treats as a failed call: by the webhook's failurePolicy, so behind
	// failurePolicy: Fail the request is refused.
	defaultMaxConcurrentReviews = admission.DefaultMaxConcurrentReviews
	// defaultMaxWebhookConns bounds the connections open to the webhook:
	// five per review evaluated at once, room for several
	// kube-apiservers' pools, in a few tens of MiB of TLS and read
	// buffers.
	defaultMaxWebhookConns = 5 * defaultMaxConcurrentReviews
)

// defaultEnforcedNamespaces is the namespaceSelector of the webhook
// configuration in deploy/webhook/configuration, as a label selector: the
// namespaces labelled quotakit.io/enforce=true, never those the cluster
// itself needs nor quotakit's own. The manifest test checks that every
// rendered variant passes the selector its configuration uses.
const defaultEnforcedNamespaces = "quotakit.io/enforce=true,kubernetes.io/metadata.name notin (kube-node-lease,kube-public,kube-system,quotakit-system)"

// The ways the webhook trusts its callers (-caller-trust). Only the first
// is checked by the binary; with the others, what keeps a forged review
// out is outside it, and the flag says so where everyone reads the
// Deployment.
const (
	// trustClientCertificates: the TLS handshake requires a client
	// certificate that -client-ca-file verifies and whose name is in
	// -client-allowed-names.
	trustClientCertificates = "client-certificates"
	// trustNetworkPolicy: a NetworkPolicy admits only the control plane's
	// addresses to the webhook's port.
	trustNetworkPolicy = "network-policy"
	// trustInsecureAnyCaller: anyone who reaches the port is answered, and
	// charged for: a forged review in an enforced namespace charges its
	// quotas.
	trustInsecureAnyCaller = "insecure-any-caller"
)

const callerTrustUsage = trustClientCertificates + " (with -client-ca-file and -client-allowed-names: the TLS handshake refuses any other client; implied by -client-ca-file), " +
	trustNetworkPolicy + " (a NetworkPolicy admits only the control plane's addresses to the port; the binary cannot check it), or " +
	trustInsecureAnyCaller + " (anyone who reaches the port can send reviews, and a forged review in an enforced namespace is charged)"

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
	fs.StringVar(&c.namespace, "namespace", "", "keep the quotas of this namespace only; defaults to every namespace (kube-controller-manager has no such flag)")
	fs.IntVar(&c.workers, "workers", 5, "quota syncs that run at once on each of the two queues (kube-controller-manager: --concurrent-resource-quota-syncs)")
	fs.DurationVar(&c.resync, "resync-period", 5*time.Minute, "how often every quota is recalculated from scratch (kube-controller-manager: --resource-quota-sync-period); a negative value turns it off")
	fs.DurationVar(&c.chargeWindow, "charge-window", quotakit.DefaultChargeWindow, "how long a charge admission made to status.used, that no cached object accounts for yet, is kept by recounts before it is released (no kube-controller-manager counterpart: it writes what its caches hold); a negative value does the same")
	fs.DurationVar(&c.startGrace, "start-grace", 5*time.Second, "how long the workers wait at start for the informers of the core resources before writing statuses with what has synced; a negative value does not wait (no kube-controller-manager counterpart)")
	fs.Float64Var(&c.qps, "kube-api-qps", kube.DefaultQPS, "requests per second of the controller and leader election to the API server; a negative value turns client-side rate limiting off, 0 is an error (kube-controller-manager takes 0 for client-go's 5)")
	fs.IntVar(&c.burst, "kube-api-burst", kube.DefaultBurst, "burst of requests of the controller and leader election to the API server")
	fs.BoolVar(&c.controller, "controller", true, "run the ResourceQuota controller, under leader election; false serves only the webhook (-webhook-addr), with no controller, no Lease and none of the controller's permissions, as the webhook's own Deployment does")
	fs.BoolVar(&c.countSecrets, "count-secrets", false, "count Secrets (secrets, count/secrets); off by default, because listing them needs list and watch on every Secret of the cluster, which RBAC cannot narrow to metadata. Without it a quota naming them is reported as uncounted (kube-controller-manager counts them)")
	fs.BoolVar(&c.wholeObjects, "whole-objects", false, "cache whole objects of resources that are only counted, instead of their metadata (no kube-controller-manager counterpart)")
	fs.BoolVar(&c.leaderElect, "leader-elect", true, "run the controller only on the replica that holds the lease")
	fs.StringVar(&c.leaseName, "leader-elect-resource-name", "quotakit-controller", "name of the Lease (kube-controller-manager's is kube-controller-manager)")
	fs.StringVar(&c.leaseNamespace, "leader-elect-resource-namespace", "", "namespace of the Lease; defaults to the pod's own namespace (kube-controller-manager's: kube-system)")
	fs.DurationVar(&c.leaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long standbys wait after the last renewal before taking the lease")
	fs.DurationVar(&c.renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader tries to renew before it stops leading")
	fs.DurationVar(&c.retryPeriod, "leader-elect-retry-period", 2*time.Second, "how long to wait between attempts to take or renew the lease")
	fs.StringVar(&c.metricsAddr, "metrics-bind-address", defaultMetricsAddr, "address of the /metrics endpoint, localhost only by default; 0 turns it off (kube-controller-manager serves /metrics on --secure-port, 10257, over HTTPS with authentication)")
	fs.BoolVar(&c.metricsSecure, "metrics-secure", false, "serve /metrics over HTTPS (a self-signed certificate) to clients that authenticate with a bearer token (TokenReview) and may get the non-resource URL /metrics (SubjectAccessReview), with controller-runtime's metrics filter")
	fs.StringVar(&c.probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz; 0 turns it off (kube-controller-manager serves /healthz on --secure-port)")
	fs.DurationVar(&c.shutdownDelay, "shutdown-delay", defaultShutdownDelay, "on SIGTERM, how long the webhook keeps serving with /readyz failing, for the endpoints' removal to reach every kube-apiserver, before it stops accepting connections (kube-apiserver: --shutdown-delay-duration; kube-controller-manager has none)")
	fs.StringVar(&c.webhookAddr, "webhook-addr", "", "address to serve the validating admission webhook on, over TLS, at /validate; empty turns it off")
	fs.StringVar(&c.tlsCertFile, "tls-cert-file", "", "PEM certificate of the webhook, reloaded when the file changes")
	fs.StringVar(&c.tlsKeyFile, "tls-private-key-file", "", "PEM private key of the webhook's certificate")
	fs.StringVar(&c.clientCAFile, "client-ca-file", "", "PEM bundle of the CAs of the client certificates the webhook accepts, reloaded when the file changes; when set, a review without a certificate they verify is refused in the TLS handshake (give kube-apiserver a client certificate in its AdmissionConfiguration)")
	fs.Func("client-allowed-names", "comma-separated names, each the common name or a DNS name of the client certificates the webhook accepts; a client whose verified certificate names none of them fails the TLS handshake (kube-apiserver: --requestheader-allowed-names). Required with -client-ca-file: a CA that also signs other clients' certificates (the cluster's CA signs every kubelet's) would otherwise let them all in", func(v string) error {
		c.clientAllowedNames = nil
		for _, n := range strings.Split(v, ",") {
			if n = strings.TrimSpace(n); n != "" {
				c.clientAllowedNames = append(c.clientAllowedNames, n)
			}
		}
		return nil
	})
	fs.StringVar(&c.callerTrust, "caller-trust", "", "how the webhook trusts that a review comes from kube-apiserver, required with -webhook-addr: "+callerTrustUsage)
	fs.StringVar(&c.admissionConfig, "admission-config", "", "kube-apiserver's ResourceQuotaConfiguration file (limited resources) for the webhook, optional; needs -enforce-namespaced-quota")
	fs.BoolVar(&c.clusterQuotas, "cluster-quotas", false, "keep the status of ClusterQuotas (quota.quotakit.io, the CRD in deploy/crd) and make the webhook enforce them, beside namespaced quotas where -enforce-namespaced-quota is set; kube-apiserver's plugin cannot enforce them, so this does not double-charge; not with -namespace, as a cluster quota counts every namespace (no kube-controller-manager counterpart)")
	fs.BoolVar(&c.enforceNamespacedQuota, "enforce-namespaced-quota", false, "make the webhook enforce namespaced ResourceQuota; set it only where kube-apiserver's ResourceQuota admission plugin is off, or every admitted request is charged twice. Without it the webhook allows every request")
	fs.BoolVar(&c.appliedClusterQuotas, "applied-cluster-quotas", false, "with -cluster-quotas, write into every namespace a ClusterQuota selects an AppliedClusterQuota (quota.quotakit.io, the CRD in deploy/applied-cluster-quotas) holding its limits, total usage and conditions and that namespace's own usage, which a tenant with the view role there may read: the leader writes them, through a client of its own, each quota's copies at most once per -applied-interval (OpenShift serves AppliedClusterResourceQuota from its API server instead)")
	fs.DurationVar(&c.appliedInterval, "applied-interval", kube.DefaultAppliedQuotaInterval, "least time between two writes of one ClusterQuota's AppliedClusterQuota copies: a quota that selects N namespaces is N writes each time")
	fs.IntVar(&c.clusterQuotaMaxSeries, "clusterquota-metrics-max-series", kube.DefaultClusterQuotaMaxSeries, "with -cluster-quotas, the most series of quotakit_clusterquota_hard and quotakit_clusterquota_used one scrape gives (quotas in name order, each whole; the rest counted in quotakit_clusterquota_series_dropped): 5,000 tenants of six resources need 60,000")
	fs.StringVar(&c.enforcedNamespaces, "enforced-namespaces", defaultEnforcedNamespaces, "label selector of the namespaces the webhook enforces: the namespaceSelector of its ValidatingWebhookConfiguration, written as a label selector. The webhook allows any other namespace's request without reading, charging or naming its quotas, and the controller says on each ClusterQuota whether every namespace it selects is enforced (no kube-controller-manager counterpart)")
	fs.Float64Var(&c.admissionQPS, "admission-kube-api-qps", defaultAdmissionQPS, "requests per second of the webhook's own client (quota status writes and reads), as kube-apiserver's loopback client; a negative value turns client-side rate limiting off")
	fs.IntVar(&c.admissionBurst, "admission-kube-api-burst", defaultAdmissionBurst, "burst of requests of the webhook's own client")
	fs.IntVar(&c.maxConcurrentReviews, "max-concurrent-reviews", defaultMaxConcurrentReviews, "reviews the webhook evaluates at once (a review being received takes no slot); more are answered 429, which kube-apiserver handles by the webhook's failurePolicy: with failurePolicy: Fail the request is refused")
	fs.IntVar(&c.maxWebhookConns, "max-webhook-connections", defaultMaxWebhookConns, "connections open to the webhook at once, idle ones included; one more takes the place of the oldest that has sent no request or the one idle longest, and is closed as soon as it is accepted only when every one is serving a request")
	fs.Int64Var(&c.memoryLimit, "memory-limit", 0, "the container's memory limit in bytes (the Deployments pass limits.memory); unless GOMEMLIMIT is set, the Go runtime's soft memory limit is set to 90% of it, so that the collector works harder before the kernel kills the container for what the runtime does not count (thread stacks, buffers outside the heap); 0 leaves the runtime's default")
	fs.IntVar(&c.verbosity, "v", 0, "log verbosity: messages up to this V level are logged")
	fs.StringVar(&c.logFormat, "log-format", "json", "log format: json or text (kube-controller-manager: --logging-format, which defaults to text)")
	fs.BoolVar(&c.version, "version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		err := fmt.Errorf("unexpected arguments: %q", fs.Args())
		fmt.Fprintln(errOut, err)
		return c, err
	}
	if c.version {
		// The other flags do not matter: -version works anywhere.
		return c, nil
	}
	sel, err := labels.Parse(c.enforcedNamespaces)
	if err != nil {
		err = fmt.Errorf("-enforced-namespaces: %w", err)
		fmt.Fprintln(errOut, err)
		return c, err
	}
	c.enforced = sel
	if !c.controller {
		// No controller, nothing to elect.
		c.leaderElect = false
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
	for _, q := range []struct {
		flag string
		qps  float64
	}{{"kube-api-qps", c.qps}, {"admission-kube-api-qps", c.admissionQPS}} {
		// NaN compares false with everything.
		if q.qps == 0 || math.IsNaN(q.qps) || math.IsInf(q.qps, 0) {
			bad("-%s must be finite and not 0 (a negative value turns rate limiting off), got %v", q.flag, q.qps)
		}
	}
	if c.admissionBurst < 1 {
		bad("-admission-kube-api-burst must be at least 1, got %d", c.admissionBurst)
	}
	if c.maxConcurrentReviews < 1 {
		bad("-max-concurrent-reviews must be at least 1, got %d", c.maxConcurrentReviews)
	}
	if c.maxWebhookConns < 1 {
		bad("-max-webhook-connections must be at least 1, got %d", c.maxWebhookConns)
	}
	if c.shutdownDelay < 0 {
		bad("-shutdown-delay must not be negative, got %v", c.shutdownDelay)
	}
	if c.verbosity < 0 {
		bad("-v must not be negative, got %d", c.verbosity)
	}
	if c.logFormat != "json" && c.logFormat != "text" {
		bad("-log-format must be json or text, got %q", c.logFormat)
	}
	if c.namespace != "" {
		if msgs := validation.IsDNS1123Label(c.namespace); len(msgs) > 0 {
			bad("-namespace %q is not a namespace name: %s", c.namespace, strings.Join(msgs, "; "))
		}
	}
	if c.memoryLimit < 0 {
		bad("-memory-limit must not be negative, got %d", c.memoryLimit)
	}
	if c.burst < 1 {
		bad("-kube-api-burst must be at least 1, got %d", c.burst)
	}
	if c.chargeWindow == 0 {
		bad("-charge-window must not be 0 (use a negative value to write what the caches hold)")
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
	if c.webhookAddr == "" && (c.tlsCertFile != "" || c.tlsKeyFile != "" || c.clientCAFile != "" || c.admissionConfig != "" || c.enforceNamespacedQuota || c.callerTrust != "") {
		bad("-tls-cert-file, -tls-private-key-file, -client-ca-file, -caller-trust, -admission-config and -enforce-namespaced-quota need -webhook-addr")
	}
	if c.webhookAddr != "" {
		if c.callerTrust == "" && c.clientCAFile != "" {
			c.callerTrust = trustClientCertificates
		}
		switch c.callerTrust {
		case "":
			// No open door by default.
			bad("-webhook-addr needs -caller-trust: %s", callerTrustUsage)
		case trustClientCertificates:
			if c.clientCAFile == "" || len(c.clientAllowedNames) == 0 {
				bad("-caller-trust=%s needs -client-ca-file and -client-allowed-names", trustClientCertificates)
			}
		case trustNetworkPolicy, trustInsecureAnyCaller:
			if c.clientCAFile != "" {
				bad("-client-ca-file makes the trust %s, not %s", trustClientCertificates, c.callerTrust)
			}
		default:
			bad("-caller-trust must be %s, %s or %s, got %q", trustClientCertificates, trustNetworkPolicy, trustInsecureAnyCaller, c.callerTrust)
		}
		for _, n := range c.clientAllowedNames {
			if strings.Contains(n, "$(") {
				// The kubelet leaves a reference it cannot resolve as
				// it is.
				bad("-client-allowed-names %q holds an unexpanded $(VAR) reference", n)
			}
		}
	}
	if len(c.clientAllowedNames) > 0 && c.clientCAFile == "" {
		bad("-client-allowed-names needs -client-ca-file")
	}
	if c.clusterQuotas && c.namespace != "" {
		// A cluster quota counts pods in every namespace it selects; a
		// controller of one namespace would count that one only.
		bad("-cluster-quotas counts objects in every namespace; it cannot be used with -namespace %q", c.namespace)
	}
	if c.appliedClusterQuotas && (!c.clusterQuotas || !c.controller) {
		bad("-applied-cluster-quotas needs -cluster-quotas and the controller: the copies are of the ClusterQuotas it keeps")
	}
	if c.appliedInterval <= 0 {
		bad("-applied-interval must be positive, got %v", c.appliedInterval)
	}
	if c.clusterQuotaMaxSeries <= 0 {
		bad("-clusterquota-metrics-max-series must be positive, got %d", c.clusterQuotaMaxSeries)
	}
	if !c.controller {
		switch {
		case c.webhookAddr == "":
			bad("-controller=false needs -webhook-addr: it runs nothing else")
		case !c.enforceNamespacedQuota && !c.clusterQuotas:
			// It would only add a fail-closed call to every request
			// it is sent.
			bad("-controller=false needs -cluster-quotas or -enforce-namespaced-quota: a webhook that enforces no quota allows everything")
		}
	}
	if c.admissionConfig != "" && !c.enforceNamespacedQuota {
		// Limited resources are a rule of namespaced quota: without it
		// the webhook enforces none, and would deny by them alone.
		bad("-admission-config needs -enforce-namespaced-quota")
	}
	return errors.Join(errs...)
}
