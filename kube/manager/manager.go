// Package manager adds quotakit's ResourceQuota controller to a
// controller-runtime manager in one call ([Add]), with the manager's
// logger, metrics registry, leader election and probes. It is apart from
// package kube so that a program that uses kube's client and listers
// alone (an admission webhook, say) links no controller-runtime package
// and none of the start-up hooks with which controller-runtime takes over
// client-go's process-wide metrics providers.
package manager

import (
	"errors"
	"fmt"
	"net/http"

	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/quotakit/quotakit"
	"github.com/quotakit/quotakit/kube"
)

// CheckName is the name under which [Add] registers the
// controller's liveness and readiness checks.
const CheckName = "resourcequota"

// Add adds a ResourceQuota controller to mgr, a controller-runtime
// manager, and returns it. The controller reads and writes through a
// [kube.Client] built from mgr's rest.Config (see [kube.NewForConfig])
// and gets from mgr what opts (optional: at most one) leaves unset:
//
//   - the manager's logger, when opts.Logger is the zero (or discarding)
//     logr.Logger;
//   - queue metrics in controller-runtime's metrics.Registry, which the
//     manager serves, when opts.MetricsProvider is nil (see
//     [kube.MetricsProvider] for the shape they take there), with the
//     controller's own counts ([kube.RegisterControllerMetrics]);
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
func Add(mgr manager.Manager, opts ...quotakit.Options) (*quotakit.Controller, error) {
	if mgr == nil {
		return nil, errors.New("manager: Add: nil manager")
	}
	o, err := one(opts)
	if err != nil {
		return nil, err
	}
	client, err := kube.NewForConfig(mgr.GetConfig(), o)
	if err != nil {
		return nil, fmt.Errorf("manager: Add: %w", err)
	}
	return AddClient(mgr, client, o)
}

// AddClient is [Add] over client instead of a [kube.Client] built from
// mgr's rest.Config: client-go's fake clients in a test, the in-memory API
// of cache/cachetest, or a [kube.Client] over clients of the caller's
// own. Give client the same opts (see [kube.NewForConfig]).
func AddClient(mgr manager.Manager, client quotakit.Client, opts ...quotakit.Options) (*quotakit.Controller, error) {
	if mgr == nil {
		return nil, errors.New("manager: Add: nil manager")
	}
	o, err := one(opts)
	if err != nil {
		return nil, err
	}
	return add(mgr, client, o)
}

// one returns the Options given, or the zero Options when none is.
func one(opts []quotakit.Options) (quotakit.Options, error) {
	switch len(opts) {
	case 0:
		return quotakit.Options{}, nil
	case 1:
		return opts[0], nil
	}
	return quotakit.Options{}, fmt.Errorf("manager: Add: %d Options given, want at most one", len(opts))
}

func add(mgr manager.Manager, client quotakit.Client, opts quotakit.Options) (*quotakit.Controller, error) {
	if opts.Logger.GetSink() == nil {
		opts.Logger = mgr.GetLogger()
	}
	ownMetrics := opts.MetricsProvider == nil
	if ownMetrics {
		metrics, err := kube.NewMetricsProvider(crmetrics.Registry)
		if err != nil {
			return nil, fmt.Errorf("manager: Add: %w", err)
		}
		opts.MetricsProvider = metrics
	}
	ctrl, err := quotakit.NewController(client, opts)
	if err != nil {
		return nil, fmt.Errorf("manager: Add: %w", err)
	}
	if ownMetrics {
		if err := kube.RegisterControllerMetrics(crmetrics.Registry, ctrl); err != nil {
			return nil, fmt.Errorf("manager: Add: %w", err)
		}
	}
	// The checks first: a controller added to a manager cannot be
	// removed, and a failed check must not leave one running unchecked.
	if err := mgr.AddHealthzCheck(CheckName, healthz.Ping); err != nil {
		return nil, fmt.Errorf("manager: Add: %w", err)
	}
	if err := mgr.AddReadyzCheck(CheckName, ReadyCheck(ctrl)); err != nil {
		return nil, fmt.Errorf("manager: Add: %w", err)
	}
	if err := mgr.Add(ctrl); err != nil {
		return nil, fmt.Errorf("manager: Add: adding the controller: %w", err)
	}
	return ctrl, nil
}

// ReadyCheck returns the readiness check [Add] registers: it
// passes while ctrl is not running, which under leader election is a
// standby (a replica that is not ready receives no traffic, and a standby
// has nothing to receive it for), and once running, when its informers
// have synced ([quotakit.Controller.Ready]). Without leader election the
// controller runs as soon as the manager starts, and the check passes
// only in the moment before.
//
// A process that also serves a webhook from a quota cache must not be
// ready, standby or not, before that cache has synced: add a check of its
// HasSynced (see [kube.Client.QuotaInformer]).
func ReadyCheck(ctrl *quotakit.Controller) healthz.Checker {
	return func(r *http.Request) error {
		if ctrl == nil {
			return errors.New("manager: ReadyCheck: nil controller")
		}
		if err := ctrl.Ready(r); !errors.Is(err, quotakit.ErrNotRunning) {
			return err
		}
		return nil
	}
}
