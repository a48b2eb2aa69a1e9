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
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

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

// TestWebhook builds the command's webhook over client-go's fakes and
// sends it AdmissionReviews: a pod create in a namespace whose quota is
// full is denied with kube-apiserver's message, one in a namespace with
// room is allowed and charged to the quota's status. The TLS listener is
// not exercised (no sockets inside synctest); the handler is called
// directly.
func TestWebhook(t *testing.T) {
	cert, key := writeCert(t)
	synctest.Test(t, func(t *testing.T) {
		f := newFakes()
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

		// From here on the fakes record the webhook's requests only.
		f.typed.ClearActions()
		cfg, err := parseFlags([]string{"-leader-elect=false", "-webhook-addr=:9443", "-tls-cert-file=" + cert, "-tls-private-key-file=" + key}, t.Output())
		if err != nil {
			t.Fatal(err)
		}
		hook, err := newWebhook(cfg, kube.New(f.clients(), quotakit.Options{}))
		if err != nil {
			t.Fatalf("newWebhook: %v", err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); hook.run(ctx, logr.Discard()) }()
		time.Sleep(time.Second)
		synctest.Wait()
		if !hook.informer.HasSynced() {
			t.Fatal("the webhook's quota cache did not sync")
		}

		denied := post(t, hook.mux(), review(t, "full"))
		if denied.Allowed || denied.Result == nil || denied.Result.Code != http.StatusForbidden || !strings.Contains(denied.Result.Message, "exceeded quota: q") {
			t.Errorf("create in a full namespace: %+v, want a 403 exceeded quota denial", denied)
		}
		allowed := post(t, hook.mux(), review(t, "room"))
		if !allowed.Allowed {
			t.Errorf("create in a namespace with room: %+v, want allowed", allowed)
		}
		calls := f.calls()
		rq, err := f.typed.CoreV1().ResourceQuotas("room").Get(t.Context(), "q", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := rq.Status.Used.Pods().String(); got != "1" {
			t.Errorf("status.used pods after the admitted create = %s, want 1 (charged)", got)
		}
		cancel()
		<-done
		// The webhook's requests are allowed by the deployed RBAC rules.
		if len(calls) < 3 {
			t.Errorf("the webhook made too few requests to check the rules: %v", calls)
		}
		for _, d := range checkRBAC(t, calls) {
			t.Error(d)
		}
	})
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
