package admission

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
)

// Default values of the limits of [Handler].
const (
	// DefaultMaxConcurrentReviews is as many reviews as the Evaluator's
	// batches absorb without queueing for long: with the default
	// Timeout of 10 seconds, a review waiting behind a hundred others
	// of one namespace is still answered.
	DefaultMaxConcurrentReviews = 100
	// DefaultBodyReadTimeout is far above what kube-apiserver needs to
	// send the largest review over a cluster's network, and well under
	// its default webhook timeout of 10 seconds.
	DefaultBodyReadTimeout = 5 * time.Second
	// DefaultMaxBytesInFlight holds about nine bodies of
	// DefaultMaxRequestBytes, or thousands of usual reviews (a pod's is
	// a few KiB), in a small part of a webhook pod's memory.
	DefaultMaxBytesInFlight = 64 << 20
)

// firstBuffer is the size of the first buffer a body is read into when
// its length is unknown or larger: a usual review fits, and a sender
// that sends nothing after its headers holds no more.
const firstBuffer = 16 << 10

// limits are a Handler's limits with the defaults applied.
type limits struct {
	maxRequest, maxInFlight, reviews int64
	bodyTimeout                      time.Duration
}

func (h *Handler) limits() limits {
	l := limits{
		maxRequest:  h.MaxRequestBytes,
		maxInFlight: h.MaxBytesInFlight,
		reviews:     int64(h.MaxConcurrentReviews),
		bodyTimeout: h.BodyReadTimeout,
	}
	if l.maxRequest <= 0 {
		l.maxRequest = DefaultMaxRequestBytes
	}
	if l.maxInFlight <= 0 {
		l.maxInFlight = DefaultMaxBytesInFlight
	}
	// While a body's buffer grows, the old and the new one are both
	// held: at most MaxRequestBytes and one byte more.
	l.maxInFlight = max(l.maxInFlight, 2*l.maxRequest+1)
	if l.reviews <= 0 {
		l.reviews = DefaultMaxConcurrentReviews
	}
	if l.bodyTimeout <= 0 {
		l.bodyTimeout = DefaultBodyReadTimeout
	}
	return l
}

var (
	// errBodyTimeout is a body that did not arrive by BodyReadTimeout.
	errBodyTimeout = errors.New("admission: the AdmissionReview was not received in time")
	// errNoBytes is a body for which MaxBytesInFlight has no room.
	errNoBytes = errors.New("admission: no room for the AdmissionReview in the bytes being received")
	// errLongerThanDeclared is a body longer than its Content-Length,
	// which net/http never hands a handler, but a caller of ServeHTTP
	// might.
	errLongerThanDeclared = errors.New("admission: the AdmissionReview is longer than its Content-Length")
)

// readBody reads r's body, by l.bodyTimeout and at most l.maxRequest
// bytes, into a buffer whose memory it reserves in h.inFlightBytes before
// allocating it. It returns the body and the bytes reserved, which the
// caller gives back once done with the body; on error it has given them
// back itself and returns 0.
//
// The buffer grows as bytes arrive, doubling from firstBuffer up to the
// declared Content-Length (plus one byte, for the read that finds the
// end), so that a body declared large but sent slowly holds about what
// it has sent: reserving the Content-Length up front would let a caller
// hold the whole budget with headers alone. A declared length that does
// not fit in what is left of the budget is refused before anything is
// read.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request, l limits) (body []byte, reserved int64, err error) {
	if r.ContentLength > l.maxRequest {
		return nil, 0, &http.MaxBytesError{Limit: l.maxRequest}
	}
	// bound is the largest buffer: one byte over the body's largest
	// length, so that the read that finds the end, or finds a byte too
	// many, has room.
	bound := l.maxRequest + 1
	if r.ContentLength >= 0 {
		bound = r.ContentLength + 1
		if bound > l.maxInFlight-h.inFlightBytes.Load() {
			return nil, 0, errNoBytes
		}
	}

	deadline := time.Now().Add(l.bodyTimeout)
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(deadline) == nil {
		// Lifted once the body is read, so that the read a server makes
		// to notice a client going away cannot time out and cancel the
		// request's context during the evaluation (net/http's lifts it
		// itself when the body reaches its end; others need not). The
		// server sets the next request's deadlines itself.
		defer func() { _ = rc.SetReadDeadline(time.Time{}) }()
	}
	src := r.Body
	if src == nil { // a Request made by hand; a server's always has one
		src = http.NoBody
	}
	src = http.MaxBytesReader(w, src, l.maxRequest)
	defer func() {
		if err != nil {
			h.inFlightBytes.Add(-reserved)
			body, reserved = nil, 0
		}
	}()
	var buf []byte
	for {
		if len(buf) == cap(buf) {
			if int64(cap(buf)) == bound {
				return nil, reserved, errLongerThanDeclared
			}
			size := min(max(2*int64(cap(buf)), firstBuffer), bound)
			if !take(&h.inFlightBytes, size, l.maxInFlight) {
				return nil, reserved, errNoBytes
			}
			reserved += size
			grown := make([]byte, len(buf), size)
			copy(grown, buf)
			h.inFlightBytes.Add(-int64(cap(buf)))
			reserved -= int64(cap(buf))
			buf = grown
		}
		n, rerr := src.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		switch {
		case errors.Is(rerr, io.EOF):
			return buf, reserved, nil
		case isTimeout(rerr):
			return nil, reserved, errBodyTimeout
		case rerr != nil:
			return nil, reserved, rerr
		case time.Now().After(deadline):
			// Where the connection has no deadline (see
			// Handler.BodyReadTimeout), a trickling sender is cut here.
			return nil, reserved, errBodyTimeout
		}
	}
}

// isTimeout reports whether err is a read deadline that passed.
func isTimeout(err error) bool {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	ne, ok := errors.AsType[net.Error](err)
	return ok && ne.Timeout()
}

// take adds n to c if the sum stays within limit, and reports whether it
// did. It never waits: over the limit, the caller refuses.
func take(c *atomic.Int64, n, limit int64) bool {
	for {
		cur := c.Load()
		if cur+n > limit {
			return false
		}
		if c.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}

// refuseBody answers a body readBody could not read.
func refuseBody(w http.ResponseWriter, r *http.Request, err error, l limits) {
	// The rest of the body, if any, is not worth reading: the server
	// closes the connection after the answer.
	w.Header().Set("Connection", "close")
	_, tooLarge := errors.AsType[*http.MaxBytesError](err)
	switch {
	case tooLarge:
		refuse(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("admission: AdmissionReview larger than %d bytes", l.maxRequest))
	case errors.Is(err, errBodyTimeout):
		refuse(w, r, http.StatusRequestTimeout, fmt.Sprintf("admission: the AdmissionReview was not received within %v", l.bodyTimeout))
	case errors.Is(err, errNoBytes):
		refuse(w, r, http.StatusTooManyRequests, fmt.Sprintf("admission: more than %d bytes of AdmissionReviews being received at once", l.maxInFlight))
	default:
		refuse(w, r, http.StatusBadRequest, "admission: reading the AdmissionReview: "+err.Error())
	}
}

// refuse answers code with msg, and no review. A refusal for load (429)
// says when to retry.
func refuse(w http.ResponseWriter, r *http.Request, code int, msg string) {
	if code == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	logr.FromContextOrDiscard(r.Context()).V(1).Info("admission: review refused", "code", code, "reason", msg)
	http.Error(w, msg, code)
}
