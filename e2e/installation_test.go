package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/quotakit/quotakit/e2e/internal/cluster"
)

// An installation runs the quotakit-controller command as the cluster
// install does, for the tests of install_test.go: processes for the
// Deployment's replicas, and the ValidatingWebhookConfiguration that
// kube/deploy/webhook/configuration renders.

const (
	// controllerModule is the directory, from this module's, of the
	// command the cluster install runs: a module of its own, built there
	// with its own go.mod, as `make controller` builds it.
	controllerModule = "../kube/cmd/quotakit-controller"
	// enforceLabel opts a namespace into the webhook's enforcement.
	enforceLabel = "quotakit.io/enforce"
	// shippedWebhookName is the name of the webhook in the shipped
	// configuration, which kube-apiserver's messages quote.
	shippedWebhookName = "quota.quotakit.io"
)

// installBin is the quotakit-controller executable, built once for the
// install tests into a directory of their own.
var installBin struct {
	once sync.Once
	path string
	err  error
}

func quotakitController(t *testing.T) string {
	t.Helper()
	installBin.once.Do(func() {
		installBin.path, installBin.err = buildController(t.Context(), filepath.Join(env.dir, "bin", "install"))
	})
	if installBin.err != nil {
		t.Fatal(installBin.err)
	}
	return installBin.path
}

// buildController builds the command of controllerModule into dir, in
// its module's directory, at nice 19 as the other builds of the tests.
func buildController(ctx context.Context, dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	out := filepath.Join(dir, "quotakit-controller")
	args := []string{"go", "build", "-o", out, "."}
	if nice, err := exec.LookPath("nice"); err == nil {
		args = append([]string{nice, "-n", "19"}, args...)
	}
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir = controllerModule
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s: %w\n%s", controllerModule, err, b)
	}
	return out, nil
}

// installation is what every quotakit-controller process of a test shares:
// the API server's kubeconfig, the webhook's serving certificate (issued
// by the test CA, which kube-apiserver trusts as the configuration's
// caBundle), the namespace its controller keeps and its lease is in, and
// further flags.
type installation struct {
	t                 *testing.T
	bin               string
	kubeconfig        string
	certFile, keyFile string
	ns                string
	args              []string
	started           int
}

func newInstallation(t *testing.T, api *cluster.APIServer, ns string, args ...string) *installation {
	t.Helper()
	dir := t.TempDir()
	in := &installation{
		t:          t,
		bin:        quotakitController(t),
		kubeconfig: filepath.Join(dir, "kubeconfig"),
		certFile:   filepath.Join(dir, "tls.crt"),
		keyFile:    filepath.Join(dir, "tls.key"),
		ns:         ns,
		args:       args,
	}
	if err := api.Kubeconfig(in.kubeconfig); err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := api.CA.Issue()
	if err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, in.certFile, certPEM)
	writeTestFile(t, in.keyFile, keyPEM)
	return in
}

