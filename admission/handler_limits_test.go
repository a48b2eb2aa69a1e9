package admission_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/quotakit/quotakit/admission"
)

// pipeListener is a net.Listener whose connections are net.Pipes, so that
// an http.Server and its clients run inside a synctest bubble, where
// sockets would keep virtual time from advancing. Pipes buffer nothing:
// a write waits for the server to read it.
type pipeListener struct {
	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

// dial opens a connection to the server; its signature is
// http.Transport.DialContext's.
func (l *pipeListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
	case <-ctx.Done():
	}
	client.Close()
	server.Close()
	return nil, errors.New("pipe: connection refused")
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "webhook:443" }

// serve serves h over pipes, without the server's own timeouts (the
// Handler's limits must do without them), until the test ends, and
// returns the listener and a client.
func serve(t *testing.T, h http.Handler) (*pipeListener, *http.Client) {
	t.Helper()
	l := &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
	srv := &http.Server{Handler: h, ErrorLog: log.New(io.Discard, "", 0)}
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(l) }()
	transport := &http.Transport{DialContext: l.dial}
	t.Cleanup(func() {
		transport.CloseIdleConnections()
		srv.Close()
		<-served
	})
	return l, &http.Client{Transport: transport}
}

// postReview sends a review of a pod in namespace ns and returns the HTTP
// code and, for a 200, whether the review allowed the pod.
func postReview(t *testing.T, c *http.Client, uid string) (code int, allowed bool) {
	t.Helper()
	resp, err := c.Post("http://webhook/validate", "application/json", strings.NewReader(review(uid, webPod, false)))
	if err != nil {
		t.Errorf("POST review %s: %v", uid, err)
		return 0, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, false
	}
	var out admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Response == nil {
		t.Errorf("review %s: decoding the answer: %v", uid, err)
		return resp.StatusCode, false
	}
	return resp.StatusCode, out.Response.Allowed
}

// answer is how a server answered a request sent by send.
type answer struct {
	code    int
	allowed bool          // for a 200, whether the review allowed the pod
	after   time.Duration // from the first byte sent
	err     error
}

// readAnswer reads the answer of a review from r.
func readAnswer(r *bufio.Reader, start time.Time) answer {
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	a := answer{code: resp.StatusCode, after: time.Since(start)}
	if a.code != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return a
	}
	var out admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Response == nil {
		a.err = fmt.Errorf("decoding the review: %v", err)
		return a
	}
	a.allowed = out.Response.Allowed
	return a
}

// send sends a POST of body to /validate on a new connection of l: its
// headers, declaring len(body), and the first `now` bytes of the body at
// once; then, every gap, the next `step` bytes, until the body is sent or
// the server answers. A gap of 0 sends nothing after the first bytes.
func send(l *pipeListener, body []byte, now, step int, gap time.Duration) answer {
	start := time.Now()
	c, err := l.dial(context.Background(), "", "")
	if err != nil {
		return answer{err: err}
	}
	defer c.Close()
	answered := make(chan answer, 1)
	go func() {
		answered <- readAnswer(bufio.NewReader(c), start)
		c.Close() // ends a write waiting for the server
	}()
	head := fmt.Sprintf("POST /validate HTTP/1.1\r\nHost: webhook\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))
	if _, err = io.WriteString(c, head); err == nil && now > 0 {
		_, err = c.Write(body[:now])
	}
	for sent := now; err == nil && sent < len(body) && gap > 0; sent += step {
		select {
		case a := <-answered:
			return a
		case <-time.After(gap):
		}
		_, err = c.Write(body[sent:min(sent+step, len(body))])
	}
	return <-answered
}

// TestHandlerSlowSenders sends reviews one byte every 100ms on three times
// as many connections as the Handler evaluates reviews at once, while
// genuine reviews come: these are answered at once, as a slow sender
// holds no slot, and the slow ones are cut at the body's deadline with a
// 408.
func TestHandlerSlowSenders(t *testing.T) {
	tests := []struct {
		name    string
		cap     int // MaxConcurrentReviews; 0 for the default
		senders int
	}{
		{name: "cap 3", cap: 3, senders: 9},
		{name: "default cap", cap: 0, senders: 3 * admission.DefaultMaxConcurrentReviews},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newStore(rq("ns", "compute", rl("pods", "1000"), rl("pods", "0")))
				e := newEvaluator(t, s, admission.Options{})
				run(t, e)
				l, client := serve(t, &admission.Handler{Evaluator: e, MaxConcurrentReviews: tt.cap})

				slow := make(chan answer, tt.senders)
				for i := range tt.senders {
					body := []byte(review(fmt.Sprint("slow-", i), webPod, false))
					go func() { slow <- send(l, body, 0, 1, 100*time.Millisecond) }()
				}
				synctest.Wait()
				for i := range 8 {
					time.Sleep(500 * time.Millisecond)
					sent := time.Now()
					code, allowed := postReview(t, client, fmt.Sprint("genuine-", i))
					if code != http.StatusOK || !allowed {
						t.Errorf("genuine review %d during the slow sends = %d, allowed %v; want 200, allowed", i, code, allowed)
					}
					if d := time.Since(sent); d > time.Second {
						t.Errorf("genuine review %d answered after %v, want within 1s", i, d)
					}
				}
				for range tt.senders {
					a := <-slow
					if a.err != nil || a.code != http.StatusRequestTimeout || a.after > admission.DefaultBodyReadTimeout+time.Second {
						t.Errorf("slow sender = %d after %v (%v), want 408 by %v", a.code, a.after, a.err, admission.DefaultBodyReadTimeout)
					}
				}
				if used := quantity(s.used("ns", "compute"), "pods"); used != 8 {
					t.Errorf("status.used pods = %d, want 8 (the genuine reviews only)", used)
				}
			})
		})
	}
}

