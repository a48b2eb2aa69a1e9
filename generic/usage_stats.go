package generic

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/quotakit/quotakit/internal/isnil"
	"github.com/quotakit/quotakit/quota"
)

// ErrNoListFunc is returned by [CalculateUsageStats], and so by the
// UsageStats method of an evaluator, when the evaluator has no list function.
// Evaluators built for admission only (a nil [ListFuncByNamespace] or
// [ListerForResourceFunc]) compute the usage of single objects but cannot
// sum a namespace.
var ErrNoListFunc = errors.New("generic: no list function: the evaluator can compute usage of single objects only")

// CalculateUsageStats sums the usage of the objects listFunc returns for
// options.Namespace. Every name in options.Resources is in the result, zero
// (in DecimalSI format) when nothing uses it; the usage of each object that
// matches every scope requirement ([ScopeRequirements] of options.Scopes and
// options.ScopeSelector) is added to it, so the result also holds any other
// names usageFunc returns. Callers mask the result to the names they need.
//
// Unlike upstream Kubernetes, an error from scopeFunc is returned instead of
// silently ending the sum with a partial result and no error
// (kubernetes#117676): a quota whose selector cannot be evaluated must not
// be shown an undercount. Errors from listFunc and usageFunc are returned
// too; a nil listFunc is [ErrNoListFunc]. On error the stats are empty.
//
// Apart from the result map and the requirement list, the sum allocates
// nothing per object beyond what usageFunc returns: usage is added in place.
func CalculateUsageStats(options quota.UsageStatsOptions, listFunc ListFuncByNamespace, scopeFunc MatchesScopeFunc, usageFunc UsageFunc) (quota.UsageStats, error) {
	if listFunc == nil {
		return quota.UsageStats{}, ErrNoListFunc
	}
	if scopeFunc == nil || usageFunc == nil {
		return quota.UsageStats{}, errors.New("generic: CalculateUsageStats needs a scope func and a usage func")
	}
	reqs := ScopeRequirements(options.Scopes, options.ScopeSelector)
	items, err := listFunc(options.Namespace)
	if err != nil {
		return quota.UsageStats{}, fmt.Errorf("generic: listing namespace %q: %w", options.Namespace, err)
	}
	used := make(corev1.ResourceList, len(options.Resources))
	for _, name := range options.Resources {
		used[name] = resource.Quantity{Format: resource.DecimalSI}
	}
	for _, item := range items {
		if isnil.Value(item) {
			return quota.UsageStats{}, fmt.Errorf("generic: listing namespace %q returned a nil object", options.Namespace)
		}
		matches := true
		for _, req := range reqs {
			ok, err := scopeFunc(req, item)
			if err != nil {
				return quota.UsageStats{}, fmt.Errorf("generic: matching %s to scope %s %s %v: %w", describe(item), req.ScopeName, req.Operator, req.Values, err)
			}
			matches = matches && ok
		}
		if !matches {
			continue
		}
		usage, err := usageFunc(item)
		if err != nil {
			return quota.UsageStats{}, fmt.Errorf("generic: usage of %s: %w", describe(item), err)
		}
		addInPlace(used, usage)
	}
	return quota.UsageStats{Used: used}, nil
}

// addInPlace adds b to a, key by key, as quota.Add does but without building
// a new list: this is what keeps a sum over thousands of objects free of
// per-object allocations. Values taken from b are deep-copied so that a
// never shares an arbitrary-precision value with b.
func addInPlace(a, b corev1.ResourceList) {
	for name, v := range b {
		q, ok := a[name]
		if !ok {
			a[name] = v.DeepCopy()
			continue
		}
		q.Add(v)
		a[name] = q
	}
}

// describe names an object for an error message: namespace/name when it has
// object metadata, its Go type otherwise.
func describe(obj runtime.Object) string {
	if m, err := meta.Accessor(obj); err == nil {
		return fmt.Sprintf("%T %s/%s", obj, m.GetNamespace(), m.GetName())
	}
	return fmt.Sprintf("%T", obj)
}
