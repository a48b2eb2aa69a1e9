package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"
)

// The RBAC of each Deployment is checked against what its code does: the
// command is run, over client-go's fakes, with the arguments the
// Deployment renders (addresses and files aside), doing what the process
// is for, and every API request it makes is recorded. Each rule bound to
// the Deployment's ServiceAccount must allow some request of that run, and
// each request must be allowed, except the ones a role leaves out on
// purpose, which are listed below with the reason.

// unreached are rules whose requests the runs over fakes cannot make,
// with the reason each is granted all the same.
var unreached = map[string]string{
	"patch events":                        "client-go's event recorder patches an Event that repeats one it has recorded",
	"get clusterquotas.quota.quotakit.io": "the webhook reads a ClusterQuota live after its status write conflicted",
}

// forbiddenOnPurpose reports whether c is a request the controller makes
// and its default role does not allow: a resource a quota names and that
// no core evaluator counts (count/widgets.example.com, found by
// discovery), which only the component count-any-resource, or a role of
// the user's own, grants. The controller reports such quotas instead.
func forbiddenOnPurpose(v variant, c call) bool {
	return c.gr.Group == "example.com" && !v.has("count-any-resource")
}

// recorded memoizes the calls of a run by its command line: variants that
// render the same arguments make the same calls.
var recorded struct {
	mu sync.Mutex
	// guarded by mu
	calls map[string][]call
}

// TestRolesMatchCalls checks, for every Deployment of every install, that
// the rules bound to its ServiceAccount allow every request its process
// makes and nothing it does not, that the webhook's FlowSchema matches
// every request of the webhook, and that no role may mint tokens, escalate
// or impersonate, or read Secrets unless a component that says why grants
// it.
func TestRolesMatchCalls(t *testing.T) {
	for _, v := range installs() {
		t.Run(v.name, func(t *testing.T) {
			objs := render(t, v)
			checkRoles(t, v, objs)
			for _, p := range processes(t, v, objs) {
				calls := runCalls(t, p)
				if len(calls) < 4 {
					t.Fatalf("%s made too few requests to check its rules: %v", p.name(), calls)
				}
				cluster, leaseNS := boundRules(t, v, objs, p)
				used := map[int]bool{}
				for _, c := range calls {
					rules := cluster
					if c.namespaced && (c.gr.Resource == "leases" || c.gr.Resource == "events") {
						// Made in the Lease's namespace.
						rules = append(slices.Clone(cluster), leaseNS...)
					}
					i := allowedBy(rules, c)
					switch {
					case forbiddenOnPurpose(v, c):
						if i >= 0 {
							t.Errorf("%s: %s is allowed without the component that grants it", p.name(), c)
						}
					case i < 0:
						t.Errorf("%s: %s is not allowed to its ServiceAccount", p.name(), c)
					}
					if i >= 0 {
						used[i] = true
					}
				}
				for i, r := range append(slices.Clone(cluster), leaseNS...) {
					if used[i] || len(r.NonResourceURLs) > 0 {
						continue
					}
					if reason, ok := unreachedRule(r); ok {
						t.Logf("%s: %v is granted though the run does not use it: %s", p.name(), r, reason)
						continue
					}
					if isMetricsAuth(r) && p.cfg.metricsSecure {
						// TestMetricsRBAC and TestSecureMetrics.
						continue
					}
					t.Errorf("%s: the rule %v allows what its code never asks", p.name(), r)
				}
				if p.cfg.webhookAddr != "" {
					fs := one[*flowcontrolv1.FlowSchema](t, v, objs)
					for _, c := range calls {
						if !flowMatches(fs, p, c) {
							t.Errorf("%s: the FlowSchema %s does not match %s", p.name(), fs.Name, c)
						}
					}
				}
			}
		})
	}
}

// allowedBy returns the index in rules of the first rule that allows c,
// or -1.
func allowedBy(rules []rbacv1.PolicyRule, c call) int {
	resource := c.gr.Resource
	if c.sub != "" {
		resource += "/" + c.sub
	}
	for i, r := range rules {
		if allowed([]rbacv1.PolicyRule{r}, c.verb, c.gr.Group, resource) {
			return i
		}
	}
	return -1
}

// unreachedRule reports whether every request r allows is listed in
// unreached, and why.
func unreachedRule(r rbacv1.PolicyRule) (string, bool) {
	var reasons []string
	for _, verb := range r.Verbs {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				gr := schema.ParseGroupResource(res).String()
				if g != "" {
					gr = res + "." + g
				}
				reason, ok := unreached[verb+" "+gr]
				if !ok {
					return "", false
				}
				reasons = append(reasons, reason)
			}
		}
	}
	return strings.Join(reasons, "; "), len(reasons) > 0
}

// isMetricsAuth reports whether r is the rule of quotakit-metrics-auth.
func isMetricsAuth(r rbacv1.PolicyRule) bool {
	return slices.Equal(r.Verbs, []string{"create"}) &&
		(slices.Contains(r.Resources, "tokenreviews") || slices.Contains(r.Resources, "subjectaccessreviews"))
}

