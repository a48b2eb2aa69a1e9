package e2e_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/quotakit/quotakit/e2e/internal/cluster"
)

// The tests of this file install kube/deploy as shipped, variant by
// variant, on an API server of their own: every object a variant renders
// is created as `kubectl apply -k` would create it, and the processes its
// Deployments run are started as the kubelet would start them, with the
// rendered arguments, environment and volumes, authenticated as their
// ServiceAccounts with tokens from the TokenRequest API, never the admin's.
// Only what a pod has and a test process has not is translated: addresses
// become free ports on loopback, mounted files temporary files, and
// -shutdown-delay is cut to a second. What needs a kubelet, a network
// plugin or cert-manager (NetworkPolicy, the certificates) is checked on
// the rendered objects by the manifest test in kube/cmd/quotakit-controller.

// shippedNamespace is where the shipped install runs.
const shippedNamespace = "quotakit-system"

// clientCertName is the common name of the client certificate the API
// server of these tests presents to webhooks, and the name the
// client-certificates variant allows.
const clientCertName = "quotakit-webhook-client"

// shippedAPIServer starts the API server of TestShippedInstall: without
// the ResourceQuota plugin, so that the webhook's namespaced enforcement
// is what refuses, and presenting a client certificate of the test CA to
// every webhook, as the README's admission configuration does.
func shippedAPIServer(t *testing.T) *cluster.APIServer {
	t.Helper()
	dir := t.TempDir()
	certPEM, keyPEM, err := env.api.CA.IssueClient(clientCertName)
	if err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, filepath.Join(dir, "client.crt"), certPEM)
	writeTestFile(t, filepath.Join(dir, "client.key"), keyPEM)
	kc := clientcmdapi.NewConfig()
	kc.AuthInfos["*"] = &clientcmdapi.AuthInfo{ClientCertificate: filepath.Join(dir, "client.crt"), ClientKey: filepath.Join(dir, "client.key")}
	if err := clientcmd.WriteToFile(*kc, filepath.Join(dir, "webhook-kubeconfig.yaml")); err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, filepath.Join(dir, "admission.yaml"), []byte(`apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: ValidatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: `+filepath.Join(dir, "webhook-kubeconfig.yaml")+"\n"))
	api, err := cluster.StartAPIServer(t.Context(), env.bins.APIServer, env.etcd, env.api.CA, env.dir, cluster.APIServerOptions{
		Name: "shipped", EtcdPrefix: "/shipped", NoResourceQuota: true,
		Args: []string{"--admission-control-config-file=" + filepath.Join(dir, "admission.yaml")},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(api.Stop)
	return api
}

// renderShipped renders kube/deploy/<dir>, as a user's overlay with
// components, and with the caller-trust component naming trust that the
// user writes in deploy/webhook/caller-trust, from a copy of kube/deploy:
// the checkout is never written.
func renderShipped(t *testing.T, dir, trust string, components ...string) []*unstructured.Unstructured {
	t.Helper()
	from, err := filepath.Abs(filepath.Join("..", "kube", "deploy"))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	deploy := filepath.Join(root, "deploy")
	err = filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(deploy, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(deploy, rel), b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	if trust != "" {
		ct := "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\ncomponents:\n- ../../components/" + trust + "\n"
		if err := os.MkdirAll(filepath.Join(deploy, "webhook", "caller-trust"), 0o755); err != nil {
			t.Fatal(err)
		}
		writeTestFile(t, filepath.Join(deploy, "webhook", "caller-trust", "kustomization.yaml"), []byte(ct))
	}
	overlay := "resources:\n- deploy/" + dir + "\ncomponents:\n"
	for _, c := range components {
		overlay += "- deploy/components/" + c + "\n"
	}
	writeTestFile(t, filepath.Join(root, "kustomization.yaml"), []byte(overlay))
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), root)
	if err != nil {
		t.Fatalf("kustomize build %s (%s, %v): %v", dir, trust, components, err)
	}
	var out []*unstructured.Unstructured
	for _, r := range m.Resources() {
		obj, err := r.Map()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, &unstructured.Unstructured{Object: obj})
	}
	return out
}

// install is a rendered variant created on an API server.
type install struct {
	t     *testing.T
	api   *cluster.APIServer
	admin kubernetes.Interface
	dyn   dynamic.Interface
	objs  []*unstructured.Unstructured
	// secrets are the contents of the Secrets the pods mount, which
	// cert-manager or the user would create.
	secrets map[string]map[string][]byte
}

// kindsFirst are the kinds created before the others, as kubectl orders
// them: what the others refer to.
var kindsFirst = []string{"Namespace", "CustomResourceDefinition", "ServiceAccount", "ClusterRole", "Role", "ConfigMap", "PriorityClass"}

