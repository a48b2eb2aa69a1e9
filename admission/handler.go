package admission

import (
	"errors"
	"fmt"
	"mime"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultMaxRequestBytes bounds the body of a review [Handler] reads when
// MaxRequestBytes is zero. kube-apiserver caps the objects it stores at
// 3 MiB, and a review carries an update's object twice.
const DefaultMaxRequestBytes = 7 << 20

// Handler is an http.Handler for a validating admission webhook: it reads an
// AdmissionReview, checks its request with an [Evaluator], and answers with
// an AdmissionReview of the same version whose response allows or denies
// the request. It is safe for concurrent use.
//
// It reads admission.k8s.io/v1, and v1beta1, which kube-apiserver still
// sends to a webhook whose admissionReviewVersions lists v1beta1 before v1
// (configurations written before v1 existed). Prefer ["v1"].
//
// A denial carries kube-apiserver's status: for a quota that would be
// exceeded, code 403, reason Forbidden and the message of kube-apiserver's
// ResourceQuota plugin (`pods "web" is forbidden: exceeded quota: …`); for
// the timeout, 500 and InternalError; for an error without an API status,
// 500 and its text, as kube-apiserver answers such an error. kube-apiserver
// prefixes the message it returns to the client with
// `admission webhook "<name>" denied the request: `.
//
// A body that is not an AdmissionReview of admission.k8s.io/v1 or v1beta1
// with a request gets HTTP 400 (405 for a method other than POST, 413 for
// a body over MaxRequestBytes, 415 for a missing content type or one other
// than JSON: kube-apiserver always sends application/json) and no review;
// kube-apiserver then applies the webhook's failurePolicy. A review whose
// embedded objects cannot be decoded, or whose CREATE or UPDATE has no
// object, is answered with a denial of code 400, so that the request is
// refused whatever the failurePolicy.
// Nothing a client sends can make it panic.
//
// # Under hostile load
//
// Whoever can reach the webhook can send it reviews slowly, or many at
// once; the Handler bounds what that costs, so that the reviews
// kube-apiserver sends are still answered:
//
//   - A caller holds one of the MaxConcurrentReviews slots only while its
//     review is evaluated: the slot is taken once the body has been read
//     and decoded, and given back when [Evaluator.Evaluate] returns. A
//     slow sender holds none.
//   - The body must arrive within BodyReadTimeout of the call, or the
//     review is answered 408 and the connection closed.
//   - The bodies of the reviews being read, decoded and evaluated at
//     once take at most MaxBytesInFlight bytes (their decoded objects a
//     small multiple of that more). Memory is reserved as bytes arrive,
//     never by the Content-Length a caller declares: a caller that sends
//     headers and then nothing holds one small first buffer (16 KiB),
//     and one that trickles holds about twice what it has sent. A review
//     that does not fit is refused at once.
//
// A review over a limit is answered 429 with Retry-After (408 for the
// deadline), never queued. kube-apiserver handles such an answer as a
// failed call, by the webhook's failurePolicy: behind failurePolicy: Fail
// it refuses the request being admitted, as a denial would; behind Ignore
// it admits it unchecked. The limits keep the Handler answering under
// load; they do not make a refusal harmless.
//
// The fields must not be changed once the Handler serves, nor the Handler
// copied. The zero value, with an Evaluator, is ready to serve with the
// defaults below.
type Handler struct {
	// Evaluator checks the requests. Required.
	Evaluator *Evaluator
	// MaxRequestBytes bounds the body read. Defaults to
	// DefaultMaxRequestBytes.
	MaxRequestBytes int64
	// MaxConcurrentReviews bounds the reviews being evaluated at once;
	// one more is answered 429. Reading and decoding a body takes no
	// slot. Defaults to DefaultMaxConcurrentReviews.
	MaxConcurrentReviews int
	// BodyReadTimeout bounds how long the body may take to arrive,
	// from the moment ServeHTTP is called. It is set as the
	// connection's read deadline through [http.ResponseController] and
	// lifted once the body is read, so that it never cuts an
	// evaluation short; where the ResponseWriter cannot set one, it is
	// checked after each read, and a sender that stops sending
	// altogether is left to the server's ReadTimeout. Defaults to
	// DefaultBodyReadTimeout.
	BodyReadTimeout time.Duration
	// MaxBytesInFlight bounds the memory of the bodies held at once by
	// the reviews being read, decoded or evaluated, across all
	// requests. A value below what one body of MaxRequestBytes needs
	// while its buffer grows (twice MaxRequestBytes) is raised to it.
	// Defaults to DefaultMaxBytesInFlight.
	MaxBytesInFlight int64

	// evaluating counts the reviews holding a slot, and inFlightBytes
	// the bytes of buffers reserved.
	evaluating    atomic.Int64
	inFlightBytes atomic.Int64
}

var _ http.Handler = (*Handler)(nil)

// ServeHTTP answers one AdmissionReview.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "admission: an AdmissionReview must be POSTed", http.StatusMethodNotAllowed)
		return
	}
	if ct := r.Header.Get("Content-Type"); !isJSON(ct) {
		http.Error(w, fmt.Sprintf("admission: content type %q, want application/json", ct), http.StatusUnsupportedMediaType)
		return
	}
	l := h.limits()
	body, reserved, err := h.readBody(w, r, l)
	// The decoded review holds copies of the body's objects until the
	// answer is written: the reservation lasts as long.
	defer h.inFlightBytes.Add(-reserved)
	if err != nil {
		refuseBody(w, r, err, l)
		return
	}
	review, err := decodeReview(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}

	resp := &admissionv1.AdmissionResponse{UID: review.request.UID, Allowed: true}
	if h.Evaluator == nil {
		resp.Allowed, resp.Result = false, status(errors.New("admission: Handler has no Evaluator"))
	} else if attrs, err := NewAttributes(review.request); err != nil {
		resp.Allowed, resp.Result = false, status(apierrors.NewBadRequest(err.Error()))
	} else if !take(&h.evaluating, 1, l.reviews) {
		refuse(w, r, http.StatusTooManyRequests, fmt.Sprintf("admission: more than %d AdmissionReviews being evaluated at once", l.reviews))
		return
	} else {
		err := h.Evaluator.Evaluate(r.Context(), attrs)
		h.evaluating.Add(-1)
		if err != nil {
			resp.Allowed, resp.Result = false, status(err)
		}
	}
	out, err := review.encode(resp)
	if err != nil {
		http.Error(w, "admission: encoding the AdmissionReview: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if _, err := w.Write(out); err != nil {
		logr.FromContextOrDiscard(r.Context()).V(2).Info("admission: writing a review response failed", "uid", review.request.UID, "err", err.Error())
	}
}

// status is what kube-apiserver would answer for err: its API status when
// it is an API status error itself, and otherwise code 500 with err's text.
// As kube-apiserver, it does not look into wrapped errors.
func status(err error) *metav1.Status {
	if s, ok := err.(apierrors.APIStatus); ok { //nolint:errorlint // as kube-apiserver's ErrorToAPIStatus
		st := s.Status()
		if st.Status == "" {
			st.Status = metav1.StatusFailure
		}
		if st.Code == 0 {
			st.Code = http.StatusInternalServerError
		}
		return &st
	}
	return &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Message: err.Error()}
}

// isJSON reports whether ct, a Content-Type header, is application/json,
// with or without parameters.
func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}
