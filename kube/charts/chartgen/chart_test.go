package chartgen_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"

	"github.com/quotakit/quotakit/kube/charts/chartgen"
)

// TestChartEqualsKustomize renders every variant with kustomize and with
// Helm's engine and compares them: the same objects (group, kind,
// namespace, name), and each object whole, every field (RBAC rules,
// containers' args, env, image, probes, security contexts and resources,
// service accounts, volumes, the webhook configuration's rules, selectors
// and failure policy, network policies, certificates). The only
// differences allowed are what Helm needs: the Namespace, which the chart
// leaves to `kubectl create namespace`, and the CRD's resource policy.
func TestChartEqualsKustomize(t *testing.T) {
	for _, v := range variants() {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			kobjs, err := chartgen.Render(deployDir, v.build)
			if err != nil {
				t.Fatal(err)
			}
			hobjs, err := helmTemplate(v.chart, v.values, namespace, nil)
			if err != nil {
				t.Fatalf("helm template %v: %v", v.values, err)
			}
			want := map[string]chartgen.Object{}
			for _, o := range kobjs {
				if o["kind"] == "Namespace" {
					continue
				}
				want[chartgen.ID(o)] = normalize(o)
			}
			got := byID(t, "helm", hobjs)
			for _, m := range []map[string]chartgen.Object{want, got} {
				for _, o := range m {
					unwrapCABundle(o)
				}
			}
			for id, o := range got {
				if o["kind"] == "CustomResourceDefinition" {
					md := o["metadata"].(map[string]any)
					ann, _ := md["annotations"].(map[string]any)
					if ann["helm.sh/resource-policy"] != "keep" {
						t.Errorf("%s: annotations %v, want helm.sh/resource-policy: keep, so that uninstalling keeps every ClusterQuota", id, ann)
					}
					delete(ann, "helm.sh/resource-policy")
					if len(ann) == 0 {
						delete(md, "annotations")
					}
				}
			}
			if diff := cmp.Diff(keys(want), keys(got)); diff != "" {
				t.Errorf("objects (-kustomize +helm):\n%s", diff)
			}
			for id, w := range want {
				if g, ok := got[id]; ok {
					if diff := cmp.Diff(w, g); diff != "" {
						t.Errorf("%s (-kustomize +helm):\n%s", id, diff)
					}
				}
			}
		})
	}
}

// unwrapCABundle removes the line breaks kustomize writes into a webhook
// configuration's caBundle (it wraps base64 at 76 characters, as MIME
// does) and Helm's b64enc does not: kube-apiserver's base64 decoding
// ignores them, so both stand for the same bytes.
func unwrapCABundle(o chartgen.Object) {
	hooks, _ := o["webhooks"].([]any)
	for _, h := range hooks {
		cc, _ := h.(map[string]any)["clientConfig"].(map[string]any)
		if b, ok := cc["caBundle"].(string); ok {
			cc["caBundle"] = strings.ReplaceAll(b, "\n", "")
		}
	}
}

func keys(m map[string]chartgen.Object) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestWebhookConfigurationOnlyInItsChart pins the first half of the
// install-order guarantee: no values of the chart quotakit render a
// webhook configuration, so `helm install quotakit` never registers the
// fail-closed webhook, whether or not its replicas are ready; the chart
// quotakit-webhook-configuration renders it and nothing else.
func TestWebhookConfigurationOnlyInItsChart(t *testing.T) {
	for _, v := range variants() {
		objs, err := helmTemplate(v.chart, v.values, namespace, nil)
		if err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		for _, o := range objs {
			isConfig := o["kind"] == "ValidatingWebhookConfiguration" || o["kind"] == "MutatingWebhookConfiguration"
			if isConfig != (v.chart == configurationChart) {
				t.Errorf("%s: chart %s renders %s", v.name, filepath.Base(v.chart), chartgen.ID(o))
			}
		}
	}
}

// TestReleaseNamespace renders the fullest install into another
// namespace: nothing names quotakit-system any more, so every reference
// to the namespace (subjects, Service references, the certificate's DNS
// names, the webhook configuration's exclusions, the controller's lease)
// follows the release.
func TestReleaseNamespace(t *testing.T) {
	for _, v := range variants() {
		if !strings.Contains(v.name, "enforce-namespaced-quota+count-secrets+count-any-resource+guard-namespace-labels") &&
			!strings.Contains(v.name, "configuration") {
			continue
		}
		objs, err := helmTemplate(v.chart, v.values, "quota-other", nil)
		if err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		for _, o := range objs {
			if b, _ := yamlOf(o); bytes.Contains(b, []byte(namespace)) {
				t.Errorf("%s: %s in namespace quota-other still names %s:\n%s", v.name, chartgen.ID(o), namespace, b)
			}
		}
	}
}

