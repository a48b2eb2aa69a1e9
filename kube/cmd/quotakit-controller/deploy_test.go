package main

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// deployDir is the module's deploy directory, relative to this package.
const deployDir = "../../deploy"

// A variant is one kustomization of deploy/ that a user applies with
// `kubectl apply -k`, or an overlay of one with components, as a user
// writes it.
type variant struct {
	// name tells the variant apart in the test's output and its cache.
	name string
	// dir is the kustomization under deploy/ the variant starts from.
	dir string
	// kind says what the variant is for.
	kind variantKind
	// components are components of deploy/components that an overlay the
	// test writes adds to dir, as a user's kustomization.yaml would.
	components []string
	// caFile is set on variants that read the webhook's CA from
	// <dir>/ca.crt, which the user writes; the test writes one.
	caFile bool
	// trust is the component the webhook's caller-trust names, which the
	// user writes: one of trusts, or none for an install without the
	// webhook.
	trust string
	// callerTrust, when set, is the whole caller-trust component the test
	// writes instead, for the builds that must fail.
	callerTrust string
}

type variantKind int

const (
	// controllerOnly runs the controller without the webhook.
	controllerOnly variantKind = iota
	// serving runs the controller and serves the webhook, but does not
	// register it.
	serving
	// registration holds the ValidatingWebhookConfiguration and nothing
	// else, to be applied once a serving variant is ready.
	registration
)

// has reports whether v adds the component c.
func (v variant) has(c string) bool { return slices.Contains(v.components, c) }

// The components a user adds to an install, by the installs they apply to:
// the controller's to both, the webhook's to those that serve it; and the
// ways the webhook trusts its callers, one of which the webhook's install
// requires.
var (
	controllerComponents = []string{"count-secrets", "count-any-resource", "guard-namespace-labels"}
	webhookComponents    = []string{"enforce-namespaced-quota"}
	trusts               = []string{"trust-client-certificates", "trust-control-plane-network", "insecure-trust-any-caller"}
)

// controlPlaneCIDR is the control plane's range in the patch the README
// gives for trust-control-plane-network.
const controlPlaneCIDR = "172.16.0.32/28"

// callerTrustFor returns the caller-trust component a user writes for
// trust, as the README and deploy/webhook/kustomization.yaml say.
func callerTrustFor(trust string) string {
	k := "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\ncomponents:\n- ../../components/" + trust + "\n"
	if trust == "trust-control-plane-network" {
		k += `patches:
- target:
    kind: NetworkPolicy
    name: quotakit-webhook
  patch: |-
    - op: replace
      path: /spec/ingress/0/from
      value:
      - ipBlock:
          cidr: ` + controlPlaneCIDR + "\n"
	}
	return k
}

// variants are every kustomization deploy/ ships, and every combination of
// the components with the installs they apply to.
var variants = func() []variant {
	out := []variant{
		{name: "webhook/configuration", dir: "webhook/configuration", kind: registration, caFile: true},
		{name: "cert-manager/configuration", dir: "cert-manager/configuration", kind: registration},
	}
	add := func(dir, trust string, kind variantKind, optional []string, always ...string) {
		for mask := 0; mask < 1<<len(optional); mask++ {
			comps := slices.Clone(always)
			for i, c := range optional {
				if mask&(1<<i) != 0 {
					comps = append(comps, c)
				}
			}
			name := dir
			if trust != "" {
				name += "[" + trust + "]"
			}
			name = strings.Join(append([]string{name}, comps...), "+")
			out = append(out, variant{name: name, dir: dir, kind: kind, components: comps, trust: trust})
		}
	}
	add("default", "", controllerOnly, controllerComponents)
	add("default", "", controllerOnly, controllerComponents, "cluster-quotas")
	for _, dir := range []string{"webhook", "cert-manager"} {
		for _, trust := range trusts {
			add(dir, trust, serving, append(slices.Clone(webhookComponents), controllerComponents...))
		}
	}
	return out
}()

// rendered caches the objects of each variant, by name: rendering takes
// a while and the checks render them all.
var rendered struct {
	mu sync.Mutex
	// guarded by mu
	objs map[string][]runtime.Object
	ca   []byte
}

// build runs kustomize over v as `kubectl apply -k` does, from a
// temporary directory where the test writes what a user writes (an
// overlay with v's components, ca.crt), and returns its output.
func build(t *testing.T, v variant) (resmap.ResMap, error) {
	t.Helper()
	deploy, err := filepath.Abs(deployDir)
	if err != nil {
		t.Fatal(err)
	}
	if v.trust != "" || v.callerTrust != "" {
		ct := v.callerTrust
		if ct == "" {
			ct = callerTrustFor(v.trust)
		}
		deploy = deployWith(t, deploy, ct)
	}
	dir := filepath.Join(deploy, v.dir)
	switch {
	case len(v.components) > 0 || v.trust != "" || v.callerTrust != "":
		dir = t.TempDir()
		rel, err := filepath.Rel(dir, deploy)
		if err != nil {
			t.Fatal(err)
		}
		rel = filepath.ToSlash(rel)
		k := "resources:\n- " + rel + "/" + v.dir + "\ncomponents:\n"
		for _, c := range v.components {
			k += "- " + rel + "/components/" + c + "\n"
		}
		writeFile(t, filepath.Join(dir, "kustomization.yaml"), []byte(k))
	case v.caFile:
		// A copy, so that the test writes nothing into the repository.
		dir = filepath.Join(t.TempDir(), filepath.Base(v.dir))
		copyDir(t, filepath.Join(deploy, v.dir), dir)
		writeFile(t, filepath.Join(dir, "ca.crt"), testCA(t))
	}
	return krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
}

// copies holds the copies of deploy/ with a caller-trust component, by
// the component, made once for the test binary and removed by TestMain.
var copies struct {
	mu sync.Mutex
	// guarded by mu
	dir  string
	byCT map[string]string
}

func TestMain(m *testing.M) {
	code := m.Run()
	copies.mu.Lock()
	if copies.dir != "" {
		os.RemoveAll(copies.dir)
	}
	copies.mu.Unlock()
	os.Exit(code)
}

// deployWith returns a copy of the tree deploy with the caller-trust
// component ct, which the user writes in deploy/webhook/caller-trust.
func deployWith(t *testing.T, deploy, ct string) string {
	t.Helper()
	copies.mu.Lock()
	defer copies.mu.Unlock()
	if dir, ok := copies.byCT[ct]; ok {
		return dir
	}
	if copies.dir == "" {
		dir, err := os.MkdirTemp("", "quotakit-deploy-")
		if err != nil {
			t.Fatal(err)
		}
		copies.dir, copies.byCT = dir, map[string]string{}
	}
	dir := filepath.Join(copies.dir, strconv.Itoa(len(copies.byCT)), "deploy")
	copyDir(t, deploy, dir)
	if err := os.MkdirAll(filepath.Join(dir, "webhook", "caller-trust"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "webhook", "caller-trust", "kustomization.yaml"), []byte(ct))
	copies.byCT[ct] = dir
	return dir
}