// installShipped creates every object of objs on api with the admin's
// credentials, as `kubectl apply -k` would (cert-manager's objects
// aside: no cert-manager runs here), waits for its CRDs to be served,
// and deletes them all but the namespace and the CRDs when the test
// ends.
func installShipped(t *testing.T, api *cluster.APIServer, objs []*unstructured.Unstructured) *install {
	t.Helper()
	cfg := api.Config()
	in := &install{t: t, api: api, admin: clientset(t, cfg), objs: objs, secrets: map[string]map[string][]byte{}}
	var err error
	if in.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	mapper := map[string]string{}
	ordered := slices.Clone(objs)
	slices.SortStableFunc(ordered, func(a, b *unstructured.Unstructured) int {
		rank := func(u *unstructured.Unstructured) int {
			if i := slices.Index(kindsFirst, u.GetKind()); i >= 0 {
				return i
			}
			return len(kindsFirst)
		}
		return rank(a) - rank(b)
	})
	disc := in.admin.Discovery()
	for _, u := range ordered {
		gvk := u.GroupVersionKind()
		if gvk.Group == "cert-manager.io" {
			continue
		}
		resource, namespaced := resourceOf(t, disc, gvk, mapper)
		ri := in.dyn.Resource(gvk.GroupVersion().WithResource(resource))
		var r dynamic.ResourceInterface = ri
		if namespaced {
			r = ri.Namespace(u.GetNamespace())
		}
		_, err := r.Create(t.Context(), u, metav1.CreateOptions{FieldManager: "kubectl"})
		switch {
		case apierrors.IsAlreadyExists(err) && (gvk.Kind == "Namespace" || gvk.Kind == "CustomResourceDefinition"):
			continue
		case err != nil:
			t.Fatalf("create %s %s: %v", gvk.Kind, u.GetName(), err)
		}
		if gvk.Kind == "CustomResourceDefinition" {
			waitFor(t, 30*time.Second, "the CRD "+u.GetName()+" to be served", func() bool {
				_, err := disc.ServerResourcesForGroupVersion("quota.quotakit.io/v1alpha1")
				return err == nil
			})
			continue
		}
		if gvk.Kind == "Namespace" {
			continue
		}
		t.Cleanup(func() {
			if err := r.Delete(context.WithoutCancel(t.Context()), u.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete %s %s: %v", gvk.Kind, u.GetName(), err)
			}
		})
	}
	return in
}

// resourceOf returns the resource of gvk and whether it is namespaced,
// from discovery (asked again after a CRD was created).
func resourceOf(t *testing.T, disc interface {
	ServerResourcesForGroupVersion(string) (*metav1.APIResourceList, error)
}, gvk schema.GroupVersionKind, cache map[string]string) (string, bool) {
	t.Helper()
	key := gvk.String()
	if r, ok := cache[key]; ok {
		res, ns, _ := strings.Cut(r, "|")
		return res, ns == "true"
	}
	list, err := disc.ServerResourcesForGroupVersion(gvk.GroupVersion().String())
	if err != nil {
		t.Fatalf("discovering %s: %v", gvk.GroupVersion(), err)
	}
	for _, r := range list.APIResources {
		if r.Kind == gvk.Kind && !strings.Contains(r.Name, "/") {
			cache[key] = r.Name + "|" + strconv.FormatBool(r.Namespaced)
			return r.Name, r.Namespaced
		}
	}
	t.Fatalf("the API server serves no %s", gvk)
	return "", false
}

// deployment returns the rendered Deployment called name.
func (in *install) deployment(name string) *appsv1.Deployment {
	in.t.Helper()
	for _, u := range in.objs {
		if u.GetKind() == "Deployment" && u.GetName() == name {
			dep := &appsv1.Deployment{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, dep); err != nil {
				in.t.Fatal(err)
			}
			return dep
		}
	}
	in.t.Fatalf("no Deployment %s rendered", name)
	return nil
}

// pod is one process of a Deployment, started as the kubelet would.
type pod struct {
	name string
	prog *cluster.Program
	// probes is the base URL of /readyz; metrics and webhook those of
	// /metrics and of the webhook, over TLS.
	probes, metrics string
	webhook         *url.URL
	// args are the arguments it runs with.
	args []string
}

