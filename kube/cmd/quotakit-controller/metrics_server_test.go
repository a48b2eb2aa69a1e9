package main

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"

	"github.com/quotakit/quotakit/kube"
)

// reviewer answers the fakes' TokenReviews and SubjectAccessReviews as an
// API server would: token "scraper" is user prometheus, "intruder" user
// mallory, any other token authenticates no one; prometheus may get
// /metrics, as a member of system:authenticated.
type reviewer struct {
	tokenReviews, accessReviews int
	fail                        bool
}

func (r *reviewer) install(f *fakes) {
	f.typed.PrependReactor("create", "tokenreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
		r.tokenReviews++
		if r.fail {
			return true, nil, errors.New("the API server is unreachable")
		}
		tr := a.(clienttesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
		switch tr.Spec.Token {
		case "scraper":
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "prometheus", Groups: []string{"monitoring"}}}
		case "intruder":
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "mallory"}}
		default:
			tr.Status = authenticationv1.TokenReviewStatus{Error: "invalid bearer token"}
		}
		return true, tr, nil
	})
	f.typed.PrependReactor("create", "subjectaccessreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
		r.accessReviews++
		sar := a.(clienttesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		nr := sar.Spec.NonResourceAttributes
		sar.Status.Allowed = sar.Spec.User == "prometheus" && slices.Contains(sar.Spec.Groups, "system:authenticated") &&
			nr != nil && nr.Path == "/metrics" && nr.Verb == "get"
		return true, sar, nil
	})
}

// TestSecureMetrics checks the authentication and authorization in front
// of /metrics with -metrics-secure, and that decisions are kept: a
// scraper's second scrape makes no review.
func TestSecureMetrics(t *testing.T) {
	f := newFakes()
	var r reviewer
	r.install(f)
	cfg := config{metricsAddr: ":8443", metricsSecure: true}
	s, err := newMetricsServer(cfg, f.clients(), newRegistry())
	if err != nil {
		t.Fatalf("newMetricsServer: %v", err)
	}
	if s.tls == nil || len(s.tls.Certificates) != 1 {
		t.Fatalf("the secure metrics server has no certificate")
	}
	scrape := func(method, auth string) (int, string) {
		req := httptest.NewRequest(method, "/metrics", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		rec := httptest.NewRecorder()
		s.handler.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	tests := []struct {
		name, method, auth string
		want               int
	}{
		{"no token", http.MethodGet, "", http.StatusUnauthorized},
		{"another scheme", http.MethodGet, "Basic c2NyYXBlcg==", http.StatusUnauthorized},
		{"an invalid token", http.MethodGet, "Bearer nonsense", http.StatusUnauthorized},
		{"a user without the right", http.MethodGet, "Bearer intruder", http.StatusForbidden},
		{"the scraper, another verb", http.MethodPost, "Bearer scraper", http.StatusForbidden},
		{"the scraper", http.MethodGet, "bearer scraper", http.StatusOK},
	}
	for _, tt := range tests {
		if code, _ := scrape(tt.method, tt.auth); code != tt.want {
			t.Errorf("%s: %s /metrics = %d, want %d", tt.name, tt.method, code, tt.want)
		}
	}
	tokens, access := r.tokenReviews, r.accessReviews
	code, body := scrape(http.MethodGet, "Bearer scraper")
	if code != http.StatusOK || !strings.Contains(body, "go_goroutines") {
		t.Errorf("second scrape = %d, want 200 with the metrics", code)
	}
	if r.tokenReviews != tokens || r.accessReviews != access {
		t.Errorf("the second scrape made %d token and %d access reviews, want none", r.tokenReviews-tokens, r.accessReviews-access)
	}
	// A review that fails is a 500, and is not kept.
	r.fail = true
	if code, _ := scrape(http.MethodGet, "Bearer another"); code != http.StatusInternalServerError {
		t.Errorf("scrape while the token review fails = %d, want 500", code)
	}
	r.fail = false
	if code, _ := scrape(http.MethodGet, "Bearer another"); code != http.StatusUnauthorized {
		t.Errorf("scrape once the token review answers = %d, want 401", code)
	}

	if _, err := newMetricsServer(cfg, kube.Clients{}, newRegistry()); err == nil {
		t.Error("newMetricsServer(-metrics-secure) without a typed client = nil error, want one")
	}
	plain, err := newMetricsServer(config{metricsAddr: "127.0.0.1:8080"}, kube.Clients{}, newRegistry())
	if err != nil || plain.tls != nil {
		t.Errorf("newMetricsServer without -metrics-secure = %v, %v; want plain HTTP", plain, err)
	}
	s = plain
	if code, _ := scrape(http.MethodGet, ""); code != http.StatusOK {
		t.Errorf("plain /metrics without a token = %d, want 200", code)
	}
}

// TestTTLCache checks expiry and the bound on the entries.
func TestTTLCache(t *testing.T) {
	now := time.Unix(0, 0)
	c := newTTLCache[int](2)
	c.now = func() time.Time { return now }
	c.set("a", 1, time.Minute)
	c.set("b", 2, 2*time.Minute)
	if v, ok := c.get("a"); !ok || v != 1 {
		t.Errorf("get(a) = %v, %v; want 1", v, ok)
	}
	// Full: the entry closest to expiry goes.
	c.set("c", 3, 3*time.Minute)
	if _, ok := c.get("a"); ok {
		t.Error("get(a) after a third entry in a cache of two = found, want evicted")
	}
	now = now.Add(2 * time.Minute)
	if _, ok := c.get("b"); ok {
		t.Error("get(b) after its time = found, want expired")
	}
	// The expired entry goes first.
	c.set("d", 4, time.Minute)
	if v, ok := c.get("c"); !ok || v != 3 {
		t.Errorf("get(c) = %v, %v; want 3", v, ok)
	}
	if v, ok := c.get("d"); !ok || v != 4 {
		t.Errorf("get(d) = %v, %v; want 4", v, ok)
	}
}
