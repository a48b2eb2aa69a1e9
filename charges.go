package quotakit

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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
// taking back what admission just admitted, and still release, once they
// are old enough, the charges that no object follows (a creation that
// failed after admission: a name already taken, a later webhook's denial,
// a forged review). It is safe for concurrent use.
type chargeBook struct {
	window time.Duration

	mu sync.Mutex
	// guarded by mu
	quotas map[string]*charges // by quota key
}

// charges is what the book knows of one quota after its last settled sync.
//
// Charges are kept in two pools: old holds those seen before mark, young
// those seen since. At mark+window every charge in old is at least a
// window old, so what arrivals have not accounted for by then never will
// be and is released; young becomes old and the window starts again. A
// charge made while none is pending starts a window of its own and is
// released one window after the controller saw it; one made while a
// window runs, at most two windows after. A namespace charged without
// pause is rechecked once per window.
type charges struct {
	mark       time.Time
	old, young corev1.ResourceList
	// seen is status.used as written (or read) at the last settled sync:
	// what it gains since are new charges, what it loses were charges
	// their maker took back.
	seen corev1.ResourceList
	// usage is what the objects charged then, and arrived the ledger's
	// count of arrivals then (see [arrivals]).
	usage   corev1.ResourceList
	arrived arrivals
}

// arrivals is a quota account's running sum, per resource name, of what
// the objects that reached the caches added to its usage (a creation
// adds what the object charges; an update what it charges more), under
// the generation of the account that counted it: a rebuilt account
// counts from zero again, and then only the growth of the usage itself
// is known to have arrived.
type arrivals struct {
	gen  uint64
	sums corev1.ResourceList
}

// settlement is the outcome of [chargeBook.settle] for one sync: the used
// values to write, and the state to keep once they are written.
type settlement struct {
	key  string
	used corev1.ResourceList
	next *charges
	// released is what this sync releases, and age how long ago the
	// youngest of it was seen, at least a window.
	released corev1.ResourceList
	age      time.Duration
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
func (b *chargeBook) settle(now time.Time, key string, status, usage corev1.ResourceList, arr arrivals) settlement {
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

	next := &charges{old: corev1.ResourceList{}, young: corev1.ResourceList{}, usage: usage, arrived: arr}
	if prev == nil {
		// First sight: whatever status holds beyond the objects is in
		// flight, of unknown age; it is released a window from now.
		next.mark = now
		for name, u := range usage {
			if e := excess(status[name], u); e.Sign() > 0 {
				next.old[name] = e
			}
		}
	} else {
		next.mark = prev.mark
		for name, u := range usage {
			old, young := prev.old[name].DeepCopy(), prev.young[name].DeepCopy()
			seen := prev.seen[name]
			cur := status[name]
			// New charges since the last sync join young; charges taken
			// back by their maker (admission releasing a denied request's
			// charge) leave young first, then old.
			if gain := excess(cur, seen); gain.Sign() > 0 {
				young.Add(gain)
			} else if loss := excess(seen, cur); loss.Sign() > 0 {
				take(&old, take(&young, loss))
			}
			// Objects that arrived since account for the oldest charges
			// first: attributing an arrival to a newer charge than its own
			// would only hold the older one longer.
			take(&young, take(&old, arrivedSince(prev, name, u, arr)))
			if old.Sign() > 0 {
				next.old[name] = old
			}
			if young.Sign() > 0 {
				next.young[name] = young
			}
		}
		switch {
		case len(prev.old) == 0 && len(prev.young) == 0:
			// Nothing was pending: the charges seen now start a window
			// of their own.
			next.old, next.young, next.mark = next.young, corev1.ResourceList{}, now
		case !now.Before(prev.mark.Add(b.window)):
			if len(next.old) > 0 {
				s.released, s.age = next.old, now.Sub(prev.mark)
			}
			next.old, next.young, next.mark = next.young, corev1.ResourceList{}, now
		}
	}
	for name, u := range usage {
		q := u.DeepCopy()
		if v, ok := next.old[name]; ok {
			q.Add(v)
		}
		if v, ok := next.young[name]; ok {
			q.Add(v)
		}
		s.used[name] = q
	}
	s.next = next
	return s
}

// commit keeps what s computed, with written as the status.used now
// stored, and returns when the quota must be synced again to release its
// charges in flight (zero: none are).
func (b *chargeBook) commit(s settlement, written corev1.ResourceList) time.Time {
	if s.next == nil {
		return time.Time{}
	}
	s.next.seen = written
	b.mu.Lock()
	defer b.mu.Unlock()
	b.quotas[s.key] = s.next
	if len(s.next.old) == 0 && len(s.next.young) == 0 {
		return time.Time{}
	}
	return s.next.mark.Add(b.window)
}

// forget drops the quota with key, which was deleted.
func (b *chargeBook) forget(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.quotas, key)
}

// arrivedSince returns what is known to have arrived of name since prev:
// the growth of the ledger's arrival count when it counts for the same
// account, and at least the growth of the usage itself. Both are lower
// bounds of the arrivals (usage also shrinks by deletions, and the
// ledger does not count evaluators it does not keep), so no charge still
// in flight is ever taken for arrived.
func arrivedSince(prev *charges, name corev1.ResourceName, usage resource.Quantity, arr arrivals) resource.Quantity {
	out := excess(usage, prev.usage[name])
	if arr.sums != nil && prev.arrived.sums != nil && arr.gen == prev.arrived.gen {
		if d := excess(arr.sums[name], prev.arrived.sums[name]); d.Cmp(out) > 0 {
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