// run starts one pod of the Deployment name: its container's arguments
// with $(VAR) expanded from its environment (a ConfigMap key read from the
// API server, as the kubelet reads it), its volumes written to temporary
// files (Secrets from in.secrets, ConfigMaps from the API server), and a
// kubeconfig holding a token of its ServiceAccount from the TokenRequest
// API. It waits until /readyz passes, and stops the process when the test
// ends.
func (in *install) run(name string) *pod {
	t := in.t
	t.Helper()
	dep := in.deployment(name)
	spec := dep.Spec.Template.Spec
	c := spec.Containers[0]
	ns := dep.Namespace
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		dir := t.TempDir()
		for _, v := range spec.Volumes {
			if v.Name != m.Name {
				continue
			}
			files := map[string][]byte{}
			switch {
			case v.Secret != nil:
				data, ok := in.secrets[v.Secret.SecretName]
				if !ok {
					t.Fatalf("pod %s mounts Secret %s, which the test does not hold", name, v.Secret.SecretName)
				}
				files = data
			case v.ConfigMap != nil:
				cm, err := in.admin.CoreV1().ConfigMaps(ns).Get(t.Context(), v.ConfigMap.Name, metav1.GetOptions{})
				if err != nil {
					t.Fatalf("pod %s mounts ConfigMap %s: %v", name, v.ConfigMap.Name, err)
				}
				for k, v := range cm.Data {
					files[k] = []byte(v)
				}
				if len(v.ConfigMap.Items) > 0 {
					picked := map[string][]byte{}
					for _, it := range v.ConfigMap.Items {
						picked[it.Path] = files[it.Key]
					}
					files = picked
				}
			default:
				t.Fatalf("pod %s mounts a volume %s the test cannot make", name, v.Name)
			}
			for f, b := range files {
				writeTestFile(t, filepath.Join(dir, f), b)
			}
		}
		mounts[strings.TrimSuffix(m.MountPath, "/")] = dir
	}
	envs := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			envs[e.Name] = e.Value
		case e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			cm, err := in.admin.CoreV1().ConfigMaps(ns).Get(t.Context(), ref.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("pod %s: env %s: %v", name, e.Name, err)
			}
			v, ok := cm.Data[ref.Key]
			if !ok {
				t.Fatalf("pod %s: env %s: ConfigMap %s has no key %s", name, e.Name, ref.Name, ref.Key)
			}
			envs[e.Name] = v
		case e.ValueFrom.ResourceFieldRef != nil:
			ref := e.ValueFrom.ResourceFieldRef
			q, ok := c.Resources.Limits[corev1.ResourceName(strings.TrimPrefix(ref.Resource, "limits."))]
			if !ok || !strings.HasPrefix(ref.Resource, "limits.") {
				t.Fatalf("pod %s: env %s: no %s", name, e.Name, ref.Resource)
			}
			envs[e.Name] = strconv.FormatInt(q.Value()/max(ref.Divisor.Value(), 1), 10)
		}
	}
	ports, err := cluster.FreePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	loopback := func(p int) string { return "127.0.0.1:" + strconv.Itoa(p) }
	p := &pod{name: fmt.Sprintf("%s-%d", name, ports[0]), probes: "http://" + loopback(ports[1]), metrics: "https://" + loopback(ports[2])}
	var args []string
	for _, a := range c.Args {
		a = os.Expand(strings.NewReplacer("$(", "${", ")", "}").Replace(a), func(k string) string { return envs[k] })
		flag, value, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch flag {
		case "webhook-addr":
			p.webhook = &url.URL{Scheme: "https", Host: loopback(ports[0])}
			value = p.webhook.Host
		case "health-probe-bind-address":
			value = loopback(ports[1])
		case "metrics-bind-address":
			value = loopback(ports[2])
		case "shutdown-delay":
			value = "1s"
		}
		for mount, dir := range mounts {
			if rest, ok := strings.CutPrefix(value, mount+"/"); ok {
				value = filepath.Join(dir, rest)
			}
		}
		if value != "" || strings.Contains(a, "=") {
			a = "-" + flag + "=" + value
		}
		args = append(args, a)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	in.writeTokenKubeconfig(kubeconfig, ns, spec.ServiceAccountName)
	args = append(args, "-kubeconfig="+kubeconfig, "-log-format=text")
	p.args = args
	p.prog, err = cluster.Start(p.name, quotakitController(t), filepath.Join(t.TempDir(), p.name+".log"), args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.prog.Stop(30 * time.Second)
		if t.Failed() {
			t.Logf("%s (pid %d, %q) log:\n%s", p.name, p.prog.Pid(), p.args, p.prog.Log())
		}
	})
	start := time.Now()
	ready := func() bool {
		resp, err := probeClient.Get(p.probes + "/readyz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode == http.StatusOK
	}
	if !poll(60*time.Second, func() bool {
		exited, _ := p.prog.Exited()
		return exited || ready()
	}) || !ready() {
		exited, err := p.prog.Exited()
		t.Fatalf("%s not ready after %v (exited %v: %v); log:\n%s", p.name, time.Since(start).Round(time.Millisecond), exited, err, p.prog.Log())
	}
	t.Logf("%s (pid %d) ready in %v, as %s:%s", p.name, p.prog.Pid(), time.Since(start).Round(time.Millisecond), ns, spec.ServiceAccountName)
	return p
}