// checkRoles checks every role of v: none may create ServiceAccount
// tokens, escalate, bind or impersonate, or use a wildcard verb; and none
// grants Secrets, or every resource, but the roles of the components made
// for it.
func checkRoles(t *testing.T, v variant, objs []runtime.Object) {
	t.Helper()
	type named struct {
		name  string
		rules []rbacv1.PolicyRule
	}
	var roles []named
	for _, r := range objectsOf[*rbacv1.ClusterRole](objs) {
		roles = append(roles, named{"ClusterRole " + r.Name, r.Rules})
	}
	for _, r := range objectsOf[*rbacv1.Role](objs) {
		roles = append(roles, named{"Role " + r.Namespace + "/" + r.Name, r.Rules})
	}
	for _, role := range roles {
		for _, r := range role.rules {
			for _, verb := range []string{"escalate", "bind", "impersonate", "*"} {
				if slices.Contains(r.Verbs, verb) {
					t.Errorf("%s: %s allows %s", v.name, role.name, verb)
				}
			}
			if allowed([]rbacv1.PolicyRule{r}, "create", "", "serviceaccounts/token") {
				t.Errorf("%s: %s may mint ServiceAccount tokens", v.name, role.name)
			}
			secrets := allowed([]rbacv1.PolicyRule{r}, "list", "", "secrets") || allowed([]rbacv1.PolicyRule{r}, "get", "", "secrets")
			switch role.name {
			case "ClusterRole quotakit-controller-secrets", "ClusterRole quotakit-controller-any-resource":
			default:
				if secrets {
					t.Errorf("%s: %s may read Secrets", v.name, role.name)
				}
				if slices.Contains(r.Resources, "*") || slices.Contains(r.APIGroups, "*") {
					t.Errorf("%s: %s has a wildcard rule %v", v.name, role.name, r)
				}
			}
		}
	}
}

// runCalls returns the API requests p's process makes over fakes doing
// what it is for: the controller leads, counts, writes statuses and
// reports quotas it cannot count; the webhook answers reviews, charging
// quotas, reading a namespace created a moment ago live, and reading
// again after status writes that conflicted.
func runCalls(t *testing.T, p process) []call {
	t.Helper()
	args := p.args(testEnvValue)
	key := strings.Join(args, " ")
	recorded.mu.Lock()
	defer recorded.mu.Unlock()
	if calls, ok := recorded.calls[key]; ok {
		return calls
	}
	var calls []call
	// A subtest, whose bubble holds only the run.
	t.Run("run "+p.name(), func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			if p.cfg.webhookAddr != "" {
				calls = webhookCalls(t, args)
			} else {
				calls = controllerCalls(t, args)
			}
		})
	})
	if recorded.calls == nil {
		recorded.calls = map[string][]call{}
	}
	recorded.calls[key] = calls
	return calls
}

// clusterQuota returns an unstructured ClusterQuota of pods over the
// namespaces labelled tenant=a, enforced.
func clusterQuota() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "quota.quotakit.io/v1alpha1", "kind": "ClusterQuota",
		"metadata": map[string]any{"name": "tenant-a", "uid": "6d1d4c55-7f0c-4f7e-9a51-3f8c2b1e0a01", "resourceVersion": "1"},
		"spec": map[string]any{
			"selector": map[string]any{"labels": map[string]any{"matchLabels": map[string]any{"tenant": "a"}}},
			"quota":    map[string]any{"hard": map[string]any{"pods": "10"}},
		},
		"status": map[string]any{"total": map[string]any{"hard": map[string]any{"pods": "10"}, "used": map[string]any{"pods": "1"}}},
	}}
}

