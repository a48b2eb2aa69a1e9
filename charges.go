package quotakit

import (
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
// the whole path takes milliseconds, so the window is all margin.
const DefaultChargeWindow = 30 * time.Second

// chargeBook keeps, per quota, the charges admission made to its
// status.used that the controller's caches do not account for yet: the
// charges in flight. It is what lets a recount run at any time without
// taking back what admission just admitted, and still release the
// charges that no object follows (a creation that failed after
// admission: a name already taken, a later webhook's denial, a forged
// review). It is safe for concurrent use.
//
// What is kept of a quota's charges is bounded twice, and the smaller
// bound is kept:
//
//   - by what the charges seen since the controller first saw the quota
//     add up to, less what arriving objects account for (a lower bound
//     of the arrivals: [arrivedSince]) and what admission took back;
//   - by the charges seen within the last window: a charge in flight was
//     made within the window, or its object would have arrived.
//
// A charge in flight is under both bounds, so it is never written away.
// A charge no object followed is released once it is a window old and
// the charges seen since do not cover it: a window after it was seen when
// the namespace is quiet, and as soon as charges keep coming, beyond what
// the last window's charges add up to. No charge can be told from one
// in flight without the object it was made for, which status.used does
// not name: while a namespace is charged without pause, as much as one
// window's charges may be held.
type chargeBook struct {
	window time.Duration

	mu sync.Mutex
	// guarded by mu
	quotas map[string]*charges // by quota key
}

// charges is what the book knows of one quota after its last settled sync.
type charges struct {
	// kept is what is held in flight, written on top of usage.
	kept corev1.ResourceList
	// recent are the charges seen within the last window, oldest first.
	recent []recentCharge
	// seen is status.used as written (or read) at the last settled sync:
	// what it gains since are new charges, what it loses were charges
	// their maker took back.
	seen corev1.ResourceList
	// usage is what the objects charged then, and arrived the ledger's
	// count of arrivals then (see [ledger.Arrivals]).
	usage   corev1.ResourceList
	arrived ledger.Arrivals
	// due is when the last recheck was asked for: rechecks are a window
	// apart.
	due time.Time
}

// recentCharge is what status.used gained between two syncs, as of the
// later one.
type recentCharge struct {
	at     time.Time
	amount corev1.ResourceList
}

// recentGrain bounds how many recent charges a quota keeps: charges seen
// within a window/recentGrain of the last one are merged into it, under
// its later time, which only keeps them a little longer.
const recentGrain = 32

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

// settle computes the used values of the quota with key for usage, what
// its objects charge (the names an evaluator could compute), given
// status, its status.used as stored (freshest known). Names of usage get
// usage plus the charges in flight; other names are left to the caller.
// Nothing is kept until [chargeBook.commit]: a sync whose write fails
// settles again from the same state.
func (b *chargeBook) settle(now time.Time, key string, status, usage corev1.ResourceList, arr ledger.Arrivals) settlement {
	s := settlement{key: key, used: corev1.ResourceList{}}
	if b.window < 0 {
		// Off: kube-controller-manager's recount.
		for name, q := range usage {
			s.used[name] = q.DeepCopy()
		}
		return s
	}
	b.mu.Lock()
	prev := b.quotas[key]
	b.mu.Unlock()

	next := &charges{kept: corev1.ResourceList{}, usage: usage, arrived: arr}
	gained := corev1.ResourceList{}
	if prev == nil {
		// First sight: whatever status holds beyond the objects is in
		// flight, of unknown age: seen now.
		for name, u := range usage {
			if e := excess(status[name], u); e.Sign() > 0 {
				next.kept[name], gained[name] = e, e.DeepCopy()
			}
		}
	} else {
		next.due = prev.due
		for _, r := range prev.recent {
			if now.Before(r.at.Add(b.window)) {
				next.recent = append(next.recent, r)
			}
		}
		for name, u := range usage {
			kept := prev.kept[name].DeepCopy()
			cur, seen := status[name], prev.seen[name]
			if gain := excess(cur, seen); gain.Sign() > 0 {
				kept.Add(gain)
				gained[name] = gain
			} else if loss := excess(seen, cur); loss.Sign() > 0 {
				// Charges taken back by their maker (admission releasing
				// a denied request's charge): the newest first.
				take(&kept, loss)
				next.recent = takeNewest(next.recent, name, loss)
			}
			take(&kept, arrivedSince(prev, name, u, arr))
			if kept.Sign() > 0 {
				next.kept[name] = kept
			}
		}
	}
	if len(gained) > 0 {
		if n := len(next.recent); n > 0 && now.Sub(next.recent[n-1].at) < b.window/recentGrain {
			last := &next.recent[n-1]
			last.at, last.amount = now, quota.Add(last.amount, gained)
		} else {
			next.recent = append(next.recent, recentCharge{at: now, amount: gained})
		}
	}
	// The second bound: what was seen within the window.
	var within corev1.ResourceList
	for _, r := range next.recent {
		within = quota.Add(within, r.amount)
	}
	for name, k := range next.kept {
		if w := within[name]; k.Cmp(w) > 0 {
			if w.Sign() > 0 {
				next.kept[name] = w.DeepCopy()
			} else {
				delete(next.kept, name)
			}
			if s.released == nil {
				s.released = corev1.ResourceList{}
			}
			s.released[name] = excess(k, w)
		}
	}
	for name, u := range usage {
		q := u.DeepCopy()
		if v, ok := next.kept[name]; ok {
			q.Add(v)
		}
		s.used[name] = q
	}
	s.next = next
	return s
}

// commit keeps what s computed, with written as the status.used now
// stored, and returns when the quota must be synced again for its charges
// in flight to be rechecked (zero: none are, or a recheck is already
// due): when the oldest charge seen leaves the window, and at least a
// window after the last recheck asked for.
func (b *chargeBook) commit(now time.Time, s settlement, written corev1.ResourceList) time.Time {
	if s.next == nil {
		return time.Time{}
	}
	s.next.seen = written
	b.mu.Lock()
	defer b.mu.Unlock()
	b.quotas[s.key] = s.next
	if len(s.next.kept) == 0 || len(s.next.recent) == 0 || now.Before(s.next.due) {
		return time.Time{}
	}
	at := s.next.recent[0].at.Add(b.window)
	if !s.next.due.IsZero() {
		at = maxTime(at, s.next.due.Add(b.window))
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

// takeNewest takes amount of name out of the newest charges of recent
// first, and returns recent.
func takeNewest(recent []recentCharge, name corev1.ResourceName, amount resource.Quantity) []recentCharge {
	for i := len(recent) - 1; i >= 0 && amount.Sign() > 0; i-- {
		q, ok := recent[i].amount[name]
		if !ok {
			continue
		}
		amount = take(&q, amount)
		// Lists in recent may be shared with an earlier settlement.
		recent[i].amount = recent[i].amount.DeepCopy()
		recent[i].amount[name] = q
	}
	return recent
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// arrivedSince returns what is known to have arrived of name since prev:
// the growth of the ledger's arrival count when it counts for the same
// account, and at least the growth of the usage itself. Both are lower
// bounds of the arrivals (usage also shrinks by deletions, and the
// ledger does not count evaluators it does not keep), so no charge still
// in flight is ever taken for arrived.
func arrivedSince(prev *charges, name corev1.ResourceName, usage resource.Quantity, arr ledger.Arrivals) resource.Quantity {
	out := excess(usage, prev.usage[name])
	if arr.Sums != nil && prev.arrived.Sums != nil && arr.Gen == prev.arrived.Gen {
		if d := excess(arr.Sums[name], prev.arrived.Sums[name]); d.Cmp(out) > 0 {
			out = d
		}
	}
	return out
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