// token returns a token of the ServiceAccount ns/name from the TokenRequest
// API, as the kubelet mounts one in a pod.
func (in *install) token(ns, name string) string {
	in.t.Helper()
	tr, err := in.admin.CoreV1().ServiceAccounts(ns).CreateToken(in.t.Context(), name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		in.t.Fatalf("token of %s/%s: %v", ns, name, err)
	}
	return tr.Status.Token
}

// writeTokenKubeconfig writes a kubeconfig for the API server that
// authenticates with a token of ns/name.
func (in *install) writeTokenKubeconfig(path, ns, name string) {
	in.t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["shipped"] = &clientcmdapi.Cluster{Server: in.api.Host, CertificateAuthorityData: in.api.CA.PEM}
	kc.AuthInfos["sa"] = &clientcmdapi.AuthInfo{Token: in.token(ns, name)}
	kc.Contexts["shipped"] = &clientcmdapi.Context{Cluster: "shipped", AuthInfo: "sa"}
	kc.CurrentContext = "shipped"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		in.t.Fatal(err)
	}
}

// as returns a clientset of the API server authenticated as the
// ServiceAccount ns/name, with a token from the TokenRequest API.
func (in *install) as(ns, name string) kubernetes.Interface {
	in.t.Helper()
	cfg := &rest.Config{Host: in.api.Host, BearerToken: in.token(ns, name), TLSClientConfig: rest.TLSClientConfig{CAData: in.api.CA.PEM}, QPS: -1}
	return clientset(in.t, cfg)
}

// scraper returns a token of a ServiceAccount bound to the shipped
// ClusterRole quotakit-metrics-reader, as the README has a Prometheus
// bound to it.
func (in *install) scraper() string {
	t := in.t
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "scraper", Namespace: "default"}}
	if _, err := in.admin.CoreV1().ServiceAccounts("default").Create(t.Context(), sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "quotakit-metrics-reader-e2e"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "quotakit-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "scraper", Namespace: "default"}},
	}
	if _, err := in.admin.RbacV1().ClusterRoleBindings().Create(t.Context(), crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return in.token("default", "scraper")
}

// metric returns the sum of the pod's metric name over every label set,
// scraped over HTTPS with token, as a scraper does; the pod asks the API
// server, with its own ServiceAccount, who the token is and whether it may
// get /metrics.
func (p *pod) metric(t *testing.T, token, name string) float64 {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the binary's self-signed metrics certificate
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, p.metrics+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s metrics: %v", p.name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s metrics: %d %s %v", p.name, resp.StatusCode, body, err)
	}
	var total float64
	for line := range strings.Lines(string(body)) {
		if !strings.HasPrefix(line, name+" ") && !strings.HasPrefix(line, name+"{") {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(line[strings.LastIndexByte(line, ' ')+1:]), 64)
		if err != nil {
			t.Fatalf("%s metrics: %q: %v", p.name, line, err)
		}
		total += v
	}
	return total
}

// labelledNamespace creates a namespace with labels, as its admin does.
func labelledNamespace(t *testing.T, cs kubernetes.Interface, name string, labels map[string]string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if _, err := cs.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return name
}

// tenantClusterQuota creates a ClusterQuota of pods over the namespaces
// labelled quotakit.io/tenant=tenant, and waits until the controller has
// taken it up (status.total.hard written), from when it is enforced.
func tenantClusterQuota(t *testing.T, dyn dynamic.Interface, tenant string, pods int) {
	t.Helper()
	cq := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "quota.quotakit.io/v1alpha1", "kind": "ClusterQuota",
		"metadata": map[string]any{"name": tenant},
		"spec": map[string]any{
			"selector": map[string]any{"labels": map[string]any{"matchLabels": map[string]any{"quotakit.io/tenant": tenant}}},
			"quota":    map[string]any{"hard": map[string]any{"pods": strconv.Itoa(pods)}},
		},
	}}
	r := dyn.Resource(schema.GroupVersionResource{Group: "quota.quotakit.io", Version: "v1alpha1", Resource: "clusterquotas"})
	if _, err := r.Create(t.Context(), cq, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the controller to take up ClusterQuota "+tenant, func() bool {
		got, err := r.Get(t.Context(), tenant, metav1.GetOptions{})
		if err != nil {
			return false
		}
		_, ok, _ := unstructured.NestedString(got.Object, "status", "total", "hard", "pods")
		return ok
	})
}

