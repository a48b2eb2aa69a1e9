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
	"os"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
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

// TestShutdownOrder runs the binary with the webhook, enforcing quota,
// over client-go's fakes and an in-memory network, sends SIGTERM (cancels
// its context) while a review waits for its quota status write, and
// checks the order of the shutdown:
//
//   - /readyz fails at once, while the webhook still accepts and answers
//     new reviews, for -shutdown-delay;
//   - then the webhook stops accepting, while the review in flight still
//     waits, and the lease is still held;
//   - the review in flight gets its real answer (allowed, charged), not
//     a denial because the evaluator stopped;
//   - only then does the controller stop and the lease get released.
func TestShutdownOrder(t *testing.T) {
	cert, key := writeCert(t)
	// The bubble's clock starts in 2000; the certificate is valid now.
	certTime := time.Now()
	synctest.Test(t, func(t *testing.T) {
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
		cfg, err := parseFlags([]string{
			"-leader-elect-resource-namespace=kube-system", "-metrics-bind-address=0", "-health-probe-bind-address=:8081",
			"-webhook-addr=:9443", "-caller-trust=insecure-any-caller", "-tls-cert-file=" + cert, "-tls-private-key-file=" + key, "-enforce-namespaced-quota",
			"-shutdown-delay=4s",
		}, t.Output())
		if err != nil {
			t.Fatal(err)
		}
		var mem memNet
		ctx, sigterm := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			done <- runWith(ctx, cfg, env{clients: f.clients(), admission: hookFakes.clients(), reg: newRegistry(), listen: mem.listen})
		}()
		// Whatever fails, everything stops before the bubble ends.
		defer func() {
			sigterm()
			releaseWrite()
			<-done
		}()
		time.Sleep(time.Minute)
		synctest.Wait()

		transport := &http.Transport{DialContext: mem.dial, TLSClientConfig: &tls.Config{
			RootCAs: pool(t, cert), ServerName: "quotakit-controller.quotakit-system.svc",
			Time: func() time.Time { return certTime },
		}}
		defer transport.CloseIdleConnections()
		client := &http.Client{Transport: transport}
		readyz := func() (int, error) {
			resp, err := client.Get("http://probes:8081/readyz")
			if err != nil {
				return 0, err
			}
			defer resp.Body.Close()
			_, _ = io.Copy(io.Discard, resp.Body)
			return resp.StatusCode, nil
		}
		reviewOf := func(namespace string) (*admissionv1.AdmissionResponse, error) {
			resp, err := client.Post("https://webhook:9443/validate", "application/json", bytes.NewReader(review(t, namespace)))
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
				t.Fatal(err)
			}
			if lease.Spec.HolderIdentity == nil {
				return ""
			}
			return *lease.Spec.HolderIdentity
		}

		if code, err := readyz(); code != http.StatusOK {
			t.Fatalf("/readyz of the synced leader = %d, %v; want 200", code, err)
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
		time.Sleep(time.Second)
		synctest.Wait()

		if code, err := readyz(); code != http.StatusInternalServerError {
			t.Errorf("/readyz after SIGTERM = %d, %v; want 500", code, err)
		}
		// Endpoints are not removed yet everywhere: a new review is
		// answered.
		if resp, err := reviewOf("other"); err != nil || !resp.Allowed {
			t.Errorf("a review during the shutdown delay = %+v, %v; want allowed", resp, err)
		}

		time.Sleep(4 * time.Second)
		synctest.Wait()
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
	})
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
