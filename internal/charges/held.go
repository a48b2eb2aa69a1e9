package charges

import (
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/quotakit/quotakit/internal/ledger"
	"github.com/quotakit/quotakit/quota"
)

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

// amounted is a charge or a credit: an amount per resource name.
type amounted interface{ amounts() corev1.ResourceList }

func (c charge) amounts() corev1.ResourceList { return c.amount }
func (c credit) amounts() corev1.ResourceList { return c.amount }

// takeOldest takes amount of name out of items, the oldest first (held
// charges, or credits), and returns what it could not take. The lists of
// items are the caller's own.
func takeOldest[T amounted](items []T, name corev1.ResourceName, amount resource.Quantity) resource.Quantity {
	for i := 0; i < len(items) && amount.Sign() > 0; i++ {
		l := items[i].amounts()
		q, ok := l[name]
		if !ok {
			continue
		}
		amount = take(&q, amount)
		l[name] = q
	}
	return amount
}

// dropEmpty removes the items that nothing is left of.
func dropEmpty[T amounted](items []T) []T {
	return slices.DeleteFunc(items, func(c T) bool { return quota.IsZero(c.amounts()) })
}

// arrivals returns, per name, what is known to have arrived between the
// parts of the last sync, prev, and those of this one, and the latest
// resourceVersion of the objects counted (zero when unknown). A part
// present in only one of the two (a namespace that joined or left a
// ClusterQuota) is no arrival: its objects were not charged to the quota
// as they came.
func arrivals(prev, cur map[string]Part) (corev1.ResourceList, uint64) {
	out := corev1.ResourceList{}
	var rv uint64
	rvKnown := true
	for k, p := range cur {
		before, ok := prev[k]
		if !ok {
			continue
		}
		for name, u := range p.Usage {
			a := arrivedSince(before, name, u, p.Arrived)
			if a.Sign() <= 0 {
				continue
			}
			if sum, ok := out[name]; ok {
				a.Add(sum)
			}
			out[name] = a
			if p.Arrived.RV == 0 || p.Arrived.Gen != before.Arrived.Gen {
				rvKnown = false
			}
			rv = max(rv, p.Arrived.RV)
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
func arrivedSince(prev Part, name corev1.ResourceName, usage resource.Quantity, arr ledger.Arrivals) resource.Quantity {
	out := excess(usage, prev.Usage[name])
	if arr.Sums != nil && prev.Arrived.Sums != nil && arr.Gen == prev.Arrived.Gen {
		if d := excess(arr.Sums[name], prev.Arrived.Sums[name]); d.Cmp(out) > 0 {
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
