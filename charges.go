package quotakit

import (
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/quotakit/quotakit/internal/ledger"
	"github.com/quotakit/quotakit/quota"
)

// DefaultChargeWindow is the default of [Options.ChargeWindow].
//
// Admission charges a request before the object is stored, and the object
// reaches the controller's informers after that: kube-apiserver stores it
// once the validating webhooks (each bounded by its timeoutSeconds, at most
// 30 seconds, and run in parallel) and its own ResourceQuota plugin
// (bounded by 10 seconds) have answered, and the watch delivers it within
// milliseconds. A charge that no object follows 30 seconds later is one
// that no object will follow on any configuration kube-apiserver accepts,
// short of an etcd write that takes longer than that; on a healthy server
// the whole path takes milliseconds, so the window is all margin. That a
// test on loopback, with no other webhook, sees every object within
// milliseconds is no reason to shorten it.
const DefaultChargeWindow = 30 * time.Second

// chargeBook keeps, per quota, the charges admission made to its
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
type chargeBook struct {
	window time.Duration

	mu sync.Mutex
	// guarded by mu
	quotas map[string]*charges // by quota key
}

// charges is what the book knows of one quota after its last settled sync.
type charges struct {
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
	parts map[string]usagePart
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

// usagePart is what one ledger account contributes to a quota's usage:
// a ResourceQuota has one, a ClusterQuota one per namespace it selects.
type usagePart struct {
	usage   corev1.ResourceList
	arrived ledger.Arrivals
}

// sighting is what one sync sees of a quota.
type sighting struct {
	// status is status.used as stored (the freshest version known), rv
	// its resourceVersion.
	status corev1.ResourceList
	rv     string
	// usage is what the objects charge, to be written: the names an
	// evaluator could compute.
	usage corev1.ResourceList
	// parts are the ledger accounts usage came from, by namespace (""
	// for a ResourceQuota), for the arrivals since the last sync: their
	// usage is the ledger's even when usage is a recalculation from the
	// caches, which run ahead of the ledger, so that an arrival is
	// counted once.
	parts map[string]usagePart
}

// recentGrain bounds how many charges a quota holds: charges seen within
// a window/recentGrain of the last one are merged into it, under the
// later time, which holds the earlier ones that much longer.
const recentGrain = 256

// settlement is the outcome of [chargeBook.settle] for one sync: the used
// values to write, and the state to keep once they are written.
type settlement struct {
	key  string
	used corev1.ResourceList
	next *charges
	// released is what this sync releases, at least a window old.
	released corev1.ResourceList
}

func newChargeBook(window time.Duration) *chargeBook {
	return &chargeBook{window: window, quotas: map[string]*charges{}}
}

// settle computes the used values of the quota with key from what a sync
// sees of it. Names of s.usage get the usage plus the charges in flight;
// other names are left to the caller. Nothing is kept until
// [chargeBook.commit]: a sync whose write fails, or is put off, settles
// again from the same state.
func (b *chargeBook) settle(now time.Time, key string, s sighting) settlement {
	out := settlement{key: key, used: corev1.ResourceList{}}
	if b.window < 0 {
		// Off: kube-controller-manager's recount.
		for name, q := range s.usage {
			out.used[name] = q.DeepCopy()
		}
		return out
	}
	b.mu.Lock()
	prev := b.quotas[key]
	b.mu.Unlock()

	next := &charges{parts: s.parts}
	if prev == nil {
		// First sight: whatever status holds beyond the objects is in
		// flight, of unknown age: seen now.
		gained := corev1.ResourceList{}
		for name, u := range s.usage {
			if e := excess(s.status[name], u); e.Sign() > 0 {
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
			out.released = quota.Add(out.released, c.amount)
		}
		rv, rvOK := parseRV(s.rv)
		for _, c := range prev.credits {
			next.credits = append(next.credits, credit{rv: c.rv, amount: c.amount.DeepCopy()})
		}
		gained := corev1.ResourceList{}
		for name := range s.usage {
			cur, seen := s.status[name], prev.seen[name]
			if gain := excess(cur, seen); gain.Sign() > 0 {
				if rest := takeCredit(next.credits, name, gain); rest.Sign() > 0 {
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
		arrived, arrivedRV := arrivals(prev.parts, s.parts)
		unmatched := corev1.ResourceList{}
		for name, a := range arrived {
			if _, ok := s.usage[name]; !ok {
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
		next.credits = dropEmptyCredits(next.credits)
	}
	held := corev1.ResourceList{}
	for _, c := range next.held {
		held = quota.Add(held, c.amount)
	}
	for name, u := range s.usage {
		q := u.DeepCopy()
		if v, ok := held[name]; ok {
			q.Add(v)
		}
		out.used[name] = q
	}
	if len(out.released) > 0 {
		out.released = quota.RemoveZeros(out.released)
		if len(out.released) == 0 {
			out.released = nil
		}
	}
	out.next = next
	return out
}

// commit keeps what s computed, with written as the status.used now
// stored, and returns when the quota must be synced again for its charges
// in flight to be rechecked (zero: none are, or a recheck that soon is
// already asked for): when the oldest charge held leaves the window.
func (b *chargeBook) commit(now time.Time, s settlement, written corev1.ResourceList) time.Time {
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
func (b *chargeBook) forget(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.quotas, key)
}

// addCharge appends what was gained at now to held, merged into the last
// charge when that was seen within a window/recentGrain.
func addCharge(held []charge, now time.Time, gained corev1.ResourceList, window time.Duration) []charge {
	if len(gained) == 0 {
		return held
	}
	if n := len(held); n > 0 && now.Sub(held[n-1].at) < window/recentGrain {
		last := &held[n-1]
		last.at, last.amount = now, quota.Add(last.amount, gained)
		return held
	}
	return append(held, charge{at: now, amount: gained})
}

// takeOldest takes amount of name out of the oldest charges of held
// first, and returns what it could not take. The lists of held are the
// caller's own.
func takeOldest(held []charge, name corev1.ResourceName, amount resource.Quantity) resource.Quantity {
	for i := 0; i < len(held) && amount.Sign() > 0; i++ {
		q, ok := held[i].amount[name]
		if !ok {
			continue
		}
		amount = take(&q, amount)
		held[i].amount[name] = q
	}
	return amount
}

// takeCredit cancels amount of name against credits, oldest first, and
// returns what no credit covered. The lists of credits are the caller's
// own.
func takeCredit(credits []credit, name corev1.ResourceName, amount resource.Quantity) resource.Quantity {
	for i := 0; i < len(credits) && amount.Sign() > 0; i++ {
		q, ok := credits[i].amount[name]
		if !ok {
			continue
		}
		amount = take(&q, amount)
		credits[i].amount[name] = q
	}
	return amount
}

// dropEmpty removes the charges that nothing is left of.
func dropEmpty(held []charge) []charge {
	return slices.DeleteFunc(held, func(c charge) bool { return quota.IsZero(c.amount) })
}

func dropEmptyCredits(credits []credit) []credit {
	return slices.DeleteFunc(credits, func(c credit) bool { return quota.IsZero(c.amount) })
}

// arrivals returns, per name, what is known to have arrived between the
// parts of the last sync, prev, and those of this one, and the latest
// resourceVersion of the objects counted (zero when unknown). A part
// present in only one of the two (a namespace that joined or left a
// ClusterQuota) is no arrival: its objects were not charged to the quota
// as they came.
func arrivals(prev, cur map[string]usagePart) (corev1.ResourceList, uint64) {
	out := corev1.ResourceList{}
	var rv uint64
	rvKnown := true
	for k, p := range cur {
		before, ok := prev[k]
		if !ok {
			continue
		}
		for name, u := range p.usage {
			a := arrivedSince(before, name, u, p.arrived)
			if a.Sign() <= 0 {
				continue
			}
			if sum, ok := out[name]; ok {
				a.Add(sum)
			}
			out[name] = a
			if p.arrived.RV == 0 || p.arrived.Gen != before.arrived.Gen {
				rvKnown = false
			}
			rv = max(rv, p.arrived.RV)
		}
	}
	if !rvKnown {
		rv = 0
	}
	return out, rv
}

// arrivedSince returns what is known to have arrived of name since prev:
// the growth of the ledger's arrival count when it counts for the same
// account, and at least the growth of the usage itself. Both are lower
// bounds of the arrivals (usage also shrinks by deletions, and the
// ledger does not count evaluators it does not keep), so no charge still
// in flight is ever taken for arrived.
func arrivedSince(prev usagePart, name corev1.ResourceName, usage resource.Quantity, arr ledger.Arrivals) resource.Quantity {
	out := excess(usage, prev.usage[name])
	if arr.Sums != nil && prev.arrived.Sums != nil && arr.Gen == prev.arrived.Gen {
		if d := excess(arr.Sums[name], prev.arrived.Sums[name]); d.Cmp(out) > 0 {
			out = d
		}
	}
	return out
}

// parseRV returns a resourceVersion as an integer, false when it is not
// one.
func parseRV(rv string) (uint64, bool) {
	n, err := strconv.ParseUint(rv, 10, 64)
	return n, err == nil && n > 0
}

// excess returns a-b when positive, else zero.
func excess(a, b resource.Quantity) resource.Quantity {
	d := a.DeepCopy()
	d.Sub(b)
	if d.Sign() <= 0 {
		return resource.Quantity{Format: a.Format}
	}
	return d
}

// take takes up to amount from pool and returns what it could not take.
func take(pool *resource.Quantity, amount resource.Quantity) resource.Quantity {
	if amount.Sign() <= 0 {
		return resource.Quantity{}
	}
	if pool.Cmp(amount) >= 0 {
		pool.Sub(amount)
		return resource.Quantity{}
	}
	rest := amount.DeepCopy()
	rest.Sub(*pool)
	*pool = resource.Quantity{Format: pool.Format}
	return rest
}