// render builds v and decodes every object strictly with client-go's
// scheme: an unknown or duplicated field fails, and so does a kind the
// scheme does not know, except cert-manager's and the CRD, which are
// returned unstructured. The objects are shared: do not mutate them.
func render(t *testing.T, v variant) []runtime.Object {
	t.Helper()
	rendered.mu.Lock()
	defer rendered.mu.Unlock()
	if objs, ok := rendered.objs[v.name]; ok {
		return objs
	}
	m, err := build(t, v)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", v.name, err)
	}
	decoder := serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()
	var objs []runtime.Object
	for _, r := range m.Resources() {
		doc, err := r.AsYAML()
		if err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		obj, _, err := decoder.Decode(doc, nil, nil)
		if runtime.IsNotRegisteredError(err) {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(doc, &u.Object); err != nil {
				t.Fatalf("%s: %v", v.name, err)
			}
			if g := u.GroupVersionKind().Group; g != "cert-manager.io" && g != "apiextensions.k8s.io" {
				t.Errorf("%s: %s %s is of a kind neither client-go nor the test knows", v.name, u.GroupVersionKind(), u.GetName())
			}
			obj, err = u, nil
		}
		if err != nil {
			t.Errorf("%s: %v", v.name, err)
			continue
		}
		objs = append(objs, obj)
	}
	if rendered.objs == nil {
		rendered.objs = map[string][]runtime.Object{}
	}
	rendered.objs[v.name] = objs
	return objs
}

// testCA returns a PEM CA certificate, the same for every variant.
// rendered.mu must be held.
func testCA(t *testing.T) []byte {
	t.Helper()
	if rendered.ca == nil {
		certFile, _ := writeCert(t)
		b, err := os.ReadFile(certFile)
		if err != nil {
			t.Fatal(err)
		}
		rendered.ca = b
	}
	return rendered.ca
}

func writeFile(t *testing.T, name string, b []byte) {
	t.Helper()
	if err := os.WriteFile(name, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// copyDir copies the tree at from to to.
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// objectsOf returns the objects of type T among objs.
func objectsOf[T runtime.Object](objs []runtime.Object) []T {
	var out []T
	for _, o := range objs {
		if o, ok := o.(T); ok {
			out = append(out, o)
		}
	}
	return out
}

// one returns the only object of type T among objs of v, failing the
// test unless there is exactly one.
func one[T runtime.Object](t *testing.T, v variant, objs []runtime.Object) T {
	t.Helper()
	all := objectsOf[T](objs)
	if len(all) != 1 {
		var zero T
		t.Fatalf("%s: %d objects of type %T, want 1", v.name, len(all), zero)
	}
	return all[0]
}

// installs returns the variants a user runs the binary with.
func installs() []variant {
	var out []variant
	for _, v := range variants {
		if v.kind != registration {
			out = append(out, v)
		}
	}
	return out
}

// registrationFor returns the registration variant that goes with the
// serving variant v: cert-manager's own, or the plain one.
func registrationFor(v variant) variant {
	if v.dir == "cert-manager" {
		return variantNamed("cert-manager/configuration")
	}
	if v.kind != serving {
		panic("no registration for " + v.name)
	}
	return variantNamed("webhook/configuration")
}

// variantNamed returns the variant called name.
func variantNamed(name string) variant {
	for _, v := range variants {
		if v.name == name {
			return v
		}
	}
	panic("no variant " + name)
}

// A process is what one Deployment of a variant runs: its pods, as one
// quotakit-controller command line.
type process struct {
	dep *appsv1.Deployment
	// cfg is what the container's arguments say.
	cfg config
}

// name is the Deployment's.
func (p process) name() string { return p.dep.Name }

// container is the Deployment's only container.
func (p process) container() corev1.Container { return p.dep.Spec.Template.Spec.Containers[0] }

// args are the container's arguments as the kubelet passes them:
// $(NAME) references to the container's environment expanded, with
// expand giving the value of a variable that is not a literal.
func (p process) args(expand func(corev1.EnvVar) string) []string {
	c := p.container()
	env := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env[e.Name] = e.Value
		} else if expand != nil {
			env[e.Name] = expand(e)
		}
	}
	var out []string
	for _, a := range c.Args {
		out = append(out, os.Expand(strings.NewReplacer("$(", "${", ")", "}").Replace(a), func(name string) string { return env[name] }))
	}
	return out
}

// processes returns the Deployments of an install v, each with the
// configuration its arguments parse to, failing the test when they do not
// parse: a Deployment whose pods would exit 2.
func processes(t *testing.T, v variant, objs []runtime.Object) []process {
	t.Helper()
	var out []process
	for _, dep := range objectsOf[*appsv1.Deployment](objs) {
		p := process{dep: dep}
		if len(dep.Spec.Template.Spec.Containers) != 1 {
			t.Fatalf("%s: Deployment %s has %d containers, want 1", v.name, dep.Name, len(dep.Spec.Template.Spec.Containers))
		}
		cfg, err := parseFlags(p.args(testEnvValue), io.Discard)
		if err != nil {
			t.Fatalf("%s: Deployment %s: the arguments %q: %v", v.name, dep.Name, p.container().Args, err)
		}
		p.cfg = cfg
		out = append(out, p)
	}
	return out
}

// testEnvValue is the value the test gives an environment variable that
// the kubelet would read from a ConfigMap, a Secret or the pod: a number
// for a resource of the container.
func testEnvValue(e corev1.EnvVar) string {
	if e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil {
		return "536870912"
	}
	return "test-" + strings.ToLower(e.Name)
}

// processOf returns the process of v that runs the controller, or, with
// webhook, the one that serves the webhook.
func processOf(t *testing.T, v variant, objs []runtime.Object, webhook bool) process {
	t.Helper()
	var found []process
	for _, p := range processes(t, v, objs) {
		if (p.cfg.webhookAddr != "") == webhook && (p.cfg.controller != webhook) {
			found = append(found, p)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s: %d Deployments serving the webhook=%v, want 1", v.name, len(found), webhook)
	}
	return found[0]
}

// TestVariantsRender checks that every variant builds and holds what it
// is for: the controller's objects in each install, the webhook's
// Deployment and Service beside them in each serving one, the webhook
// configuration alone, and nowhere else, in each registration; and that
// each install runs the processes it is for, each under a ServiceAccount
// of its own.
func TestVariantsRender(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			objs := render(t, v)
			kinds := map[string]int{}
			for _, o := range objs {
				kinds[o.GetObjectKind().GroupVersionKind().Kind]++
			}
			want := map[string]int{}
			switch v.kind {
			case registration:
				want = map[string]int{"ValidatingWebhookConfiguration": 1}
			case controllerOnly, serving:
				want = map[string]int{
					"Namespace": 1, "PriorityClass": 1, "Role": 1, "RoleBinding": 1,
					"ServiceAccount": 1, "Deployment": 1, "PodDisruptionBudget": 1, "Service": 1, "NetworkPolicy": 1,
					// The controller's, quotakit-metrics-auth and
					// quotakit-metrics-reader; two bindings.
					"ClusterRole": 3, "ClusterRoleBinding": 2,
				}
				roles := 0
				if v.kind == serving || v.has("cluster-quotas") {
					// The CRDs of ClusterQuota and AppliedClusterQuota,
					// the controller's role for them, and the role
					// aggregated to view that lets a namespace's viewers
					// read the copies (no binding: aggregation).
					want["CustomResourceDefinition"] = 2
					roles++
					want["ClusterRole"]++
				}
				if v.kind == serving {
					// The webhook's ServiceAccount, role, metrics-auth
					// binding, Deployment, PodDisruptionBudget, Service,
					// metrics Service, NetworkPolicy and flow control.
					want["ServiceAccount"], want["Deployment"], want["PodDisruptionBudget"] = 2, 2, 2
					want["Service"], want["NetworkPolicy"] = 3, 2
					want["FlowSchema"], want["PriorityLevelConfiguration"] = 1, 1
					roles++
					want["ClusterRoleBinding"]++
				}
				for _, c := range []string{"enforce-namespaced-quota", "count-secrets", "count-any-resource"} {
					if v.has(c) {
						roles++
					}
				}
				if v.has("guard-namespace-labels") {
					want["ValidatingAdmissionPolicy"], want["ValidatingAdmissionPolicyBinding"] = 1, 1
				}
				want["ClusterRole"] += roles
				want["ClusterRoleBinding"] += roles
				if v.dir == "cert-manager" {
					want["Issuer"], want["Certificate"] = 2, 2
				}
			}
			for k, n := range want {
				if kinds[k] != n {
					t.Errorf("%d objects of kind %s, want %d", kinds[k], k, n)
				}
			}
			for k, n := range kinds {
				if want[k] == 0 {
					t.Errorf("%d objects of kind %s, want none", n, k)
				}
			}
			if v.kind == registration {
				return
			}
			sas := map[string]string{}
			for _, p := range processes(t, v, objs) {
				sa := p.dep.Spec.Template.Spec.ServiceAccountName
				if other, ok := sas[sa]; ok {
					t.Errorf("Deployments %s and %s share the ServiceAccount %s", other, p.name(), sa)
				}
				sas[sa] = p.name()
			}
			processOf(t, v, objs, false)
			if v.kind == serving {
				hook := processOf(t, v, objs, true)
				// The webhook enforces what it is there for: a webhook
				// that enforces nothing would only add a fail-closed call.
				if !hook.cfg.clusterQuotas || hook.cfg.enforceNamespacedQuota != v.has("enforce-namespaced-quota") {
					t.Errorf("the webhook runs with -cluster-quotas=%v -enforce-namespaced-quota=%v", hook.cfg.clusterQuotas, hook.cfg.enforceNamespacedQuota)
				}
				// It trusts its callers as the component chosen says,
				// and its pods say so.
				want := map[string]string{
					"trust-client-certificates":   trustClientCertificates,
					"trust-control-plane-network": trustNetworkPolicy,
					"insecure-trust-any-caller":   trustInsecureAnyCaller,
				}[v.trust]
				if got := hook.cfg.callerTrust; got != want || hook.dep.Spec.Template.Annotations["quotakit.io/caller-trust"] != want {
					t.Errorf("the webhook runs with -caller-trust=%s, its pods are annotated %q; want %s", got, hook.dep.Spec.Template.Annotations["quotakit.io/caller-trust"], want)
				}
			}
		})
	}
}

