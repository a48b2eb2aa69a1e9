package chartgen

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"
)

// Generated is the prefix of every template [Generate] writes, so that a
// stale one is easy to find and the hand-written ones (helpers, notes,
// checks of the values) are told apart.
const Generated = "zz_generated."

// placeholderTrust is a caller-trust component that chooses no trust:
// the note kustomize's webhook overlay requires, and nothing else. It
// gives the rendering of the webhook that each trust is compared to.
const placeholderTrust = `apiVersion: kustomize.config.k8s.io/v1alpha1
kind: Component
configMapGenerator:
- name: quotakit-webhook-caller-trust
  literals:
  - trust=none
  options:
    disableNameSuffixHash: true
    annotations:
      config.kubernetes.io/local-config: "true"
`

// Trusts maps each kustomize component that chooses how the webhook
// trusts its callers to the chart's value webhook.callerTrust, which is
// the binary's -caller-trust flag.
var Trusts = map[string]string{
	"trust-client-certificates":   "client-certificates",
	"trust-control-plane-network": "network-policy",
	"insecure-trust-any-caller":   "insecure-any-caller",
}

// Generate renders the kustomize tree at deployDir and returns the files
// it generates for both charts, by their paths relative to the directory
// that holds the charts (slash-separated): each chart's values.yaml and
// its templates named with the prefix [Generated].
func Generate(deployDir string) (map[string][]byte, error) {
	out := map[string][]byte{}
	if err := generateQuotakit(deployDir, out); err != nil {
		return nil, err
	}
	if err := generateConfiguration(deployDir, out); err != nil {
		return nil, err
	}
	return out, nil
}

// Write writes files, as [Generate] returns them, under dir, and removes
// any generated template there that files does not hold.
func Write(dir string, files map[string][]byte) error {
	for _, chart := range []string{"quotakit", "quotakit-webhook-configuration"} {
		old, err := filepath.Glob(filepath.Join(dir, chart, "templates", Generated+"*"))
		if err != nil {
			return err
		}
		for _, p := range old {
			if err := os.Remove(p); err != nil {
				return err
			}
		}
	}
	for _, p := range sortedKeys(files) {
		path := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, files[p], 0o644); err != nil {
			return err
		}
	}
	return nil
}

// generateQuotakit generates the chart quotakit: everything but the
// webhook's configuration.
func generateQuotakit(deployDir string, out map[string][]byte) error {
	containers := []string{"spec", "template", "spec", "containers"}
	c := newChart(deployDir, []field{
		{kind: "Deployment", name: "quotakit-controller", path: append(containers[:4:4], "*", "image"), value: "image", record: true},
		{kind: "Deployment", name: "quotakit-webhook", path: append(containers[:4:4], "*", "image"), value: "image", record: true},
		{kind: "Deployment", name: "quotakit-controller", path: append(containers[:4:4], "0", "resources"), value: "controllerResources", record: true},
		{kind: "Deployment", name: "quotakit-webhook", path: append(containers[:4:4], "0", "resources"), value: "webhookResources", record: true},
		{kind: "Deployment", name: "quotakit-webhook", path: []string{"spec", "template", "metadata", "annotations", "quotakit.io/caller-trust"}, value: "callerTrust"},
		{kind: "NetworkPolicy", name: "quotakit-webhook", path: []string{"spec", "ingress", "0", "from"}, value: "controlPlaneFrom"},
		{kind: "ValidatingAdmissionPolicy", name: "quotakit-guard-namespace-labels", path: []string{"spec", "variables", "0", "expression"}, value: "allowedGroups", record: true},
	}, map[string]value{
		"image":               {expr: `"{{ .Values.image.repository }}:{{ .Values.image.tag }}"`},
		"controllerResources": {expr: "toYaml .Values.controller.resources", block: true},
		"webhookResources":    {expr: "toYaml .Values.webhook.resources", block: true},
		"callerTrust":         {expr: "{{ .Values.webhook.callerTrust | quote }}"},
		"controlPlaneFrom":    {expr: `include "quotakit.controlPlaneFrom" .`, block: true},
		"allowedGroups":       {expr: `{{ include "quotakit.allowedGroups" . | quote }}`},
	})
	def := Build{Dir: "default"}
	with := func(b Build, comp string) Build {
		b.Components = append(b.Components, comp)
		return b
	}
	webhook := Build{Dir: "webhook", CallerTrust: placeholderTrust}
	features := []feature{
		{file: "controller", build: def},
		{file: "cluster-quotas", cond: `include "quotakit.clusterQuotas" .`, build: with(def, "cluster-quotas"), base: def, hasBase: true},
		{file: "count-secrets", cond: ".Values.controller.countSecrets", build: with(def, "count-secrets"), base: def, hasBase: true},
		{file: "count-any-resource", cond: ".Values.controller.countAnyResource", build: with(def, "count-any-resource"), base: def, hasBase: true},
		{file: "guard-namespace-labels", cond: ".Values.guardNamespaceLabels.enabled", build: with(def, "guard-namespace-labels"), base: def, hasBase: true},
		{file: "webhook", cond: ".Values.webhook.enabled", build: webhook, base: with(def, "cluster-quotas"), hasBase: true},
	}
	// The trusts in the order the README lists them; kustomize applies
	// the caller-trust component before the components of a user's
	// overlay, so their flags come first.
	for _, t := range []string{"trust-client-certificates", "trust-control-plane-network", "insecure-trust-any-caller"} {
		b := webhook
		b.CallerTrust = TrustComponent(t, "")
		features = append(features, feature{
			file: t, cond: fmt.Sprintf(`and .Values.webhook.enabled (eq .Values.webhook.callerTrust %q)`, Trusts[t]),
			build: b, base: webhook, hasBase: true,
		})
	}
	features = append(features,
		feature{file: "enforce-namespaced-quota", cond: "and .Values.webhook.enabled .Values.webhook.enforceNamespacedQuota",
			build: with(webhook, "enforce-namespaced-quota"), base: webhook, hasBase: true},
		feature{file: "cert-manager", cond: `and .Values.webhook.enabled (eq .Values.webhook.certificate "cert-manager")`,
			build: Build{Dir: "cert-manager", CallerTrust: placeholderTrust}, base: webhook, hasBase: true},
	)
	for _, f := range features {
		if err := c.add(f); err != nil {
			return err
		}
	}
	// Helm never upgrades crds/: the CRD is a template, so that an
	// upgrade applies its new schema, and kept when the release is
	// uninstalled, so that uninstalling never deletes every ClusterQuota.
	c.annotate("CustomResourceDefinition", "helm.sh/resource-policy", "keep")
	if err := c.emitAll("quotakit", out); err != nil {
		return err
	}
	values, err := quotakitValues(c.defaults)
	if err != nil {
		return err
	}
	out["quotakit/values.yaml"] = values
	return nil
}

