package admission

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

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
type Handler struct {
	// Evaluator checks the requests. Required.
	Evaluator *Evaluator
	// MaxRequestBytes bounds the body read. Defaults to
	// DefaultMaxRequestBytes.
	MaxRequestBytes int64
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
	limit := h.MaxRequestBytes
	if limit <= 0 {
		limit = DefaultMaxRequestBytes
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			http.Error(w, fmt.Sprintf("admission: AdmissionReview larger than %d bytes", limit), http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "admission: reading the AdmissionReview: "+err.Error(), http.StatusBadRequest)
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
	} else if err := h.Evaluator.Evaluate(r.Context(), attrs); err != nil {
		resp.Allowed, resp.Result = false, status(err)
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
