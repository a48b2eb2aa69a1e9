package admission_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/quotakit/quotakit/admission"
)

const webPod = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"ns"},
 "spec":{"containers":[{"name":"app","image":"nginx","resources":{"requests":{"cpu":"500m"}}}]}}`

func review(uid, object string, dryRun bool) string {
	r := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       types.UID("uid-" + uid),
			Operation: admissionv1.Create,
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Namespace: "ns",
			Name:      "web",
			DryRun:    &dryRun,
		},
	}
	r.Request.Object.Raw = []byte(object)
	b, err := json.Marshal(r)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// post sends body to h and decodes the answer; review is nil when the
// answer is not a review.
func post(t *testing.T, h http.Handler, method, contentType, body string) (int, *admissionv1.AdmissionReview, string) {
	t.Helper()
	req := httptest.NewRequestWithContext(t.Context(), method, "/validate", strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	raw, _ := io.ReadAll(rec.Body)
	if rec.Code != http.StatusOK {
		return rec.Code, nil, string(raw)
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("answer is not JSON: %v: %s", err, raw)
	}
	return rec.Code, &out, string(raw)
}

func TestHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(rq("ns", "compute", rl("requests.cpu", "1", "pods", "5"), rl("requests.cpu", "400m", "pods", "1")))
		e := newEvaluator(t, s, admission.Options{})
		run(t, e)
		h := &admission.Handler{Evaluator: e}

		// Dry run: allowed, not charged.
		code, got, raw := post(t, h, http.MethodPost, "application/json", review("1", webPod, true))
		if code != http.StatusOK || got.Response == nil || !got.Response.Allowed || got.Response.UID != "uid-1" {
			t.Fatalf("dry run: %d %s, want 200 and an allowed response for uid-1", code, raw)
		}
		if diff := cmp.Diff(metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, got.TypeMeta); diff != "" {
			t.Errorf("response TypeMeta (-want +got):\n%s", diff)
		}

		// Admitted and charged, then over quota: kube-apiserver's denial.
		if _, got, raw = post(t, h, http.MethodPost, "application/json", review("2", webPod, false)); got.Response == nil || !got.Response.Allowed {
			t.Fatalf("within quota: %s, want allowed", raw)
		}
		_, got, raw = post(t, h, http.MethodPost, "application/json", review("2", webPod, false))
		want := &metav1.Status{
			Status:  metav1.StatusFailure,
			Code:    http.StatusForbidden,
			Reason:  metav1.StatusReasonForbidden,
			Message: `pods "web" is forbidden: exceeded quota: compute, requested: requests.cpu=500m, used: requests.cpu=900m, limited: requests.cpu=1`,
			Details: &metav1.StatusDetails{Name: "web", Kind: "pods"},
		}
		if got.Response == nil || got.Response.Allowed {
			t.Fatalf("over quota: %s, want a denial", raw)
		}
		if diff := cmp.Diff(want, got.Response.Result); diff != "" {
			t.Errorf("over quota: status (-want +got):\n%s", diff)
		}

		// An object that does not decode: a denial with code 400.
		_, got, raw = post(t, h, http.MethodPost, "application/json; charset=utf-8", review("3", `{"apiVersion":"v1","kind":"Pod","spec":{"containers":"x"}}`, false))
		if got.Response == nil || got.Response.Allowed || got.Response.Result.Code != http.StatusBadRequest || got.Response.Result.Reason != metav1.StatusReasonBadRequest {
			t.Errorf("undecodable object: %s, want a denial with code 400, reason BadRequest", raw)
		}
		// A CREATE without an object, which kube-apiserver never sends: a
		// denial with code 400.
		noObject := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"uid-4",
			"operation":"CREATE","namespace":"ns","name":"web","resource":{"version":"v1","resource":"pods"}}}`
		_, got, raw = post(t, h, http.MethodPost, "application/json", noObject)
		if got.Response == nil || got.Response.Allowed || got.Response.Result.Code != http.StatusBadRequest || !strings.Contains(got.Response.Result.Message, "has no object") {
			t.Errorf("CREATE without an object: %s, want a denial with code 400 saying it has no object", raw)
		}
		if quantity(s.used("ns", "compute"), "pods") != 2 {
			t.Errorf("status.used changed: %v", s.used("ns", "compute"))
		}
	})
}