// slowReader returns one byte of its data every gap.
type slowReader struct {
	data []byte
	gap  time.Duration
}

func (r *slowReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	time.Sleep(r.gap)
	n := copy(p[:1], r.data)
	r.data = r.data[n:]
	return n, nil
}

// TestHandlerBodyReadTimeout checks that a body that does not arrive by
// BodyReadTimeout is cut off with a 408, over a server (the connection's
// read deadline) and through a ResponseWriter that cannot set one (a check
// after each read); and that a body in time is evaluated for as long as
// the evaluation takes, beyond the deadline.
func TestHandlerBodyReadTimeout(t *testing.T) {
	const timeout = 2 * time.Second
	tests := []struct {
		name   string
		server bool
		// now, step and gap are send's; without a server, the body is
		// read one byte every gap.
		now, step int
		gap       time.Duration
		// writeDelay is the quota writes'; with one, another review of
		// the namespace is sent first, so that the review waits in the
		// Evaluator's queue for that write, where it would see its
		// context cancelled.
		writeDelay  time.Duration
		wantCode    int
		wantAllowed bool
		wantAfter   time.Duration // at most
	}{
		{name: "stalled sender", server: true, now: 100, wantCode: http.StatusRequestTimeout, wantAfter: timeout},
		{name: "trickling sender", server: true, step: 1, gap: 100 * time.Millisecond, wantCode: http.StatusRequestTimeout, wantAfter: timeout},
		{name: "trickling sender, ResponseWriter without deadlines", gap: 100 * time.Millisecond, wantCode: http.StatusRequestTimeout, wantAfter: timeout + 100*time.Millisecond},
		{name: "body in time, evaluation past the deadline", server: true, now: 100, step: 200, gap: 400 * time.Millisecond, writeDelay: 3 * time.Second,
			wantCode: http.StatusOK, wantAllowed: true, wantAfter: 6*time.Second + 100*time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newStore(rq("ns", "compute", rl("pods", "5"), rl("pods", "0")))
				s.writeDelay = tt.writeDelay
				e := newEvaluator(t, s, admission.Options{})
				run(t, e)
				h := &admission.Handler{Evaluator: e, BodyReadTimeout: timeout}
				body := []byte(review("1", webPod, false))
				var got answer
				if tt.server {
					l, client := serve(t, h)
					if tt.writeDelay > 0 {
						go postReview(t, client, "first")
						synctest.Wait()
					}
					got = send(l, body, tt.now, tt.step, tt.gap)
				} else {
					start := time.Now()
					req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/validate", &slowReader{data: body, gap: tt.gap})
					req.Header.Set("Content-Type", "application/json")
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, req)
					got = answer{code: rec.Code, after: time.Since(start)}
				}
				if got.err != nil || got.code != tt.wantCode || got.allowed != tt.wantAllowed || got.after > tt.wantAfter {
					t.Errorf("answer %d, allowed %v, after %v (%v); want %d, allowed %v, by %v", got.code, got.allowed, got.after, got.err, tt.wantCode, tt.wantAllowed, tt.wantAfter)
				}
			})
		})
	}
}

// TestHandlerBytesInFlight sends many large bodies at once, each stalled
// before its last byte, and checks that the Handler refuses with a 429,
// at once, those for which MaxBytesInFlight has no room rather than
// allocating their buffers: the heap grows by about MaxBytesInFlight,
// not by the bodies sent. Once the stalled ones are cut at the deadline,
// their bytes are free again.
func TestHandlerBytesInFlight(t *testing.T) {
	const (
		size     = 1 << 20
		inFlight = 4 << 20
		senders  = 32
	)
	synctest.Test(t, func(t *testing.T) {
		s := newStore(rq("ns", "compute", rl("pods", "5"), rl("pods", "0")))
		e := newEvaluator(t, s, admission.Options{})
		run(t, e)
		l, client := serve(t, &admission.Handler{Evaluator: e, MaxRequestBytes: size, MaxBytesInFlight: inFlight})
		// One body for every sender: what the senders hold is not the
		// server's.
		body := bytes.Repeat([]byte{' '}, size)
		base := liveHeap()

		answers := make(chan answer, senders)
		for range senders {
			go func() { answers <- send(l, body, size-1, 0, 0) }()
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if grown := liveHeap() - base; grown > inFlight+2<<20 {
			t.Errorf("the heap grew by %d MiB while %d bodies of 1 MiB were being received, want at most MaxBytesInFlight (%d MiB) and little more", grown>>20, senders, inFlight>>20)
		}
		refused := 0
		for len(answers) > 0 {
			a := <-answers
			if a.err != nil || a.code != http.StatusTooManyRequests || a.after > 0 {
				t.Errorf("a body received while the others held the bytes = %d after %v (%v), want 429 at once", a.code, a.after, a.err)
			}
			refused++
		}
		if refused < senders-inFlight/size {
			t.Errorf("%d of %d bodies refused, want at least %d", refused, senders, senders-inFlight/size)
		}

		time.Sleep(admission.DefaultBodyReadTimeout)
		for range senders - refused {
			if a := <-answers; a.code != http.StatusRequestTimeout {
				t.Errorf("a stalled body = %d (%v), want 408", a.code, a.err)
			}
		}
		if code, allowed := postReview(t, client, "after"); code != http.StatusOK || !allowed {
			t.Errorf("a review once the stalled bodies were cut = %d, allowed %v; want 200, allowed", code, allowed)
		}
	})
}

// liveHeap returns the bytes of live heap objects.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
