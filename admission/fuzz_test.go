package admission_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/quotakit/quotakit/admission"
)

// FuzzHandler: whatever the body, the Handler answers without panicking,
// with 400, 413 or a review whose response carries the request's UID.
func FuzzHandler(f *testing.F) {
	f.Add([]byte(review("1", webPod, false)))
	f.Add([]byte(review("2", webPod, true)))
	f.Add([]byte(review("3", `{"apiVersion":"v1","kind":"Pod","spec":{"containers":"x"}}`, false)))
	f.Add([]byte(review("4", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"}}`, false)))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"5","operation":"UPDATE","namespace":"ns","resource":{"version":"v1","resource":"pods"},"subResource":"resize","object":{"apiVersion":"v1","kind":"Pod"},"oldObject":{"apiVersion":"v1","kind":"Pod","metadata":{"resourceVersion":"1"}}}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`))
	f.Add([]byte(strings.Replace(review("6", webPod, false), "admission.k8s.io/v1", "admission.k8s.io/v1beta1", 1)))
	f.Add([]byte(`{`))
	f.Add([]byte{})

	s := newStore(rq("ns", "compute", rl("pods", "1000000", "requests.cpu", "1000"), rl("pods", "0", "requests.cpu", "0")))
	e, err := admission.NewEvaluator(s, admission.Options{})
	if err != nil {
		f.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	f.Cleanup(func() { cancel(); <-done })
	h := &admission.Handler{Evaluator: e, MaxRequestBytes: 1 << 16}

	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(http.MethodPost, "/validate", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			return
		case http.StatusOK:
		default:
			t.Fatalf("answer %d: %s", rec.Code, rec.Body)
		}
		var in, out admissionv1.AdmissionReview
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
			t.Fatalf("answer is not a review with a response: %v: %s", err, rec.Body)
		}
		if err := json.Unmarshal(body, &in); err == nil && in.Request != nil && in.Request.UID != out.Response.UID {
			t.Errorf("response UID %q, want the request's %q", out.Response.UID, in.Request.UID)
		}
		if !out.Response.Allowed && (out.Response.Result == nil || out.Response.Result.Code < 400) {
			t.Errorf("denial without a failure status: %s", rec.Body)
		}
	})
}

// FuzzLoadConfiguration: any file is read or rejected, never a panic, and
// a configuration read has a resource in every entry.
func FuzzLoadConfiguration(f *testing.F) {
	f.Add([]byte("apiVersion: apiserver.config.k8s.io/v1\nkind: ResourceQuotaConfiguration\nlimitedResources:\n- resource: pods\n  matchContains: [cpu]\n"))
	f.Add([]byte("apiVersion: resourcequota.admission.k8s.io/v1beta1\nkind: Configuration\nlimitedResources:\n- resource: pods\n  matchScopes:\n  - {scopeName: PriorityClass, operator: In, values: [a]}\n"))
	f.Add([]byte(`{"apiVersion":"resourcequota.admission.k8s.io/v1alpha1","kind":"Configuration","limitedResources":[{"apiGroup":"apps"}]}`))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, file []byte) {
		cfg, err := admission.LoadConfiguration(bytes.NewReader(file))
		if err != nil {
			return
		}
		for i, l := range cfg.LimitedResources {
			if l.Resource == "" {
				t.Errorf("limitedResources[%d] has no resource: %+v", i, l)
			}
		}
	})
}