// clusterQuotaUsedPods returns status.total.used pods of the ClusterQuota.
func clusterQuotaUsedPods(t *testing.T, dyn dynamic.Interface, name string) string {
	t.Helper()
	got, err := dyn.Resource(schema.GroupVersionResource{Group: "quota.quotakit.io", Version: "v1alpha1", Resource: "clusterquotas"}).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	used, _, _ := unstructured.NestedString(got.Object, "status", "total", "used", "pods")
	return used
}

// createPod creates a pod in ns and returns the error.
func createPod(t *testing.T, cs kubernetes.Interface, ns, name string) error {
	t.Helper()
	_, err := cs.CoreV1().Pods(ns).Create(t.Context(), simplePod(name), metav1.CreateOptions{})
	return err
}

// forgedReview POSTs a review of a pod creation in ns straight to the
// webhook, as any pod that reaches its port could, presenting certs, and
// returns the answer's body, or the error of a refused handshake.
func forgedReview(t *testing.T, webhook *url.URL, ns string, certs []tls.Certificate) (string, error) {
	t.Helper()
	resp, err := postReview(t.Context(), webhook, certs, podReview(t, ns, "forged"))
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("HTTP %d %s", resp.StatusCode, resp.body), nil
}

// clientCert returns a client certificate of the test CA for cn.
func clientCert(t *testing.T, cn string) []tls.Certificate {
	t.Helper()
	certPEM, keyPEM, err := env.api.CA.IssueClient(cn)
	if err != nil {
		t.Fatal(err)
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return []tls.Certificate{c}
}

// registerShipped registers the shipped webhook configuration for the
// webhook at p, and waits until the API server calls it.
func registerShipped(t *testing.T, in *install, p *pod, probeNS string) {
	t.Helper()
	register(t, in.admin, shippedWebhook(t, p.webhook.String()+"/validate"))
	waitFor(t, 30*time.Second, "the API server to call the webhook", func() bool {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-"}}
		_, err := in.admin.CoreV1().ConfigMaps(probeNS).Create(t.Context(), cm, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil
	})
}

// TestShippedInstall installs three variants of kube/deploy in turn on an
// API server of its own, with their rendered RBAC, and runs the
// controller's and the webhook's processes as their ServiceAccounts. See
// each subtest for what it checks.
func TestShippedInstall(t *testing.T) {
	api := shippedAPIServer(t)
	started := time.Now()
	t.Cleanup(func() { t.Logf("TestShippedInstall took %v", time.Since(started).Round(time.Second)) })
	certPEM, keyPEM, err := api.CA.Issue()
	if err != nil {
		t.Fatal(err)
	}
	tlsSecret := map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM}

	// The webhook trusts client certificates of the test CA for the
	// name the API server presents; it enforces namespaced quota (the
	// API server has no plugin) and cluster quotas; the guard policy is
	// installed.
	t.Run("client-certificates", func(t *testing.T) {
		objs := renderShipped(t, "webhook", "trust-client-certificates", "enforce-namespaced-quota", "guard-namespace-labels")
		in := installShipped(t, api, objs)
		in.secrets["quotakit-webhook-tls"] = tlsSecret
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "quotakit-webhook-client-ca", Namespace: shippedNamespace},
			Data:       map[string]string{"ca.crt": string(api.CA.PEM), "allowed-names": clientCertName},
		}
		if _, err := in.admin.CoreV1().ConfigMaps(shippedNamespace).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = in.admin.CoreV1().ConfigMaps(shippedNamespace).Delete(context.WithoutCancel(t.Context()), cm.Name, metav1.DeleteOptions{})
		})
		checkClientCertificates(t, in)
	})

	// The webhook trusts the network (a NetworkPolicy no plugin enforces
	// here): it serves any TLS client, and enforces cluster quotas.
	t.Run("control-plane-network", func(t *testing.T) {
		in := installShipped(t, api, renderShipped(t, "webhook", "trust-control-plane-network"))
		in.secrets["quotakit-webhook-tls"] = tlsSecret
		checkClusterQuotaEnforced(t, in, "network")
	})

	// Anyone may call the webhook; the controller counts Secrets.
	t.Run("insecure-any-caller", func(t *testing.T) {
		in := installShipped(t, api, renderShipped(t, "webhook", "insecure-trust-any-caller", "count-secrets"))
		in.secrets["quotakit-webhook-tls"] = tlsSecret
		hook := checkClusterQuotaEnforced(t, in, "open")
		checkRevealsNothing(t, in, hook, "open")
		checkSecretsCounted(t, in)
	})
}

