package main

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// valid are flags that pass outside a pod.
var valid = []string{"-leader-elect-resource-namespace=kube-system"}

func TestParseFlagsDefaults(t *testing.T) {
	cfg, err := parseFlags(valid, &bytes.Buffer{})
	if err != nil {
		t.Fatalf("parseFlags(%q): %v", valid, err)
	}
	want := config{
		workers: 5, resync: 5 * time.Minute, chargeWindow: 30 * time.Second, startGrace: 5 * time.Second, qps: 20, burst: 30,
		controller: true, leaderElect: true, leaseName: "quotakit-controller", leaseNamespace: "kube-system",
		leaseDuration: 15 * time.Second, renewDeadline: 10 * time.Second, retryPeriod: 2 * time.Second,
		metricsAddr: "127.0.0.1:8080", probeAddr: ":8081", shutdownDelay: 10 * time.Second,
		admissionQPS: 50, admissionBurst: 100, maxConcurrentReviews: 100, maxWebhookConns: 500, logFormat: "json",
		enforcedNamespaces: defaultEnforcedNamespaces,
		appliedInterval:    5 * time.Second, clusterQuotaMaxSeries: 20000,
	}
	if cfg.enforced == nil || cfg.enforced.Empty() {
		t.Errorf("parseFlags(%q): no enforced namespaces' selector", valid)
	}
	cfg.enforced = nil // parsed from enforcedNamespaces
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("parseFlags(%q) =\n%+v\nwant\n%+v", valid, cfg, want)
	}
}

func TestParseFlagsValid(t *testing.T) {
	args := []string{
		"-namespace=team-a", "-workers=2", "-resync-period=-1s", "-start-grace=-1s", "-kube-api-qps=50", "-kube-api-burst=100",
		"-leader-elect=false", "-metrics-bind-address=0", "-health-probe-bind-address=127.0.0.1:9000",
		"-webhook-addr=:9443", "-tls-cert-file=c", "-tls-private-key-file=k", "-whole-objects",
		"-client-ca-file=ca", "-client-allowed-names=kube-apiserver, front-proxy-client", "-enforce-namespaced-quota", "-admission-config=a", "-admission-kube-api-qps=-1", "-admission-kube-api-burst=7",
		"-max-concurrent-reviews=3", "-max-webhook-connections=7", "-shutdown-delay=0s", "-metrics-secure", "-v=4", "-log-format=text",
	}
	cfg, err := parseFlags(args, &bytes.Buffer{})
	if err != nil {
		t.Fatalf("parseFlags: %v", err)
	}
	if cfg.namespace != "team-a" || cfg.workers != 2 || cfg.resync != -time.Second || cfg.startGrace != -time.Second || cfg.qps != 50 || cfg.burst != 100 ||
		cfg.leaderElect || cfg.metricsAddr != "0" || cfg.webhookAddr != ":9443" || !cfg.wholeObjects ||
		cfg.clientCAFile != "ca" || cfg.callerTrust != "client-certificates" || !slices.Equal(cfg.clientAllowedNames, []string{"kube-apiserver", "front-proxy-client"}) || !cfg.enforceNamespacedQuota || cfg.admissionConfig != "a" || cfg.admissionQPS != -1 || cfg.admissionBurst != 7 ||
		cfg.maxConcurrentReviews != 3 || cfg.maxWebhookConns != 7 || cfg.shutdownDelay != 0 || !cfg.metricsSecure || cfg.verbosity != 4 || cfg.logFormat != "text" {
		t.Errorf("parseFlags(%q) = %+v", args, cfg)
	}
	// The webhook alone needs no Lease, and so no lease namespace
	// outside a pod.
	webhookOnly := []string{"-controller=false", "-webhook-addr=:9443", "-caller-trust=network-policy", "-tls-cert-file=c", "-tls-private-key-file=k", "-cluster-quotas"}
	if cfg, err := parseFlags(webhookOnly, &bytes.Buffer{}); err != nil || cfg.controller || cfg.leaderElect {
		t.Errorf("parseFlags(%q) = controller %v, leader election %v, %v; want neither", webhookOnly, cfg.controller, cfg.leaderElect, err)
	}
	// A negative QPS turns client-go's rate limiter off, as
	// kube.WithDefaults documents.
	if cfg, err := parseFlags(append([]string{"-kube-api-qps=-1"}, valid...), &bytes.Buffer{}); err != nil || cfg.qps != -1 {
		t.Errorf("parseFlags(-kube-api-qps=-1) = %v, %v; want -1", cfg.qps, err)
	}
}

