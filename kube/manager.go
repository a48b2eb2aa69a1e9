package kube

import (
	"errors"
	"fmt"
	"net/http"

	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/quotakit/quotakit"
)

// CheckName is the name under which [AddToManager] registers the
// controller's liveness and readiness checks.
const CheckName = "resourcequota"

// AddToManager adds a ResourceQuota controller to mgr, a controller-runtime
// manager, and returns it. The controller reads and writes through a
// [Client] built from mgr's rest.Config (see [NewForConfig]) and gets
// from mgr what opts leaves unset:
//
//   - the manager's logger, when opts.Logger is the zero (or discarding)
//     logr.Logger;
//   - queue metrics in controller-runtime's metrics.Registry, which the
//     manager serves, when opts.MetricsProvider is nil (see
//     [MetricsProvider] for the shape they take there), with the
//     controller's own counts ([RegisterControllerMetrics]);
//   - leader election: the controller is a Runnable that needs it, so the
//     manager runs it only on the replica it elects, and stops it before
//     releasing the lease (set LeaderElectionReleaseOnCancel so that a
//     standby takes over at once rather than after the lease expires);
//   - a liveness check that passes while the process serves (the
//     controller has no state that a restart would mend), and a readiness
//     check, both named [CheckName]: see [ReadyCheck].
//
// An error leaves mgr without the controller; a check registered before
// a later step failed stays (controller-runtime cannot remove one), and
// passes. controller-runtime keeps one check per name: a second
// controller added to the same manager replaces the first one's checks.
func AddToManager(mgr manager.Manager, opts quotakit.Options) (*quotakit.Controller, error) {
	if mgr == nil {
		return nil, errors.New("kube: AddToManager: nil manager")
	}
	client, err := NewForConfig(mgr.GetConfig(), opts)
	if err != nil {
		return nil, fmt.Errorf("kube: AddToManager: %w", err)
	}
	return AddClientToManager(mgr, client, opts)
}

// AddClientToManager is [AddToManager] over client instead of a [Client]
// built from mgr's rest.Config: client-go's fake clients in a test, the
// in-memory API of cache/cachetest, or a [Client] over clients of the
// caller's own. Give client the same opts (see [NewForConfig]).
func AddClientToManager(mgr manager.Manager, client quotakit.Client, opts quotakit.Options) (*quotakit.Controller, error) {
	if mgr == nil {
		return nil, errors.New("kube: AddToManager: nil manager")
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = mgr.GetLogger()
	}
	ownMetrics := opts.MetricsProvider == nil
	if ownMetrics {
		metrics, err := NewMetricsProvider(crmetrics.Registry)
		if err != nil {
			return nil, fmt.Errorf("kube: AddToManager: %w", err)
		}
		opts.MetricsProvider = metrics
	}
	ctrl, err := quotakit.NewController(client, opts)
	if err != nil {
		return nil, fmt.Errorf("kube: AddToManager: %w", err)
	}
	if ownMetrics {
		if err := RegisterControllerMetrics(crmetrics.Registry, ctrl); err != nil {
			return nil, fmt.Errorf("kube: AddToManager: %w", err)
		}
	}
	// The checks first: a controller added to a manager cannot be
	// removed, and a failed check must not leave one running unchecked.
	if err := mgr.AddHealthzCheck(CheckName, healthz.Ping); err != nil {
		return nil, fmt.Errorf("kube: AddToManager: %w", err)
	}
	if err := mgr.AddReadyzCheck(CheckName, ReadyCheck(ctrl)); err != nil {
		return nil, fmt.Errorf("kube: AddToManager: %w", err)
	}
	if err := mgr.Add(ctrl); err != nil {
		return nil, fmt.Errorf("kube: AddToManager: adding the controller: %w", err)
	}
	return ctrl, nil
}

// ReadyCheck returns the readiness check [AddToManager] registers: it
// passes while ctrl is not running, which under leader election is a
// standby (a replica that is not ready receives no traffic, and a standby
// has nothing to receive it for), and once running, when its informers
// have synced ([quotakit.Controller.Ready]). Without leader election the
// controller runs as soon as the manager starts, and the check passes
// only in the moment before.
//
// A process that also serves a webhook from a quota cache must not be
// ready, standby or not, before that cache has synced: add a check of its
// HasSynced (see [Client.QuotaInformer]).
func ReadyCheck(ctrl *quotakit.Controller) healthz.Checker {
	return func(r *http.Request) error {
		if ctrl == nil {
			return errors.New("kube: ReadyCheck: nil controller")
		}
		if err := ctrl.Ready(r); !errors.Is(err, quotakit.ErrNotRunning) {
			return err
		}
		return nil
	}
}
