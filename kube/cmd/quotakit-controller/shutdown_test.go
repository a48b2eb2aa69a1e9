package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"
)

// memNet is an in-memory network of listeners, by port, whose
// connections are net.Pipes: servers and clients that run inside a
// synctest bubble, where real sockets would keep time from advancing.
type memNet struct {
	mu sync.Mutex
	// guarded by mu
	listeners map[string]*memListener
}

func (n *memNet) listen(addr string) (net.Listener, error) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.listeners == nil {
		n.listeners = map[string]*memListener{}
	}
	if l := n.listeners[port]; l != nil && !l.closed() {
		return nil, fmt.Errorf("listen %s: address in use", addr)
	}
	l := &memListener{addr: addr, conns: make(chan net.Conn), done: make(chan struct{})}
	n.listeners[port] = l
	return l, nil
}

// dial connects to the listener of addr's port, or fails as a refused
// connection when there is none or it is closed.
func (n *memNet) dial(ctx context.Context, _, addr string) (net.Conn, error) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	l := n.listeners[port]
	n.mu.Unlock()
	if l == nil {
		return nil, fmt.Errorf("dial %s: connection refused", addr)
	}
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
	case <-ctx.Done():
	}
	client.Close()
	server.Close()
	return nil, fmt.Errorf("dial %s: connection refused", addr)
}

type memListener struct {
	addr  string
	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
}

func (l *memListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *memListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *memListener) closed() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

func (l *memListener) Addr() net.Addr { return memAddr(l.addr) }

type memAddr string

func (a memAddr) Network() string { return "mem" }
func (a memAddr) String() string  { return string(a) }