func writeTestFile(t *testing.T, name string, b []byte) {
	t.Helper()
	if err := os.WriteFile(name, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// replica is one quotakit-controller process, as one pod of the
// Deployment.
type replica struct {
	name string
	prog *cluster.Program
	// webhook is the webhook's base URL, https://127.0.0.1:port; the
	// reviews go to webhook + "/validate".
	webhook *url.URL
	// probes and metrics are the base URLs of /readyz and /metrics.
	probes, metrics string

	mu sync.Mutex
	// guarded by mu
	stopped bool
}

// start starts a replica with the installation's flags and extra, and
// waits until its /readyz passes. It is stopped, by its pid, when the
// test ends, unless the test stopped or killed it before.
func (in *installation) start(extra ...string) *replica {
	t := in.t
	t.Helper()
	ports, err := cluster.FreePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	in.started++
	r := &replica{
		name:    fmt.Sprintf("quotakit-controller-%d", in.started),
		webhook: &url.URL{Scheme: "https", Host: "127.0.0.1:" + strconv.Itoa(ports[0])},
		probes:  "http://127.0.0.1:" + strconv.Itoa(ports[1]),
		metrics: "http://127.0.0.1:" + strconv.Itoa(ports[2]),
	}
	args := []string{
		"-kubeconfig=" + in.kubeconfig,
		"-namespace=" + in.ns,
		"-leader-elect-resource-namespace=" + in.ns,
		"-leader-elect-resource-name=quotakit-controller",
		// Short, so that a standby takes over within seconds.
		"-leader-elect-lease-duration=4s",
		"-leader-elect-renew-deadline=3s",
		"-leader-elect-retry-period=500ms",
		"-webhook-addr=" + r.webhook.Host,
		// The test's processes listen on loopback only; a test of the
		// trust in callers says otherwise, later flags win.
		"-caller-trust=insecure-any-caller",
		"-tls-cert-file=" + in.certFile,
		"-tls-private-key-file=" + in.keyFile,
		"-health-probe-bind-address=" + strings.TrimPrefix(r.probes, "http://"),
		"-metrics-bind-address=" + strings.TrimPrefix(r.metrics, "http://"),
		"-log-format=text",
		// The endpoints of a test are gone as soon as /readyz fails;
		// a test that needs more says so, later flags win.
		"-shutdown-delay=1s",
	}
	args = append(append(args, in.args...), extra...)
	r.prog, err = cluster.Start(r.name, in.bin, filepath.Join(t.TempDir(), r.name+".log"), args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.stop(30 * time.Second)
		if t.Failed() {
			t.Logf("%s (pid %d) log:\n%s", r.name, r.prog.Pid(), r.prog.Log())
		}
	})
	start := time.Now()
	if !poll(60*time.Second, func() bool {
		if exited, _ := r.prog.Exited(); exited {
			return true
		}
		return r.ready()
	}) || !r.ready() {
		exited, err := r.prog.Exited()
		t.Fatalf("%s not ready after %v (exited %v: %v); log:\n%s", r.name, time.Since(start).Round(time.Millisecond), exited, err, r.prog.Log())
	}
	t.Logf("%s (pid %d) ready in %v", r.name, r.prog.Pid(), time.Since(start).Round(time.Millisecond))
	return r
}

// probeClient asks the replicas' probes and metrics, over plain HTTP on
// loopback.
var probeClient = &http.Client{Timeout: 2 * time.Second}

// ready reports whether the replica's /readyz passes.
func (r *replica) ready() bool {
	resp, err := probeClient.Get(r.probes + "/readyz")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode == http.StatusOK
}

// stop sends SIGTERM to the replica's process group and waits for it to
// exit, killing it after grace. Only the first stop or kill signals it:
// a pid is signalled only while it is the replica's.
func (r *replica) stop(grace time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.stopped {
		r.stopped = true
		r.prog.Stop(grace)
	}
}

// kill ends the replica with SIGKILL, as a crashed pod or a lost node.
func (r *replica) kill() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.stopped {
		r.stopped = true
		r.prog.Kill()
	}
}

// webhookRequests returns the reviews the replica has been sent, of any
// outcome (controller_runtime_webhook_requests_total over every code).
func (r *replica) webhookRequests(t *testing.T) float64 {
	t.Helper()
	return r.metricSum(t, "controller_runtime_webhook_requests_total")
}

// webhookRequests sums webhookRequests over replicas.
func webhookRequests(t *testing.T, replicas ...*replica) float64 {
	t.Helper()
	var total float64
	for _, r := range replicas {
		total += r.webhookRequests(t)
	}
	return total
}