// TestCombinationsThatCannotRunDoNotRender checks that a component added
// where it cannot work fails the build, with a message that says what is
// missing, rather than render pods that exit 2 or do nothing.
func TestCombinationsThatCannotRunDoNotRender(t *testing.T) {
	for _, tt := range []struct {
		v    variant
		want string
	}{
		// The flag would make the controller alone exit 2.
		{variant{name: "default+enforce-namespaced-quota", dir: "default", components: []string{"enforce-namespaced-quota"}}, "nothing selected by Deployment.[noVer].apps/quotakit-webhook"},
		// The webhook includes it already.
		{variant{name: "webhook+cluster-quotas", dir: "webhook", trust: "insecure-trust-any-caller", components: []string{"cluster-quotas"}}, "already registered id"},
		// No open door by default: the webhook does not build without a
		// choice of how it trusts its callers, ...
		{variant{name: "webhook", dir: "webhook"}, "webhook/caller-trust"},
		{variant{name: "cert-manager", dir: "cert-manager"}, "webhook/caller-trust"},
		// ... nor with a caller-trust that names none, ...
		{variant{name: "webhook[caller-trust without a trust]", dir: "webhook", callerTrust: "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\ncomponents:\n- ../../components/count-secrets\n"}, "nothing selected by ConfigMap.[noVer].[noGrp]/quotakit-webhook-caller-trust"},
		// ... or two.
		{variant{name: "webhook[two trusts]", dir: "webhook", callerTrust: "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\ncomponents:\n- ../../components/trust-client-certificates\n- ../../components/insecure-trust-any-caller\n"}, "already registered id"},
		// A trust without the webhook's Deployment.
		{variant{name: "default+trust-client-certificates", dir: "default", components: []string{"trust-client-certificates"}}, "nothing selected by Deployment.[noVer].apps/quotakit-webhook"},
		{variant{name: "default+insecure-trust-any-caller", dir: "default", components: []string{"insecure-trust-any-caller"}}, "nothing selected by Deployment.[noVer].apps/quotakit-webhook"},
	} {
		t.Run(tt.v.name, func(t *testing.T) {
			_, err := build(t, tt.v)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("kustomize build = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestInstallOrder checks the order that keeps a fail-closed webhook from
// ever existing without a replica to answer it: no variant holds both the
// Deployment and the webhook configuration (the configuration is applied
// after `kubectl rollout status`), and the configuration's CA is the one
// the serving certificate comes from.
func TestInstallOrder(t *testing.T) {
	for _, v := range variants {
		objs := render(t, v)
		if len(objectsOf[*appsv1.Deployment](objs)) > 0 && len(objectsOf[*admissionregistrationv1.ValidatingWebhookConfiguration](objs)) > 0 {
			t.Errorf("deploy/%s holds both the Deployment and the ValidatingWebhookConfiguration: the configuration would exist before a replica serves", v.dir)
		}
	}
	t.Run("plain", func(t *testing.T) {
		v := variantNamed("webhook/configuration")
		hook := one[*admissionregistrationv1.ValidatingWebhookConfiguration](t, v, render(t, v))
		for _, w := range hook.Webhooks {
			block, _ := pem.Decode(w.ClientConfig.CABundle)
			if block == nil {
				t.Fatalf("webhook %s: caBundle %q is not PEM", w.Name, w.ClientConfig.CABundle)
			}
			if _, err := x509.ParseCertificate(block.Bytes); err != nil {
				t.Errorf("webhook %s: caBundle: %v", w.Name, err)
			}
			rendered.mu.Lock()
			ca := rendered.ca
			rendered.mu.Unlock()
			if string(w.ClientConfig.CABundle) != string(ca) {
				t.Errorf("webhook %s: caBundle is not ca.crt", w.Name)
			}
		}
	})
	t.Run("cert-manager", func(t *testing.T) {
		v := variantNamed("cert-manager[trust-client-certificates]")
		objs := render(t, v)
		r := registrationFor(v)
		hook := one[*admissionregistrationv1.ValidatingWebhookConfiguration](t, r, render(t, r))
		from := hook.Annotations["cert-manager.io/inject-ca-from"]
		ns, name, _ := strings.Cut(from, "/")
		var cert *unstructured.Unstructured
		for _, u := range objectsOf[*unstructured.Unstructured](objs) {
			if u.GetKind() == "Certificate" && u.GetNamespace() == ns && u.GetName() == name {
				cert = u
			}
		}
		if cert == nil {
			t.Fatalf("cert-manager.io/inject-ca-from %q names no Certificate of deploy/%s", from, v.dir)
		}
		secret, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
		if got := webhookSecret(t, v, objs); secret != got {
			t.Errorf("the Certificate writes Secret %q, the webhook serves Secret %q", secret, got)
		}
		dnsNames, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
		for _, w := range hook.Webhooks {
			svc := w.ClientConfig.Service
			if host := svc.Name + "." + svc.Namespace + ".svc"; !slices.Contains(dnsNames, host) {
				t.Errorf("the Certificate's dnsNames %q lack %s, which kube-apiserver verifies", dnsNames, host)
			}
			if len(w.ClientConfig.CABundle) != 0 {
				t.Errorf("webhook %s: a caBundle in the cert-manager variant; the CA injector sets it", w.Name)
			}
		}
	})
}

// webhookSecret returns the Secret the webhook's Deployment of v mounts
// where -tls-cert-file points.
func webhookSecret(t *testing.T, v variant, objs []runtime.Object) string {
	t.Helper()
	p := processOf(t, v, objs, true)
	file := p.cfg.tlsCertFile
	if s := mountedFrom(p, file); s != nil && s.Secret != nil {
		return s.Secret.SecretName
	}
	t.Fatalf("%s: -tls-cert-file %q is not in a mounted Secret", v.name, file)
	return ""
}

// mountedFrom returns the volume of p's pods mounted where file is, or
// nil.
func mountedFrom(p process, file string) *corev1.VolumeSource {
	for _, m := range p.container().VolumeMounts {
		if strings.HasPrefix(file, strings.TrimSuffix(m.MountPath, "/")+"/") {
			for _, vol := range p.dep.Spec.Template.Spec.Volumes {
				if vol.Name == m.Name {
					return &vol.VolumeSource
				}
			}
		}
	}
	return nil
}

// flagValue returns the value args give flag name in the form -name=value,
// or "" if they do not.
func flagValue(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(strings.TrimLeft(a, "-"), name+"="); ok {
			return v
		}
	}
	return ""
}

// TestDeploymentArgs checks, for every Deployment of every install, that
// the container's arguments are flags the command defines and accepts
// together, with ports, probes and Services where the flags put them; that
// the controller's Deployment runs no webhook and the webhook's no
// controller; and that the Lease is in the Deployments' namespace.
func TestDeploymentArgs(t *testing.T) {
	for _, v := range installs() {
		t.Run(v.name, func(t *testing.T) {
			objs := render(t, v)
			for _, p := range processes(t, v, objs) {
				checkProcessArgs(t, v, objs, p)
			}
		})
	}
}

func checkProcessArgs(t *testing.T, v variant, objs []runtime.Object, p process) {
	t.Helper()
	dep, c, cfg := p.dep, p.container(), p.cfg
	if cfg.controller && cfg.webhookAddr != "" {
		t.Errorf("Deployment %s runs the controller and the webhook in one pod, under one ServiceAccount", dep.Name)
	}
	if cfg.controller && cfg.leaseNamespace != dep.Namespace {
		t.Errorf("Deployment %s: lease namespace %q, want the Deployment's %q", dep.Name, cfg.leaseNamespace, dep.Namespace)
	}
	port := func(name string) string {
		for _, p := range c.Ports {
			if p.Name == name {
				return ":" + strconv.Itoa(int(p.ContainerPort))
			}
		}
		return ""
	}
	type portFlag struct{ port, flag string }
	ports := []portFlag{{"probes", cfg.probeAddr}}
	if cfg.webhookAddr != "" {
		ports = append(ports, portFlag{"webhook", cfg.webhookAddr})
	} else if port("webhook") != "" {
		t.Errorf("Deployment %s has a webhook port but no -webhook-addr", dep.Name)
	}
	// /metrics is either served over HTTPS behind authentication, or
	// bound to the pod's loopback where nobody else reaches it.
	if cfg.metricsSecure {
		ports = append(ports, portFlag{"metrics", cfg.metricsAddr})
	} else if host, _, err := net.SplitHostPort(cfg.metricsAddr); cfg.metricsAddr != "0" && (err != nil || !net.ParseIP(host).IsLoopback()) {
		t.Errorf("Deployment %s: -metrics-bind-address=%s serves plain HTTP beyond the pod; add -metrics-secure or bind to 127.0.0.1", dep.Name, cfg.metricsAddr)
	}
	for _, tt := range ports {
		if got := port(tt.port); got != tt.flag {
			t.Errorf("Deployment %s: port %s = %q, flag says %q", dep.Name, tt.port, got, tt.flag)
		}
	}
	if c.LivenessProbe.HTTPGet.Path != "/healthz" || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("Deployment %s: probes at %s and %s, want /healthz and /readyz", dep.Name, c.LivenessProbe.HTTPGet.Path, c.ReadinessProbe.HTTPGet.Path)
	}
	for _, pr := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
		if port(pr.HTTPGet.Port.StrVal) != cfg.probeAddr {
			t.Errorf("Deployment %s: probe %s on port %s, not -health-probe-bind-address=%s", dep.Name, pr.HTTPGet.Path, pr.HTTPGet.Port.String(), cfg.probeAddr)
		}
	}
	pods := labels.Set(dep.Spec.Template.Labels)
	var selected bool
	for _, svc := range objectsOf[*corev1.Service](objs) {
		if !labels.SelectorFromSet(svc.Spec.Selector).Matches(pods) {
			continue
		}
		selected = true
		for _, sp := range svc.Spec.Ports {
			if port(sp.TargetPort.StrVal) == "" {
				t.Errorf("Service %s selects Deployment %s, whose container has no port %s", svc.Name, dep.Name, sp.TargetPort.String())
			}
		}
	}
	if !selected {
		t.Errorf("no Service selects Deployment %s (its metrics)", dep.Name)
	}
}

// TestWebhookService checks that kube-apiserver's calls reach the pods that
// serve the webhook, and only those: the configuration's Service and path
// are the webhook Deployment's, and the Service selects no pod of the
// controller's Deployment, of this install or of deploy/default.
func TestWebhookService(t *testing.T) {
	controller := variantNamed("default")
	plainPods := labels.Set(processOf(t, controller, render(t, controller), false).dep.Spec.Template.Labels)
	for _, v := range installs() {
		if v.kind != serving {
			continue
		}
		t.Run(v.name, func(t *testing.T) {
			objs := render(t, v)
			controllerPods := labels.Set(processOf(t, v, objs, false).dep.Spec.Template.Labels)
			webhookPods := labels.Set(processOf(t, v, objs, true).dep.Spec.Template.Labels)
			r := registrationFor(v)
			hook := one[*admissionregistrationv1.ValidatingWebhookConfiguration](t, r, render(t, r))
			for _, w := range hook.Webhooks {
				ref := w.ClientConfig.Service
				var svc *corev1.Service
				for _, s := range objectsOf[*corev1.Service](objs) {
					if s.Namespace == ref.Namespace && s.Name == ref.Name {
						svc = s
					}
				}
				if svc == nil {
					t.Fatalf("webhook %s calls Service %s/%s, which %s does not create", w.Name, ref.Namespace, ref.Name, v.name)
				}
				if ref.Path == nil || *ref.Path != "/validate" {
					t.Errorf("webhook %s: path %v, want /validate", w.Name, ref.Path)
				}
				var found bool
				for _, p := range svc.Spec.Ports {
					if ref.Port != nil && p.Port == *ref.Port {
						found = true
						if p.TargetPort.String() != "webhook" {
							t.Errorf("Service %s: port %d leads to %s, want the container port named webhook", svc.Name, p.Port, p.TargetPort.String())
						}
					}
				}
				if !found {
					t.Errorf("webhook %s calls port %v, which Service %s does not have", w.Name, ref.Port, svc.Name)
				}
				sel := labels.SelectorFromSet(svc.Spec.Selector)
				if !sel.Matches(webhookPods) {
					t.Errorf("Service %s does not select the webhook's pods", svc.Name)
				}
				if sel.Matches(plainPods) || sel.Matches(controllerPods) {
					t.Errorf("Service %s selects the controller's pods, which do not serve the webhook", svc.Name)
				}
			}
		})
	}
}

// TestWebhookScope checks what reaches the webhook: only namespaces that
// opt in, never the cluster's own or quotakit's; every rule namespaced;
// subresources that change usage named; the cluster's machinery and
// reviews filtered out by matchConditions; failurePolicy Fail only with
// that opt-in scope.
func TestWebhookScope(t *testing.T) {
	controller := variantNamed("default")
	own := processOf(t, controller, render(t, controller), false).dep.Namespace
	for _, v := range variants {
		if v.kind != registration {
			continue
		}
		t.Run(v.name, func(t *testing.T) {
			hook := one[*admissionregistrationv1.ValidatingWebhookConfiguration](t, v, render(t, v))
			if len(hook.Webhooks) == 0 {
				t.Fatal("no webhooks")
			}
			for _, w := range hook.Webhooks {
				sel, err := metav1.LabelSelectorAsSelector(w.NamespaceSelector)
				if err != nil || w.NamespaceSelector == nil {
					t.Fatalf("webhook %s: namespaceSelector %v: %v", w.Name, w.NamespaceSelector, err)
				}
				for _, tt := range []struct {
					ns     string
					optIn  bool
					wanted bool
				}{
					{"kube-node-lease", true, false},
					{"kube-system", true, false},
					{"kube-public", true, false},
					{own, true, false},
					{"tenant", false, false},
					{"tenant", true, true},
				} {
					l := labels.Set{"kubernetes.io/metadata.name": tt.ns}
					if tt.optIn {
						l["quotakit.io/enforce"] = "true"
					}
					if got := sel.Matches(l); got != tt.wanted {
						t.Errorf("webhook %s: namespace %v sent = %v, want %v", w.Name, l, got, tt.wanted)
					}
				}

				for _, r := range w.Rules {
					if r.Scope == nil || *r.Scope != admissionregistrationv1.NamespacedScope {
						t.Errorf("webhook %s: rule %v is not limited to namespaced resources", w.Name, r)
					}
					for _, op := range r.Operations {
						if op != admissionregistrationv1.Create && op != admissionregistrationv1.Update {
							t.Errorf("webhook %s: rule %v sends %s, which never changes usage", w.Name, r, op)
						}
					}
					if slices.Contains(r.Resources, "*/*") {
						t.Errorf("webhook %s: rule %v sends every subresource", w.Name, r)
					}
				}
				for _, tt := range []struct {
					op                admissionregistrationv1.OperationType
					group, resource   string
					wantSent, checked bool
				}{
					{op: admissionregistrationv1.Create, resource: "pods", wantSent: true},
					{op: admissionregistrationv1.Create, group: "example.com", resource: "widgets", wantSent: true},
					{op: admissionregistrationv1.Update, resource: "pods/resize", wantSent: true},
					{op: admissionregistrationv1.Update, resource: "persistentvolumeclaims/status", wantSent: true},
					{op: admissionregistrationv1.Update, resource: "services", wantSent: true},
					{op: admissionregistrationv1.Update, resource: "pods/status"},
					{op: admissionregistrationv1.Update, resource: "configmaps"},
					{op: admissionregistrationv1.Delete, resource: "pods"},
				} {
					if got := rulesMatch(w.Rules, tt.op, tt.group, tt.resource); got != tt.wantSent {
						t.Errorf("webhook %s: rules send %s %s.%s = %v, want %v", w.Name, tt.op, tt.resource, tt.group, got, tt.wantSent)
					}
				}

				for _, tt := range []struct {
					group, resource string
					want            bool
				}{
					{"coordination.k8s.io", "leases", false},
					{"", "events", false},
					{"events.k8s.io", "events", false},
					{"", "endpoints", false},
					{"discovery.k8s.io", "endpointslices", false},
					{"authorization.k8s.io", "localsubjectaccessreviews", false},
					{"authorization.k8s.io", "subjectaccessreviews", false},
					{"authentication.k8s.io", "tokenreviews", false},
					{"", "pods", true},
					{"", "configmaps", true},
					{"", "services", true},
					{"", "persistentvolumeclaims", true},
					{"apps", "deployments", true},
					{"resource.k8s.io", "resourceclaims", true},
					{"example.com", "leases", true},
					// A custom resource is an object, whatever its name.
					{"example.com", "widgetreviews", true},
					{"authorization.k8s.io", "selfsubjectrulesreviews", false},
					{"authentication.k8s.io", "selfsubjectreviews", false},
				} {
					got, err := conditionsMatch(w.MatchConditions, tt.group, tt.resource)
					if err != nil {
						t.Fatalf("webhook %s: %v", w.Name, err)
					}
					if got != tt.want {
						t.Errorf("webhook %s: matchConditions send %s.%s = %v, want %v", w.Name, tt.resource, tt.group, got, tt.want)
					}
				}

				optIn := false
				for _, e := range w.NamespaceSelector.MatchExpressions {
					optIn = optIn || (e.Key == "quotakit.io/enforce" && e.Operator == metav1.LabelSelectorOpIn)
				}
				if w.FailurePolicy == nil || (*w.FailurePolicy == admissionregistrationv1.Fail && !optIn) {
					t.Errorf("webhook %s: failurePolicy %v without an opt-in namespaceSelector", w.Name, w.FailurePolicy)
				}
				if w.SideEffects == nil || *w.SideEffects != admissionregistrationv1.SideEffectClassNoneOnDryRun {
					t.Errorf("webhook %s: sideEffects %v, want NoneOnDryRun (dry runs are never charged)", w.Name, w.SideEffects)
				}
				if w.TimeoutSeconds == nil || float64(*w.TimeoutSeconds) <= webhookTimeout.Seconds() || *w.TimeoutSeconds > 30 {
					t.Errorf("webhook %s: timeoutSeconds %v, want above the command's check timeout %v and at most 30", w.Name, w.TimeoutSeconds, webhookTimeout)
				}
			}
		})
	}
}

// rulesMatch reports whether rules send op on resource ("name" or
// "name/subresource") of group, as kube-apiserver matches them: "*" is
// any resource and no subresource, a subresource must be named.
func rulesMatch(rules []admissionregistrationv1.RuleWithOperations, op admissionregistrationv1.OperationType, group, resource string) bool {
	res, sub, _ := strings.Cut(resource, "/")
	for _, r := range rules {
		if !slices.Contains(r.Operations, op) && !slices.Contains(r.Operations, admissionregistrationv1.OperationAll) {
			continue
		}
		if !slices.Contains(r.APIGroups, "*") && !slices.Contains(r.APIGroups, group) {
			continue
		}
		for _, name := range r.Resources {
			rr, rs, _ := strings.Cut(name, "/")
			if (rr == "*" || rr == res) && (rs == sub || (rs == "*" && sub != "")) {
				return true
			}
		}
	}
	return false
}

// The form of matchConditions expression that conditionsMatch evaluates.
// The test does not embed a CEL interpreter; a condition of another form
// fails it, to be added here.
var notInList = regexp.MustCompile(`^!\(\(request\.resource\.group \+ "/" \+ request\.resource\.resource\) in \[([^\]]*)\]\)$`)

// conditionsMatch reports whether every condition holds for a request on
// group/resource, as kube-apiserver requires before it sends a request.
func conditionsMatch(conds []admissionregistrationv1.MatchCondition, group, resource string) (bool, error) {
	for _, c := range conds {
		var holds bool
		if m := notInList.FindStringSubmatch(c.Expression); m != nil {
			var list []string
			if err := yaml.Unmarshal([]byte("["+m[1]+"]"), &list); err != nil {
				return false, fmt.Errorf("condition %s: %w", c.Name, err)
			}
			holds = !slices.Contains(list, group+"/"+resource)
		} else {
			return false, fmt.Errorf("condition %s: the test cannot evaluate %q", c.Name, c.Expression)
		}
		if !holds {
			return false, nil
		}
	}
	return true, nil
}

// TestAvailability checks that every Deployment of every install keeps a
// replica running through voluntary disruptions, node failures and
// rollouts, within bounded memory, at a priority of its own, and drains
// before it is killed.
func TestAvailability(t *testing.T) {
	for _, v := range installs() {
		t.Run(v.name, func(t *testing.T) {
			objs := render(t, v)
			for _, p := range processes(t, v, objs) {
				t.Run(p.name(), func(t *testing.T) { checkAvailability(t, v, objs, p) })
			}
		})
	}
}

func checkAvailability(t *testing.T, v variant, objs []runtime.Object, p process) {
	dep := p.dep
	pods := labels.Set(dep.Spec.Template.Labels)
	spec := dep.Spec.Template.Spec
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 2 {
		t.Errorf("replicas = %v, want 2", dep.Spec.Replicas)
	}
	if ru := dep.Spec.Strategy.RollingUpdate; ru == nil || ru.MaxUnavailable == nil || ru.MaxUnavailable.IntValue() != 0 {
		t.Errorf("rolling update %+v: a rollout may take a replica down before its successor is ready", ru)
	}
	var pdbs []*policyv1.PodDisruptionBudget
	for _, pdb := range objectsOf[*policyv1.PodDisruptionBudget](objs) {
		if sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err == nil && sel.Matches(pods) && pdb.Namespace == dep.Namespace {
			pdbs = append(pdbs, pdb)
		}
	}
	if len(pdbs) != 1 {
		t.Fatalf("%d PodDisruptionBudgets select the Deployment's pods, want 1", len(pdbs))
	}
	if pdb := pdbs[0]; pdb.Spec.MinAvailable == nil || *pdb.Spec.MinAvailable != intstr.FromInt32(1) || pdb.Spec.MaxUnavailable != nil {
		t.Errorf("PodDisruptionBudget minAvailable %v, maxUnavailable %v, want minAvailable 1", pdb.Spec.MinAvailable, pdb.Spec.MaxUnavailable)
	}

	spread := false
	for _, c := range spec.TopologySpreadConstraints {
		sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
		if err == nil && sel.Matches(pods) && c.TopologyKey == corev1.LabelHostname && c.WhenUnsatisfiable == corev1.DoNotSchedule && c.MaxSkew == 1 {
			spread = true
		}
	}
	if a := spec.Affinity; a != nil && a.PodAntiAffinity != nil {
		for _, term := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
			spread = spread || (err == nil && sel.Matches(pods) && term.TopologyKey == corev1.LabelHostname)
		}
	}
	if !spread {
		t.Error("nothing keeps two replicas off one node (a kubernetes.io/hostname spread or anti-affinity)")
	}

	pc := one[*schedulingv1.PriorityClass](t, v, objs)
	if spec.PriorityClassName != pc.Name || strings.HasPrefix(pc.Name, "system-") || pc.Value <= 0 || pc.Value > 1_000_000_000 || pc.GlobalDefault {
		t.Errorf("priorityClassName %q, PriorityClass %s of value %d (global default %v): want the shipped class, high but below the system classes", spec.PriorityClassName, pc.Name, pc.Value, pc.GlobalDefault)
	}

	c := spec.Containers[0]
	limit, ok := c.Resources.Limits[corev1.ResourceMemory]
	if !ok || c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
		t.Errorf("resources %+v: want CPU and memory requests and a memory limit", c.Resources)
	}
	// The Go runtime's soft limit leaves headroom under the container's:
	// -memory-limit is the container's limit in bytes, and nothing sets
	// GOMEMLIMIT, which would win.
	var memLimit bool
	for _, e := range c.Env {
		if e.Name == "GOMEMLIMIT" {
			t.Errorf("GOMEMLIMIT is set (%+v): it would override -memory-limit's headroom", e)
		}
		if ref := "$(" + e.Name + ")"; e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil && slices.Contains(c.Args, "-memory-limit="+ref) {
			r := e.ValueFrom.ResourceFieldRef
			memLimit = r.Resource == "limits.memory" && (r.ContainerName == "" || r.ContainerName == c.Name) && r.Divisor.Value() == 1
		}
	}
	if !memLimit || limit.IsZero() {
		t.Error("-memory-limit is not the container's memory limit in bytes")
	}
	if got := goMemoryLimit(limit.Value(), ""); float64(got) > 0.9*float64(limit.Value()) {
		t.Errorf("the Go runtime's soft limit %d leaves less than 10%% of the container's %d", got, limit.Value())
	}

	// SIGTERM: readiness fails for -shutdown-delay, reviews in flight
	// take up to the webhook's timeout, the servers get 5s to close,
	// then the lease is released; the kubelet must wait for all of it.
	delay := 10 * time.Second // -shutdown-delay's default
	if s := flagValue(c.Args, "shutdown-delay"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("-shutdown-delay=%s: %v", s, err)
		}
		delay = d
	}
	drain := delay + 5*time.Second
	if p.cfg.webhookAddr != "" {
		r := registrationFor(v)
		for _, w := range one[*admissionregistrationv1.ValidatingWebhookConfiguration](t, r, render(t, r)).Webhooks {
			drain += time.Duration(*w.TimeoutSeconds) * time.Second
		}
	}
	if spec.TerminationGracePeriodSeconds == nil || time.Duration(*spec.TerminationGracePeriodSeconds)*time.Second < drain {
		t.Errorf("terminationGracePeriodSeconds %v is shorter than the drain (%v)", spec.TerminationGracePeriodSeconds, drain)
	}

	psc, sc := spec.SecurityContext, c.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext %+v: want runAsNonRoot and the RuntimeDefault seccomp profile", psc)
	}
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container securityContext %+v: want a read-only root, no privilege escalation, every capability dropped", sc)
	}
}

