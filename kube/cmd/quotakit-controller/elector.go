package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"

	"github.com/quotakit/quotakit"
	"github.com/quotakit/quotakit/kube"
)

// leaderHealthTolerance is how long past the lease duration a leader that
// has not renewed still passes /healthz, as kube-controller-manager.
const leaderHealthTolerance = 20 * time.Second

// elector runs the controller while this replica holds the lease.
type elector struct {
	le     *leaderelection.LeaderElector
	health *leaderelection.HealthzAdaptor
	events record.EventBroadcaster
	sink   record.EventSink
	ctrl   *quotakit.Controller
	// metrics and lease name the leader status.
	metrics *leaderMetrics
	lease   string

	mu sync.Mutex
	// stopping is set once the controller must not start any more:
	// [elector.run] is stopping, or this replica stopped leading (client-go
	// starts the leading callback in a goroutine that may run after the
	// elector has stopped).
	// guarded by mu
	stopping bool
	// running is closed when the controller's Run has returned; nil
	// before it starts.
	// guarded by mu
	running chan struct{}
	// stop ends the run of the controller.
	// guarded by mu
	stop context.CancelFunc
}

func newElector(cfg config, clients kube.Clients, ctrl *quotakit.Controller, metrics *leaderMetrics) (*elector, error) {
	if clients.Typed == nil {
		return nil, errors.New("leader election needs the typed client")
	}
	host, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("leader election identity: %w", err)
	}
	e := &elector{
		health:  leaderelection.NewLeaderHealthzAdaptor(leaderHealthTolerance),
		events:  record.NewBroadcaster(),
		sink:    &typedcorev1.EventSinkImpl{Interface: clients.Typed.CoreV1().Events("")},
		ctrl:    ctrl,
		metrics: metrics,
		lease:   cfg.leaseName,
	}
	recorder := e.events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "quotakit-controller"})
	lock := &countingLock{
		Interface: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: cfg.leaseNamespace, Name: cfg.leaseName},
			Client:     clients.Typed.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: host + "_" + string(uuid.NewUUID()), EventRecorder: recorder},
		},
		metrics: metrics,
		name:    cfg.leaseName,
	}
	metrics.Off(cfg.leaseName)
	e.le, err = leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		Name:            cfg.leaseName,
		LeaseDuration:   cfg.leaseDuration,
		RenewDeadline:   cfg.renewDeadline,
		RetryPeriod:     cfg.retryPeriod,
		ReleaseOnCancel: true,
		WatchDog:        e.health,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: e.lead,
			OnStoppedLeading: e.stoppedLeading,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("leader election: %w", err)
	}
	return e, nil
}

// lead runs the controller until leaderCtx ends (the lease is lost or
// released) or [elector.run] stops it.
func (e *elector) lead(leaderCtx context.Context) {
	e.mu.Lock()
	if e.stopping {
		e.mu.Unlock()
		return
	}
	e.metrics.On(e.lease)
	ctx, stop := context.WithCancel(leaderCtx)
	done := make(chan struct{})
	e.running, e.stop = done, stop
	e.mu.Unlock()
	defer close(done)
	defer stop()
	logr.FromContextOrDiscard(ctx).Info("leading: starting the controller")
	if err := e.ctrl.Run(ctx); err != nil {
		logr.FromContextOrDiscard(ctx).Error(err, "controller failed")
	}
}

// stoppedLeading records that this replica leads no more, and keeps a
// late leading callback from starting the controller.
func (e *elector) stoppedLeading() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stopping = true
	e.metrics.Off(e.lease)
}

// run takes part in the election until ctx is done or the lease is lost.
// When ctx ends it stops the controller first and then releases the
// lease, so that no two replicas write statuses at once. A lost lease is
// an error: the caller exits, as kube-controller-manager does.
func (e *elector) run(ctx context.Context) error {
	e.events.StartRecordingToSink(e.sink)
	defer e.events.Shutdown()
	electCtx, cancelElect := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelElect()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-ctx.Done():
		case <-electCtx.Done():
		}
		e.stopController()
		cancelElect()
	}()
	e.le.Run(electCtx)
	cancelElect()
	<-stopped
	if ctx.Err() == nil {
		// The elector returns before ctx ends only when the lease was
		// lost.
		return errors.New("leader election lost")
	}
	return nil
}

// stopController stops the controller, or keeps it from starting, and
// waits for its Run to return.
func (e *elector) stopController() {
	e.mu.Lock()
	e.stopping = true
	running, stop := e.running, e.stop
	e.mu.Unlock()
	if running != nil {
		stop()
		<-running
	}
}
