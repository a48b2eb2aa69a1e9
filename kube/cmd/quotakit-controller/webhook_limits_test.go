package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quotakit/quotakit/admission"
)

// webhookUnderTest is the binary running with the webhook over an
// in-memory network, TLS included, inside a synctest bubble.
type webhookUnderTest struct {
	mem    *memNet
	tls    *tls.Config
	client *http.Client
	reg    *prometheus.Registry
}

// startWebhook runs the binary with the webhook enforcing namespaced
// quota (namespace room has room for one pod) and the extra flags args,
// until stop is called; it returns once the webhook's cache has synced.
func startWebhook(t *testing.T, args ...string) (w *webhookUnderTest, stop func()) {
	t.Helper()
	cert, key := writeCert(t)
	hookFakes := newFakes()
	addQuotas(t, hookFakes)
	cfg, err := parseFlags(append([]string{
		"-leader-elect=false", "-metrics-bind-address=0", "-health-probe-bind-address=0", "-shutdown-delay=0",
		"-webhook-addr=:9443", "-caller-trust=insecure-any-caller", "-tls-cert-file=" + cert, "-tls-private-key-file=" + key, "-enforce-namespaced-quota",
	}, args...), t.Output())
	if err != nil {
		t.Fatal(err)
	}
	w = &webhookUnderTest{mem: &memNet{}, reg: newRegistry()}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- runWith(ctx, cfg, env{clients: newFakes().clients(), admission: hookFakes.clients(), reg: w.reg, listen: w.mem.listen})
	}()
	time.Sleep(time.Minute)
	synctest.Wait()
	// The certificate was made in the bubble: valid at its time.
	w.tls = &tls.Config{RootCAs: pool(t, cert), ServerName: "quotakit-controller.quotakit-system.svc"}
	transport := &http.Transport{DialContext: w.mem.dial, TLSClientConfig: w.tls}
	w.client = &http.Client{Transport: transport}
	return w, func() {
		transport.CloseIdleConnections()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("runWith = %v", err)
		}
	}
}

// review sends a review of a pod in namespace on a pooled connection and
// returns the HTTP code, and whether it was allowed.
func (w *webhookUnderTest) review(t *testing.T, namespace string) (int, bool, error) {
	resp, err := w.client.Post("https://webhook:9443/validate", "application/json", bytes.NewReader(review(t, namespace)))
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.StatusCode == http.StatusOK && strings.Contains(string(b), `"allowed":true`), err
}

// slowAnswer is how the webhook answered a review sent slowly.
type slowAnswer struct {
	code  int
	after time.Duration
	err   error
}

// sendSlowly sends a review on a new TLS connection: its headers at once,
// then its body one byte every gap, or nothing at all with a gap of 0,
// until the webhook answers.
func (w *webhookUnderTest) sendSlowly(body []byte, gap time.Duration) slowAnswer {
	start := time.Now()
	raw, err := w.mem.dial(context.Background(), "tcp", "webhook:9443")
	if err != nil {
		return slowAnswer{err: err}
	}
	c := tls.Client(raw, w.tls)
	defer c.Close()
	head := fmt.Sprintf("POST /validate HTTP/1.1\r\nHost: webhook\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))
	if _, err := io.WriteString(c, head); err != nil {
		return slowAnswer{err: err}
	}
	answered := make(chan slowAnswer, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			answered <- slowAnswer{err: err}
			return
		}
		resp.Body.Close()
		answered <- slowAnswer{code: resp.StatusCode, after: time.Since(start)}
	}()
	for i := 0; gap > 0 && i < len(body); i++ {
		select {
		case a := <-answered:
			return a
		case <-time.After(gap):
		}
		if _, err := c.Write(body[i : i+1]); err != nil {
			break
		}
	}
	return <-answered
}