// TestNetworkPolicies checks that, in every install, the controller's
// pods admit ingress only on the metrics port, from namespaces labelled
// for monitoring, and the webhook's on the metrics port and the webhook's
// port, and nothing else but what NetworkPolicy always allows.
func TestNetworkPolicies(t *testing.T) {
	for _, v := range installs() {
		t.Run(v.name, func(t *testing.T) {
			objs := render(t, v)
			for _, p := range processes(t, v, objs) {
				admitted := admittedPorts(t, objs, p)
				if len(admitted["metrics"]) == 0 || (len(admitted["webhook"]) > 0) != (p.cfg.webhookAddr != "") {
					t.Errorf("Deployment %s: ports admitted %v; want metrics, and webhook exactly where it is served", p.name(), admitted)
				}
				if p.cfg.callerTrust != trustNetworkPolicy {
					continue
				}
				// The network is the trust: the webhook's port is
				// admitted from the control plane's addresses alone.
				for _, peer := range admitted["webhook"] {
					if peer.IPBlock == nil || peer.IPBlock.CIDR != controlPlaneCIDR || len(peer.IPBlock.Except) > 0 || peer.PodSelector != nil || peer.NamespaceSelector != nil {
						t.Errorf("Deployment %s trusts the network, and its webhook port is admitted from %+v; want only %s", p.name(), peer, controlPlaneCIDR)
					}
				}
			}
		})
	}
}

