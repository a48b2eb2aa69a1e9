package main

import (
	"context"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// leaderMetrics exposes the leader election metrics kube-controller-manager
// exposes (component-base, ALPHA): whether this replica holds the lease,
// and how often a renewal took the slow path.
//
// client-go reports them only to one provider per process, the first
// given to leaderelection.SetProvider, and controller-runtime's metrics
// package, which this binary links through the kube package, sets its
// own when the process starts. So they are measured here instead: the
// status by the elector's callbacks, the slow path by [countingLock].
// One difference with kube-controller-manager, whose status stays 1 after
// a release on shutdown: here it is 0 once this replica stops leading,
// however it stops.
type leaderMetrics struct {
	status   *prometheus.GaugeVec
	slowpath *prometheus.CounterVec
}

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

// On records that this replica holds lease name.
func (m *leaderMetrics) On(name string) { m.status.WithLabelValues(name).Set(1) }

// Off records that this replica does not hold lease name.
func (m *leaderMetrics) Off(name string) { m.status.WithLabelValues(name).Set(0) }

// countingLock is a lease lock that counts the slow-path renewals of the
// lease name in metrics. client-go's elector renews on the fast path by
// an Update alone; on the slow path it reads the lease first (Get) and,
// finding itself the holder, updates it keeping its acquire time. So a
// slow-path renewal is an Update that names this replica as holder after
// a Get that found it holding the lease; a takeover (the Get found
// another holder) and a release (the Update names no holder) are not.
type countingLock struct {
	resourcelock.Interface
	metrics *leaderMetrics
	name    string

	mu sync.Mutex
	// heldAtGet says whether the last Get, not yet followed by an
	// Update, found this replica holding the lease.
	// guarded by mu
	heldAtGet bool
}

// Get reads the lease, remembering whether this replica holds it.
func (l *countingLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	rec, raw, err := l.Interface.Get(ctx)
	l.mu.Lock()
	l.heldAtGet = err == nil && rec != nil && rec.HolderIdentity != "" && rec.HolderIdentity == l.Identity()
	l.mu.Unlock()
	return rec, raw, err
}

// Update writes the lease, counting a slow-path renewal.
func (l *countingLock) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	l.mu.Lock()
	slow := l.heldAtGet && rec.HolderIdentity == l.Identity()
	l.heldAtGet = false
	l.mu.Unlock()
	if slow {
		l.metrics.slowpath.WithLabelValues(l.name).Inc()
	}
	return l.Interface.Update(ctx, rec)
}
