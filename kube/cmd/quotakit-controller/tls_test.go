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
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/quotakit/quotakit"
	"github.com/quotakit/quotakit/cache"
	"github.com/quotakit/quotakit/kube"
)

// certAuthority is a certificate authority for client certificates.
type certAuthority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newCertAuthority(t *testing.T, name string) *certAuthority {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &certAuthority{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// client returns a client certificate for user, signed by ca.
func (ca *certAuthority) client(t *testing.T, user string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: user},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestClientCertificates serves the webhook, enforcing quota, over TLS on
// a loopback socket with -client-ca-file and -client-allowed-names, and
// sends the same review without a client certificate, with one of another
// CA, with one the bundle verifies for a name not allowed, and with one
// the bundle verifies for an allowed name: only the last reaches the
// handler and is charged; the others fail in the handshake and charge
// nothing.
func TestClientCertificates(t *testing.T) {
	serverCert, serverKey := writeCert(t)
	trusted, rogue := newCertAuthority(t, "kube-apiserver clients"), newCertAuthority(t, "someone else")
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, trusted.pem, 0o600); err != nil {
		t.Fatal(err)
	}
	f := newFakes()
	addQuotas(t, f)
	cfg, err := parseFlags([]string{
		"-leader-elect=false", "-webhook-addr=127.0.0.1:0", "-tls-cert-file=" + serverCert, "-tls-private-key-file=" + serverKey,
		"-client-ca-file=" + caFile, "-client-allowed-names=kube-apiserver,other", "-enforce-namespaced-quota", "-shutdown-delay=0",
	}, t.Output())
	if err != nil {
		t.Fatal(err)
	}
	hook, err := newWebhook(cfg, kube.New(f.clients(), quotakit.Options{}), newRegistry())
	if err != nil {
		t.Fatalf("newWebhook: %v", err)
	}
	if err := hook.listen(func(addr string) (net.Listener, error) { return net.Listen("tcp", addr) }); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(logr.NewContext(t.Context(), logr.Discard()))
	running := make(chan error, 1)
	go func() { running <- hook.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-running; err != nil {
			t.Errorf("Start = %v", err)
		}
	}()
	if !cache.WaitForCacheSync(ctx, hook.synced) {
		t.Fatal("the webhook's quota cache did not sync")
	}
	served := webhookRequests(t, "200")

	send := func(cert *tls.Certificate) (*admissionv1.AdmissionResponse, error) {
		tc := &tls.Config{RootCAs: pool(t, serverCert), ServerName: "quotakit-controller.quotakit-system.svc"}
		if cert != nil {
			tc.Certificates = []tls.Certificate{*cert}
		}
		transport := &http.Transport{TLSClientConfig: tc}
		defer transport.CloseIdleConnections()
		resp, err := (&http.Client{Transport: transport, Timeout: 10 * time.Second}).Post("https://"+hook.ln.Addr().String()+"/validate", "application/json", bytes.NewReader(review(t, "room")))
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		var out admissionv1.AdmissionReview
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			return nil, err
		}
		return out.Response, nil
	}
	rogueCert, trustedCert := rogue.client(t, "kube-apiserver"), trusted.client(t, "kube-apiserver")
	// The trusted CA signs other clients too, as a cluster's CA signs
	// every kubelet's certificate: their name is not allowed.
	kubeletCert := trusted.client(t, "system:node:worker-1")
	for _, tt := range []struct {
		name string
		cert *tls.Certificate
	}{{"no client certificate", nil}, {"a certificate of another CA", &rogueCert}, {"a certificate of the CA for a name not allowed", &kubeletCert}} {
		if resp, err := send(tt.cert); err == nil {
			t.Errorf("review with %s = %+v; want the handshake refused", tt.name, resp)
		}
	}
	if got := usedPods(t, f, "room"); got != "0" {
		t.Errorf("status.used pods after refused reviews = %s, want 0", got)
	}
	resp, err := send(&trustedCert)
	if err != nil || !resp.Allowed {
		t.Fatalf("review with a trusted certificate = %+v, %v; want allowed", resp, err)
	}
	if got := usedPods(t, f, "room"); got != "1" {
		t.Errorf("status.used pods after the trusted review = %s, want 1", got)
	}
	// The refused reviews never reached the handler.
	if got := webhookRequests(t, "200") - served; got != 1 {
		t.Errorf("controller_runtime_webhook_requests_total{code=200} grew by %v, want 1", got)
	}
}

// TestCALoader checks that the client CA bundle is read again when it
// changes, and that a broken rewrite keeps the previous pool.
func TestCALoader(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ca.crt")
	if _, err := (&caLoader{file: file}).get(); err == nil {
		t.Error("get of a missing bundle = nil error, want one")
	}
	first := newCertAuthority(t, "first")
	if err := os.WriteFile(file, first.pem, 0o600); err != nil {
		t.Fatal(err)
	}
	l := &caLoader{file: file}
	p1, err := l.get()
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	second := newCertAuthority(t, "second")
	if err := os.WriteFile(file, append(first.pem, second.pem...), 0o600); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(file, later, later); err != nil {
		t.Fatal(err)
	}
	p2, err := l.get()
	if err != nil || p2 == p1 {
		t.Errorf("after a rewrite get = %v, the same pool %v; want a new pool", err, p2 == p1)
	}
	if err := os.WriteFile(file, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(file, later.Add(time.Minute), later.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if p3, err := l.get(); err != nil || p3 != p2 {
		t.Errorf("after a broken rewrite get = %v, same pool %v; want the previous pool", err, p3 == p2)
	}
	if _, err := (&caLoader{file: file}).get(); err == nil {
		t.Error("get of a bundle without certificates = nil error, want one")
	}
}
