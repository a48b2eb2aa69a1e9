package quotakit

import (
	"errors"
	"fmt"
	"net/http"
)

// HasSynced reports whether the ResourceQuota informer and the informer of
// every resource counted now have synced: from then on, the statuses the
// controller writes can be trusted. It reports false before Run, and so
// on a replica that has not been started (a standby under leader
// election), and after Run has returned.
func (c *Controller) HasSynced() bool {
	if !c.running.Load() || !c.quotaInformer.HasSynced() {
		return false
	}
	if c.cluster != nil && !c.cluster.hasSynced() {
		return false
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, m := range c.monitorsLocked() {
		if !m.informer.HasSynced() {
			return false
		}
	}
	return true
}

// ErrNotRunning is returned by [Controller.Ready] before Run, after it
// returns, and so on a standby replica under leader election.
var ErrNotRunning = errors.New("quotakit: controller not running")

// Ready returns nil when [Controller.HasSynced] holds, [ErrNotRunning] when
// the controller does not run, and an error naming the resources whose
// informers have not synced otherwise. Its signature is that of a
// controller-runtime healthz.Checker. On a standby replica under leader
// election it returns ErrNotRunning, so that a readiness check made of it
// alone keeps standbys unready; one that should pass on standbys ignores
// that error:
//
//	mgr.AddReadyzCheck("resourcequota", func(r *http.Request) error {
//		if err := controller.Ready(r); !errors.Is(err, quotakit.ErrNotRunning) {
//			return err
//		}
//		return nil
//	})
func (c *Controller) Ready(*http.Request) error {
	if !c.running.Load() {
		return ErrNotRunning
	}
	var unsynced []string
	if !c.quotaInformer.HasSynced() {
		unsynced = append(unsynced, resourceQuotas.GroupResource().String())
	}
	c.mu.RLock()
	monitors := c.monitorsLocked()
	c.mu.RUnlock()
	for _, m := range monitors {
		// A resource the controller may not list is reported on the
		// quotas that name it (see ForbiddenResources) and holds up
		// only them, never the controller (kubernetes#133737).
		if m.informer != c.quotaInformer && !m.informer.HasSynced() && c.denied(m) == nil {
			unsynced = append(unsynced, m.gvr.GroupResource().String())
		}
	}
	if c.cluster != nil {
		// Configured to keep ClusterQuotas: not ready while they cannot
		// be watched (no CRD installed), with the reason.
		unsynced = append(unsynced, c.cluster.unsynced()...)
	}
	if len(unsynced) > 0 {
		return fmt.Errorf("quotakit: informers not synced: %v", unsynced)
	}
	return nil
}

// UncountedQuotas returns the number of quotas whose spec.hard names a
// resource the controller does not count: no evaluator charges it and no
// discovered resource serves it, or it is ignored, or the server forbids
// the controller to list it (see [Controller.ForbiddenResources]). Each
// such quota is logged at error level, with a Warning Event on it when
// Options.Events is set, once for each new set of such names and reasons.
func (c *Controller) UncountedQuotas() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.uncounted)
}

// ReleasedCharges returns how many times a recalculation released
// charges in flight that no object followed, each at least a charge
// window old: see Charges in flight on [Controller].
func (c *Controller) ReleasedCharges() int64 { return c.releases.Load() }

// Drifts returns how many times a full resync found a quota's usage kept
// from events different from a recalculation from the caches: the number
// of times the controller wrote the truth over a wrong number it would
// otherwise have kept. There should be none; each is logged at error
// level.
func (c *Controller) Drifts() int64 { return c.drifts.Load() }

// StatusConflicts returns how many status writes of the controller's
// conflicted: another writer, admission charging the quota, wrote since
// the version the controller read. Beside an admission that charges
// quotas they are expected; each is synced again as soon as the informer
// delivers the newer version, and logged at V(1), not as an error.
func (c *Controller) StatusConflicts() int64 { return c.conflicts.Load() }

// PutOffWrites returns how many status writes that only released usage
// were put off, to go out with the releases that followed them within
// 100ms in one write: bursts of deletions cost admission fewer
// conflicts.
func (c *Controller) PutOffWrites() int64 { return c.putOffs.Load() }
