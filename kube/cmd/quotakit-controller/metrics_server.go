package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"

	"github.com/quotakit/quotakit/kube"
)

// newMetricsServer returns the /metrics endpoint: plain HTTP, or with
// -metrics-secure HTTPS behind [metricsAuth].
func newMetricsServer(cfg config, clients kube.Clients, reg *prometheus.Registry) (*server, error) {
	mux := http.NewServeMux()
	s := &server{name: "metrics", addr: cfg.metricsAddr, handler: mux}
	metrics := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	if !cfg.metricsSecure {
		mux.Handle("/metrics", metrics)
		return s, nil
	}
	if clients.Typed == nil {
		return nil, errors.New("metrics: -metrics-secure needs the typed client")
	}
	cert, err := selfSignedCertificate()
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	s.tls = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	auth := &metricsAuth{
		tokens:  clients.Typed.AuthenticationV1().TokenReviews(),
		access:  clients.Typed.AuthorizationV1().SubjectAccessReviews(),
		users:   newTTLCache[authenticationv1.UserInfo](authCacheSize),
		allowed: newTTLCache[bool](authCacheSize),
	}
	mux.Handle("/metrics", auth.wrap(metrics))
	return s, nil
}

// selfSignedCertificate returns a certificate for the secure /metrics,
// made at start and kept in memory, as controller-runtime's metrics server
// makes one when given no certificate directory. Scrapers that verify
// server certificates cannot verify it; they authenticate themselves,
// which is what protects the metrics.
func selfSignedCertificate() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return tls.Certificate{}, err
	}
	host, _ := os.Hostname()
	if host == "" {
		host = "quotakit-controller"
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: host},
		DNSNames:     []string{host, "localhost"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// How long decisions are kept, as controller-runtime's metrics filter
// configures kube-apiserver's delegating authenticator and authorizer:
// a token's review for a minute (authenticated or not), an authorization
// for five minutes, a refusal for thirty seconds. Errors are not kept.
const (
	tokenTTL      = time.Minute
	allowTTL      = 5 * time.Minute
	denyTTL       = 30 * time.Second
	reviewTimeout = 10 * time.Second
	authCacheSize = 1024
)

// metricsAuth lets through the requests of clients that authenticate with
// a bearer token, reviewed by a TokenReview, and that a
// SubjectAccessReview allows the request's verb (its method, lower case)
// on its path, a non-resource URL: a scraper needs a ClusterRole allowing
// get on /metrics, and this process one allowing create on tokenreviews
// and subjectaccessreviews. As controller-runtime's filter: 401 without a
// token, 403 when not allowed, 500 when a review fails; unlike it, a token
// the review does not authenticate is 401 (controller-runtime answers
// 500, as kube-apiserver's authenticator reports an invalid token as an
// error).
type metricsAuth struct {
	tokens authenticationclient.TokenReviewInterface
	access authorizationclient.SubjectAccessReviewInterface
	// users holds the user of each token (by its SHA-256), the zero
	// UserInfo for a token that did not authenticate.
	users *ttlCache[authenticationv1.UserInfo]
	// allowed holds the decision for each user and request.
	allowed *ttlCache[bool]
}

func (a *metricsAuth) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log := logr.FromContextOrDiscard(r.Context())
		token, ok := bearerToken(r)
		if !ok {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		user, err := a.authenticate(r.Context(), token)
		if err != nil {
			log.Error(err, "metrics: authentication failed")
			http.Error(w, "Authentication failed", http.StatusInternalServerError)
			return
		}
		if user.Username == "" {
			log.V(4).Info("metrics: token not authenticated")
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		allowed, err := a.authorize(r.Context(), user, strings.ToLower(r.Method), r.URL.Path)
		if err != nil {
			log.Error(err, "metrics: authorization failed", "user", user.Username)
			http.Error(w, "Authorization for user "+user.Username+" failed", http.StatusInternalServerError)
			return
		}
		if !allowed {
			log.V(4).Info("metrics: authorization denied", "user", user.Username)
			http.Error(w, "Authorization denied for user "+user.Username, http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// bearerToken returns the token of the request's Authorization header,
// "Bearer <token>" with the scheme in any case.
func bearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") || token == "" || strings.ContainsRune(token, ' ') {
		return "", false
	}
	return token, true
}

// authenticate returns the user token authenticates as, with the group
// system:authenticated added as kube-apiserver adds it, or the zero
// UserInfo if it does not authenticate.
func (a *metricsAuth) authenticate(ctx context.Context, token string) (authenticationv1.UserInfo, error) {
	sum := sha256.Sum256([]byte(token))
	key := string(sum[:])
	if user, ok := a.users.get(key); ok {
		return user, nil
	}
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	review, err := a.tokens.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return authenticationv1.UserInfo{}, fmt.Errorf("token review: %w", err)
	}
	var user authenticationv1.UserInfo
	if review.Status.Authenticated && review.Status.User.Username != "" {
		user = review.Status.User
		if user.Username != "system:anonymous" && !slices.Contains(user.Groups, "system:authenticated") && !slices.Contains(user.Groups, "system:unauthenticated") {
			user.Groups = append(slices.Clip(user.Groups), "system:authenticated")
		}
	}
	a.users.set(key, user, tokenTTL)
	return user, nil
}

// authorize reports whether user may do verb on the non-resource URL
// path.
func (a *metricsAuth) authorize(ctx context.Context, user authenticationv1.UserInfo, verb, path string) (bool, error) {
	extra := make(map[string]authorizationv1.ExtraValue, len(user.Extra))
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	spec := authorizationv1.SubjectAccessReviewSpec{
		User:                  user.Username,
		UID:                   user.UID,
		Groups:                user.Groups,
		Extra:                 extra,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return false, err
	}
	sum := sha256.Sum256(b)
	key := string(sum[:])
	if allowed, ok := a.allowed.get(key); ok {
		return allowed, nil
	}
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	review, err := a.access.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("subject access review: %w", err)
	}
	allowed := review.Status.Allowed && !review.Status.Denied
	ttl := denyTTL
	if allowed {
		ttl = allowTTL
	}
	a.allowed.set(key, allowed, ttl)
	return allowed, nil
}

// ttlCache is a map whose entries expire, bounded in size: when it is
// full, expired entries go, and if none had, the one closest to expiry.
// It is safe for concurrent use.
type ttlCache[V any] struct {
	max int
	now func() time.Time

	mu sync.Mutex
	// guarded by mu
	entries map[string]ttlEntry[V]
}

type ttlEntry[V any] struct {
	value  V
	expiry time.Time
}

func newTTLCache[V any](max int) *ttlCache[V] {
	return &ttlCache[V]{max: max, now: time.Now, entries: map[string]ttlEntry[V]{}}
}

func (c *ttlCache[V]) get(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || !c.now().Before(e.expiry) {
		var zero V
		return zero, false
	}
	return e.value, true
}

func (c *ttlCache[V]) set(key string, value V, ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if _, ok := c.entries[key]; !ok && len(c.entries) >= c.max {
		var soonest string
		for k, e := range c.entries {
			if !now.Before(e.expiry) {
				delete(c.entries, k)
			} else if soonest == "" || e.expiry.Before(c.entries[soonest].expiry) {
				soonest = k
			}
		}
		if len(c.entries) >= c.max {
			delete(c.entries, soonest)
		}
	}
	c.entries[key] = ttlEntry[V]{value: value, expiry: now.Add(ttl)}
}
