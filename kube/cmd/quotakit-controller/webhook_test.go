package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/quotakit/quotakit"
	"github.com/quotakit/quotakit/kube"
)

// writeCert writes a self-signed certificate and its key as PEM files.
func writeCert(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "quotakit-controller.quotakit-system.svc"},
		DNSNames: []string{"quotakit-controller.quotakit-system.svc"}, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// addQuotas adds to f a quota of one pod in namespace full, used up, and
// one in namespace room, unused.
func addQuotas(t *testing.T, f *fakes) {
	t.Helper()
	full := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: "full", Name: "q"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}},
		Status: corev1.ResourceQuotaStatus{
			Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")},
			Used: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")},
		},
	}
	if _, err := f.typed.CoreV1().ResourceQuotas("full").Create(t.Context(), full, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	room := full.DeepCopy()
	room.Namespace = "room"
	room.Status.Used = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}
	if _, err := f.typed.CoreV1().ResourceQuotas("room").Create(t.Context(), room, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// usedPods returns status.used pods of quota q of namespace.
func usedPods(t *testing.T, f *fakes, namespace string) string {
	t.Helper()
	rq, err := f.typed.CoreV1().ResourceQuotas(namespace).Get(t.Context(), "q", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return rq.Status.Used.Pods().String()
}

// TestWebhook builds the command's webhook, enforcing namespaced quota,
// over client-go's fakes and sends it AdmissionReviews: a pod create in a
// namespace whose quota is full is denied with kube-apiserver's message,
// one in a namespace with room is allowed and charged to the quota's
// status, and the webhook metrics count both. The TLS listener is not
// exercised (TestShutdownOrder and TestClientCertificates do); the
// handler is called directly.
func TestWebhook(t *testing.T) {
	cert, key := writeCert(t)
	synctest.Test(t, func(t *testing.T) {
		f := newFakes()
		addQuotas(t, f)
		// From here on the fakes record the webhook's requests only.
		f.typed.ClearActions()
		cfg, err := parseFlags([]string{"-leader-elect=false", "-webhook-addr=:9443", "-caller-trust=insecure-any-caller", "-tls-cert-file=" + cert, "-tls-private-key-file=" + key, "-enforce-namespaced-quota"}, t.Output())
		if err != nil {
			t.Fatal(err)
		}
		reg := newRegistry()
		hook, err := newWebhook(cfg, kube.New(f.clients(), quotakit.Options{}), reg)
		if err != nil {
			t.Fatalf("newWebhook: %v", err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); hook.run(ctx, logr.Discard()) }()
		time.Sleep(time.Second)
		synctest.Wait()
		if !hook.synced() {
			t.Fatal("the webhook's quota cache did not sync")
		}
		served := webhookRequests(t, "200")
		latency := webhookLatencySamples(t)

		denied := post(t, hook.mux(), review(t, "full"))
		if denied.Allowed || denied.Result == nil || denied.Result.Code != http.StatusForbidden || !strings.Contains(denied.Result.Message, "exceeded quota: q") {
			t.Errorf("create in a full namespace: %+v, want a 403 exceeded quota denial", denied)
		}
		allowed := post(t, hook.mux(), review(t, "room"))
		if !allowed.Allowed {
			t.Errorf("create in a namespace with room: %+v, want allowed", allowed)
		}
		calls := f.calls()
		if got := usedPods(t, f, "room"); got != "1" {
			t.Errorf("status.used pods after the admitted create = %s, want 1 (charged)", got)
		}
		cancel()
		<-done

		// controller-runtime's series, in its registry, which every
		// test of the process shares: by what they grew.
		hookLabel := map[string]string{"webhook": "/validate"}
		if got := webhookRequests(t, "200") - served; got != 2 {
			t.Errorf("controller_runtime_webhook_requests_total{code=200} grew by %v, want 2", got)
		}
		if got := gauge(t, crmetrics.Registry, "controller_runtime_webhook_requests_in_flight", hookLabel); got != 0 {
			t.Errorf("controller_runtime_webhook_requests_in_flight = %v, want 0", got)
		}
		if got := webhookLatencySamples(t) - latency; got != 2 {
			t.Errorf("controller_runtime_webhook_latency_seconds grew by %v samples, want 2", got)
		}
		if got := counter(t, reg, "quotakit_webhook_denials_total", map[string]string{"reason": "Forbidden"}); got != 1 {
			t.Errorf("quotakit_webhook_denials_total{reason=Forbidden} = %v, want 1", got)
		}

		// TestRolesMatchCalls checks the webhook's requests against its
		// RBAC rules.
		if len(calls) < 3 {
			t.Errorf("the webhook made too few requests: %v", calls)
		}
	})
}

// TestWebhookNotEnforcing checks the default: without
// -enforce-namespaced-quota the webhook allows a create that a full quota
// would deny (kube-apiserver's own plugin enforces that quota), charges
// nothing, makes no API request and is ready without a quota cache.
func TestWebhookNotEnforcing(t *testing.T) {
	cert, key := writeCert(t)
	synctest.Test(t, func(t *testing.T) {
		f := newFakes()
		addQuotas(t, f)
		f.typed.ClearActions()
		cfg, err := parseFlags([]string{"-leader-elect=false", "-webhook-addr=:9443", "-caller-trust=insecure-any-caller", "-tls-cert-file=" + cert, "-tls-private-key-file=" + key}, t.Output())
		if err != nil {
			t.Fatal(err)
		}
		hook, err := newWebhook(cfg, kube.New(f.clients(), quotakit.Options{}), newRegistry())
		if err != nil {
			t.Fatalf("newWebhook: %v", err)
		}
		if len(hook.caches) != 0 {
			t.Error("a webhook that enforces no quota has a quota cache")
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); hook.run(ctx, logr.Discard()) }()
		for _, ns := range []string{"full", "room"} {
			if got := post(t, hook.mux(), review(t, ns)); !got.Allowed {
				t.Errorf("create in namespace %s: %+v, want allowed", ns, got)
			}
		}
		cancel()
		<-done
		if calls := f.calls(); len(calls) != 0 {
			t.Errorf("a webhook that enforces no quota made API requests: %v", calls)
		}
		if got := usedPods(t, f, "room"); got != "0" {
			t.Errorf("status.used pods = %s, want 0 (nothing charged)", got)
		}
		ctrl, err := quotakit.NewController(kube.New(f.clients(), quotakit.Options{}), quotakit.Options{})
		if err != nil {
			t.Fatal(err)
		}
		_, ready := probeHandlers(t.Context(), config{controller: true, leaderElect: true}, ctrl, hook)
		if code := probe(ready); code != http.StatusOK {
			t.Errorf("/readyz of a standby whose webhook enforces nothing = %d, want 200", code)
		}
	})
}

// TestWebhookStandbyNotReady checks that a standby whose webhook enforces
// quota is not ready while its quota cache cannot sync (the API server is
// unreachable), and is once it has.
func TestWebhookStandbyNotReady(t *testing.T) {
	cert, key := writeCert(t)
	synctest.Test(t, func(t *testing.T) {
		f := newFakes()
		var unreachable atomic.Bool
		unreachable.Store(true)
		f.typed.PrependReactor("list", "resourcequotas", func(clienttesting.Action) (bool, runtime.Object, error) {
			if unreachable.Load() {
				return true, nil, errors.New("dial tcp: connection refused")
			}
			return false, nil, nil
		})
		cfg, err := parseFlags([]string{"-leader-elect-resource-namespace=kube-system", "-webhook-addr=:9443", "-caller-trust=insecure-any-caller", "-tls-cert-file=" + cert, "-tls-private-key-file=" + key, "-enforce-namespaced-quota"}, t.Output())
		if err != nil {
			t.Fatal(err)
		}
		hook, err := newWebhook(cfg, kube.New(f.clients(), quotakit.Options{}), newRegistry())
		if err != nil {
			t.Fatal(err)
		}
		ctrl, err := quotakit.NewController(kube.New(f.clients(), quotakit.Options{}), quotakit.Options{})
		if err != nil {
			t.Fatal(err)
		}
		// A standby: the controller does not run.
		_, standby := probeHandlers(t.Context(), cfg, ctrl, hook)
		readyz := func() int { return probe(standby) }
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); hook.run(ctx, logr.Discard()) }()
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if code := readyz(); code != http.StatusInternalServerError {
			t.Errorf("/readyz of a standby serving the webhook without reaching the API server = %d, want 500", code)
		}
		unreachable.Store(false)
		time.Sleep(time.Minute)
		synctest.Wait()
		if code := readyz(); code != http.StatusOK {
			t.Errorf("/readyz of a standby whose webhook's cache synced = %d, want 200", code)
		}
		cancel()
		<-done
	})
}

