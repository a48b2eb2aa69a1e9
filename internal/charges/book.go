package charges

import (
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/quotakit/quotakit/internal/ledger"
	"github.com/quotakit/quotakit/quota"
)

// Book keeps, per quota (by key K), the charges admission made to its
// status.used whose objects the controller's caches do not hold yet: the
// charges in flight. It is what lets a recount run at any time without
// taking back what admission just admitted, and still release the
// charges that no object follows (a creation that failed after
// admission: a name already taken, a later webhook's denial, a forged
// review; or a request kube-apiserver's plugin refused in one round of a
// batch whose write conflicted, and charged in the round it retried with,
// which its refusal outlives). It is safe for concurrent use.
//
// A charge is what status.used gained between two syncs, kept under the
// time the controller first saw it, until the object it was made for
// arrives, admission takes it back, or a window has passed:
//
//   - an object that arrives (the ledger counts the objects that reach
//     the caches, [ledger.Arrivals]) takes back the oldest charge held,
//     and so does a charge that admission itself takes back (a denied
//     request's charge released): what arrived is no longer held;
//   - a charge held a window after it was seen is released: a recheck is
//     asked for at the expiry of the oldest charge held, and each asks
//     for the next, so that a charge is released a window after it was
//     seen (and the time to write), not a window after a recheck.
//
// status.used does not say which object a charge was made for, so an
// arrival is taken for the oldest charge held. That keeps the newest
// charges, and so no charge in flight is ever released: whatever order
// the objects arrive in, as many charges at least as recent as any
// charge in flight are held. The cost is a charge that no object
// follows while charges keep coming whose objects arrive: the next
// arrival is taken for it, and what stays held in its place is the
// charge of that arrival, a newer one. Such a charge is released one
// window after the last charge seen before the namespace is quiet (or
// sooner, when a charge that follows is still in flight at its expiry),
// and no more than the charges seen within the last window are ever
// held. No rule can do better: a charge that no object follows, followed
// by charges whose objects arrive at once, is seen exactly as charges
// whose objects each arrive after the next charge is made, and the
// second must keep one held for as long as the charges keep coming.
//
// The controller's informers do not move together: the objects' cache may
// deliver an object before the ResourceQuota cache delivers the status
// that charged it. Such an arrival, when nothing is held, is kept as a
// credit, with the object's resourceVersion, and cancels the gain the
// status shows once it catches up, so that the charge is not held a
// window for nothing. A credit is dropped once the quota's own
// resourceVersion has passed the object's: then the charge, made before
// the object was stored, is in the status seen, and an arrival that
// nothing accounted for was never charged (an object admitted before the
// quota existed, one whose charge was released because it arrived more
// than a window late). kube-apiserver numbers every object from one etcd
// revision, which makes the two resourceVersions comparable; where either
// is not an integer no credit is kept, and such a charge is held a window.
type Book[K comparable] struct {
	window time.Duration

	mu sync.Mutex
	// guarded by mu
	quotas map[K]*quotaCharges
}

// quotaCharges is what the book knows of one quota after its last settled sync.
type quotaCharges struct {
	// held are the charges in flight, oldest first: what status.used
	// gained at each sync, less what arrivals and admission took back.
	held []charge
	// credits are arrivals that no held charge accounted for, oldest
	// first, each with the latest resourceVersion of its objects.
	credits []credit
	// seen is status.used as written (or read) at the last settled sync:
	// what it gains since are new charges, what it loses were charges
	// their maker took back.
	seen corev1.ResourceList
	// parts are the ledger's accounts the usage came from, with what they
	// had counted of arrivals.
	parts map[string]Part
	// due is when the recheck last asked for runs; zero when none is.
	due time.Time
}

// charge is an amount status.used gained, as first seen at at.
type charge struct {
	at     time.Time
	amount corev1.ResourceList
}

// credit is an amount of arrivals seen before the charges they account
// for, the latest of whose objects has resourceVersion rv.
type credit struct {
	rv     uint64
	amount corev1.ResourceList
}

// Part is what one ledger account contributes to a quota's usage:
// a ResourceQuota has one, a ClusterQuota one per namespace it selects.
type Part struct {
	// Usage is what the account charges the quota.
	Usage corev1.ResourceList
	// Arrived is what the ledger counted of arrivals into it.
	Arrived ledger.Arrivals
}

// Sighting is what one sync sees of a quota.
type Sighting struct {
	// Status is status.used as stored (the freshest version known), RV
	// its resourceVersion.
	Status corev1.ResourceList
	RV     string
	// Usage is what the objects charge, to be written: the names an
	// evaluator could compute.
	Usage corev1.ResourceList
	// Parts are the ledger accounts Usage came from, by namespace (""
	// for a ResourceQuota), for the arrivals since the last sync: their
	// usage is the ledger's even when Usage is a recalculation from the
	// caches, which run ahead of the ledger, so that an arrival is
	// counted once.
	Parts map[string]Part
}

// recentGrain bounds how many charges a quota holds: charges seen within
// a window/recentGrain of the last one are merged into it, under the
// later time, which holds the earlier ones that much longer.
const recentGrain = 256

// Settlement is the outcome of [Book.Settle] for one sync: the used
// values to write, and the state to keep once they are written.
type Settlement[K comparable] struct {
	key K
	// Used are the used values to write: the usage plus the charges in
	// flight, for the names of the sighting's usage.
	Used corev1.ResourceList
	next *quotaCharges
	// Released is what this sync releases, at least a window old.
	Released corev1.ResourceList
}