// TestWebhookSlowSenders runs the binary and sends reviews slowly (one
// byte every 100ms, or the headers and nothing more) on three times as
// many connections as -max-concurrent-reviews, while genuine reviews
// come: they are answered at once, and the slow ones are cut with a 408 at
// the Handler's body deadline, well before the server's 30s ReadTimeout.
func TestWebhookSlowSenders(t *testing.T) {
	tests := []struct {
		name string
		cap  int // -max-concurrent-reviews; 0 for the default
	}{
		{name: "cap 3", cap: 3},
		{name: "default cap", cap: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var args []string
				reviews := defaultMaxConcurrentReviews
				if tt.cap > 0 {
					args, reviews = []string{fmt.Sprint("-max-concurrent-reviews=", tt.cap)}, tt.cap
				}
				w, stop := startWebhook(t, args...)
				defer stop()
				timedOut := webhookRequests(t, "408")
				senders := 3 * reviews
				slow := make(chan slowAnswer, senders)
				body := review(t, "other")
				for i := range senders {
					gap := 100 * time.Millisecond
					if i%2 == 1 {
						gap = 0 // headers only
					}
					go func() { slow <- w.sendSlowly(body, gap) }()
				}
				synctest.Wait()
				for i := range 8 {
					time.Sleep(500 * time.Millisecond)
					ns := "other"
					if i == 0 {
						ns = "room" // one pod of room: charged
					}
					sent := time.Now()
					code, allowed, err := w.review(t, ns)
					if err != nil || code != http.StatusOK || !allowed {
						t.Errorf("genuine review %d during the slow sends = %d, allowed %v (%v); want 200, allowed", i, code, allowed, err)
					}
					if d := time.Since(sent); d > time.Second {
						t.Errorf("genuine review %d answered after %v, want within 1s", i, d)
					}
				}
				for range senders {
					if a := <-slow; a.err != nil || a.code != http.StatusRequestTimeout || a.after > admission.DefaultBodyReadTimeout+time.Second {
						t.Errorf("slow sender = %d after %v (%v), want 408 by %v", a.code, a.after, a.err, admission.DefaultBodyReadTimeout)
					}
				}
				if got := webhookRequests(t, "408") - timedOut; got != float64(senders) {
					t.Errorf("controller_runtime_webhook_requests_total{code=408} grew by %v, want %d", got, senders)
				}
			})
		})
	}
}

// TestWebhookConnectionCap: with -max-webhook-connections held by a
// client that sends nothing, a new connection still gets in, in place of
// the oldest silent one, and a genuine review is answered: the cap bounds
// memory without locking kube-apiserver out. Only when every connection
// is serving a request is a new one closed at once.
func TestWebhookConnectionCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const maxConns = 4
		w, stop := startWebhook(t, fmt.Sprint("-max-webhook-connections=", maxConns))
		defer stop()
		type conn struct {
			c      *tls.Conn
			closed chan struct{}
		}
		dial := func() (conn, error) {
			raw, err := w.mem.dial(context.Background(), "tcp", "webhook:9443")
			if err != nil {
				return conn{}, err
			}
			c := tls.Client(raw, w.tls)
			if err := c.Handshake(); err != nil {
				c.Close()
				return conn{}, err
			}
			// Read what the server sends, as a socket's buffer would
			// take it, until it closes: a pipe buffers nothing, and the
			// server's close would wait for its TLS alert to be read.
			closed := make(chan struct{})
			go func() { _, _ = io.Copy(io.Discard, c); close(closed) }()
			return conn{c, closed}, nil
		}
		var held []conn
		defer func() {
			for _, c := range held {
				c.c.Close()
			}
		}()
		for i := range maxConns {
			c, err := dial()
			if err != nil {
				t.Fatalf("connection %d of %d: %v", i+1, maxConns, err)
			}
			held = append(held, c)
			time.Sleep(time.Millisecond) // accepted in order
		}
		// The cap is held by connections that sent nothing: a new one
		// takes the oldest one's place.
		c, err := dial()
		if err != nil {
			t.Fatalf("a connection at the cap, all others silent: %v", err)
		}
		held = append(held, c)
		synctest.Wait()
		select {
		case <-held[0].closed:
		default:
			t.Error("the oldest silent connection was not closed to make room")
		}
		if got := counter(t, w.reg, "quotakit_webhook_connections_evicted_total", nil); got != 1 {
			t.Errorf("quotakit_webhook_connections_evicted_total = %v, want 1", got)
		}
		// A genuine review, on a connection of its own, is answered while
		// the silent ones hold the cap.
		if code, allowed, err := w.review(t, "other"); err != nil || code != http.StatusOK || !allowed {
			t.Errorf("a review while silent connections hold the cap = %d, allowed %v (%v); want 200, allowed", code, allowed, err)
		}

		// Every connection serving a request (bodies trickling in): a
		// new one is closed at once.
		for _, c := range held {
			c.c.Close()
		}
		held = nil
		w.client.Transport.(*http.Transport).CloseIdleConnections()
		synctest.Wait()
		body := review(t, "other")
		answers := make(chan slowAnswer, maxConns)
		for range maxConns {
			go func() { answers <- w.sendSlowly(body, 100*time.Millisecond) }()
		}
		time.Sleep(time.Second)
		synctest.Wait()
		start := time.Now()
		if c, err := dial(); err == nil {
			c.c.Close()
			t.Error("a connection while every other serves a request completed its handshake, want it closed")
		}
		if d := time.Since(start); d > 0 {
			t.Errorf("the connection over the cap was closed after %v, want at once", d)
		}
		if got := counter(t, w.reg, "quotakit_webhook_connections_refused_total", nil); got != 1 {
			t.Errorf("quotakit_webhook_connections_refused_total = %v, want 1", got)
		}
		for range maxConns {
			<-answers
		}
	})
}
