package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"testing/synctest"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
)

// manifests decodes every document of every deploy/*.yaml strictly with
// client-go's scheme: an unknown or duplicated field, or a kind the scheme
// does not know, fails.
func manifests(t *testing.T) []runtime.Object {
	t.Helper()
	files, err := filepath.Glob("../../deploy/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	decoder := serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()
	var out []runtime.Object
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if len(bytes.TrimSpace(stripComments(doc))) == 0 {
				continue
			}
			obj, _, err := decoder.Decode(doc, nil, nil)
			if err != nil {
				t.Errorf("%s: %v", file, err)
				continue
			}
			out = append(out, obj)
		}
	}
	return out
}

// stripComments drops the comment lines of a YAML document.
func stripComments(doc []byte) []byte {
	var out []byte
	for line := range bytes.Lines(doc) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(out, line...)
		}
	}
	return out
}

func TestManifestsDecode(t *testing.T) {
	objs := manifests(t)
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.GetObjectKind().GroupVersionKind().Kind]++
	}
	for _, k := range []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Deployment", "Service", "ValidatingWebhookConfiguration"} {
		if kinds[k] != 1 {
			t.Errorf("%d manifests of kind %s, want 1", kinds[k], k)
		}
	}
}

// TestDeploymentArgs checks that the Deployment's arguments are flags the
// command accepts, with probes and ports where the flags put them, and
// that the webhook's Service and path are the ones the command serves.
func TestDeploymentArgs(t *testing.T) {
	var dep *appsv1.Deployment
	var svc *corev1.Service
	var hook *admissionregistrationv1.ValidatingWebhookConfiguration
	for _, o := range manifests(t) {
		switch o := o.(type) {
		case *appsv1.Deployment:
			dep = o
		case *corev1.Service:
			svc = o
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			hook = o
		}
	}
	if dep == nil || svc == nil || hook == nil {
		t.Fatal("missing Deployment, Service or ValidatingWebhookConfiguration")
	}
	if *dep.Spec.Replicas != 2 {
		t.Errorf("replicas = %d, want 2", *dep.Spec.Replicas)
	}
	c := dep.Spec.Template.Spec.Containers[0]
	cfg, err := parseFlags(c.Args, t.Output())
	if err != nil {
		t.Fatalf("the Deployment's args %q: %v", c.Args, err)
	}
	if cfg.leaseNamespace != dep.Namespace {
		t.Errorf("lease namespace %q, want the Deployment's %q", cfg.leaseNamespace, dep.Namespace)
	}
	port := func(name string) string {
		for _, p := range c.Ports {
			if p.Name == name {
				return ":" + strconv.Itoa(int(p.ContainerPort))
			}
		}
		return ""
	}
	for _, tt := range []struct{ port, flag string }{{"metrics", cfg.metricsAddr}, {"probes", cfg.probeAddr}, {"webhook", cfg.webhookAddr}} {
		if got := port(tt.port); got != tt.flag {
			t.Errorf("port %s = %q, flag says %q", tt.port, got, tt.flag)
		}
	}
	if c.LivenessProbe.HTTPGet.Path != "/healthz" || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("probes at %s and %s, want /healthz and /readyz", c.LivenessProbe.HTTPGet.Path, c.ReadinessProbe.HTTPGet.Path)
	}
	ref := hook.Webhooks[0].ClientConfig.Service
	if ref.Name != svc.Name || ref.Namespace != svc.Namespace || *ref.Path != "/validate" {
		t.Errorf("webhook calls %s/%s%s, want %s/%s/validate", ref.Namespace, ref.Name, *ref.Path, svc.Namespace, svc.Name)
	}
	if float64(*hook.Webhooks[0].TimeoutSeconds) <= webhookTimeout.Seconds() {
		t.Errorf("webhook timeoutSeconds %d is not above the command's check timeout %v", *hook.Webhooks[0].TimeoutSeconds, webhookTimeout)
	}
}

// TestClusterRoleCoversCalls runs the command over client-go's fakes, as
// the leader, until shutdown, and checks that the manifests' RBAC rules
// allow every API request it made: the lists and watches of every resource
// of the table and of a discovered one, the status writes, the Lease and
// the events.
func TestClusterRoleCoversCalls(t *testing.T) {
	var calls []call
	synctest.Test(t, func(t *testing.T) {
		f := newFakes()
		if err := runLeader(t, f, nil); err != nil {
			t.Fatalf("runWith: %v", err)
		}
		calls = f.calls()
	})
	denied := checkRBAC(t, calls)
	var sawLease, sawEvent, sawStatus bool
	for _, c := range calls {
		sawLease = sawLease || c.gr.Resource == "leases"
		sawEvent = sawEvent || c.gr.Resource == "events"
		sawStatus = sawStatus || (c.gr.Resource == "resourcequotas" && c.sub == "status")
	}
	if !sawLease || !sawEvent || !sawStatus || len(calls) < 10 {
		t.Errorf("the run made too few kinds of requests to check the rules: %v", calls)
	}
	for _, d := range denied {
		t.Error(d)
	}
}

// checkRBAC returns a message for each of calls that the ClusterRole, or
// for leases and events (made in the lease namespace) the Role, does not
// allow.
func checkRBAC(t *testing.T, calls []call) []string {
	t.Helper()
	var cluster, leaderNS []rbacv1.PolicyRule
	var ns string
	for _, o := range manifests(t) {
		switch o := o.(type) {
		case *rbacv1.ClusterRole:
			cluster = o.Rules
		case *rbacv1.Role:
			leaderNS, ns = o.Rules, o.Namespace
		}
	}
	var denied []string
	for _, c := range calls {
		resource := c.gr.Resource
		if c.sub != "" {
			resource += "/" + c.sub
		}
		rules := cluster
		if c.gr.Resource == "leases" || c.gr.Resource == "events" {
			rules = append(slices.Clone(cluster), leaderNS...)
		}
		if !allowed(rules, c.verb, c.gr.Group, resource) {
			denied = append(denied, fmt.Sprintf("%s %s.%s is not allowed by the ClusterRole or the Role in %s", c.verb, resource, c.gr.Group, ns))
		}
	}
	return denied
}

// allowed reports whether rules allow verb on group/resource.
func allowed(rules []rbacv1.PolicyRule, verb, group, resource string) bool {
	match := func(list []string, v string) bool { return slices.Contains(list, "*") || slices.Contains(list, v) }
	for _, r := range rules {
		if match(r.Verbs, verb) && match(r.APIGroups, group) && match(r.Resources, resource) {
			return true
		}
	}
	return false
}
