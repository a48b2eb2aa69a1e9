package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// webhookMetrics are the webhook's series: controller-runtime's three
// webhook metrics, with its names, labels, help strings and buckets, so
// that dashboards written for controller-runtime webhooks work; and the
// denials by reason and the connections refused, quotakit's own.
type webhookMetrics struct {
	latency      *prometheus.HistogramVec
	requests     *prometheus.CounterVec
	inFlight     *prometheus.GaugeVec
	denials      *prometheus.CounterVec
	refusedConns prometheus.Counter
	evictedConns prometheus.Counter
}

// newWebhookMetrics registers the webhook's series in reg.
func newWebhookMetrics(reg prometheus.Registerer) (*webhookMetrics, error) {
	m := &webhookMetrics{
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:                            "controller_runtime_webhook_latency_seconds",
			Help:                            "Histogram of the latency of processing admission requests",
			Buckets:                         prometheus.ExponentialBuckets(10e-9, 10, 12),
			NativeHistogramBucketFactor:     1.1,
			NativeHistogramMaxBucketNumber:  100,
			NativeHistogramMinResetDuration: time.Hour,
		}, []string{"webhook"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "controller_runtime_webhook_requests_total",
			Help: "Total number of admission requests by HTTP status code.",
		}, []string{"webhook", "code"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "controller_runtime_webhook_requests_in_flight",
			Help: "Current number of admission requests being served.",
		}, []string{"webhook"}),
		denials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quotakit_webhook_denials_total",
			Help: "Total number of admission requests the webhook denied, by the reason of the status it answered (Forbidden for a quota that would be exceeded, InternalError for a timeout, Conflict, BadRequest for a review whose objects do not decode).",
		}, []string{"reason"}),
		refusedConns: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "quotakit_webhook_connections_refused_total",
			Help: "Total number of connections to the webhook closed as soon as they were accepted, because -max-webhook-connections were open and every one was serving a request.",
		}),
		evictedConns: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "quotakit_webhook_connections_evicted_total",
			Help: "Total number of connections to the webhook that had sent no request, or were idle, closed to make room for a new one at -max-webhook-connections.",
		}),
	}
	for _, c := range []prometheus.Collector{m.latency, m.requests, m.inFlight, m.denials, m.refusedConns, m.evictedConns} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// instrument measures next, served at path: every request, including
// those refused without a review (429 over a limit of admission's
// Handler, 408 for a body too slow, 400), counts by HTTP code, and each
// denial in an answered review by its reason.
func (m *webhookMetrics) instrument(path string, next http.Handler) http.Handler {
	labels := prometheus.Labels{"webhook": path}
	requests := m.requests.MustCurryWith(labels)
	// The codes of a review answered and of a failure exist from the
	// start, as controller-runtime's.
	requests.WithLabelValues("200")
	requests.WithLabelValues("500")
	counted := &denialCounter{next: next, denials: m.denials}
	return promhttp.InstrumentHandlerDuration(m.latency.MustCurryWith(labels),
		promhttp.InstrumentHandlerCounter(requests,
			promhttp.InstrumentHandlerInFlight(m.inFlight.With(labels), counted)))
}

// denialCounter counts the denials next answers, by reading the reviews
// it writes.
type denialCounter struct {
	next    http.Handler
	denials *prometheus.CounterVec
}

// maxCapturedReview bounds the answer kept to be read: a review's answer
// is small, its objects are not sent back.
const maxCapturedReview = 64 << 10

func (d *denialCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := &capture{ResponseWriter: w}
	d.next.ServeHTTP(c, r)
	if c.code != 0 && c.code != http.StatusOK {
		return
	}
	// The answer of admission.k8s.io v1 and v1beta1 alike.
	var review struct {
		Response *struct {
			Allowed bool `json:"allowed"`
			Status  *struct {
				Reason string `json:"reason"`
			} `json:"status"`
		} `json:"response"`
	}
	if json.Unmarshal(c.body.Bytes(), &review) != nil || review.Response == nil || review.Response.Allowed {
		return
	}
	reason := "Unknown"
	if s := review.Response.Status; s != nil && s.Reason != "" {
		reason = s.Reason
	}
	d.denials.WithLabelValues(reason).Inc()
}

// capture passes an answer through, keeping its code and the start of its
// body.
type capture struct {
	http.ResponseWriter
	code int
	body bytes.Buffer
}

func (c *capture) WriteHeader(code int) {
	if c.code == 0 {
		c.code = code
	}
	c.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection through the
// capture: admission's Handler sets the body's read deadline with it.
func (c *capture) Unwrap() http.ResponseWriter { return c.ResponseWriter }

func (c *capture) Write(p []byte) (int, error) {
	if c.code == 0 {
		c.code = http.StatusOK
	}
	if room := maxCapturedReview - c.body.Len(); room > 0 {
		c.body.Write(p[:min(len(p), room)])
	}
	return c.ResponseWriter.Write(p)
}