// fakesForRoles returns fakes holding, besides newFakes' objects, a
// ClusterQuota over namespace ns (labelled tenant=a), and quotas naming a
// resource no evaluator counts and Secrets.
func fakesForRoles(t *testing.T) *fakes {
	t.Helper()
	f := newFakes()
	ns, err := f.typed.CoreV1().Namespaces().Get(t.Context(), "ns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns.Labels["tenant"] = "a"
	if _, err := f.typed.CoreV1().Namespaces().Update(t.Context(), ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	meta, err := f.metadata.Resource(corev1.SchemeGroupVersion.WithResource("namespaces")).Get(t.Context(), "ns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	meta.Labels["tenant"] = "a"
	if err := f.metadata.Tracker().Update(corev1.SchemeGroupVersion.WithResource("namespaces"), meta, ""); err != nil {
		t.Fatal(err)
	}
	if err := f.dynamic.Tracker().Add(clusterQuota()); err != nil {
		t.Fatal(err)
	}
	for name, hard := range map[string]corev1.ResourceList{
		"gadgets": {"count/gadgets.example.com": resource.MustParse("1")},
		"secrets": {"secrets": resource.MustParse("1")},
	} {
		rq := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: corev1.ResourceQuotaSpec{Hard: hard}}
		if _, err := f.typed.CoreV1().ResourceQuotas("ns").Create(t.Context(), rq, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rq, err := f.typed.CoreV1().ResourceQuotas("ns").Get(t.Context(), "q", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rq.Status.Hard, rq.Status.Used = rq.Spec.Hard, corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}
	if _, err := f.typed.CoreV1().ResourceQuotas("ns").UpdateStatus(t.Context(), rq, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.typed.ClearActions()
	f.dynamic.ClearActions()
	f.metadata.ClearActions()
	return f
}

// controllerCalls runs the controller with args, as the leader, for a
// minute of virtual time, and returns its requests.
func controllerCalls(t *testing.T, args []string) []call {
	t.Helper()
	cfg, err := parseFlags(append(slices.Clone(args), "-metrics-bind-address=0", "-health-probe-bind-address=0"), t.Output())
	if err != nil {
		t.Fatal(err)
	}
	f := fakesForRoles(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- runWith(ctx, cfg, env{clients: f.clients(), reg: newRegistry()}) }()
	time.Sleep(time.Minute)
	synctest.Wait()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("runWith = %v", err)
	}
	return f.calls()
}

// webhookCalls runs the webhook with args over an in-memory network and
// sends it reviews: a pod in namespace ns, which a ClusterQuota selects
// and whose ResourceQuota it enforces with -enforce-namespaced-quota,
// whose first status writes conflict; and a pod in a namespace created a
// moment ago, which its cache does not hold yet. It returns its requests.
func webhookCalls(t *testing.T, args []string) []call {
	t.Helper()
	cert, key := writeCert(t)
	args = append(slices.Clone(args), "-metrics-bind-address=0", "-health-probe-bind-address=0", "-shutdown-delay=0",
		"-webhook-addr=:9443", "-tls-cert-file="+cert, "-tls-private-key-file="+key)
	cfg, err := parseFlags(args, t.Output())
	if err != nil {
		t.Fatal(err)
	}
	var clientCerts []tls.Certificate
	if cfg.clientCAFile != "" {
		// The CA of the ConfigMap the Deployment mounts, and the
		// certificate kube-apiserver would present, for the first
		// allowed name.
		ca := newCertAuthority(t, "kube-apiserver clients")
		caFile := filepath.Join(t.TempDir(), "ca.crt")
		writeFile(t, caFile, ca.pem)
		if cfg, err = parseFlags(append(args, "-client-ca-file="+caFile), t.Output()); err != nil {
			t.Fatal(err)
		}
		clientCerts = []tls.Certificate{ca.client(t, cfg.clientAllowedNames[0])}
	}
	f := fakesForRoles(t)
	conflicts := map[string]int{}
	var mu sync.Mutex
	conflictFirst := func(action clienttesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "status" {
			return false, nil, nil
		}
		mu.Lock()
		defer mu.Unlock()
		gr := action.GetResource().GroupResource()
		if conflicts[gr.String()]++; conflicts[gr.String()] == 1 {
			return true, nil, apierrors.NewConflict(gr, "conflict", errors.New("the object has been modified"))
		}
		return false, nil, nil
	}
	f.typed.PrependReactor("update", "resourcequotas", conflictFirst)
	f.dynamic.PrependReactor("update", "clusterquotas", conflictFirst)
	mem := &memNet{}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- runWith(ctx, cfg, env{clients: newFakes().clients(), admission: f.clients(), reg: newRegistry(), listen: mem.listen})
	}()
	time.Sleep(time.Minute)
	synctest.Wait()
	// Created now, in the typed client only: the cache of namespaces
	// (metadata) never holds it, and the webhook reads it live.
	fresh := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fresh", Labels: map[string]string{
		"quotakit.io/enforce": "true", "kubernetes.io/metadata.name": "fresh", "tenant": "a",
	}}}
	if err := f.typed.Tracker().Add(fresh); err != nil {
		t.Fatal(err)
	}
	transport := &http.Transport{DialContext: mem.dial, TLSClientConfig: &tls.Config{RootCAs: pool(t, cert), ServerName: "quotakit-controller.quotakit-system.svc", Certificates: clientCerts}}
	client := &http.Client{Transport: transport}
	for _, ns := range []string{"ns", "fresh"} {
		resp, err := client.Post("https://webhook:9443/validate", "application/json", bytes.NewReader(review(t, ns)))
		if err != nil {
			t.Fatalf("review in %s: %v", ns, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"allowed":true`) {
			t.Errorf("review in %s = %d %s, want allowed", ns, resp.StatusCode, body)
		}
	}
	transport.CloseIdleConnections()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("runWith = %v", err)
	}
	calls := f.calls()
	for _, want := range []call{
		{verb: "get", gr: schema.GroupResource{Resource: "namespaces"}},
		{verb: "update", gr: schema.GroupResource{Group: "quota.quotakit.io", Resource: "clusterquotas"}, sub: "status"},
	} {
		if !slices.Contains(calls, want) {
			t.Errorf("the webhook never made %s: %v", want, calls)
		}
	}
	if cfg.enforceNamespacedQuota && !slices.Contains(calls, call{verb: "update", gr: schema.GroupResource{Resource: "resourcequotas"}, sub: "status", namespaced: true}) {
		t.Errorf("the webhook never charged the namespace's ResourceQuota: %v", calls)
	}
	return calls
}
