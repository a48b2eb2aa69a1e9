package main

import (
	"net"
	"sync"
	"sync/atomic"
)

// limitConns returns ln accepting at most n connections open at once.
// One more is closed as soon as it is accepted, and refused is called:
// its client fails at once (kube-apiserver retries a reset connection,
// then applies the webhook's failurePolicy) rather than waiting in the
// listen queue until its timeout. Idle keep-alive connections count, as
// they hold the same memory; the server's idle timeout closes them.
//
// It bounds the goroutines, TLS and read buffers that connections take,
// not who gets them: a client that opens n connections and holds them
// leaves none to kube-apiserver until the server's timeouts close them.
func limitConns(ln net.Listener, n int, refused func()) net.Listener {
	return &connLimiter{Listener: ln, max: int64(n), refused: refused}
}

type connLimiter struct {
	net.Listener
	max     int64
	refused func()
	// open counts the connections accepted and not closed yet.
	open atomic.Int64
}

func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= l.max {
			return &limitedConn{Conn: c, open: &l.open}, nil
		}
		l.open.Add(-1)
		c.Close()
		l.refused()
	}
}

// limitedConn gives its place back when it is first closed.
type limitedConn struct {
	net.Conn
	open *atomic.Int64
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.open.Add(-1) })
	return err
}
