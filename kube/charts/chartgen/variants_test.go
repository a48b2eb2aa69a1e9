package chartgen_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"sigs.k8s.io/yaml"

	"github.com/quotakit/quotakit/kube/charts/chartgen"
)

// The tree and the charts, relative to this package.
const (
	deployDir          = "../../deploy"
	chartsDir          = ".."
	quotakitChart      = "../quotakit"
	configurationChart = "../quotakit-webhook-configuration"
)

// namespace is the namespace kube/deploy installs into, and the release's
// namespace of the renderings compared with it.
const namespace = "quotakit-system"

// controlPlaneCIDR is the control plane's range in the patch
// kube/deploy/components/trust-control-plane-network tells a user to
// write, and in the chart's webhook.controlPlaneCIDRs.
const controlPlaneCIDR = "172.16.0.32/28"

// A variant is one install, as a kustomize build and as the chart values
// that choose the same.
type variant struct {
	name   string
	build  chartgen.Build
	chart  string
	values map[string]any
}

// The components a user adds, as kube/cmd/quotakit-controller's manifest
// test lists them: the controller's to every install, the webhook's to
// those that serve it.
var (
	controllerComponents = []string{"count-secrets", "count-any-resource", "guard-namespace-labels"}
	webhookComponents    = []string{"enforce-namespaced-quota"}
	trusts               = []string{"trust-client-certificates", "trust-control-plane-network", "insecure-trust-any-caller"}
)

// testCA stands for the PEM a user writes into
// kube/deploy/webhook/configuration/ca.crt and gives the chart as caCrt:
// both only base64-encode it.
const testCA = "-----BEGIN CERTIFICATE-----\nMIIBtestonly\n-----END CERTIFICATE-----\n"

// variants returns every install of kube/deploy: the controller alone with
// every combination of its components, with and without cluster-quotas;
// the webhook and cert-manager overlays with each trust and every
// combination of components; and both webhook configurations.
func variants() []variant {
	var out []variant
	subsets := func(opt []string) [][]string {
		var s [][]string
		for mask := 0; mask < 1<<len(opt); mask++ {
			var c []string
			for i, x := range opt {
				if mask&(1<<i) != 0 {
					c = append(c, x)
				}
			}
			s = append(s, c)
		}
		return s
	}
	values := func(dir, trust string, comps []string) map[string]any {
		has := func(c string) bool { return slices.Contains(comps, c) }
		webhook := map[string]any{"enabled": dir != "default", "enforceNamespacedQuota": has("enforce-namespaced-quota")}
		if dir != "default" {
			webhook["callerTrust"] = chartgen.Trusts[trust]
			if dir == "cert-manager" {
				webhook["certificate"] = "cert-manager"
			}
			if trust == "trust-control-plane-network" {
				webhook["controlPlaneCIDRs"] = []any{controlPlaneCIDR}
			}
		}
		return map[string]any{
			"clusterQuotas":        has("cluster-quotas"),
			"controller":           map[string]any{"countSecrets": has("count-secrets"), "countAnyResource": has("count-any-resource")},
			"guardNamespaceLabels": map[string]any{"enabled": has("guard-namespace-labels")},
			"webhook":              webhook,
		}
	}
	for _, always := range [][]string{nil, {"cluster-quotas"}} {
		for _, s := range subsets(controllerComponents) {
			comps := append(slices.Clone(always), s...)
			out = append(out, variant{
				name:  strings.Join(append([]string{"default"}, comps...), "+"),
				build: chartgen.Build{Dir: "default", Components: comps}, chart: quotakitChart,
				values: values("default", "", comps),
			})
		}
	}
	for _, dir := range []string{"webhook", "cert-manager"} {
		for _, trust := range trusts {
			patches := ""
			if trust == "trust-control-plane-network" {
				patches = fmt.Sprintf("patches:\n- target:\n    kind: NetworkPolicy\n    name: quotakit-webhook\n  patch: |-\n"+
					"    - op: replace\n      path: /spec/ingress/0/from\n      value:\n      - ipBlock:\n          cidr: %s\n", controlPlaneCIDR)
			}
			for _, comps := range subsets(append(slices.Clone(webhookComponents), controllerComponents...)) {
				out = append(out, variant{
					name:  strings.Join(append([]string{dir + "[" + trust + "]"}, comps...), "+"),
					build: chartgen.Build{Dir: dir, Components: comps, CallerTrust: chartgen.TrustComponent(trust, patches)},
					chart: quotakitChart, values: values(dir, trust, comps),
				})
			}
		}
	}
	return append(out,
		variant{name: "webhook/configuration", build: chartgen.Build{Dir: "webhook/configuration", CA: []byte(testCA)},
			chart: configurationChart, values: map[string]any{"caCrt": testCA}},
		variant{name: "cert-manager/configuration", build: chartgen.Build{Dir: "cert-manager/configuration"},
			chart: configurationChart, values: map[string]any{"certificate": "cert-manager"}},
	)
}

// helmTemplate renders the chart at dir with vals as `helm template -n ns`
// does, with Helm's engine, and returns its objects. provider, if not
// nil, answers the templates' lookups, as a cluster does during `helm
// install`.
func helmTemplate(dir string, vals map[string]any, ns string, provider engine.ClientProvider) ([]chartgen.Object, error) {
	ch, err := loader.Load(dir)
	if err != nil {
		return nil, err
	}
	rv, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{Name: "quotakit", Namespace: ns, Revision: 1, IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, err
	}
	var files map[string]string
	if provider != nil {
		files, err = engine.RenderWithClientProvider(ch, rv, provider)
	} else {
		files, err = engine.Render(ch, rv)
	}
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	var objs []chartgen.Object
	for _, name := range names {
		if filepath.Ext(name) != ".yaml" {
			continue
		}
		for _, doc := range docSep.Split(files[name], -1) {
			var o chartgen.Object
			if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
				return nil, fmt.Errorf("%s: %w\n%s", name, err, doc)
			}
			if len(o) > 0 {
				objs = append(objs, normalize(o))
			}
		}
	}
	return objs, nil
}

// docSep separates the YAML documents of a rendered template.
var docSep = regexp.MustCompile(`(?m)^---\s*$`)

// normalize returns o as JSON decodes it, so that numbers compare alike
// whichever YAML decoder read them.
func normalize(o chartgen.Object) chartgen.Object {
	data, err := json.Marshal(o)
	if err != nil {
		panic(err)
	}
	var out chartgen.Object
	if err := json.Unmarshal(data, &out); err != nil {
		panic(err)
	}
	return out
}

// byID indexes objs by [chartgen.ID], and fails on two of one ID: Helm
// refuses a release that holds an object twice.
func byID(t *testing.T, what string, objs []chartgen.Object) map[string]chartgen.Object {
	t.Helper()
	m := map[string]chartgen.Object{}
	for _, o := range objs {
		id := chartgen.ID(o)
		if _, dup := m[id]; dup {
			t.Errorf("%s: %s twice", what, id)
		}
		m[id] = o
	}
	return m
}

// yamlOf returns o as YAML, for messages.
func yamlOf(o chartgen.Object) ([]byte, error) { return yaml.Marshal(o) }