// TestBadFlags checks that every bad flag exits with code 2 and a message
// that names it.
func TestBadFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-nope"}, "flag provided but not defined: -nope"},
		{[]string{"-workers=x"}, `invalid value "x" for flag -workers`},
		{append([]string{"-enforced-namespaces=a in b"}, valid...), "-enforced-namespaces: "},
		{append([]string{"-workers=0"}, valid...), "-workers must be at least 1"},
		{append([]string{"-kube-api-qps=0"}, valid...), "-kube-api-qps must be finite and not 0"},
		{append([]string{"-kube-api-qps=NaN"}, valid...), "-kube-api-qps must be finite and not 0 (a negative value turns rate limiting off), got NaN"},
		{append([]string{"-kube-api-qps=+Inf"}, valid...), "-kube-api-qps must be finite and not 0 (a negative value turns rate limiting off), got +Inf"},
		{append([]string{"-kube-api-qps=-Inf"}, valid...), "got -Inf"},
		{append([]string{"-admission-kube-api-qps=0"}, valid...), "-admission-kube-api-qps must be finite and not 0"},
		{append([]string{"-admission-kube-api-burst=0"}, valid...), "-admission-kube-api-burst must be at least 1"},
		{append([]string{"-max-concurrent-reviews=0"}, valid...), "-max-concurrent-reviews must be at least 1"},
		{append([]string{"-max-webhook-connections=0"}, valid...), "-max-webhook-connections must be at least 1"},
		{append([]string{"-shutdown-delay=-1s"}, valid...), "-shutdown-delay must not be negative"},
		{append([]string{"-v=-1"}, valid...), "-v must not be negative"},
		{append([]string{"-log-format=klog"}, valid...), `-log-format must be json or text, got "klog"`},
		{append([]string{"-client-ca-file=ca"}, valid...), "need -webhook-addr"},
		{append([]string{"-enforce-namespaced-quota"}, valid...), "need -webhook-addr"},
		{append([]string{"-webhook-addr=:9443", "-caller-trust=network-policy", "-tls-cert-file=c", "-tls-private-key-file=k", "-admission-config=a"}, valid...), "-admission-config needs -enforce-namespaced-quota"},
		{append([]string{"-namespace=Bad_NS!"}, valid...), `-namespace "Bad_NS!" is not a namespace name`},
		{append([]string{"-namespace=team-a", "-cluster-quotas"}, valid...), `-cluster-quotas counts objects in every namespace; it cannot be used with -namespace "team-a"`},
		{append([]string{"-kube-api-burst=-1"}, valid...), "-kube-api-burst must be at least 1"},
		{append([]string{"-resync-period=0"}, valid...), "-resync-period must not be 0"},
		{append([]string{"-charge-window=0"}, valid...), "-charge-window must not be 0"},
		{append([]string{"-start-grace=0"}, valid...), "-start-grace must not be 0"},
		{[]string{"-leader-elect-resource-namespace="}, "-leader-elect-resource-namespace is required"},
		{append([]string{"-leader-elect-resource-name="}, valid...), "-leader-elect-resource-name must not be empty"},
		{append([]string{"-leader-elect-lease-duration=10s"}, valid...), "must be greater than -leader-elect-renew-deadline"},
		{append([]string{"-leader-elect-retry-period=9s"}, valid...), "must be greater than 1.2 × -leader-elect-retry-period"},
		{append([]string{"-leader-elect-retry-period=0s"}, valid...), "must be positive"},
		{append([]string{"-metrics-bind-address=8080"}, valid...), "-metrics-bind-address: address 8080: missing port"},
		{append([]string{"-health-probe-bind-address="}, valid...), "-health-probe-bind-address must not be empty"},
		{append([]string{"-webhook-addr=:9443"}, valid...), "-webhook-addr needs -tls-cert-file"},
		{append([]string{"-tls-cert-file=c"}, valid...), "need -webhook-addr"},
		{[]string{"-controller=false"}, "-controller=false needs -webhook-addr"},
		{[]string{"-controller=false", "-webhook-addr=:9443", "-caller-trust=network-policy", "-tls-cert-file=c", "-tls-private-key-file=k"}, "-controller=false needs -cluster-quotas or -enforce-namespaced-quota"},
		// No open door by default.
		{append([]string{"-webhook-addr=:9443", "-tls-cert-file=c", "-tls-private-key-file=k"}, valid...), "-webhook-addr needs -caller-trust"},
		{append([]string{"-webhook-addr=:9443", "-caller-trust=anyone", "-tls-cert-file=c", "-tls-private-key-file=k"}, valid...), `-caller-trust must be client-certificates, network-policy or insecure-any-caller, got "anyone"`},
		{append([]string{"-webhook-addr=:9443", "-client-ca-file=ca", "-tls-cert-file=c", "-tls-private-key-file=k"}, valid...), "-caller-trust=client-certificates needs -client-ca-file and -client-allowed-names"},
		{append([]string{"-webhook-addr=:9443", "-caller-trust=client-certificates", "-client-allowed-names=a", "-tls-cert-file=c", "-tls-private-key-file=k"}, valid...), "-caller-trust=client-certificates needs -client-ca-file and -client-allowed-names"},
		{append([]string{"-webhook-addr=:9443", "-caller-trust=insecure-any-caller", "-client-ca-file=ca", "-client-allowed-names=a", "-tls-cert-file=c", "-tls-private-key-file=k"}, valid...), "-client-ca-file makes the trust client-certificates, not insecure-any-caller"},
		{append([]string{"-webhook-addr=:9443", "-client-ca-file=ca", "-client-allowed-names=$(NAMES)", "-tls-cert-file=c", "-tls-private-key-file=k"}, valid...), "unexpanded $(VAR) reference"},
		{append([]string{"-client-allowed-names=a"}, valid...), "-client-allowed-names needs -client-ca-file"},
		{append([]string{"-caller-trust=network-policy"}, valid...), "need -webhook-addr"},
		{append(append([]string{}, valid...), "extra"), `unexpected arguments: ["extra"]`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var out bytes.Buffer
			if code := mainExit(tt.args, &out, &out); code != 2 {
				t.Errorf("exit code %d, want 2", code)
			}
			if !strings.Contains(out.String(), tt.want) {
				t.Errorf("output %q does not contain %q", out.String(), tt.want)
			}
		})
	}
}