// TestHandlerV1beta1 sends the admission.k8s.io/v1beta1 reviews
// kube-apiserver sends a webhook that lists v1beta1 first, and checks that
// they are answered in v1beta1 with the decisions of v1.
func TestHandlerV1beta1(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(rq("ns", "compute", rl("requests.cpu", "1"), rl("requests.cpu", "400m")))
		e := newEvaluator(t, s, admission.Options{})
		run(t, e)
		h := &admission.Handler{Evaluator: e}
		v1beta1 := func(uid string) string {
			return strings.Replace(review(uid, webPod, false), `"apiVersion":"admission.k8s.io/v1"`, `"apiVersion":"admission.k8s.io/v1beta1"`, 1)
		}
		wantType := metav1.TypeMeta{APIVersion: "admission.k8s.io/v1beta1", Kind: "AdmissionReview"}

		code, got, raw := post(t, h, http.MethodPost, "application/json", v1beta1("1"))
		if code != http.StatusOK || got.Response == nil || !got.Response.Allowed || got.Response.UID != "uid-1" {
			t.Fatalf("within quota: %d %s, want 200 and an allowed response for uid-1", code, raw)
		}
		if diff := cmp.Diff(wantType, got.TypeMeta); diff != "" {
			t.Errorf("response TypeMeta (-want +got):\n%s", diff)
		}
		_, got, raw = post(t, h, http.MethodPost, "application/json", v1beta1("2"))
		if got.Response == nil || got.Response.Allowed || got.Response.UID != "uid-2" || got.Response.Result.Code != http.StatusForbidden ||
			got.Response.Result.Message != `pods "web" is forbidden: exceeded quota: compute, requested: requests.cpu=500m, used: requests.cpu=900m, limited: requests.cpu=1` {
			t.Errorf("over quota: %s, want kube-apiserver's denial for uid-2", raw)
		}
		if diff := cmp.Diff(wantType, got.TypeMeta); diff != "" {
			t.Errorf("response TypeMeta (-want +got):\n%s", diff)
		}
		if cpu := s.used("ns", "compute")["requests.cpu"]; cpu.MilliValue() != 900 {
			t.Errorf("status.used = %v, want requests.cpu 900m", s.used("ns", "compute"))
		}
	})
}

func TestHandlerTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(rq("ns", "compute", rl("pods", "5"), rl("pods", "1")))
		s.writeDelay = time.Minute
		e := newEvaluator(t, s, admission.Options{Timeout: time.Second})
		run(t, e)
		_, got, raw := post(t, &admission.Handler{Evaluator: e}, http.MethodPost, "application/json", review("1", webPod, false))
		want := &metav1.Status{
			Status:  metav1.StatusFailure,
			Code:    http.StatusInternalServerError,
			Reason:  metav1.StatusReasonInternalError,
			Message: "Internal error occurred: resource quota evaluation timed out",
			Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Message: "resource quota evaluation timed out"}}},
		}
		if got.Response == nil || got.Response.Allowed {
			t.Fatalf("timeout: %s, want a denial", raw)
		}
		if diff := cmp.Diff(want, got.Response.Result); diff != "" {
			t.Errorf("timeout: status (-want +got):\n%s", diff)
		}
	})
}

func TestHandlerMalformed(t *testing.T) {
	e := newEvaluator(t, newStore(), admission.Options{})
	h := &admission.Handler{Evaluator: e, MaxRequestBytes: 1 << 10}
	noRequest := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`
	tests := []struct {
		name, method, contentType, body string
		wantCode                        int
		wantText                        string
	}{
		{"GET", http.MethodGet, "", "", http.StatusMethodNotAllowed, "must be POSTed"},
		{"not JSON", http.MethodPost, "application/json", "{", http.StatusBadRequest, "decoding the AdmissionReview"},
		{"empty", http.MethodPost, "application/json", "", http.StatusBadRequest, "decoding the AdmissionReview"},
		{"no request", http.MethodPost, "application/json", noRequest, http.StatusBadRequest, "has no request"},
		{"v1beta1 without a request", http.MethodPost, "application/json", strings.Replace(noRequest, "/v1", "/v1beta1", 1), http.StatusBadRequest, "has no request"},
		{"unknown version", http.MethodPost, "application/json", strings.Replace(noRequest, "/v1", "/v2", 1), http.StatusBadRequest, "decoding the AdmissionReview"},
		{"another kind", http.MethodPost, "application/json", webPod, http.StatusBadRequest, "want an AdmissionReview"},
		{"yaml content type", http.MethodPost, "application/yaml", noRequest, http.StatusUnsupportedMediaType, "want application/json"},
		{"no content type", http.MethodPost, "", review("1", webPod, false), http.StatusUnsupportedMediaType, `content type "", want application/json`},
		{"too large", http.MethodPost, "application/json", review("1", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"`+strings.Repeat("x", 2000)+`"}}`, false), http.StatusRequestEntityTooLarge, "larger than 1024 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, raw := post(t, h, tt.method, tt.contentType, tt.body)
			if code != tt.wantCode || !strings.Contains(raw, tt.wantText) {
				t.Errorf("answer %d %q, want %d containing %q", code, raw, tt.wantCode, tt.wantText)
			}
		})
	}
	t.Run("no evaluator", func(t *testing.T) {
		_, got, raw := post(t, &admission.Handler{}, http.MethodPost, "application/json", review("1", webPod, false))
		if got == nil || got.Response.Allowed || got.Response.Result.Code != http.StatusInternalServerError {
			t.Errorf("answer %s, want a denial with code 500", raw)
		}
	})
}

// TestHandlerOverHTTP runs the handler behind a real HTTP server, as
// kube-apiserver calls it.
func TestHandlerOverHTTP(t *testing.T) {
	s := newStore(rq("ns", "compute", rl("pods", "1"), rl("pods", "0")))
	e := newEvaluator(t, s, admission.Options{})
	run(t, e)
	srv := httptest.NewServer(&admission.Handler{Evaluator: e})
	defer srv.Close()
	for i, wantAllowed := range []bool{true, false} {
		resp, err := srv.Client().Post(srv.URL, "application/json", bytes.NewReader([]byte(review("1", webPod, false))))
		if err != nil {
			t.Fatal(err)
		}
		var got admissionv1.AdmissionReview
		err = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if err != nil || got.Response == nil || got.Response.Allowed != wantAllowed {
			t.Errorf("request %d: %+v, %v; want allowed=%v", i, got.Response, err, wantAllowed)
		}
	}
}