// checkClientCertificates checks the variant with client certificates:
//
//   - both processes become ready as their ServiceAccounts;
//   - a review without a certificate, or with one of the trusted CA for a
//     name not allowed (as a kubelet's), fails the handshake: no handler
//     sees it, nothing is charged, nothing is answered;
//   - a labelled namespace's first pod, created the moment after the
//     namespace, is admitted and charged to the ClusterQuota;
//   - the webhook refuses a pod over a ResourceQuota and one over a
//     ClusterQuota;
//   - the controller, which may not list deployments nor Secrets, reports
//     the quotas that name them with an Event, counts the resource it may
//     not list, stays ready, and counts what it may;
//   - a namespace editor, with RBAC to update namespaces and their status,
//     can change other labels but not those under quotakit.io/ nor such
//     annotations, by patch or through the status subresource, nor label
//     a namespace into a tenant; a cluster admin can.
func checkClientCertificates(t *testing.T, in *install) {
	ctrl := in.run("quotakit-controller")
	hook := in.run("quotakit-webhook")
	scraper := in.scraper()
	admin := in.admin
	const tenant = "certs"
	enforced := map[string]string{"quotakit.io/enforce": "true"}
	tenantLabels := map[string]string{"quotakit.io/enforce": "true", "quotakit.io/tenant": tenant}
	a := labelledNamespace(t, admin, "certs-a", tenantLabels)
	b := labelledNamespace(t, admin, "certs-b", enforced)
	tenantClusterQuota(t, in.dyn, tenant, 2)
	podQuota(t, admin, b, 1)
	waitFor(t, 30*time.Second, "the controller's first status of the quota in "+b, func() bool { return podUsed(t, admin, b) == 0 })

	// Forged reviews, before the API server may call the webhook.
	for _, tt := range []struct {
		name  string
		certs []tls.Certificate
	}{
		{"no client certificate", nil},
		{"a certificate of the trusted CA for a kubelet's name", clientCert(t, "system:node:worker-1")},
	} {
		if body, err := forgedReview(t, hook.webhook, a, tt.certs); err == nil {
			t.Errorf("a review with %s was answered: %s; want the handshake refused", tt.name, body)
		} else {
			t.Logf("a review with %s: %v", tt.name, err)
		}
	}
	if n := hook.metric(t, scraper, "controller_runtime_webhook_requests_total"); n != 0 {
		t.Errorf("the webhook's handler saw %v reviews from untrusted clients, want 0", n)
	}
	if used := clusterQuotaUsedPods(t, in.dyn, tenant); used != "0" {
		t.Errorf("ClusterQuota %s used pods %q after the untrusted reviews, want 0", tenant, used)
	}

	registerShipped(t, in, hook, b)

	// A namespace and its first pod, at once.
	fresh := labelledNamespace(t, admin, "certs-fresh", tenantLabels)
	if err := createPod(t, admin, fresh, "first"); err != nil {
		t.Errorf("the first pod of a namespace created a moment ago: %v", err)
	}
	waitFor(t, 10*time.Second, "the first pod's charge", func() bool { return clusterQuotaUsedPods(t, in.dyn, tenant) == "1" })
	if err := createPod(t, admin, a, "second"); err != nil {
		t.Errorf("the tenant's second pod: %v", err)
	}
	if err := createPod(t, admin, a, "third"); err == nil || !strings.Contains(err.Error(), "exceeded quota") {
		t.Errorf("the tenant's third pod, over its ClusterQuota of 2: %v; want exceeded quota", err)
	}
	if err := createPod(t, admin, b, "one"); err != nil {
		t.Errorf("a pod within the ResourceQuota: %v", err)
	}
	if err := createPod(t, admin, b, "two"); err == nil || !strings.Contains(err.Error(), "exceeded quota") {
		t.Errorf("a pod over the ResourceQuota of 1: %v; want exceeded quota", err)
	}
	if n := hook.metric(t, scraper, "controller_runtime_webhook_requests_total"); n == 0 {
		t.Error("the webhook's handler saw no review from the API server")
	}

	checkUncountedReported(t, in, ctrl, scraper, b)
	checkGuardedLabels(t, in, a, b)
}