func TestHelpExitsZero(t *testing.T) {
	var out bytes.Buffer
	if code := mainExit([]string{"-h"}, &out, &out); code != 0 {
		t.Errorf("-h: exit code %d, want 0", code)
	}
	if !strings.Contains(out.String(), "-leader-elect-lease-duration") {
		t.Errorf("-h output lacks the flags: %q", out.String())
	}
}

// TestBadKubeconfig checks that valid flags with an unreadable kubeconfig
// fail with exit code 1, not 2.
func TestBadKubeconfig(t *testing.T) {
	var out bytes.Buffer
	args := append([]string{"-kubeconfig=" + t.TempDir() + "/missing"}, valid...)
	if code := mainExit(args, &out, &out); code != 1 {
		t.Errorf("exit code %d, want 1; output %q", code, out.String())
	}
}

// TestVersion checks that -version prints the build's version to standard
// output and exits 0, whatever the other flags, even outside a pod.
func TestVersion(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := mainExit([]string{"-version", "-workers=0"}, &out, &errOut); code != 0 {
		t.Errorf("-version: exit code %d, want 0; errors %q", code, errOut.String())
	}
	if got := out.String(); !strings.HasPrefix(got, "quotakit-controller ") || strings.TrimSpace(got) == "quotakit-controller" {
		t.Errorf("-version printed %q, want quotakit-controller and a version", got)
	}
}

// TestLogger checks the two formats and that -v sets which V levels are
// logged.
func TestLogger(t *testing.T) {
	tests := []struct {
		format    string
		verbosity int
		want      []string
		not       []string
	}{
		{"json", 0, []string{`"msg":"zero"`, `"msg":"failed"`, `"err":"boom"`}, []string{"one", "four"}},
		{"json", 4, []string{`"msg":"zero"`, `"msg":"one"`, `"msg":"four"`}, []string{"five"}},
		{"text", 1, []string{"msg=zero", "msg=one", "level=ERROR"}, []string{"four", "{"}},
	}
	for _, tt := range tests {
		var out bytes.Buffer
		log := newLogger(&out, tt.format, tt.verbosity)
		log.Info("zero")
		log.V(1).Info("one")
		log.V(4).Info("four")
		log.V(5).Info("five")
		log.Error(errors.New("boom"), "failed")
		for _, w := range tt.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("-log-format=%s -v=%d: output lacks %q:\n%s", tt.format, tt.verbosity, w, out.String())
			}
		}
		for _, n := range tt.not {
			if strings.Contains(out.String(), n) {
				t.Errorf("-log-format=%s -v=%d: output has %q:\n%s", tt.format, tt.verbosity, n, out.String())
			}
		}
	}
}

// TestGoMemoryLimit checks the headroom under the container's limit, and
// that GOMEMLIMIT, which the runtime reads itself, wins.
func TestGoMemoryLimit(t *testing.T) {
	for _, tt := range []struct {
		limit int64
		env   string
		want  int64
	}{
		{512 << 20, "", 483183820},
		{0, "", 0},
		{512 << 20, "400MiB", 0},
	} {
		if got := goMemoryLimit(tt.limit, tt.env); got != tt.want {
			t.Errorf("goMemoryLimit(%d, %q) = %d, want %d", tt.limit, tt.env, got, tt.want)
		}
	}
}

// TestStampedVersion checks that the version `make controller` stamps is
// the one -version prints.
func TestStampedVersion(t *testing.T) {
	defer func(v string) { stampedVersion = v }(stampedVersion)
	stampedVersion = "v1.2.3"
	var out bytes.Buffer
	if code := mainExit([]string{"-version"}, &out, &out); code != 0 || !strings.HasPrefix(out.String(), "quotakit-controller v1.2.3") {
		t.Errorf("-version = %d %q, want quotakit-controller v1.2.3", code, out.String())
	}
}
