package quotakit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/quotakit/quotakit/internal/charges"
	"github.com/quotakit/quotakit/internal/reslist"
)

// quotaObject is a quota of either kind, as cached or as written.
type quotaObject interface {
	metav1.Object
	runtime.Object
}

// quotaKind is one kind of quota the controller keeps the status of: a
// ResourceQuota ([resourceQuotaKind]) or a ClusterQuota ([clusterQuotas]).
// What the two share — the own-write log, the charge book, coalesced
// writes, conflicts, the queues — is the controller's, run by one
// pipeline ([Controller.syncQuota]); a kind says only how to read one of
// its quotas, compute its usage and write its status.
type quotaKind interface {
	// String names the kind in logs and errors.
	String() string
	// get returns the cached quota with key; nil and no error when it
	// does not exist.
	get(key string) (quotaObject, error)
	// deleted forgets what the kind keeps of the quota with key, which no
	// longer exists.
	deleted(key string)
	// compute computes the next status of q, the freshest version of the
	// quota with key. A nil computation means there is nothing to write
	// now; the error says why when that is a failure.
	compute(ctx context.Context, key string, q quotaObject) (*computation, error)
	// used returns the status.used of q that admission charges.
	used(q quotaObject) corev1.ResourceList
	// write writes q's status and returns the quota as stored, nil
	// when the client returned no object of the kind's type.
	write(ctx context.Context, q quotaObject) (quotaObject, error)
}

// computation is what a kind computed of one quota's next status.
type computation struct {
	// sighting is what the charge book is told: the stored used values,
	// the usage of the objects, and the ledger accounts it came from.
	sighting charges.Sighting
	// next returns the status to write given the used values settled
	// with the charges in flight, whether it differs from the stored
	// one, and whether only by lower used values.
	next func(used corev1.ResourceList) (q quotaObject, changed, releasesOnly bool)
	// partial is an error that leaves part of the usage uncomputed: the
	// status is still written (with the previous values of what failed),
	// and the error returned after.
	partial error
	// done runs once the status computed is the stored one.
	done func()
	// uncharged says that no usage was computed (an invalid ClusterQuota
	// gets its conditions only): the charge book is neither asked nor
	// told, and sighting is empty.
	uncharged bool
}

// quotaRef names one quota the controller keeps: its kind, and its key
// within the kind (namespace/name for a ResourceQuota, the name for a
// ClusterQuota). It is what the queues hold and what the charge book and
// the own-write log are keyed by.
type quotaRef struct {
	kind quotaKind
	key  string
}

func (r quotaRef) String() string { return r.kind.String() + " " + r.key }

// syncQuota brings the status of the quota ref up to date: it reads the
// freshest version known (the cache, or the controller's own last write
// the informer has not delivered yet: see [ownwrites.Log.Freshest]), lets
// the kind compute the usage, settles it with the charges in flight
// ([charges.Book]), writes the status when it changed (a write that only
// releases usage may be put off to coalesce, see [writeInterval]), and
// records the write. A quota that no longer exists is forgotten.
//
// Kubernetes compares with the cached status: when the informer lags, it
// can skip a write that the stored status needs, and the quota stays
// wrong until the next full resync.
func (c *Controller) syncQuota(ctx context.Context, ref quotaRef) error {
	cached, err := ref.kind.get(ref.key)
	if err != nil {
		return err
	}
	if cached == nil {
		c.forget(ref)
		return nil
	}
	q, ok := c.writes.Freshest(ref, cached).(quotaObject)
	if !ok {
		q = cached
	}
	comp, err := ref.kind.compute(ctx, ref.key, q)
	if comp == nil {
		return err
	}
	now := time.Now()
	var settled charges.Settlement[quotaRef]
	if !comp.uncharged {
		settled = c.charges.Settle(now, ref, comp.sighting)
	}
	next, changed, releasesOnly := comp.next(settled.Used)
	var writeErr error
	if changed {
		if c.putOff(ref, now, releasesOnly) {
			// Nothing written, nothing settled: the sync the write is
			// put off to settles again.
			return comp.partial
		}
		out, err := ref.kind.write(ctx, next)
		switch {
		case err == nil:
			c.writes.Wrote(ref, q.GetResourceVersion(), out, now)
		case apierrors.IsConflict(err):
			// What the controller wrote before is no longer the stored
			// status: the informer's next version is.
			c.writes.Conflict(ref)
			c.conflicts.Add(1)
		}
		if err != nil {
			writeErr = fmt.Errorf("quotakit: updating the status of %v: %w", ref, err)
		}
	}
	if writeErr == nil {
		if !comp.uncharged {
			c.settled(ctx, ref, settled, ref.kind.used(next), now)
		}
		if comp.done != nil {
			comp.done()
		}
	}
	if comp.partial != nil {
		return errors.Join(comp.partial, writeErr)
	}
	return expected(writeErr)
}

// forget forgets what the controller keeps of the quota ref, which was
// deleted.
func (c *Controller) forget(ref quotaRef) {
	c.writes.Forget(ref)
	c.charges.Forget(ref)
	ref.kind.deleted(ref.key)
}

// settled keeps the charges in flight that s computed, now that used is
// the quota's stored status.used, queues the quota's next recheck when
// some are still in flight, and reports what s released.
func (c *Controller) settled(ctx context.Context, ref quotaRef, s charges.Settlement[quotaRef], used corev1.ResourceList, now time.Time) {
	if at := c.charges.Commit(now, s, used); !at.IsZero() {
		c.changes.AddAfter(change{quota: ref, at: at.UnixNano()}, at.Sub(now))
	}
	if len(s.Released) == 0 {
		return
	}
	c.releases.Add(1)
	logr.FromContextOrDiscard(ctx).Info("released quota charges that no object followed within the charge window",
		"quota", ref.key, "kind", ref.kind.String(), "released", reslist.String(s.Released), "window", c.charges.Window())
}