// generateConfiguration generates the chart
// quotakit-webhook-configuration: the ValidatingWebhookConfiguration.
func generateConfiguration(deployDir string, out map[string][]byte) error {
	c := newChart(deployDir, []field{
		{kind: "ValidatingWebhookConfiguration", name: "quotakit", path: []string{"webhooks", "*", "clientConfig", "caBundle"}, value: "caBundle"},
	}, map[string]value{
		"caBundle": {expr: `{{ required "caCrt: the PEM of the CA that signed the webhook's serving certificate (--set-file caCrt=ca.crt), or certificate=cert-manager" .Values.caCrt | b64enc }}`},
	})
	base := Build{Dir: "webhook/configuration/base"}
	for _, f := range []feature{
		{file: "webhook-configuration", build: base},
		{file: "ca-bundle", cond: `eq .Values.certificate "secret"`, build: Build{Dir: "webhook/configuration", CA: []byte("chartgen placeholder\n")}, base: base, hasBase: true},
		{file: "cert-manager", cond: `eq .Values.certificate "cert-manager"`, build: Build{Dir: "cert-manager/configuration"}, base: base, hasBase: true},
	} {
		if err := c.add(f); err != nil {
			return err
		}
	}
	if err := c.emitAll("quotakit-webhook-configuration", out); err != nil {
		return err
	}
	out["quotakit-webhook-configuration/values.yaml"] = []byte(configurationValues)
	return nil
}

// emitAll emits every template of c that holds an object.
func (c *chart) emitAll(name string, out map[string][]byte) error {
	for _, f := range c.files {
		if len(f.objs) == 0 {
			continue
		}
		text, err := c.emit(f)
		if err != nil {
			return err
		}
		out[name+"/templates/"+Generated+f.name+".yaml"] = []byte(text)
	}
	return nil
}

// celStringRE matches a string literal of CEL in single quotes.
var celStringRE = regexp.MustCompile(`'([^'\\]*)'`)

// quotakitValues returns the chart quotakit's values.yaml, its defaults
// those of the kustomize tree.
func quotakitValues(defaults map[string]any) ([]byte, error) {
	image, _ := defaults["image"].(string)
	i := strings.LastIndex(image, ":")
	if i < 0 {
		return nil, fmt.Errorf("chartgen: the image %q has no tag", image)
	}
	groups, _ := defaults["allowedGroups"].(string)
	var allowed []string
	for _, m := range celStringRE.FindAllStringSubmatch(groups, -1) {
		allowed = append(allowed, m[1])
	}
	if len(allowed) == 0 {
		return nil, fmt.Errorf("chartgen: no groups in the allowedGroups expression %q", groups)
	}
	block := func(v any, n int) (string, error) {
		data, err := yaml.Marshal(v)
		if err != nil {
			return "", err
		}
		pad := strings.Repeat(" ", n)
		return pad + strings.ReplaceAll(strings.TrimSuffix(string(data), "\n"), "\n", "\n"+pad), nil
	}
	cr, err := block(defaults["controllerResources"], 4)
	if err != nil {
		return nil, err
	}
	wr, err := block(defaults["webhookResources"], 4)
	if err != nil {
		return nil, err
	}
	ag, err := block(allowed, 4)
	if err != nil {
		return nil, err
	}
	return fmt.Appendf(nil, quotakitValuesText, image[:i], image[i+1:], cr, ag, wr), nil
}