// checkUncountedReported creates quotas in ns that name what the
// controller may not list (deployments) and does not count (Secrets), and
// checks that each gets a Warning Event, that the controller counts the
// forbidden resource and stays ready, and that neither name gets a used
// value.
func checkUncountedReported(t *testing.T, in *install, ctrl *pod, scraper, ns string) {
	t.Helper()
	for name, hard := range map[string]corev1.ResourceList{
		"deployments": {"count/deployments.apps": resourceQuantity(t, "3")},
		"secrets":     {"secrets": resourceQuantity(t, "3")},
	} {
		rq := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: corev1.ResourceQuotaSpec{Hard: hard}}
		if _, err := in.admin.CoreV1().ResourceQuotas(ns).Create(t.Context(), rq, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for quota, why := range map[string]string{"deployments": "may not list deployments.apps", "secrets": "secrets: no evaluator charges them"} {
		var msg string
		waitFor(t, 60*time.Second, "a Warning Event on quota "+quota, func() bool {
			evs, err := in.admin.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + quota})
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range evs.Items {
				if e.Reason == "ResourcesNotCounted" && e.Type == corev1.EventTypeWarning {
					msg = e.Message
					return true
				}
			}
			return false
		})
		if !strings.Contains(msg, why) {
			t.Errorf("the Event on quota %s says %q; want it to say %q", quota, msg, why)
		}
		t.Logf("Event on quota %s: %s", quota, msg)
		rq, err := in.admin.CoreV1().ResourceQuotas(ns).Get(t.Context(), quota, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(rq.Status.Used) != 0 {
			t.Errorf("quota %s status.used %v; want none (never a zero)", quota, rq.Status.Used)
		}
	}
	if n := ctrl.metric(t, scraper, "quotakit_resourcequota_forbidden_resources"); n < 1 {
		t.Errorf("quotakit_resourcequota_forbidden_resources = %v, want at least 1", n)
	}
	if n := ctrl.metric(t, scraper, "quotakit_resourcequota_uncounted_quotas"); n < 2 {
		t.Errorf("quotakit_resourcequota_uncounted_quotas = %v, want at least 2", n)
	}
	resp, err := probeClient.Get(ctrl.probes + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the controller's /readyz = %d with quotas naming what it may not list, want 200", resp.StatusCode)
	}
}

