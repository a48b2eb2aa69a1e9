package e2e_test

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/http/httputil"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// readyPool is a TLS proxy in front of webhook replicas that plays the
// Service and its endpoints: it sends each review to the next replica
// whose /readyz passes, polled every 100ms, as the endpoints controller
// removes a pod whose readiness fails. Replicas come and go as a rollout
// replaces them.
type readyPool struct {
	url       string
	transport *http.Transport
	// noneReady counts the reviews that found no ready replica (answered
	// 503), failed those the proxy could not forward (answered 502):
	// kube-apiserver refuses both, by the webhook's failurePolicy.
	noneReady, failed atomic.Int64

	mu sync.Mutex
	// guarded by mu
	backends []*poolBackend
	next     int
	errs     []string
}

type poolBackend struct {
	r     *replica
	proxy *httputil.ReverseProxy
	ready atomic.Bool
	sent  atomic.Int64
	stop  chan struct{}
	done  chan struct{}
}

func newReadyPool(t *testing.T) *readyPool {
	t.Helper()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(env.api.CA.PEM) {
		t.Fatal("bad CA certificate")
	}
	p := &readyPool{transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}
	p.url = serveTLS(t, http.HandlerFunc(p.serve)).String() + "/validate"
	t.Cleanup(func() {
		p.mu.Lock()
		backends := p.backends
		p.backends = nil
		p.mu.Unlock()
		for _, b := range backends {
			close(b.stop)
			<-b.done
		}
		p.transport.CloseIdleConnections()
	})
	return p
}

func (p *readyPool) serve(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	var b *poolBackend
	for i := range p.backends {
		c := p.backends[(p.next+i)%len(p.backends)]
		if c.ready.Load() {
			b = c
			p.next = (p.next + i + 1) % len(p.backends)
			break
		}
	}
	p.mu.Unlock()
	if b == nil {
		p.noneReady.Add(1)
		http.Error(w, "no ready replica", http.StatusServiceUnavailable)
		return
	}
	b.sent.Add(1)
	b.proxy.ServeHTTP(w, r)
}

// add adds r once its /readyz passes, and returns when the pool sends to
// it.
func (p *readyPool) add(t *testing.T, r *replica) {
	t.Helper()
	b := &poolBackend{r: r, stop: make(chan struct{}), done: make(chan struct{})}
	b.proxy = &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(r.webhook) },
		Transport: p.transport,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			p.failed.Add(1)
			p.mu.Lock()
			p.errs = append(p.errs, fmt.Sprintf("%s: %v", r.name, err))
			p.mu.Unlock()
			http.Error(w, err.Error(), http.StatusBadGateway)
		},
	}
	go func() {
		defer close(b.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			b.ready.Store(r.ready())
			select {
			case <-b.stop:
				return
			case <-tick.C:
			}
		}
	}()
	p.mu.Lock()
	p.backends = append(p.backends, b)
	p.mu.Unlock()
	waitFor(t, 30*time.Second, r.name+" in the pool", b.ready.Load)
}

// remove takes r out of the pool and returns how many reviews it was
// sent.
func (p *readyPool) remove(r *replica) int64 {
	p.mu.Lock()
	i := slices.IndexFunc(p.backends, func(b *poolBackend) bool { return b.r == r })
	if i < 0 {
		p.mu.Unlock()
		return 0
	}
	b := p.backends[i]
	p.backends = slices.Delete(p.backends, i, i+1)
	p.next = 0
	p.mu.Unlock()
	close(b.stop)
	<-b.done
	return b.sent.Load()
}

// sentTo returns how many reviews each replica in the pool was sent.
func (p *readyPool) sentTo() map[string]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := map[string]int64{}
	for _, b := range p.backends {
		m[b.r.name] = b.sent.Load()
	}
	return m
}

// total returns how many reviews the replicas in the pool were sent.
func (p *readyPool) total() int64 {
	var n int64
	for _, sent := range p.sentTo() {
		n += sent
	}
	return n
}

func (p *readyPool) errors() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.errs)
}
