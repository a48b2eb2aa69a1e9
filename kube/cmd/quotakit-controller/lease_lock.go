package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"

	"github.com/quotakit/quotakit/kube"
)

// leaderHealthTolerance is how long past the lease duration a leader that
// has not renewed still passes /healthz, as kube-controller-manager.
const leaderHealthTolerance = 20 * time.Second

// leaseLock is the Lease lock the manager elects with: client-go's
// LeaseLock over the election's own client, so that lease renewals never
// queue behind the controller's requests, with kube-controller-manager's
// identity (<hostname>_<uuid>). The manager runs the election, starts the
// controller when this replica leads and releases the lease once it has
// stopped; the lock adds two things the manager does not give:
//
//   - leader_election_slowpath_total{name}. client-go reports the slow
//     path to the process's leader metrics provider, which
//     controller-runtime sets, but controller-runtime v0.25 registers only
//     its leader_election_master_status gauge, not the counter. So the
//     lock counts it: client-go renews on the fast path by an Update
//     alone; on the slow path it reads the lease first and, finding itself
//     the holder, updates it. A slow-path renewal is an Update naming this
//     replica after a Get that found it holding the lease; a takeover (the
//     Get found another holder) and a release (the Update names no holder)
//     are not.
//   - the /healthz check of kube-controller-manager's leader election
//     ([leaseLock.check]), which the manager, running its elector without
//     a watchdog, does not have;
//   - leader_election_master_status{name} at 0 once the lease is released.
//     client-go sets controller-runtime's gauge to 1 when it acquires the
//     lease and to 0 when a renewal fails, but not when it releases the
//     lease on shutdown (kube-controller-manager's stays 1 then too); the
//     lock sets it to 0 after a release, so that it reads 1 only while
//     this replica leads.
//
// It is safe for concurrent use.
type leaseLock struct {
	resourcelock.Interface
	name string
	// expiry is how long after its last renewal a leader fails /healthz.
	expiry time.Duration
	// slowpath counts slow-path renewals; nil when another counts them.
	slowpath prometheus.Counter
	// status is controller-runtime's leader_election_master_status of
	// the lease; nil if it has none.
	status prometheus.Gauge

	mu sync.Mutex
	// heldAtGet says whether the last Get, not yet followed by an
	// Update, found this replica holding the lease.
	// guarded by mu
	heldAtGet bool
	// leading says whether this replica's last write of the lease named
	// it holder, and renewed when that write was.
	// guarded by mu
	leading bool
	renewed time.Time
}

// Help strings of controller-runtime's leader election metrics: Prometheus
// hands out a registered collector only to one that describes itself
// identically, and a version of controller-runtime that registers the
// counter finds ours identical.
const (
	slowpathHelp = "Total number of slow path exercised in renewing leader leases. 'name' is the string used to identify the lease. Please make sure to group by name."
	statusHelp   = "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease. Please make sure to group by name."
)

// newLeaseLock returns the lock of the lease cfg names over clients, its
// events recorded through events, its counter registered in reg and the
// leader status found in crReg, controller-runtime's registry.
func newLeaseLock(cfg config, clients kube.Clients, events record.EventRecorder, reg, crReg prometheus.Registerer) (*leaseLock, error) {
	if clients.Typed == nil {
		return nil, errors.New("leader election needs the typed client")
	}
	host, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("leader election identity: %w", err)
	}
	l := &leaseLock{
		Interface: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: cfg.leaseNamespace, Name: cfg.leaseName},
			Client:     clients.Typed.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: host + "_" + string(uuid.NewUUID()), EventRecorder: events},
		},
		name:   cfg.leaseName,
		expiry: cfg.leaseDuration + leaderHealthTolerance,
	}
	counter := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "leader_election_slowpath_total", Help: slowpathHelp}, []string{"name"})
	switch err := reg.Register(counter); {
	case err == nil:
		l.slowpath = counter.WithLabelValues(cfg.leaseName)
		// The series exists from the start, at 0.
		l.slowpath.Add(0)
	case errors.As(err, new(prometheus.AlreadyRegisteredError)):
		// Registered by controller-runtime, which then counts it.
	default:
		return nil, fmt.Errorf("leader election metrics: %w", err)
	}
	status := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "leader_election_master_status", Help: statusHelp}, []string{"name"})
	var existing prometheus.AlreadyRegisteredError
	switch err := crReg.Register(status); {
	case errors.As(err, &existing):
		if g, ok := existing.ExistingCollector.(*prometheus.GaugeVec); ok {
			l.status = g.WithLabelValues(cfg.leaseName)
		}
	case err == nil:
		// Not controller-runtime's: nobody sets it.
		crReg.Unregister(status)
	}
	return l, nil
}

// Get reads the lease, remembering whether this replica holds it.
func (l *leaseLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	rec, raw, err := l.Interface.Get(ctx)
	l.mu.Lock()
	l.heldAtGet = err == nil && rec != nil && rec.HolderIdentity != "" && rec.HolderIdentity == l.Identity()
	if err == nil && rec != nil && rec.HolderIdentity != l.Identity() {
		l.leading = false
	}
	l.mu.Unlock()
	return rec, raw, err
}

// Create creates the lease, holding it from then.
func (l *leaseLock) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Create(ctx, rec)
	if err == nil {
		l.wrote(rec)
	}
	return err
}

// Update writes the lease, counting a slow-path renewal.
func (l *leaseLock) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	l.mu.Lock()
	slow := l.heldAtGet && rec.HolderIdentity == l.Identity()
	l.heldAtGet = false
	l.mu.Unlock()
	if slow && l.slowpath != nil {
		l.slowpath.Inc()
	}
	err := l.Interface.Update(ctx, rec)
	if err == nil {
		l.wrote(rec)
	}
	return err
}

// wrote records a write of rec that succeeded: a renewal if it names this
// replica, else (a release) the end of its lead.
func (l *leaseLock) wrote(rec resourcelock.LeaderElectionRecord) {
	l.mu.Lock()
	l.leading = rec.HolderIdentity != "" && rec.HolderIdentity == l.Identity()
	if l.leading {
		l.renewed = time.Now()
	}
	l.mu.Unlock()
	if rec.HolderIdentity == "" && l.status != nil {
		// Released.
		l.status.Set(0)
	}
}

// check is the liveness check of leader election, as client-go's
// HealthzAdaptor: it fails only when this replica leads and has not
// renewed the lease for longer than its duration plus
// leaderHealthTolerance, so that a stuck leader is restarted; a standby
// always passes.
func (l *leaseLock) check(*http.Request) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.leading && time.Since(l.renewed) > l.expiry {
		return fmt.Errorf("failed election to renew leadership on lease %s", l.name)
	}
	return nil
}