// checkGuardedLabels checks the guard policy against a namespace editor:
// a ServiceAccount whose ClusterRole lets it get, patch and update
// namespaces and their status.
func checkGuardedLabels(t *testing.T, in *install, tenantNS, otherNS string) {
	t.Helper()
	admin := in.admin
	const editor = "namespace-editor"
	if _, err := admin.CoreV1().ServiceAccounts("default").Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: editor}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: editor},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces", "namespaces/status"}, Verbs: []string{"get", "list", "patch", "update"}}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: editor},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: editor},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: editor, Namespace: "default"}},
	}
	if _, err := admin.RbacV1().ClusterRoles().Create(t.Context(), role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(t.Context(), binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ed := in.as("default", editor)
	patch := func(cs kubernetes.Interface, ns string, meta map[string]any) error {
		b, err := json.Marshal(map[string]any{"metadata": meta})
		if err != nil {
			t.Fatal(err)
		}
		_, err = cs.CoreV1().Namespaces().Patch(t.Context(), ns, types.MergePatchType, b, metav1.PatchOptions{})
		return err
	}
	guarded := func(err error) bool {
		return apierrors.IsForbidden(err) || apierrors.IsInvalid(err) && strings.Contains(err.Error(), "quotakit-guard-namespace-labels")
	}
	// The editor's rights are real: an ordinary label goes through.
	waitFor(t, 30*time.Second, "the editor's RBAC and the guard policy to take effect", func() bool {
		return patch(ed, otherNS, map[string]any{"labels": map[string]any{"team": "x"}}) == nil &&
			guarded(patch(ed, otherNS, map[string]any{"labels": map[string]any{"quotakit.io/enforce": nil}}))
	})
	for _, tt := range []struct {
		what string
		ns   string
		meta map[string]any
	}{
		{"remove the enforcement label", otherNS, map[string]any{"labels": map[string]any{"quotakit.io/enforce": nil}}},
		{"change the enforcement label", otherNS, map[string]any{"labels": map[string]any{"quotakit.io/enforce": "false"}}},
		{"leave the tenant", tenantNS, map[string]any{"labels": map[string]any{"quotakit.io/tenant": nil}}},
		{"label a namespace into the tenant", otherNS, map[string]any{"labels": map[string]any{"quotakit.io/tenant": "certs"}}},
		{"set a guarded annotation", otherNS, map[string]any{"annotations": map[string]any{"quotakit.io/tenant": "certs"}}},
		{"set a label under a subdomain", otherNS, map[string]any{"labels": map[string]any{"tenants.quotakit.io/name": "certs"}}},
	} {
		err := patch(ed, tt.ns, tt.meta)
		if !guarded(err) {
			t.Errorf("the editor could %s: %v", tt.what, err)
			continue
		}
		t.Logf("the editor may not %s: %v", tt.what, err)
	}
	// The status subresource writes metadata too.
	ns, err := ed.CoreV1().Namespaces().Get(t.Context(), tenantNS, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	delete(ns.Labels, "quotakit.io/tenant")
	if _, err := ed.CoreV1().Namespaces().UpdateStatus(t.Context(), ns, metav1.UpdateOptions{}); !guarded(err) {
		t.Errorf("the editor could leave the tenant through namespaces/status: %v", err)
	}
	got, err := admin.CoreV1().Namespaces().Get(t.Context(), tenantNS, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels["quotakit.io/tenant"] != "certs" || got.Labels["quotakit.io/enforce"] != "true" {
		t.Errorf("namespace %s labels %v after the editor's attempts", tenantNS, got.Labels)
	}
	// A cluster admin may.
	if err := patch(admin, otherNS, map[string]any{"labels": map[string]any{"quotakit.io/enforce": nil}}); err != nil {
		t.Errorf("a cluster admin removing the enforcement label: %v", err)
	}
}

// checkClusterQuotaEnforced starts the variant's processes, registers
// the webhook, and checks that a tenant's namespaces created a moment
// before their first pod are admitted up to their ClusterQuota and no
// further. It returns the webhook's pod.
func checkClusterQuotaEnforced(t *testing.T, in *install, tenant string) *pod {
	t.Helper()
	in.run("quotakit-controller")
	hook := in.run("quotakit-webhook")
	admin := in.admin
	labels := map[string]string{"quotakit.io/enforce": "true", "quotakit.io/tenant": tenant}
	probeNS := labelledNamespace(t, admin, tenant+"-probe", map[string]string{"quotakit.io/enforce": "true"})
	tenantClusterQuota(t, in.dyn, tenant, 2)
	registerShipped(t, in, hook, probeNS)
	for i := range 2 {
		ns := labelledNamespace(t, admin, fmt.Sprintf("%s-%d", tenant, i), labels)
		if err := createPod(t, admin, ns, "first"); err != nil {
			t.Errorf("the first pod of namespace %s, created a moment ago: %v", ns, err)
		}
	}
	waitFor(t, 10*time.Second, "the charges of the first pods", func() bool { return clusterQuotaUsedPods(t, in.dyn, tenant) == "2" })
	if err := createPod(t, admin, tenant+"-1", "over"); err == nil || !strings.Contains(err.Error(), "exceeded quota") {
		t.Errorf("a pod over the tenant's ClusterQuota of 2: %v; want exceeded quota", err)
	}
	return hook
}

// checkRevealsNothing sends the webhook, which trusts any caller, a forged
// review for a namespace its tenant's ClusterQuota selects but that is not
// enforced: it is allowed, charges nothing and names no quota.
func checkRevealsNothing(t *testing.T, in *install, hook *pod, tenant string) {
	t.Helper()
	ns := labelledNamespace(t, in.admin, tenant+"-unenforced", map[string]string{"quotakit.io/tenant": tenant})
	before := clusterQuotaUsedPods(t, in.dyn, tenant)
	body, err := forgedReview(t, hook.webhook, ns, nil)
	if err != nil {
		t.Fatalf("a forged review to a webhook that trusts anyone: %v", err)
	}
	if !strings.Contains(body, `"allowed":true`) || strings.Contains(body, tenant+`"`) || strings.Contains(body, "quota") {
		t.Errorf("a forged review for an unenforced namespace was answered %s; want allowed, naming no quota", body)
	}
	time.Sleep(2 * time.Second)
	if after := clusterQuotaUsedPods(t, in.dyn, tenant); after != before {
		t.Errorf("ClusterQuota %s used pods %s → %s after a forged review for an unenforced namespace", tenant, before, after)
	}
}

// checkSecretsCounted checks that the controller of an install with
// count-secrets counts Secrets, with the role the component grants.
func checkSecretsCounted(t *testing.T, in *install) {
	t.Helper()
	ns := labelledNamespace(t, in.admin, "secrets-counted", nil)
	if _, err := in.admin.CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rq := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "secrets", Namespace: ns}, Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/secrets": resourceQuantity(t, "5")}}}
	if _, err := in.admin.CoreV1().ResourceQuotas(ns).Create(t.Context(), rq, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the controller to count the Secret", func() bool {
		got, err := in.admin.CoreV1().ResourceQuotas(ns).Get(t.Context(), "secrets", metav1.GetOptions{})
		if err != nil {
			return false
		}
		used, ok := got.Status.Used["count/secrets"]
		return ok && used.Value() == 1
	})
}

// resourceQuantity parses s.
func resourceQuantity(t *testing.T, s string) resource.Quantity {
	t.Helper()
	q, err := resource.ParseQuantity(s)
	if err != nil {
		t.Fatal(err)
	}
	return q
}
