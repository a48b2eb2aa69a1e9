package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
)

func reviewOf(namespace, name string) []byte {
	return []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{
		"uid":"` + namespace + "-" + name + `","operation":"CREATE","namespace":"` + namespace + `","name":"` + name + `",
		"kind":{"version":"v1","kind":"Pod"},"resource":{"version":"v1","resource":"pods"},
		"object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"` + name + `"},"spec":{"containers":[{"name":"app","image":"nginx"}]}}}}`)
}

func postReview(t *testing.T, client *http.Client, url string, body []byte) *admissionv1.AdmissionResponse {
	t.Helper()
	resp, err := client.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&review); err != nil || review.Response == nil {
		t.Fatalf("answer %d: %v %+v", resp.StatusCode, err, review)
	}
	return review.Response
}

func TestWebhook(t *testing.T) {
	hard, err := parseHard("pods=1")
	if err != nil {
		t.Fatal(err)
	}
	handler, e, err := newServer(config{hard: hard, timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	defer func() { cancel(); <-done }()
	srv := httptest.NewTLSServer(handler)
	defer srv.Close()

	if r := postReview(t, srv.Client(), srv.URL+"/validate", reviewOf("a", "web")); !r.Allowed {
		t.Errorf("first pod of a: %+v, want allowed", r.Result)
	}
	r := postReview(t, srv.Client(), srv.URL+"/validate", reviewOf("a", "db"))
	const want = `pods "db" is forbidden: exceeded quota: default, requested: pods=1, used: pods=1, limited: pods=1`
	if r.Allowed || r.Result.Code != http.StatusForbidden || r.Result.Message != want {
		t.Errorf("second pod of a: allowed=%v %+v, want denied with %q", r.Allowed, r.Result, want)
	}
	if r := postReview(t, srv.Client(), srv.URL+"/validate", reviewOf("b", "web")); !r.Allowed {
		t.Errorf("first pod of b: %+v, want allowed", r.Result)
	}

	resp, err := srv.Client().Get(srv.URL + "/quotas")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var quotas []corev1.ResourceQuota
	if err := json.NewDecoder(resp.Body).Decode(&quotas); err != nil {
		t.Fatal(err)
	}
	if len(quotas) != 2 || quotas[0].Status.Used.Pods().Value() != 1 || quotas[1].Status.Used.Pods().Value() != 1 {
		t.Errorf("/quotas = %+v, want a and b with one pod each", quotas)
	}
}

// TestRunServesTLS runs the program with a certificate and key from files.
func TestRunServesTLS(t *testing.T) {
	dir := t.TempDir()
	certPEM, keyPEM := selfSigned(t)
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	for f, b := range map[string][]byte{certFile: certPEM, keyFile: keyPEM} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	listening := make(chan net.Addr, 1)
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-tls-cert-file", certFile, "-tls-private-key-file", keyFile, "-hard", "pods=5"},
			io.Discard, func(a net.Addr) { listening <- a })
	}()
	var addr string
	select {
	case a := <-listening:
		addr = a.String()
	case err := <-done:
		t.Fatalf("run = %v before listening", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := client.Get("https://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if r := postReview(t, client, "https://"+addr+"/validate", reviewOf("a", "web")); !r.Allowed {
		t.Errorf("pod: %+v, want allowed", r.Result)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run = %v, want nil after cancel", err)
	}
}

func TestFlags(t *testing.T) {
	tests := []struct {
		args  []string
		want  string
		usage bool // a bad command line: the program exits 2
	}{
		{nil, "-tls-cert-file and -tls-private-key-file are required", true},
		{[]string{"-tls-cert-file", "c", "-tls-private-key-file", "k", "-hard", "pods"}, `"pods" is not name=quantity`, true},
		{[]string{"-tls-cert-file", "c", "-tls-private-key-file", "k", "-hard", "pods=ten"}, "-hard: pods", true},
		{[]string{"-no-such-flag"}, "flag provided but not defined", true},
		{[]string{"-tls-cert-file", "c", "-tls-private-key-file", "k", "-admission-config", "/nonexistent/config.yaml"}, "no such file", false},
		{[]string{"-tls-cert-file", "c", "-tls-private-key-file", "k"}, "no such file", false},
	}
	for _, tt := range tests {
		err := run(t.Context(), append([]string{"-addr", "127.0.0.1:0"}, tt.args...), io.Discard, func(net.Addr) { t.Errorf("run(%q) listened", tt.args) })
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("run(%q) = %v, want an error containing %q", tt.args, err, tt.want)
		}
		if usage := errors.As(err, new(usageError)); usage != tt.usage {
			t.Errorf("run(%q) = %v, a usage error: %v, want %v", tt.args, err, usage, tt.usage)
		}
	}
}

// selfSigned returns a certificate for 127.0.0.1 and its key, PEM-encoded.
func selfSigned(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "quotakit-admission"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}