// TestValuesRefused checks that the chart refuses what kube/deploy does
// not build either, with a message that says what to set.
func TestValuesRefused(t *testing.T) {
	tests := []struct {
		name   string
		values map[string]any
		want   string
	}{
		{"webhook without caller trust", map[string]any{"webhook": map[string]any{"enabled": true}}, "webhook.callerTrust"},
		{"unknown caller trust", map[string]any{"webhook": map[string]any{"enabled": true, "callerTrust": "mtls"}}, "webhook.callerTrust"},
		{"network policy without addresses", map[string]any{"webhook": map[string]any{"enabled": true, "callerTrust": "network-policy"}}, "webhook.controlPlaneCIDRs"},
		{"unknown certificate", map[string]any{"webhook": map[string]any{"enabled": true, "callerTrust": "insecure-any-caller", "certificate": "acme"}}, "webhook.certificate"},
		{"namespaced quota without webhook", map[string]any{"webhook": map[string]any{"enforceNamespacedQuota": true}}, "needs webhook.enabled"},
		{"group with a quote", map[string]any{"guardNamespaceLabels": map[string]any{"enabled": true, "allowedGroups": []any{"a'b"}}}, "allowedGroups"},
	}
	for _, tt := range tests {
		_, err := helmTemplate(quotakitChart, tt.values, namespace, nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: helm template = %v, want an error naming %s", tt.name, err, tt.want)
		}
	}
	if _, err := helmTemplate(configurationChart, nil, namespace, nil); err == nil || !strings.Contains(err.Error(), "caCrt") {
		t.Errorf("configuration without caCrt: helm template = %v, want an error naming caCrt", err)
	}
}

// TestLint runs Helm's linter over both charts, with their defaults and
// with values that turn on every choice: no warning, no error.
func TestLint(t *testing.T) {
	all := map[string]any{
		"clusterQuotas":        true,
		"controller":           map[string]any{"countSecrets": true, "countAnyResource": true},
		"guardNamespaceLabels": map[string]any{"enabled": true},
		"webhook":              map[string]any{"enabled": true, "callerTrust": "network-policy", "controlPlaneCIDRs": []any{controlPlaneCIDR}, "certificate": "cert-manager", "enforceNamespacedQuota": true},
	}
	for _, tt := range []struct {
		chart  string
		values map[string]any
	}{
		{quotakitChart, nil},
		{quotakitChart, all},
		{configurationChart, nil},
		{configurationChart, map[string]any{"caCrt": testCA}},
		{configurationChart, map[string]any{"certificate": "cert-manager"}},
	} {
		l := lint.All(tt.chart, tt.values, namespace, false)
		for _, m := range l.Messages {
			if m.Severity >= support.WarningSev {
				t.Errorf("helm lint %s %v: %v", filepath.Base(tt.chart), tt.values, m)
			} else {
				t.Logf("helm lint %s: %v", filepath.Base(tt.chart), m)
			}
		}
	}
}

// TestGeneratedUpToDate regenerates the charts from kube/deploy and
// compares them with the committed ones: a change to kube/deploy without
// `go generate ./...` in kube/charts fails here.
func TestGeneratedUpToDate(t *testing.T) {
	files, err := chartgen.Generate(deployDir)
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range files {
		got, err := os.ReadFile(filepath.Join(chartsDir, filepath.FromSlash(p)))
		if err != nil {
			t.Errorf("%s: %v; run go generate ./... in kube/charts", p, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale; run go generate ./... in kube/charts:\n%s", p, cmp.Diff(string(want), string(got)))
		}
	}
	for _, chart := range []string{"quotakit", "quotakit-webhook-configuration"} {
		old, err := filepath.Glob(filepath.Join(chartsDir, chart, "templates", chartgen.Generated+"*"))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range old {
			rel := chart + "/templates/" + filepath.Base(p)
			if _, ok := files[rel]; !ok {
				t.Errorf("%s is no longer generated; run go generate ./... in kube/charts", rel)
			}
		}
	}
}

// TestEveryComponentIsAValue fails when kube/deploy/components gains a
// component that the variants, and so the chart's values, do not cover:
// chartgen's feature table and the variants here must learn it.
func TestEveryComponentIsAValue(t *testing.T) {
	entries, err := os.ReadDir(filepath.Join(deployDir, "components"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		if e.IsDir() {
			got = append(got, e.Name())
		}
	}
	want := append(append(append([]string{"cluster-quotas"}, controllerComponents...), webhookComponents...), trusts...)
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("kube/deploy/components (-covered by the chart +present):\n%s", diff)
	}
}