// New returns a book that releases a charge no object follows window
// after it was seen; a negative window keeps no charge at all (every sync
// writes the usage alone, as kube-controller-manager's recount does).
func New[K comparable](window time.Duration) *Book[K] {
	return &Book[K]{window: window, quotas: map[K]*quotaCharges{}}
}

// settle computes the used values of the quota with key from what a sync
// sees of it. Names of s.Usage get the usage plus the charges in flight;
// other names are left to the caller. Nothing is kept until
// [Book.Commit]: a sync whose write fails, or is put off, settles
// again from the same state.
func (b *Book[K]) Settle(now time.Time, key K, s Sighting) Settlement[K] {
	out := Settlement[K]{key: key, Used: corev1.ResourceList{}}
	if b.window < 0 {
		// Off: kube-controller-manager's recount.
		for name, q := range s.Usage {
			out.Used[name] = q.DeepCopy()
		}
		return out
	}
	b.mu.Lock()
	prev := b.quotas[key]
	b.mu.Unlock()

	next := &quotaCharges{parts: s.Parts}
	if prev == nil {
		// First sight: whatever status holds beyond the objects is in
		// flight, of unknown age: seen now.
		gained := corev1.ResourceList{}
		for name, u := range s.Usage {
			if e := excess(s.Status[name], u); e.Sign() > 0 {
				gained[name] = e
			}
		}
		next.held = addCharge(nil, now, gained, b.window)
	} else {
		next.due = prev.due
		for _, c := range prev.held {
			if now.Before(c.at.Add(b.window)) {
				next.held = append(next.held, charge{at: c.at, amount: c.amount.DeepCopy()})
				continue
			}
			out.Released = quota.Add(out.Released, c.amount)
		}
		rv, rvOK := parseRV(s.RV)
		for _, c := range prev.credits {
			next.credits = append(next.credits, credit{rv: c.rv, amount: c.amount.DeepCopy()})
		}
		gained := corev1.ResourceList{}
		for name := range s.Usage {
			cur, seen := s.Status[name], prev.seen[name]
			if gain := excess(cur, seen); gain.Sign() > 0 {
				if rest := takeOldest(next.credits, name, gain); rest.Sign() > 0 {
					gained[name] = rest
				}
			} else if loss := excess(seen, cur); loss.Sign() > 0 {
				// Charges taken back by their maker (admission releasing
				// a denied request's charge). What no held charge covers
				// was not ours to hold.
				takeOldest(next.held, name, loss)
			}
		}
		next.held = addCharge(next.held, now, gained, b.window)
		// A credit whose objects the status has passed stands for nothing
		// to come: the gains it was kept for are in the status seen, and
		// have just been cancelled against it.
		next.credits = slices.DeleteFunc(next.credits, func(c credit) bool { return !rvOK || c.rv <= rv })
		arrived, arrivedRV := arrivals(prev.parts, s.Parts)
		unmatched := corev1.ResourceList{}
		for name, a := range arrived {
			if _, ok := s.Usage[name]; !ok {
				continue
			}
			if rest := takeOldest(next.held, name, a); rest.Sign() > 0 {
				unmatched[name] = rest
			}
		}
		// Arrivals nothing held accounts for: their charges are still to
		// be seen when the status is older than the objects.
		if len(unmatched) > 0 && rvOK && arrivedRV > rv {
			next.credits = append(next.credits, credit{rv: arrivedRV, amount: unmatched})
		}
		next.held = dropEmpty(next.held)
		next.credits = dropEmpty(next.credits)
	}
	held := corev1.ResourceList{}
	for _, c := range next.held {
		held = quota.Add(held, c.amount)
	}
	for name, u := range s.Usage {
		q := u.DeepCopy()
		if v, ok := held[name]; ok {
			q.Add(v)
		}
		out.Used[name] = q
	}
	if len(out.Released) > 0 {
		out.Released = quota.RemoveZeros(out.Released)
		if len(out.Released) == 0 {
			out.Released = nil
		}
	}
	out.next = next
	return out
}

// commit keeps what s computed, with written as the status.used now
// stored, and returns when the quota must be synced again for its charges
// in flight to be rechecked (zero: none are, or a recheck that soon is
// already asked for): when the oldest charge held leaves the window.
func (b *Book[K]) Commit(now time.Time, s Settlement[K], written corev1.ResourceList) time.Time {
	if s.next == nil {
		return time.Time{}
	}
	s.next.seen = written
	b.mu.Lock()
	defer b.mu.Unlock()
	b.quotas[s.key] = s.next
	if len(s.next.held) == 0 {
		return time.Time{}
	}
	at := s.next.held[0].at.Add(b.window)
	if due := s.next.due; !due.IsZero() && now.Before(due) && !at.Before(due) {
		// The recheck asked for runs first, and asks for the next.
		return time.Time{}
	}
	s.next.due = at
	return at
}

// forget drops the quota with key, which was deleted.
func (b *Book[K]) Forget(key K) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.quotas, key)
}

// Window returns the charge window the book was made with.
func (b *Book[K]) Window() time.Duration { return b.window }

// Holds reports whether the book holds charges at all: false when its
// window is negative.
func (b *Book[K]) Holds() bool { return b.window >= 0 }
