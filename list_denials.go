package quotakit

import (
	"context"
	"fmt"
	"sync"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit/cache"
)

// EventRecorder records an Event about an object. client-go's
// record.EventRecorder is one; the controller calls it from its own
// goroutines, never while holding a lock.
type EventRecorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any)
}

// listDenials remembers, per resource the controller counts, the last
// list or watch that the server refused with 403 Forbidden: the
// controller's identity may not read it. Such a resource is reported on
// every quota that names it and, unlike any other informer that has not
// synced, does not keep [Controller.Ready] false: a permission that is
// missing on purpose (a least-privilege role that leaves Secrets out)
// must not take the controller out of service for the quotas that do not
// name it, which is kubernetes#133737's rule. Its quotas keep the used
// values they had, and get none when they had none, so that admission
// refuses what would be charged for it rather than counting it as zero.
// The zero value is ready to use.
type listDenials struct {
	mu sync.Mutex
	// byResource holds the denial of each resource, until a list
	// succeeds after it.
	// guarded by mu
	byResource map[schema.GroupResource]listDenial
}

// listDenial is one refusal: its error, and the informer's last synced
// resourceVersion when it came, which changes once a list succeeds.
type listDenial struct {
	err error
	rv  string
}

// watchErrors makes the informer of m report its errors to the
// controller: a 403 Forbidden is remembered as a denial of m's resource,
// logged at error level when it starts (and at V(1) as the reflector
// retries), and the quotas are reported again; any other error is logged
// as the reflector would, and ends a denial.
func (c *Controller) watchErrors(m *monitor) error {
	gr := m.gvr.GroupResource()
	inf := m.informer
	return inf.SetWatchErrorHandler(func(ctx context.Context, _ *cache.Reflector, err error) {
		log := logr.FromContextOrDiscard(ctx)
		if !apierrors.IsForbidden(err) {
			c.denials.clear(gr)
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				log.V(4).Info("watch expired", "err", err)
				return
			}
			log.Error(err, "listing or watching failed")
			return
		}
		if c.denials.record(gr, err, inf.LastSyncResourceVersion()) {
			log.Error(err, "the controller may not list or watch this resource: the quotas that name it are not counted for it (they keep their last used value, or get none) until it may; grant list and watch on it, or stop naming it", "resource", gr)
			c.namesChanged()
			return
		}
		log.V(1).Info("listing or watching is still forbidden", "resource", gr, "err", err)
	})
}

// record remembers err as the denial of gr, and reports whether gr was
// not denied before.
func (d *listDenials) record(gr schema.GroupResource, err error, rv string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, was := d.byResource[gr]
	if d.byResource == nil {
		d.byResource = map[schema.GroupResource]listDenial{}
	}
	d.byResource[gr] = listDenial{err: err, rv: rv}
	return !was
}

func (d *listDenials) clear(gr schema.GroupResource) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.byResource, gr)
}

// denied returns the error that refused the last list of m's resource,
// or nil when none did or a list has succeeded since.
func (c *Controller) denied(m *monitor) error {
	gr := m.gvr.GroupResource()
	c.denials.mu.Lock()
	defer c.denials.mu.Unlock()
	d, ok := c.denials.byResource[gr]
	if !ok {
		return nil
	}
	if m.informer.LastSyncResourceVersion() != d.rv {
		// Listed since: the permission came back.
		delete(c.denials.byResource, gr)
		return nil
	}
	return d.err
}

// ForbiddenResources returns the number of resources the controller
// counts, or was asked to count by a quota naming them, whose last list or
// watch the server refused with 403 Forbidden. Each quota naming one is
// reported as [Controller.UncountedQuotas] reports its quotas, with an
// Event when Options.Events is set, and none of them keeps
// [Controller.Ready] false.
func (c *Controller) ForbiddenResources() int {
	c.mu.RLock()
	monitors := c.monitorsLocked()
	c.mu.RUnlock()
	n := 0
	for _, m := range monitors {
		if c.denied(m) != nil {
			n++
		}
	}
	return n
}

// deniedFor returns the error that refused the list of the resource that
// charges name, among monitors, or nil.
func (c *Controller) deniedFor(monitors []*monitor, name corev1.ResourceName) error {
	for _, m := range monitors {
		if m.evaluator != nil && m.charges(name) {
			if err := c.denied(m); err != nil {
				return fmt.Errorf("the controller may not list %s: %w", m.gvr.GroupResource(), err)
			}
		}
	}
	return nil
}

// uncountedEvent is an Event to record about a quota that names
// resources nobody counts.
type uncountedEvent struct {
	quota   *corev1.ResourceQuota
	message string
}

// recordUncounted records events, outside any lock.
func (c *Controller) recordUncounted(events []uncountedEvent) {
	if c.opts.Events == nil {
		return
	}
	for _, e := range events {
		c.opts.Events.Eventf(e.quota, corev1.EventTypeWarning, "ResourcesNotCounted", "%s", e.message)
	}
}
