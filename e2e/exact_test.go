package e2e_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/quotakit/quotakit"
	"github.com/quotakit/quotakit/admission"
	"github.com/quotakit/quotakit/e2e/internal/cluster"
	"github.com/quotakit/quotakit/kube"
)

// exactWindow is the controller's charge window in these tests: short,
// so that released charges show within seconds; the store latency on
// loopback is milliseconds.
const exactWindow = 2 * time.Second

// podQuota creates the quota pods: n in ns.
func podQuota(t *testing.T, cs kubernetes.Interface, ns string, n int64) {
	t.Helper()
	q := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "pods"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(n, resource.DecimalSI)}},
	}
	if _, err := cs.CoreV1().ResourceQuotas(ns).Create(t.Context(), q, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// podUsed returns the quota's status.used pods, -1 when it has none.
func podUsed(t *testing.T, cs kubernetes.Interface, ns string) int64 {
	t.Helper()
	q, err := cs.CoreV1().ResourceQuotas(ns).Get(t.Context(), "pods", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	used, ok := q.Status.Used[corev1.ResourcePods]
	if !ok {
		return -1
	}
	return used.Value()
}

func simplePod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "e2e.invalid/none"}}},
	}
}

// podCounter watches the pods of a namespace and keeps the most that ever
// existed at once.
type podCounter struct {
	mu sync.Mutex
	// guarded by mu
	live map[string]bool
	max  int
}

func countPods(t *testing.T, cs kubernetes.Interface, ns string) *podCounter {
	t.Helper()
	w, err := cs.CoreV1().Pods(ns).Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := &podCounter{live: map[string]bool{}}
	var wg sync.WaitGroup
	wg.Go(func() {
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			c.mu.Lock()
			switch ev.Type {
			case watch.Added:
				c.live[pod.Name] = true
			case watch.Deleted:
				delete(c.live, pod.Name)
			}
			c.max = max(c.max, len(c.live))
			c.mu.Unlock()
		}
	})
	t.Cleanup(func() {
		w.Stop()
		wg.Wait()
	})
	return c
}

func (c *podCounter) most() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.max
}

// TestExactWithThePlugin runs kube-apiserver with its ResourceQuota
// plugin on and quotakit's controller in place of kube-controller-
// manager's, once with the charge window and once without it (the rule
// kube-controller-manager follows), and logs the two side by side:
//
//   - 200 concurrent pod creations against pods: 50, while pods are
//     deleted and created again: never more than 50 pods exist;
//   - 100 creations of a name already taken, each charged by the plugin
//     before the store refuses it, then a genuine creation: admitted
//     within a few windows, and status.used equals a recount.
func TestExactWithThePlugin(t *testing.T) {
	for _, tt := range []struct {
		name   string
		window time.Duration
	}{
		{"charge window", exactWindow},
		{"recount as kube-controller-manager", -1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := env.api.Config()
			cs := clientset(t, cfg)
			rc := newRecounter(t, cfg)
			ns := namespace(t, cs)
			podQuota(t, cs, ns, 50)
			runController(t, quotakit.Options{Namespace: ns, ChargeWindow: tt.window, ResyncPeriod: -1})
			waitFor(t, 30*time.Second, "the controller's first status", func() bool { return podUsed(t, cs, ns) == 0 })

			// A burst with churn.
			counter := countPods(t, cs, ns)
			ctx := t.Context()
			stop := make(chan struct{})
			var churn sync.WaitGroup
			churn.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					case <-time.After(20 * time.Millisecond):
					}
					pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
					if err != nil || len(pods.Items) == 0 {
						continue
					}
					victim := pods.Items[i%len(pods.Items)].Name
					if cs.CoreV1().Pods(ns).Delete(ctx, victim, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}) == nil {
						_, _ = cs.CoreV1().Pods(ns).Create(ctx, simplePod(victim+"-again"), metav1.CreateOptions{})
					}
				}
			})
			created, refused := createConcurrently(t, cs, ns, "burst", 200)
			close(stop)
			churn.Wait()
			time.Sleep(time.Second) // the watch's last events
			most := counter.most()
			t.Logf("%s: 200 creations under churn: %d admitted, %d refused; at most %d pods existed at once (hard 50)", tt.name, created, refused, most)
			if tt.window > 0 && most > 50 {
				t.Errorf("%d pods existed at once; hard is 50", most)
			}

			// Charges that no object follows: make room for five pods, and
			// let five creations of a name already taken be charged (the
			// plugin charges before the store refuses them) and a hundred
			// more be refused for the quota those charges fill; and a
			// hundred creations refused by a second webhook.
			pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range pods.Items[45:] {
				if err := cs.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
					t.Fatal(err)
				}
			}
			rc.waitQuotasRight(t, ns, 4*exactWindow, "after making room for five pods")
			taken := pods.Items[0].Name
			var alreadyExists, quotaRefused int
			for range 105 {
				_, err := cs.CoreV1().Pods(ns).Create(ctx, simplePod(taken), metav1.CreateOptions{})
				switch {
				case apierrors.IsAlreadyExists(err):
					alreadyExists++
				case apierrors.IsForbidden(err):
					quotaRefused++
				default:
					t.Fatalf("creating a taken name: %v, want AlreadyExists or a quota refusal", err)
				}
			}
			refusedByWebhook := refuseLabelled(t, cs, ns)
			start := time.Now()
			admitted := poll(10*exactWindow, func() bool {
				_, err := cs.CoreV1().Pods(ns).Create(ctx, simplePod(fmt.Sprintf("genuine-%d", time.Now().UnixNano())), metav1.CreateOptions{})
				return err == nil
			})
			wait := time.Since(start).Round(10 * time.Millisecond)
			t.Logf("%s: 105 creations of a taken name (%d AlreadyExists after their charge, %d refused for quota), %d refused by another webhook; a genuine creation admitted: %v after %v",
				tt.name, alreadyExists, quotaRefused, refusedByWebhook, admitted, wait)
			if tt.window > 0 {
				if !admitted {
					t.Errorf("no genuine creation admitted within ten windows")
				}
				rc.waitQuotasRight(t, ns, 4*exactWindow, "after the failed creations")
			}
		})
	}
}

