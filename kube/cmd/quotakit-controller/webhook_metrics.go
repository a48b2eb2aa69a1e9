package main

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
)

// webhookMetrics are the webhook's own series: its denials by reason and
// the connections its listener closed. Its requests, latency and reviews
// in flight are controller-runtime's own webhook metrics
// (controller_runtime_webhook_requests_total{webhook,code},
// controller_runtime_webhook_latency_seconds{webhook},
// controller_runtime_webhook_requests_in_flight{webhook}), measured by
// controller-runtime's instrumentation around the handler (see
// [newWebhook]) in its metrics registry.
type webhookMetrics struct {
	denials      *prometheus.CounterVec
	refusedConns prometheus.Counter
	evictedConns prometheus.Counter
}

// newWebhookMetrics registers the webhook's series in reg.
func newWebhookMetrics(reg prometheus.Registerer) (*webhookMetrics, error) {
	m := &webhookMetrics{
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
	for _, c := range []prometheus.Collector{m.denials, m.refusedConns, m.evictedConns} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
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
