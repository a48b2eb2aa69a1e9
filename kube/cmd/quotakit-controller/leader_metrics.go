package main

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/leaderelection"
)

// leaderMetrics exposes client-go's leader election metrics as
// kube-controller-manager does (component-base, ALPHA): whether this
// replica holds the lease, and how often a renewal took the slow path.
// client-go takes one provider per process (leaderelection.SetProvider),
// so main sets it once.
type leaderMetrics struct {
	status   *prometheus.GaugeVec
	slowpath *prometheus.CounterVec
}

var _ leaderelection.MetricsProvider = (*leaderMetrics)(nil)

// newLeaderMetrics registers the two series in reg.
func newLeaderMetrics(reg prometheus.Registerer) (*leaderMetrics, error) {
	m := &leaderMetrics{
		status: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "leader_election_master_status",
			Help: "[ALPHA] Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease. Please make sure to group by name.",
		}, []string{"name"}),
		slowpath: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leader_election_slowpath_total",
			Help: "[ALPHA] Total number of slow path exercised in renewing leader leases. 'name' is the string used to identify the lease. Please make sure to group by name.",
		}, []string{"name"}),
	}
	for _, c := range []prometheus.Collector{m.status, m.slowpath} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// NewLeaderMetric implements leaderelection.MetricsProvider.
func (m *leaderMetrics) NewLeaderMetric() leaderelection.LeaderMetric { return m }

// On records that this replica holds lease name.
func (m *leaderMetrics) On(name string) { m.status.WithLabelValues(name).Set(1) }

// Off records that this replica does not hold lease name.
func (m *leaderMetrics) Off(name string) { m.status.WithLabelValues(name).Set(0) }

// SlowpathExercised counts a renewal of lease name that had to read the
// Lease first.
func (m *leaderMetrics) SlowpathExercised(name string) { m.slowpath.WithLabelValues(name).Inc() }