// admittedPorts returns the ports that the NetworkPolicies of objs admit
// to p's pods, by name, checking that every policy that selects them
// isolates ingress, names its ports, and admits the metrics port only
// from labelled namespaces.
func admittedPorts(t *testing.T, objs []runtime.Object, p process) map[string][]networkingv1.NetworkPolicyPeer {
	t.Helper()
	pods := labels.Set(p.dep.Spec.Template.Labels)
	admitted := map[string][]networkingv1.NetworkPolicyPeer{}
	for _, np := range objectsOf[*networkingv1.NetworkPolicy](objs) {
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil || np.Namespace != p.dep.Namespace || !sel.Matches(pods) {
			continue
		}
		if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
			t.Errorf("NetworkPolicy %s does not isolate ingress", np.Name)
		}
		for _, rule := range np.Spec.Ingress {
			if len(rule.Ports) == 0 {
				t.Errorf("NetworkPolicy %s admits every port", np.Name)
			}
			for _, port := range rule.Ports {
				name := port.Port.String()
				from := rule.From
				if len(from) == 0 {
					// No peer is every peer.
					from = []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0"}}, {IPBlock: &networkingv1.IPBlock{CIDR: "::/0"}}}
				}
				admitted[name] = append(admitted[name], from...)
				switch name {
				case "webhook":
				case "metrics":
					for _, peer := range rule.From {
						if peer.NamespaceSelector == nil || len(peer.NamespaceSelector.MatchLabels)+len(peer.NamespaceSelector.MatchExpressions) == 0 || peer.IPBlock != nil {
							t.Errorf("NetworkPolicy %s admits the metrics port from %+v, not from labelled namespaces", np.Name, peer)
						}
					}
					if len(rule.From) == 0 {
						t.Errorf("NetworkPolicy %s admits the metrics port from anywhere", np.Name)
					}
				default:
					t.Errorf("NetworkPolicy %s admits port %s", np.Name, name)
				}
			}
		}
	}
	return admitted
}