// freeAddr returns a loopback address with a port free a moment ago, for
// a server whose listener a test cannot reach (the manager's probes).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestShutdownOrder runs the binary with the webhook, enforcing quota,
// over client-go's fakes and loopback sockets, sends SIGTERM (cancels its
// context) while a review waits for its quota status write, and checks
// the order of the shutdown:
//
//   - /readyz fails at once, while the webhook still accepts and answers
//     new reviews, for -shutdown-delay;
//   - then the webhook stops accepting, while the review in flight still
//     waits, and the lease is still held;
//   - the review in flight gets its real answer (allowed, charged), not
//     a denial because the evaluator stopped;
//   - only then does the controller stop and the lease get released.
//
// It runs in real time: the manager's probes listen on a socket, which a
// synctest bubble cannot wait on. The manager's own config points at a
// server that fails the test if the manager makes any request: every
// request of the command goes through the clients the RBAC tests check.
func TestShutdownOrder(t *testing.T) {
	cert, key := writeCert(t)
	f := newFakes()
	// The webhook's own client, as in a cluster; its status write of
	// namespace room waits until the test releases it.
	hookFakes := newFakes()
	addQuotas(t, hookFakes)
	writing, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	releaseWrite := func() { releaseOnce.Do(func() { close(release) }) }
	hookFakes.typed.PrependReactor("update", "resourcequotas", func(action clienttesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() == "status" && action.GetNamespace() == "room" {
			close(writing)
			<-release
		}
		return false, nil, nil
	})
	apiserver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the manager's own client made a request: %s %s", r.Method, r.URL)
		http.Error(w, "no", http.StatusForbidden)
	}))
	defer apiserver.Close()
	const delay = 2 * time.Second
	probes, hookAddr := freeAddr(t), freeAddr(t)
	cfg, err := parseFlags([]string{
		"-leader-elect-resource-namespace=kube-system", "-metrics-bind-address=0", "-health-probe-bind-address=" + probes,
		"-webhook-addr=" + hookAddr, "-caller-trust=insecure-any-caller", "-tls-cert-file=" + cert, "-tls-private-key-file=" + key, "-enforce-namespaced-quota",
		"-shutdown-delay=" + delay.String(),
	}, t.Output())
	if err != nil {
		t.Fatal(err)
	}
	ctx, sigterm := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- runWith(ctx, cfg, env{clients: f.clients(), admission: hookFakes.clients(), reg: newRegistry(), config: &rest.Config{Host: apiserver.URL}})
	}()
	// Whatever fails, everything stops before the test ends.
	defer func() {
		sigterm()
		releaseWrite()
		<-done
	}()

	transport := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool(t, cert), ServerName: "quotakit-controller.quotakit-system.svc"}}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: 30 * time.Second}
	readyz := func() (int, error) {
		resp, err := client.Get("http://" + probes + "/readyz")
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	reviewOf := func(namespace string) (*admissionv1.AdmissionResponse, error) {
		resp, err := client.Post("https://"+hookAddr+"/validate", "application/json", bytes.NewReader(review(t, namespace)))
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		var out admissionv1.AdmissionReview
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Response == nil {
			return nil, fmt.Errorf("decoding the review: %v", err)
		}
		return out.Response, nil
	}
	leaseHolder := func() string {
		lease, err := f.typed.CoordinationV1().Leases("kube-system").Get(t.Context(), cfg.leaseName, metav1.GetOptions{})
		if err != nil {
			return ""
		}
		if lease.Spec.HolderIdentity == nil {
			return ""
		}
		return *lease.Spec.HolderIdentity
	}

	// The leader synced: ready.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		code, err := readyz()
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz of the leader = %d, %v; want 200 within 30s", code, err)
		}
	}
	if leaseHolder() == "" {
		t.Fatal("the ready leader holds no lease")
	}
	type answer struct {
		resp *admissionv1.AdmissionResponse
		err  error
	}
	inFlight := make(chan answer, 1)
	go func() {
		resp, err := reviewOf("room")
		inFlight <- answer{resp, err}
	}()
	select {
	case <-writing:
	case a := <-inFlight:
		t.Fatalf("the review was answered before its status write: %+v, %v", a.resp, a.err)
	}
	sigterm()
	sigtermAt := time.Now()

	if code, err := readyz(); code != http.StatusInternalServerError {
		t.Errorf("/readyz after SIGTERM = %d, %v; want 500", code, err)
	}
	// Endpoints are not removed yet everywhere: a new review is
	// answered.
	if resp, err := reviewOf("other"); err != nil || !resp.Allowed {
		t.Errorf("a review during the shutdown delay = %+v, %v; want allowed", resp, err)
	}
	if d := time.Since(sigtermAt); d >= delay {
		t.Fatalf("the checks during the shutdown delay took %v, longer than the delay %v", d, delay)
	}

	time.Sleep(time.Until(sigtermAt.Add(delay + time.Second)))
	transport.CloseIdleConnections()
	if _, err := reviewOf("other"); err == nil {
		t.Error("a review after the shutdown delay was answered; want the listener closed")
	}
	select {
	case a := <-inFlight:
		t.Fatalf("the review in flight was answered before its write returned: %+v, %v", a.resp, a.err)
	default:
	}
	if leaseHolder() == "" {
		t.Error("the lease was released while a review was in flight")
	}

	releaseWrite()
	a := <-inFlight
	if a.err != nil || !a.resp.Allowed {
		t.Errorf("the review in flight at SIGTERM = %+v, %v; want allowed", a.resp, a.err)
	}
	if got := usedPods(t, hookFakes, "room"); got != "1" {
		t.Errorf("status.used pods of room = %s, want 1 (the review in flight charged)", got)
	}
	if err := <-done; err != nil {
		t.Errorf("runWith = %v, want nil", err)
	}
	done <- nil // for the deferred stop
	if h := leaseHolder(); h != "" {
		t.Errorf("after shutdown the lease is held by %q, want released", h)
	}
}

// pool returns a pool of the PEM certificates of file.
func pool(t *testing.T, file string) *x509.CertPool {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(b) {
		t.Fatal(errors.New("no certificate"))
	}
	return p
}