// refuseLabelled registers a second validating webhook that refuses every
// pod labelled e2e-refuse=yes in ns, makes 100 such creations, and
// returns how many it refused. kube-apiserver runs its ResourceQuota
// plugin after the webhooks, so these are not charged by the plugin; a
// webhook that charges runs beside this one, and would be.
func refuseLabelled(t *testing.T, cs kubernetes.Interface, ns string) int {
	t.Helper()
	ctx := t.Context()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /refuse", func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: false,
			Result: &metav1.Status{Code: http.StatusForbidden, Message: "refused by the e2e webhook"}}
		review.Request = nil
		_ = json.NewEncoder(w).Encode(&review)
	})
	u := serveTLS(t, mux).String() + "/refuse"
	name := "refuse." + ns + ".quotakit.io"
	hook := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:         name,
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &u, CABundle: env.api.CA.PEM},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{
					APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"},
					Scope: ptr.To(admissionregistrationv1.NamespacedScope),
				},
			}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			ObjectSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{"e2e-refuse": "yes"}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](10),
		}},
	}
	register(t, cs, hook)
	pod := func(i int) *corev1.Pod {
		p := simplePod(fmt.Sprintf("refused-%d", i))
		p.Labels = map[string]string{"e2e-refuse": "yes"}
		return p
	}
	// kube-apiserver reads webhook configurations from an informer.
	if !poll(30*time.Second, func() bool {
		_, err := cs.CoreV1().Pods(ns).Create(ctx, pod(-1), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "refused by the e2e webhook")
	}) {
		t.Fatal("kube-apiserver did not call the refusing webhook within 30s")
	}
	refused := 0
	for i := range 100 {
		_, err := cs.CoreV1().Pods(ns).Create(ctx, pod(i), metav1.CreateOptions{})
		if err != nil && strings.Contains(err.Error(), "refused by the e2e webhook") {
			refused++
		}
	}
	return refused
}

