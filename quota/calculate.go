package quota

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/quotakit/quotakit/internal/isnil"
)

// ErrNilRegistry is returned by [CalculateUsage] when it is given no
// registry.
var ErrNilRegistry = errors.New("quota: nil registry")

// CalculateUsage computes the usage in namespace of every resource named by
// hardLimits that some evaluator in registry charges, for a quota with the
// given scopes and scope selector. It is what the ResourceQuota controller
// runs to fill status.used.
//
// Each evaluator whose resources intersect hardLimits is asked for its
// [Evaluator.UsageStats] once. When an evaluator fails, its resources are left
// out of the result and its error, wrapped with the evaluator's
// GroupResource, is returned joined with the others; the resources of the
// evaluators that succeeded are still returned, so a caller can update what
// it could compute and keep previous values for the rest. Resources that no
// evaluator charges are not in the result.
func CalculateUsage(namespace string, scopes []corev1.ResourceQuotaScope, hardLimits corev1.ResourceList, registry Registry, scopeSelector *corev1.ScopeSelector) (corev1.ResourceList, error) {
	if isnil.Value(registry) {
		return corev1.ResourceList{}, ErrNilRegistry
	}
	evaluators := registry.List()
	hard := ResourceNames(hardLimits)

	var charged []corev1.ResourceName
	for _, e := range evaluators {
		if !isnil.Value(e) {
			charged = append(charged, e.MatchingResources(hard)...)
		}
	}
	matched := Intersection(hard, charged)

	usage := corev1.ResourceList{}
	var errs []error
	for _, e := range evaluators {
		if isnil.Value(e) {
			continue
		}
		resources := e.MatchingResources(matched)
		if len(resources) == 0 {
			continue
		}
		stats, err := e.UsageStats(UsageStatsOptions{
			Namespace:     namespace,
			Scopes:        scopes,
			Resources:     resources,
			ScopeSelector: scopeSelector,
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("quota: usage of %s in namespace %q: %w", e.GroupResource(), namespace, err))
			matched = Difference(matched, resources)
			continue
		}
		usage = Add(usage, stats.Used)
	}
	return Mask(usage, matched), errors.Join(errs...)
}
