package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/rest"
)

// reviewer is an API server that answers TokenReviews and
// SubjectAccessReviews: token "scraper" (or "scraper-b") is user
// prometheus, "intruder" user mallory, any other token authenticates no
// one; prometheus may get /metrics, as a member of system:authenticated.
// It counts the reviews, and fails every one while fail is set.
type reviewer struct {
	mu sync.Mutex
	// guarded by mu
	tokenReviews, accessReviews int
	fail                        bool
}

func (r *reviewer) counts() (tokens, access int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tokenReviews, r.accessReviews
}

func (r *reviewer) setFail(fail bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail = fail
}

func (r *reviewer) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	fail := r.fail
	r.mu.Unlock()
	var out any
	switch req.URL.Path {
	case "/apis/authentication.k8s.io/v1/tokenreviews":
		r.mu.Lock()
		r.tokenReviews++
		r.mu.Unlock()
		var tr authenticationv1.TokenReview
		if err := json.NewDecoder(req.Body).Decode(&tr); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		switch tr.Spec.Token {
		case "scraper", "scraper-b":
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "prometheus", Groups: []string{"monitoring", "system:authenticated"}}}
		case "intruder":
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "mallory", Groups: []string{"system:authenticated"}}}
		default:
			tr.Status = authenticationv1.TokenReviewStatus{Error: "invalid bearer token"}
		}
		out = &tr
	case "/apis/authorization.k8s.io/v1/subjectaccessreviews":
		r.mu.Lock()
		r.accessReviews++
		r.mu.Unlock()
		var sar authorizationv1.SubjectAccessReview
		if err := json.NewDecoder(req.Body).Decode(&sar); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		nr := sar.Spec.NonResourceAttributes
		sar.Status.Allowed = sar.Spec.User == "prometheus" && slices.Contains(sar.Spec.Groups, "system:authenticated") &&
			nr != nil && nr.Path == "/metrics" && nr.Verb == "get"
		out = &sar
	default:
		http.NotFound(w, req)
		return
	}
	if fail {
		http.Error(w, "the API server is unavailable", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// TestSecureMetrics checks the authentication and authorization in front
// of /metrics with -metrics-secure: the manager's metrics server with
// controller-runtime's filter, reviewing tokens through the client of
// env.auth (not the manager's config). Decisions are kept: a scraper's
// second scrape makes no review; a review that fails is not kept.
//
// Unlike the filter quotakit had, controller-runtime's answers a token
// that the TokenReview does not authenticate with 500, not 401: the
// authenticator of k8s.io/apiserver reports it as an error. The scrape is
// refused all the same.
func TestSecureMetrics(t *testing.T) {
	var r reviewer
	auth := httptest.NewServer(&r)
	defer auth.Close()
	unused := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		t.Errorf("the manager's own config was used for a request: %s %s", req.Method, req.URL)
		http.Error(w, "no", http.StatusForbidden)
	}))
	defer unused.Close()
	addr := freeAddr(t)
	cfg := config{metricsAddr: addr, metricsSecure: true, probeAddr: "0"}
	mgr, err := newManager(t.Context(), cfg, env{config: &rest.Config{Host: unused.URL}, auth: &rest.Config{Host: auth.URL}}, nil)
	if err != nil {
		t.Fatalf("newManager: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start = %v", err)
		}
	}()

	// The self-signed certificate the server makes at start.
	transport := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // the server's self-signed certificate
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: 30 * time.Second}
	scrape := func(method, token string) (int, string) {
		req, err := http.NewRequestWithContext(t.Context(), method, "https://"+addr+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if code, _ := scrape(http.MethodGet, ""); code != 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the metrics server did not serve within 30s")
		}
	}
	if resp, err := client.Get("http://" + addr + "/metrics"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("/metrics over plain HTTP = 200, want HTTPS only")
		}
	}
	tests := []struct {
		name, method, auth string
		want               int
	}{
		{"no token", http.MethodGet, "", http.StatusUnauthorized},
		{"another scheme", http.MethodGet, "Basic c2NyYXBlcg==", http.StatusUnauthorized},
		{"an invalid token", http.MethodGet, "Bearer nonsense", http.StatusInternalServerError},
		{"a user without the right", http.MethodGet, "Bearer intruder", http.StatusForbidden},
		{"the scraper, another verb", http.MethodPost, "Bearer scraper", http.StatusForbidden},
		{"the scraper", http.MethodGet, "bearer scraper", http.StatusOK},
	}
	for _, tt := range tests {
		if code, _ := scrape(tt.method, tt.auth); code != tt.want {
			t.Errorf("%s: %s /metrics = %d, want %d", tt.name, tt.method, code, tt.want)
		}
	}
	tokens, access := r.counts()
	code, body := scrape(http.MethodGet, "Bearer scraper")
	if code != http.StatusOK || !strings.Contains(body, "go_goroutines") {
		t.Errorf("second scrape = %d, want 200 with the metrics", code)
	}
	if t2, a2 := r.counts(); t2 != tokens || a2 != access {
		t.Errorf("the second scrape made %d token and %d access reviews, want none", t2-tokens, a2-access)
	}
	// A review that fails is a 500, and is not kept: the same token is
	// let in once the reviews answer.
	r.setFail(true)
	if code, _ := scrape(http.MethodGet, "Bearer scraper-b"); code != http.StatusInternalServerError {
		t.Errorf("scrape while the token review fails = %d, want 500", code)
	}
	r.setFail(false)
	if code, _ := scrape(http.MethodGet, "Bearer scraper-b"); code != http.StatusOK {
		t.Errorf("scrape once the token review answers = %d, want 200", code)
	}
}

// TestPlainMetrics checks the default: /metrics over plain HTTP, to
// anyone who reaches the address (localhost by default), without a token.
func TestPlainMetrics(t *testing.T) {
	addr := freeAddr(t)
	mgr, err := newManager(t.Context(), config{metricsAddr: addr, probeAddr: "0"}, env{config: &rest.Config{Host: "https://manager.invalid"}}, nil)
	if err != nil {
		t.Fatalf("newManager: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() { cancel(); <-done }()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("plain /metrics without a token = %d, want 200", resp.StatusCode)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("plain /metrics: %v", err)
		}
	}
}