// TestFlowControl checks that the webhook's requests have a priority
// level of their own, matched by its ServiceAccount ahead of the
// built-in schemas; TestRolesMatchCalls checks that it matches every
// request the webhook makes.
func TestFlowControl(t *testing.T) {
	for _, v := range installs() {
		if v.kind != serving {
			continue
		}
		t.Run(v.name, func(t *testing.T) {
			objs := render(t, v)
			fs := one[*flowcontrolv1.FlowSchema](t, v, objs)
			plc := one[*flowcontrolv1.PriorityLevelConfiguration](t, v, objs)
			if fs.Spec.PriorityLevelConfiguration.Name != plc.Name || plc.Spec.Type != flowcontrolv1.PriorityLevelEnablementLimited {
				t.Errorf("FlowSchema %s uses priority level %s; want %s, limited", fs.Name, fs.Spec.PriorityLevelConfiguration.Name, plc.Name)
			}
			// Ahead of the built-in service-accounts schema.
			if fs.Spec.MatchingPrecedence >= 9000 {
				t.Errorf("matchingPrecedence %d: the built-in service-accounts schema (9000) would match first", fs.Spec.MatchingPrecedence)
			}
			hook := processOf(t, v, objs, true)
			if !flowMatches(fs, hook, call{verb: "update", gr: schema.GroupResource{Group: "quota.quotakit.io", Resource: "clusterquotas"}, sub: "status"}) {
				t.Error("the FlowSchema does not match the webhook's clusterquotas/status updates")
			}
		})
	}
}

