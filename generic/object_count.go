package generic

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/quotakit/quotakit/internal/isnil"
	"github.com/quotakit/quotakit/quota"
)

// ObjectCountQuotaResourceNameFor returns the quota resource name that
// counts objects of gr: count/<resource> for the core group and
// count/<resource>.<group> otherwise (count/pods, count/deployments.apps).
func ObjectCountQuotaResourceNameFor(gr schema.GroupResource) corev1.ResourceName {
	if gr.Group == "" {
		return corev1.ResourceName("count/" + gr.Resource)
	}
	return corev1.ResourceName("count/" + gr.Resource + "." + gr.Group)
}

// ObjectCountEvaluator is the [quota.Evaluator] of a resource whose only
// quota is its number of objects. Each object charges 1 to
// count/<resource>[.<group>] and to an optional legacy alias (configmaps for
// count/configmaps). It is safe for concurrent use.
//
// Creating an object is the only request it handles: updates never change
// a count, and deletions are released by the controller, not by admission.
// It has no scopes, so a quota with any scope or scope selector never
// counts these objects.
type ObjectCountEvaluator struct {
	gr       schema.GroupResource
	listFunc ListFuncByNamespace
	// names are the charged names: the count name, then the alias if any.
	names []corev1.ResourceName
}

var _ quota.Evaluator = (*ObjectCountEvaluator)(nil)

// NewObjectCountEvaluator returns the evaluator that counts objects of gr.
// alias, when not empty, is charged along with the count name; it exists for
// the names quota used before count/<resource> (configmaps, secrets, …) and
// should not be used otherwise. listFunc lists gr's objects for UsageStats;
// it may be nil for an evaluator used only by admission, whose UsageStats
// then returns [ErrNoListFunc].
func NewObjectCountEvaluator(gr schema.GroupResource, listFunc ListFuncByNamespace, alias corev1.ResourceName) *ObjectCountEvaluator {
	names := []corev1.ResourceName{ObjectCountQuotaResourceNameFor(gr)}
	if alias != "" {
		names = append(names, alias)
	}
	return &ObjectCountEvaluator{gr: gr, listFunc: listFunc, names: names}
}

// Constraints does nothing: counting needs nothing from the object.
func (e *ObjectCountEvaluator) Constraints(required []corev1.ResourceName, item runtime.Object) error {
	return nil
}

// GroupResource returns the counted resource.
func (e *ObjectCountEvaluator) GroupResource() schema.GroupResource { return e.gr }

// Handles reports whether a is a create of the main resource (no
// subresource).
func (e *ObjectCountEvaluator) Handles(a quota.Attributes) bool {
	if a == nil {
		return false
	}
	return a.GetSubresource() == "" && a.GetOperation() == admissionv1.Create
}

// Matches reports whether the quota's status.hard names the count or the
// alias and the quota has no scopes; see [Matches].
func (e *ObjectCountEvaluator) Matches(resourceQuota *corev1.ResourceQuota, item runtime.Object) (bool, error) {
	return Matches(resourceQuota, item, e.MatchingResources, MatchesNoScopeFunc)
}

// MatchingResources returns the count name and the alias if they are in
// input, sorted.
func (e *ObjectCountEvaluator) MatchingResources(input []corev1.ResourceName) []corev1.ResourceName {
	return quota.Intersection(input, e.names)
}

// MatchingScopes returns an empty list: counted objects match no scope.
func (e *ObjectCountEvaluator) MatchingScopes(item runtime.Object, scopes []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	return []corev1.ScopedResourceSelectorRequirement{}, nil
}

// UncoveredQuotaScopes returns an empty list: counted objects match no
// scope, so no scope limits them.
func (e *ObjectCountEvaluator) UncoveredQuotaScopes(limitedScopes, matchedQuotaScopes []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	return []corev1.ScopedResourceSelectorRequirement{}, nil
}

// Usage returns 1 for the count name and for the alias. The object's content
// does not matter, but a nil object is an error.
func (e *ObjectCountEvaluator) Usage(item runtime.Object) (corev1.ResourceList, error) {
	if isnil.Value(item) {
		return nil, fmt.Errorf("generic: usage of %s: nil object", e.gr)
	}
	return e.count(1), nil
}

// count returns n for each charged name.
func (e *ObjectCountEvaluator) count(n int64) corev1.ResourceList {
	rl := make(corev1.ResourceList, len(e.names))
	for _, name := range e.names {
		rl[name] = *resource.NewQuantity(n, resource.DecimalSI)
	}
	return rl
}

// UsageStats counts the objects of options.Namespace. The result holds zero
// for each of options.Resources and, when at least one object is counted,
// the count under both charged names, exactly as [CalculateUsageStats] with
// [ObjectCountEvaluator.Usage] would, without building a list per object. A
// quota with scopes counts nothing. Without a list function it returns
// [ErrNoListFunc].
func (e *ObjectCountEvaluator) UsageStats(options quota.UsageStatsOptions) (quota.UsageStats, error) {
	if e.listFunc == nil {
		return quota.UsageStats{}, fmt.Errorf("generic: usage stats of %s: %w", e.gr, ErrNoListFunc)
	}
	items, err := e.listFunc(options.Namespace)
	if err != nil {
		return quota.UsageStats{}, fmt.Errorf("generic: listing %s in namespace %q: %w", e.gr, options.Namespace, err)
	}
	used := make(corev1.ResourceList, len(options.Resources)+len(e.names))
	for _, name := range options.Resources {
		used[name] = resource.Quantity{Format: resource.DecimalSI}
	}
	if len(ScopeRequirements(options.Scopes, options.ScopeSelector)) > 0 {
		// MatchesNoScopeFunc: no object matches a scoped quota.
		return quota.UsageStats{Used: used}, nil
	}
	var n int64
	for _, item := range items {
		if isnil.Value(item) {
			return quota.UsageStats{}, fmt.Errorf("generic: listing %s in namespace %q returned a nil object", e.gr, options.Namespace)
		}
		n++
	}
	if n > 0 {
		addInPlace(used, e.count(n))
	}
	return quota.UsageStats{Used: used}, nil
}
