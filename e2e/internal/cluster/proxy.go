package cluster

import (
	"fmt"
	"io"
	"net"
	"sync"
)

// Proxy is a TCP proxy on 127.0.0.1 in front of one address, which a test
// can cut: [Proxy.Cut] closes every connection through it, as a network
// partition or a load balancer restart would, and [Proxy.Hold] makes new
// connections wait until [Proxy.Release], so that a test can change the
// world between a client's lost connection and its next one.
//
// It forwards bytes only, so TLS runs end to end between the client and
// the server.
type Proxy struct {
	// Addr is the proxy's address, 127.0.0.1:port.
	Addr   string
	target string
	l      net.Listener
	wg     sync.WaitGroup

	mu sync.Mutex
	// guarded by mu
	conns    map[net.Conn]struct{}
	held     chan struct{} // closed on release; nil when not holding
	accepted int
	closed   bool
}

// NewProxy starts a proxy to target. Close stops it.
func NewProxy(target string) (*Proxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("cluster: proxy: %w", err)
	}
	p := &Proxy{Addr: l.Addr().String(), target: target, l: l, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	return p, nil
}

func (p *Proxy) accept() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			return
		}
		p.accepted++
		p.conns[c] = struct{}{}
		held := p.held
		p.mu.Unlock()
		p.wg.Go(func() { p.serve(c, held) })
	}
}

func (p *Proxy) serve(c net.Conn, held chan struct{}) {
	defer p.forget(c)
	if held != nil {
		<-held
	}
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	p.mu.Lock()
	if _, ok := p.conns[c]; !ok { // cut while held
		p.mu.Unlock()
		s.Close()
		return
	}
	p.conns[s] = struct{}{}
	p.mu.Unlock()
	defer p.forget(s)
	var wg sync.WaitGroup
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		// Either direction ending ends both, as a real cut does.
		dst.Close()
		src.Close()
	}
	wg.Go(func() { pipe(s, c) })
	wg.Go(func() { pipe(c, s) })
	wg.Wait()
}

func (p *Proxy) forget(c net.Conn) {
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// Cut closes every connection through the proxy, both ends. Connections
// made after it go through as usual, or wait if the proxy holds them.
func (p *Proxy) Cut() {
	p.mu.Lock()
	conns := p.conns
	p.conns = map[net.Conn]struct{}{}
	p.mu.Unlock()
	for c := range conns {
		c.Close()
	}
}

// Hold makes connections accepted from now on wait, unconnected, until
// Release.
func (p *Proxy) Hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held == nil {
		p.held = make(chan struct{})
	}
}

// Release lets held connections through and stops holding new ones.
func (p *Proxy) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held != nil {
		close(p.held)
		p.held = nil
	}
}

// Accepted returns the number of connections the proxy has accepted.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

// Close stops the proxy, closes its connections and waits for its
// goroutines to exit.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.l.Close()
	p.Release()
	p.Cut()
	p.wg.Wait()
}