// flowMatches reports whether fs matches c made by p's ServiceAccount, as
// kube-apiserver matches a request to a FlowSchema's rules.
func flowMatches(fs *flowcontrolv1.FlowSchema, p process, c call) bool {
	sa := p.dep.Spec.Template.Spec.ServiceAccountName
	resource := c.gr.Resource
	if c.sub != "" {
		resource += "/" + c.sub
	}
	match := func(list []string, v string) bool { return slices.Contains(list, "*") || slices.Contains(list, v) }
	for _, r := range fs.Spec.Rules {
		subject := slices.ContainsFunc(r.Subjects, func(s flowcontrolv1.Subject) bool {
			return s.ServiceAccount != nil && (s.ServiceAccount.Name == sa || s.ServiceAccount.Name == "*") && s.ServiceAccount.Namespace == p.dep.Namespace
		})
		if !subject {
			continue
		}
		for _, rr := range r.ResourceRules {
			scope := rr.ClusterScope
			if c.namespaced {
				scope = len(rr.Namespaces) > 0
			}
			if scope && match(rr.Verbs, c.verb) && match(rr.APIGroups, c.gr.Group) && match(rr.Resources, resource) {
				return true
			}
		}
	}
	return false
}

// TestMetricsRBAC checks the RBAC of secure metrics: where a Deployment
// serves /metrics with -metrics-secure, its ServiceAccount may create
// TokenReviews and SubjectAccessReviews, and a quotakit-metrics-reader
// ClusterRole allows a scraper to get /metrics.
func TestMetricsRBAC(t *testing.T) {
	for _, v := range installs() {
		t.Run(v.name, func(t *testing.T) {
			objs := render(t, v)
			for _, p := range processes(t, v, objs) {
				if !p.cfg.metricsSecure {
					continue
				}
				cluster, _ := boundRules(t, v, objs, p)
				for _, gr := range [][2]string{{"authentication.k8s.io", "tokenreviews"}, {"authorization.k8s.io", "subjectaccessreviews"}} {
					if !allowed(cluster, "create", gr[0], gr[1]) {
						t.Errorf("the ServiceAccount of %s may not create %s.%s, which -metrics-secure needs", p.name(), gr[1], gr[0])
					}
				}
			}
			var reader bool
			for _, cr := range objectsOf[*rbacv1.ClusterRole](objs) {
				if cr.Name != "quotakit-metrics-reader" {
					continue
				}
				for _, r := range cr.Rules {
					reader = reader || (slices.Contains(r.NonResourceURLs, "/metrics") && slices.Contains(r.Verbs, "get"))
				}
			}
			if !reader {
				t.Error("no ClusterRole quotakit-metrics-reader allowing get /metrics")
			}
		})
	}
}

// boundRules returns the rules bound to the ServiceAccount of p's
// Deployment: cluster-wide, and in the namespace of its Lease (the
// Deployment's).
func boundRules(t *testing.T, v variant, objs []runtime.Object, p process) (cluster, leaseNS []rbacv1.PolicyRule) {
	t.Helper()
	dep := p.dep
	sa := dep.Spec.Template.Spec.ServiceAccountName
	ns := dep.Namespace
	if !slices.ContainsFunc(objectsOf[*corev1.ServiceAccount](objs), func(s *corev1.ServiceAccount) bool { return s.Name == sa && s.Namespace == dep.Namespace }) {
		t.Errorf("%s: no ServiceAccount %s for Deployment %s", v.name, sa, dep.Name)
	}
	subject := func(subjects []rbacv1.Subject) bool {
		return slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool {
			return s.Kind == rbacv1.ServiceAccountKind && s.Name == sa && s.Namespace == dep.Namespace
		})
	}
	roleRules := func(ref rbacv1.RoleRef, namespace string) []rbacv1.PolicyRule {
		switch ref.Kind {
		case "ClusterRole":
			for _, r := range objectsOf[*rbacv1.ClusterRole](objs) {
				if r.Name == ref.Name {
					return r.Rules
				}
			}
		case "Role":
			for _, r := range objectsOf[*rbacv1.Role](objs) {
				if r.Name == ref.Name && r.Namespace == namespace {
					return r.Rules
				}
			}
		}
		t.Errorf("%s: binding to %s %s, which it does not create", v.name, ref.Kind, ref.Name)
		return nil
	}
	for _, b := range objectsOf[*rbacv1.ClusterRoleBinding](objs) {
		if subject(b.Subjects) {
			cluster = append(cluster, roleRules(b.RoleRef, "")...)
		}
	}
	for _, b := range objectsOf[*rbacv1.RoleBinding](objs) {
		if b.Namespace == ns && subject(b.Subjects) {
			leaseNS = append(leaseNS, roleRules(b.RoleRef, b.Namespace)...)
		}
	}
	return cluster, leaseNS
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