// shippedWebhook renders kube/deploy/webhook/configuration as `kubectl
// apply -k` would, from a copy with a ca.crt of the test CA (the
// checkout is never written), and returns its ValidatingWebhookConfiguration
// with each webhook's clientConfig replaced by hookURL and the test CA:
// rules, namespaceSelector, matchConditions, failurePolicy, timeout and
// everything else stay as shipped.
func shippedWebhook(t *testing.T, hookURL string) *admissionregistrationv1.ValidatingWebhookConfiguration {
	t.Helper()
	from, err := filepath.Abs(filepath.Join("..", "kube", "deploy", "webhook", "configuration"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "configuration")
	err = filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dir, rel), 0o755)
		}
		if rel == "ca.crt" {
			return nil // a user's, if any: the test writes its own
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, rel), b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, filepath.Join(dir, "ca.crt"), env.api.CA.PEM)
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build deploy/webhook/configuration: %v", err)
	}
	decoder := serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()
	var hooks []*admissionregistrationv1.ValidatingWebhookConfiguration
	for _, r := range m.Resources() {
		doc, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		obj, _, err := decoder.Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("deploy/webhook/configuration: %v", err)
		}
		hook, ok := obj.(*admissionregistrationv1.ValidatingWebhookConfiguration)
		if !ok {
			t.Fatalf("deploy/webhook/configuration renders a %T, want only a ValidatingWebhookConfiguration", obj)
		}
		hooks = append(hooks, hook)
	}
	if len(hooks) != 1 || len(hooks[0].Webhooks) == 0 {
		t.Fatalf("deploy/webhook/configuration renders %d configurations, want one with webhooks", len(hooks))
	}
	hook := hooks[0]
	for i := range hook.Webhooks {
		w := &hook.Webhooks[i]
		if !bytes.Equal(w.ClientConfig.CABundle, env.api.CA.PEM) {
			t.Fatalf("webhook %s: the rendered caBundle is not ca.crt", w.Name)
		}
		if w.ClientConfig.Service == nil || w.ClientConfig.URL != nil {
			t.Fatalf("webhook %s: shipped clientConfig %+v, want a Service", w.Name, w.ClientConfig)
		}
		w.ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: ptr.To(hookURL), CABundle: env.api.CA.PEM}
	}
	return hook
}

// register creates hook on the API server of cs until the test ends.
func register(t *testing.T, cs kubernetes.Interface, hook *admissionregistrationv1.ValidatingWebhookConfiguration) {
	t.Helper()
	if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(t.Context(), hook, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), hook.Name, metav1.DeleteOptions{})
		if err != nil {
			t.Errorf("deleting the webhook configuration %s: %v", hook.Name, err)
		}
	})
}

// enforcedNamespace creates a namespace of the test's own, labelled
// quotakit.io/enforce=true.
func enforcedNamespace(t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	ns := namespace(t, cs)
	setEnforceLabel(t, cs, ns, ptr.To("true"))
	return ns
}

// setEnforceLabel sets the enforce label of ns to value, or removes it
// for nil.
func setEnforceLabel(t *testing.T, cs kubernetes.Interface, ns string, value *string) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]*string{enforceLabel: value}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Patch(context.WithoutCancel(t.Context()), ns, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// apiServerWithoutPlugin starts a kube-apiserver of the test's own, on
// the shared etcd under a prefix of its own, without the ResourceQuota
// admission plugin: an API server where quotakit's webhook enforces
// namespaced quota with -enforce-namespaced-quota.
func apiServerWithoutPlugin(t *testing.T, name string) *cluster.APIServer {
	t.Helper()
	api, err := cluster.StartAPIServer(t.Context(), env.bins.APIServer, env.etcd, env.api.CA, env.dir, cluster.APIServerOptions{
		Name: name, EtcdPrefix: "/" + name, NoResourceQuota: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(api.Stop)
	return api
}

// refusedByFailurePolicy reports whether err is kube-apiserver refusing a
// request because it could not call the shipped webhook.
func refusedByFailurePolicy(err error) bool {
	return err != nil && strings.Contains(err.Error(), fmt.Sprintf("failed calling webhook %q", shippedWebhookName))
}