// TestConcurrentReviewsCap checks that a review over -max-concurrent-reviews
// is answered 429, an error kube-apiserver handles by failurePolicy, not a
// review that denies, and is counted by its code; and that the slot is
// held while a review is evaluated (here, while its status write waits)
// and given back after.
func TestConcurrentReviewsCap(t *testing.T) {
	cert, key := writeCert(t)
	synctest.Test(t, func(t *testing.T) {
		f := newFakes()
		addQuotas(t, f)
		writing, release := make(chan struct{}), make(chan struct{})
		f.typed.PrependReactor("update", "resourcequotas", func(action clienttesting.Action) (bool, runtime.Object, error) {
			if action.GetSubresource() == "status" && action.GetNamespace() == "room" {
				close(writing)
				<-release
			}
			return false, nil, nil
		})
		cfg, err := parseFlags([]string{"-leader-elect=false", "-webhook-addr=:9443", "-caller-trust=insecure-any-caller", "-tls-cert-file=" + cert, "-tls-private-key-file=" + key,
			"-enforce-namespaced-quota", "-max-concurrent-reviews=1"}, t.Output())
		if err != nil {
			t.Fatal(err)
		}
		hook, err := newWebhook(cfg, kube.New(f.clients(), quotakit.Options{}), newRegistry())
		if err != nil {
			t.Fatal(err)
		}
		refused := webhookRequests(t, "429")
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); hook.run(ctx, logr.Discard()) }()
		defer func() { cancel(); <-done }()
		time.Sleep(time.Second)
		synctest.Wait()
		send := func(namespace string) *httptest.ResponseRecorder {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodPost, "/validate", bytes.NewReader(review(t, namespace)))
			req.Header.Set("Content-Type", "application/json")
			hook.mux().ServeHTTP(rec, req)
			return rec
		}

		first := make(chan *httptest.ResponseRecorder)
		go func() { first <- send("room") }()
		<-writing
		rec := send("other")
		if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" {
			t.Errorf("a review over the cap = %d (Retry-After %q), want 429 with Retry-After", rec.Code, rec.Header().Get("Retry-After"))
		}
		if strings.Contains(rec.Body.String(), `"response"`) {
			t.Errorf("a review over the cap was answered with a review: %s", rec.Body.String())
		}
		close(release)
		if rec := <-first; rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"allowed":true`) {
			t.Errorf("the review within the cap = %d %s, want 200, allowed", rec.Code, rec.Body.String())
		}
		if got := webhookRequests(t, "429") - refused; got != 1 {
			t.Errorf("controller_runtime_webhook_requests_total{code=429} grew by %v, want 1", got)
		}
		// The slot is free again.
		if rec := send("other"); rec.Code != http.StatusOK {
			t.Errorf("a review after the first returned = %d, want 200", rec.Code)
		}
	})
}

// webhookRequests returns controller_runtime_webhook_requests_total of
// the webhook's path and code, 0 before the first.
func webhookRequests(t *testing.T, code string) float64 {
	t.Helper()
	return max(0, counter(t, crmetrics.Registry, "controller_runtime_webhook_requests_total", map[string]string{"webhook": webhookPath, "code": code}))
}

// webhookLatencySamples returns how many requests to the webhook's path
// controller_runtime_webhook_latency_seconds has observed.
func webhookLatencySamples(t *testing.T) float64 {
	t.Helper()
	return float64(metric(t, crmetrics.Registry, "controller_runtime_webhook_latency_seconds", map[string]string{"webhook": webhookPath}).GetHistogram().GetSampleCount())
}

// review returns an AdmissionReview of a pod create in namespace.
func review(t *testing.T, namespace string) []byte {
	t.Helper()
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "p"}}
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	r := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       "1",
			Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Namespace: namespace, Name: "p", Operation: admissionv1.Create,
			Object: runtime.RawExtension{Raw: raw},
		},
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// post sends body to h's /validate and decodes the answer.
func post(t *testing.T, h http.Handler, body []byte) *admissionv1.AdmissionResponse {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/validate", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("POST /validate = %d %s", rec.Code, strings.TrimSpace(rec.Body.String()))
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
		t.Fatalf("decoding the review: %v", err)
	}
	return out.Response
}

// TestCertLoader checks that a rewritten certificate is served without a
// restart, and that a broken rewrite keeps the previous one.
func TestCertLoader(t *testing.T) {
	cert, key := writeCert(t)
	l := &certLoader{certFile: cert, keyFile: key}
	first, err := l.get(nil)
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	cert2, key2 := writeCert(t)
	for _, p := range [][2]string{{cert2, cert}, {key2, key}} {
		b, err := os.ReadFile(p[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p[1], b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(cert, later, later); err != nil {
		t.Fatal(err)
	}
	second, err := l.get(nil)
	if err != nil || bytes.Equal(first.Certificate[0], second.Certificate[0]) {
		t.Errorf("after a rewrite get = %v; want the new certificate", err)
	}
	if err := os.WriteFile(cert, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(cert, later.Add(time.Minute), later.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	third, err := l.get(nil)
	if err != nil || !bytes.Equal(second.Certificate[0], third.Certificate[0]) {
		t.Errorf("after a broken rewrite get = %v; want the previous certificate", err)
	}
	if _, err := (&certLoader{certFile: cert, keyFile: key}).get(nil); err == nil {
		t.Error("get of a broken certificate with none loaded before = nil error, want one")
	}
}
