package ledger

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit/cache"
	"github.com/quotakit/quotakit/internal/reslist"
	"github.com/quotakit/quotakit/quota"
)

// Calculate computes what [quota.CalculateUsage] computes for rq over the
// evaluators of registry, taking the totals of the evaluators ledgered
// reports from the ledger, and summing the others, and any the ledger
// cannot answer for (an object's usage or scope matching failed), from
// their caches. It also returns the quota's arrival count.
func (l *Ledger) Calculate(rq *corev1.ResourceQuota, registry quota.Registry, ledgered func(quota.Evaluator) bool) (corev1.ResourceList, Arrivals, error) {
	evaluators := registry.List()
	hard := quota.ResourceNames(rq.Spec.Hard)
	// charges[i] is what evaluators[i] charges of hard; evaluators filter
	// names one by one, so it is asked once, and what it charges of the
	// names still matched below is the intersection.
	charges := make([][]corev1.ResourceName, len(evaluators))
	var charged []corev1.ResourceName
	var kept []quota.Evaluator // those the ledger keeps, at keptAt in evaluators
	var keptAt []int
	for i, e := range evaluators {
		charges[i] = e.MatchingResources(hard)
		charged = append(charged, charges[i]...)
		if len(charges[i]) > 0 && ledgered(e) {
			kept, keptAt = append(kept, e), append(keptAt, i)
		}
	}
	matched := quota.Intersection(hard, charged)

	// fromLedger[i] is a copy of the totals of evaluators[i], when the
	// ledger keeps them and can answer for every object.
	fromLedger := make([]corev1.ResourceList, len(evaluators))
	l.mu.Lock()
	a := l.accountLocked(rq, kept)
	s := l.spaces[rq.Namespace]
	for k, e := range kept {
		gr := e.GroupResource()
		if b := s.books[gr]; a.failed[gr] || b != nil && b.failed > 0 {
			continue
		}
		fromLedger[keptAt[k]] = a.totals[gr].DeepCopy()
	}
	arrived := Arrivals{Gen: a.gen, Sums: a.arrived.DeepCopy(), RV: a.arrivedRV}
	l.mu.Unlock()

	usage := corev1.ResourceList{}
	var errs []error
	shrunk := false // matched lost the names of a failed evaluator
	for i, e := range evaluators {
		resources := charges[i]
		if shrunk {
			resources = quota.Intersection(resources, matched)
		}
		if len(resources) == 0 {
			continue
		}
		used := fromLedger[i]
		if used != nil {
			for _, name := range resources {
				if _, has := used[name]; !has {
					used[name] = resource.Quantity{Format: resource.DecimalSI}
				}
			}
		} else {
			stats, err := e.UsageStats(quota.UsageStatsOptions{Namespace: rq.Namespace, Scopes: rq.Spec.Scopes, Resources: resources, ScopeSelector: rq.Spec.ScopeSelector})
			if err != nil {
				errs = append(errs, fmt.Errorf("quota: usage of %s in namespace %q: %w", e.GroupResource(), rq.Namespace, err))
				matched = quota.Difference(matched, resources)
				shrunk = true
				continue
			}
			used = stats.Used
		}
		// usage is this call's own list: the amounts are added in place,
		// copied from used where usage has none.
		reslist.Accumulate(usage, used, false, nil)
	}
	return quota.Mask(usage, matched), arrived, errors.Join(errs...)
}

// InSync reports whether the ledger holds, for gr in namespace, exactly the
// objects of objs, each at the version objs has: then its totals must equal
// a sum over objs, and a difference is drift, not lag.
func (l *Ledger) InSync(namespace string, gr schema.GroupResource, objs []runtime.Object) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	var entries map[string]*entry
	if s := l.spaces[namespace]; s != nil && s.books[gr] != nil {
		entries = s.books[gr].entries
	}
	if len(entries) != len(objs) {
		return false
	}
	for _, obj := range objs {
		key, err := cache.MetaNamespaceKeyFunc(obj)
		if err != nil {
			return false
		}
		if en := entries[key]; en == nil || en.obj != obj {
			return false
		}
	}
	return true
}

// CheckDue reports whether rq has not been compared with a full
// recalculation since resync generation gen, and marks it compared.
func (l *Ledger) CheckDue(rq *corev1.ResourceQuota, gen uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.spaces[rq.Namespace]
	if s == nil || s.accounts[rq.Name] == nil {
		return false
	}
	a := s.accounts[rq.Name]
	if a.checked >= gen {
		return false
	}
	a.checked = gen
	return true
}

// Reset drops the totals of the quota namespace/name; they are built again
// from the kept usages at its next calculation.
func (l *Ledger) Reset(namespace, name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.spaces[namespace]; s != nil {
		if a := s.accounts[name]; a != nil {
			clear(a.totals)
			clear(a.failed)
			clear(a.arrived)
			a.arrivedRV, a.rvUnknown = 0, false
			l.gens++
			a.gen = l.gens
		}
	}
}
