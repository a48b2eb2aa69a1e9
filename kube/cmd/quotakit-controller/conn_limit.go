package main

import (
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"time"
)

// limitConns returns ln accepting at most n connections open at once,
// and the http.Server ConnState hook that tells it which of them are
// serving a request. When a connection arrives at the cap, the oldest
// connection that has not sent a request yet, or failing that the one
// idle for longest, is closed to make room (evicted is called); only
// when every connection is serving a request is the newcomer closed as
// soon as it is accepted (refused is called), so that its client fails
// at once rather than waiting in the listen queue.
//
// Eviction is what keeps a client that opens n connections and holds
// them from locking kube-apiserver out: the held connections are idle or
// have sent nothing, so each of kube-apiserver's connections takes the
// place of one of them. A request being served is never cut: it is
// bounded by the body deadline and the server's timeouts. kube-apiserver
// retries a webhook call whose connection was reset.
func limitConns(ln net.Listener, n int, evicted, refused func()) (net.Listener, func(net.Conn, http.ConnState)) {
	l := &connLimiter{Listener: ln, max: n, evicted: evicted, refused: refused, open: map[*limitedConn]struct{}{}}
	return l, l.track
}

type connLimiter struct {
	net.Listener
	max              int
	evicted, refused func()

	mu sync.Mutex
	// open holds the connections accepted and not closed yet.
	// guarded by mu
	open map[*limitedConn]struct{}
}

func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		lc := &limitedConn{Conn: c, l: l, since: time.Now()}
		l.mu.Lock()
		var victim *limitedConn
		if len(l.open) >= l.max {
			victim = l.victimLocked()
			if victim != nil {
				delete(l.open, victim)
			}
		}
		admitted := len(l.open) < l.max
		if admitted {
			l.open[lc] = struct{}{}
		}
		l.mu.Unlock()
		if victim != nil {
			victim.Conn.Close()
			l.evicted()
		}
		if admitted {
			return lc, nil
		}
		c.Close()
		l.refused()
	}
}

// victimLocked returns the connection to close for a newcomer: the
// oldest that has sent no request, else the one idle longest, else nil.
func (l *connLimiter) victimLocked() *limitedConn {
	var fresh, idle *limitedConn
	for c := range l.open {
		switch c.state {
		case http.StateNew:
			if fresh == nil || c.since.Before(fresh.since) {
				fresh = c
			}
		case http.StateIdle:
			if idle == nil || c.since.Before(idle.since) {
				idle = c
			}
		}
	}
	if fresh != nil {
		return fresh
	}
	return idle
}

// track records the state the server reports for c, a connection of
// this listener (under TLS or not).
func (l *connLimiter) track(c net.Conn, st http.ConnState) {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if st == http.StateIdle || (st == http.StateNew) != (lc.state == http.StateNew) {
		lc.since = time.Now()
	}
	lc.state = st
}

// limitedConn gives its place back when it is first closed.
type limitedConn struct {
	net.Conn
	l *connLimiter
	// since is when the connection was accepted or last became idle;
	// state is its state as the server reported it (StateNew at first).
	// guarded by l.mu
	since time.Time
	// guarded by l.mu
	state http.ConnState
	once  sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.open, c)
		c.l.mu.Unlock()
	})
	return err
}