// TestExactWebhookReplicas runs a kube-apiserver without its
// ResourceQuota plugin, with two replicas of quotakit's webhook behind
// one address, each request sent to the next replica: 100 concurrent pod
// creations against pods: 50 admit exactly 50, and status.used is 50.
func TestExactWebhookReplicas(t *testing.T) {
	ctx := t.Context()
	api, err := cluster.StartAPIServer(ctx, env.bins.APIServer, env.etcd, env.api.CA, env.dir, cluster.APIServerOptions{
		Name: "no-quota-plugin", EtcdPrefix: "/no-quota-plugin", NoResourceQuota: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(api.Stop)
	cfg := api.Config()
	cs := clientset(t, cfg)
	ns := namespace(t, cs)
	podQuota(t, cs, ns, 50)
	runControllerAt(t, cfg, quotakit.Options{Namespace: ns, ChargeWindow: exactWindow, ResyncPeriod: -1})
	waitFor(t, 30*time.Second, "the controller's first status", func() bool { return podUsed(t, cs, ns) == 0 })

	var replicas []*url.URL
	var engines []*admission.Evaluator
	for range 2 {
		u, e := serveReplica(t, cfg)
		replicas, engines = append(replicas, u), append(engines, e)
	}
	hookURL := roundRobin(t, replicas)
	hook := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "quota.exact.quotakit.io"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:         "quota.exact.quotakit.io",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &hookURL, CABundle: env.api.CA.PEM},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{
					APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"},
					Scope: ptr.To(admissionregistrationv1.NamespacedScope),
				},
			}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNoneOnDryRun),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](10),
		}},
	}
	register(t, cs, hook)
	// kube-apiserver reads webhook configurations from an informer: wait
	// until a dry run is refused for want of room, which only the webhook
	// can say.
	fill := &corev1.ResourceQuota{}
	if fill, err = cs.CoreV1().ResourceQuotas(ns).Get(ctx, "pods", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	fill.Spec.Hard[corev1.ResourcePods] = resource.MustParse("0")
	if _, err := cs.CoreV1().ResourceQuotas(ns).Update(ctx, fill, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var probe error
	if !poll(30*time.Second, func() bool {
		_, probe = cs.CoreV1().Pods(ns).Create(ctx, simplePod("probe"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return apierrors.IsForbidden(probe)
	}) {
		t.Fatalf("the webhook refused no dry run within 30s: %v", probe)
	}
	if fill, err = cs.CoreV1().ResourceQuotas(ns).Get(ctx, "pods", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	fill.Spec.Hard[corev1.ResourcePods] = resource.MustParse("50")
	if _, err := cs.CoreV1().ResourceQuotas(ns).Update(ctx, fill, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "status.hard back to 50", func() bool {
		q, err := cs.CoreV1().ResourceQuotas(ns).Get(ctx, "pods", metav1.GetOptions{})
		return err == nil && q.Status.Hard.Pods().Value() == 50
	})

	created, refused := createConcurrently(t, cs, ns, "p", 100)
	var conflicts, retries int64
	for _, e := range engines {
		s := e.Stats()
		conflicts, retries = conflicts+s.Conflicts, retries+s.Retries
	}
	t.Logf("two webhook replicas, 100 creations against pods: 50: %d admitted, %d refused; %d write conflicts, %d retries", created, refused, conflicts, retries)
	if created != 50 {
		t.Errorf("%d creations admitted, want exactly 50", created)
	}
	waitFor(t, 4*exactWindow, "status.used 50", func() bool { return podUsed(t, cs, ns) == 50 })
}

// createConcurrently creates n pods named prefix-<i> in ns at once, and
// returns how many were admitted and how many refused (Forbidden); any
// other error fails the test.
func createConcurrently(t *testing.T, cs kubernetes.Interface, ns, prefix string, n int) (created, refused int64) {
	t.Helper()
	var c, r atomic.Int64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, err := cs.CoreV1().Pods(ns).Create(t.Context(), simplePod(fmt.Sprintf("%s-%d", prefix, i)), metav1.CreateOptions{})
			switch {
			case err == nil:
				c.Add(1)
			case apierrors.IsForbidden(err):
				r.Add(1)
			default:
				t.Errorf("creation: %v", err)
			}
		})
	}
	wg.Wait()
	return c.Load(), r.Load()
}

// runControllerAt runs a controller built with opts over the kube
// bridge's Client of the API server of cfg until the test ends.
func runControllerAt(t *testing.T, cfg *rest.Config, opts quotakit.Options) {
	t.Helper()
	client, err := kube.NewForConfig(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctrl, err := quotakit.NewController(client, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := ctrl.Run(ctx); err != nil && ctx.Err() == nil {
			t.Errorf("controller: %v", err)
		}
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
}

// serveReplica serves one webhook replica for the API server of cfg: the
// core evaluators over the kube bridge's quota cache, as the binary
// builds it. It returns its URL and engine, and stops when the test ends.
func serveReplica(t *testing.T, cfg *rest.Config) (*url.URL, *admission.Evaluator) {
	t.Helper()
	client, err := kube.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	quotas := client.QuotaInformer("")
	e, err := admission.NewEvaluator(admission.NewAccessor(kube.QuotaLister(quotas), quotas.HasSynced, client, admission.AccessorOptions{}), admission.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return serveEvaluator(t, quotas, e), e
}

// roundRobin serves, over TLS, a proxy that sends each request to the
// next of replicas, as a Service with two endpoints spreads connections,
// and returns its URL.
func roundRobin(t *testing.T, replicas []*url.URL) string {
	t.Helper()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(env.api.CA.PEM) {
		t.Fatal("bad CA certificate")
	}
	var next atomic.Uint64
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(replicas[next.Add(1)%uint64(len(replicas))])
		},
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}},
	}
	return serveTLS(t, proxy).String() + "/validate"
}

// serveTLS serves h over TLS on loopback, with a certificate of the
// test CA, until the test ends, and returns its base URL.
func serveTLS(t *testing.T, h http.Handler) *url.URL {
	t.Helper()
	tlsConfig, err := env.api.CA.TLSConfig()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, TLSConfig: tlsConfig, ReadHeaderTimeout: 10 * time.Second}
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := srv.ServeTLS(l, "", ""); !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("server: %v", err)
		}
	})
	t.Cleanup(func() {
		_ = srv.Close()
		wg.Wait()
	})
	return &url.URL{Scheme: "https", Host: l.Addr().String()}
}