// TestEnforcedNamespacesMatchConfiguration checks that every variant that
// serves the webhook passes -enforced-namespaces that select exactly the
// namespaces every shipped webhook configuration's namespaceSelector
// sends, to the webhook and to the controller (for the ClusterQuotas'
// conditions): what the code believes is enforced is what kube-apiserver
// sends.
func TestEnforcedNamespacesMatchConfiguration(t *testing.T) {
	controller := variantNamed("default")
	own := processOf(t, controller, render(t, controller), false).dep.Namespace
	var samples []labels.Set
	for _, name := range []string{"kube-node-lease", "kube-system", "kube-public", own, "tenant", "default"} {
		for _, enforce := range []string{"", "true", "false"} {
			l := labels.Set{"kubernetes.io/metadata.name": name}
			if enforce != "" {
				l["quotakit.io/enforce"] = enforce
			}
			samples = append(samples, l)
		}
	}
	for _, served := range variants {
		if served.kind != serving {
			continue
		}
		for _, p := range processes(t, served, render(t, served)) {
			for _, reg := range variants {
				if reg.kind != registration {
					continue
				}
				for _, w := range one[*admissionregistrationv1.ValidatingWebhookConfiguration](t, reg, render(t, reg)).Webhooks {
					sel, err := metav1.LabelSelectorAsSelector(w.NamespaceSelector)
					if err != nil {
						t.Fatalf("%s: webhook %s: %v", reg.name, w.Name, err)
					}
					for _, l := range samples {
						if got, want := p.cfg.enforced.Matches(l), sel.Matches(l); got != want {
							t.Errorf("%s: Deployment %s's -enforced-namespaces=%q says %v for %v; %s's namespaceSelector says %v",
								served.name, p.name(), p.cfg.enforcedNamespaces, got, l, reg.name, want)
						}
					}
				}
			}
		}
	}
}

// TestUpgradeFirstStep checks the first command of the README's upgrade
// from the single Deployment, `kubectl apply -k ... -l
// 'app.kubernetes.io/name!=quotakit-controller'`: it applies the webhook's
// Deployment with everything its pods need to become ready (their
// ServiceAccount, the roles bound to it, the CRD) and the Service that
// sends them reviews, but not the controller's Deployment, whose rollout
// would replace the old pods that still serve the webhook.
func TestUpgradeFirstStep(t *testing.T) {
	sel, err := labels.Parse("app.kubernetes.io/name!=quotakit-controller")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range installs() {
		if v.kind != serving {
			continue
		}
		t.Run(v.name, func(t *testing.T) {
			objs := render(t, v)
			applied := map[string]bool{}
			for _, o := range objs {
				m, err := meta.Accessor(o)
				if err != nil {
					t.Fatal(err)
				}
				if sel.Matches(labels.Set(m.GetLabels())) {
					applied[o.GetObjectKind().GroupVersionKind().Kind+" "+m.GetName()] = true
				}
			}
			hook := processOf(t, v, objs, true)
			sa := hook.dep.Spec.Template.Spec.ServiceAccountName
			want := []string{"Deployment " + hook.name(), "ServiceAccount " + sa, "Service quotakit-webhook", "CustomResourceDefinition clusterquotas.quota.quotakit.io"}
			for _, b := range objectsOf[*rbacv1.ClusterRoleBinding](objs) {
				if slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool { return s.Name == sa }) {
					want = append(want, "ClusterRoleBinding "+b.Name, "ClusterRole "+b.RoleRef.Name)
				}
			}
			for _, w := range want {
				if !applied[w] {
					t.Errorf("the first step does not apply %s", w)
				}
			}
			if applied["Deployment quotakit-controller"] {
				t.Error("the first step applies the controller's Deployment")
			}
		})
	}
}

// TestGuardPolicy checks the shipped ValidatingAdmissionPolicy that guards
// the labels and annotations deciding quota: it sees every write of a
// namespace's metadata (creation, update, and the status and finalize
// subresources, which write metadata too), fails closed, is bound to deny,
// guards keys under quotakit.io/, labels and annotations alike, and lets
// cluster admins through. e2e evaluates it on a real API server.
func TestGuardPolicy(t *testing.T) {
	v := variantNamed("default+guard-namespace-labels")
	objs := render(t, v)
	policy := one[*admissionregistrationv1.ValidatingAdmissionPolicy](t, v, objs)
	binding := one[*admissionregistrationv1.ValidatingAdmissionPolicyBinding](t, v, objs)
	if binding.Spec.PolicyName != policy.Name || !slices.Equal(binding.Spec.ValidationActions, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}) || binding.Spec.ParamRef != nil {
		t.Errorf("binding %+v: want Deny of policy %s, without parameters", binding.Spec, policy.Name)
	}
	if policy.Spec.FailurePolicy == nil || *policy.Spec.FailurePolicy != admissionregistrationv1.Fail || policy.Spec.ParamKind != nil {
		t.Errorf("policy failurePolicy %v, paramKind %v: want Fail, no parameters", policy.Spec.FailurePolicy, policy.Spec.ParamKind)
	}
	for _, op := range []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update} {
		for _, res := range []string{"namespaces", "namespaces/status", "namespaces/finalize"} {
			if !rulesMatch(withOperations(policy.Spec.MatchConstraints.ResourceRules), op, "", res) {
				t.Errorf("the policy does not see %s %s", op, res)
			}
		}
	}
	vars := policy.Spec.Variables
	if len(vars) == 0 || vars[0].Name != "allowedGroups" || !strings.Contains(vars[0].Expression, "'system:masters'") {
		t.Errorf("the first variable is %+v; want allowedGroups, with system:masters (the README's patch replaces it by index)", vars)
	}
	var all string
	for _, v := range vars {
		all += v.Expression + "\n"
	}
	for _, want := range []string{"object.metadata.labels", "object.metadata.annotations", "oldObject.metadata.labels", "oldObject.metadata.annotations", `quotakit[.]io/`} {
		if !strings.Contains(all, want) {
			t.Errorf("the policy's variables never read %s", want)
		}
	}
}

// withOperations returns the rules of a policy's match constraints as
// webhook rules, for rulesMatch.
func withOperations(rules []admissionregistrationv1.NamedRuleWithOperations) []admissionregistrationv1.RuleWithOperations {
	var out []admissionregistrationv1.RuleWithOperations
	for _, r := range rules {
		out = append(out, r.RuleWithOperations)
	}
	return out
}

// TestImages checks that every Deployment of every install runs the same
// image, the one `make image` names in deploy/default and deploy/webhook:
// the webhook's Deployment, which is not in deploy/default, must not be
// left on the placeholder.
func TestImages(t *testing.T) {
	entries := map[string]string{}
	for _, dir := range []string{"default", "webhook"} {
		b, err := os.ReadFile(filepath.Join(deployDir, dir, "kustomization.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var k struct {
			Images []struct{ Name, NewName, NewTag string }
		}
		if err := yaml.Unmarshal(b, &k); err != nil {
			t.Fatal(err)
		}
		if len(k.Images) != 1 || k.Images[0].Name != "quotakit-controller" {
			t.Fatalf("deploy/%s: images %+v, want one entry for quotakit-controller", dir, k.Images)
		}
		entries[dir] = k.Images[0].NewName + ":" + k.Images[0].NewTag
	}
	if entries["default"] != entries["webhook"] {
		t.Errorf("deploy/default names %s, deploy/webhook %s", entries["default"], entries["webhook"])
	}
	for _, v := range installs() {
		for _, p := range processes(t, v, render(t, v)) {
			if got := p.container().Image; got != entries["default"] {
				t.Errorf("%s: Deployment %s runs %s, want %s", v.name, p.name(), got, entries["default"])
			}
		}
	}
}
