package quota

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// UsageStatsOptions says which usage an [Evaluator.UsageStats] call must
// compute: the objects of one namespace that match every scope and every
// scope selector requirement, summed over the listed resources.
type UsageStatsOptions struct {
	// Namespace is the namespace whose objects are counted.
	Namespace string
	// Scopes are the quota's spec.scopes; each must match an object for the
	// object to count.
	Scopes []corev1.ResourceQuotaScope
	// Resources are the resource names to report. Each of them appears in the
	// result, with a zero value when no object uses it.
	Resources []corev1.ResourceName
	// ScopeSelector is the quota's spec.scopeSelector; every requirement must
	// match an object for the object to count. Nil means no requirement.
	ScopeSelector *corev1.ScopeSelector
}

// UsageStats is the result of [Evaluator.UsageStats].
type UsageStats struct {
	// Used maps each requested resource name to the amount in use.
	Used corev1.ResourceList
}

// Evaluator knows how one kind of object (one GroupResource) consumes quota.
//
// The method set and semantics are those of
// k8s.io/apiserver/pkg/quota/v1.Evaluator, with [Attributes] in place of
// apiserver's admission.Attributes. Implementations must be safe for
// concurrent use: admission and the controller call them from many
// goroutines.
type Evaluator interface {
	// Constraints returns an error when item does not carry what a quota
	// over the required resources needs (for example a pod container
	// without a cpu limit when limits.cpu is constrained).
	Constraints(required []corev1.ResourceName, item runtime.Object) error
	// GroupResource is the resource this evaluator charges.
	GroupResource() schema.GroupResource
	// Handles reports whether an admission request may change usage and so
	// must be checked against quota.
	Handles(a Attributes) bool
	// Matches reports whether item is charged to resourceQuota: the quota's
	// status.hard names a resource this evaluator knows, and item matches
	// every scope and scope selector requirement of the quota.
	Matches(resourceQuota *corev1.ResourceQuota, item runtime.Object) (bool, error)
	// MatchingScopes returns the requirements among scopes that item matches.
	MatchingScopes(item runtime.Object, scopes []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error)
	// UncoveredQuotaScopes returns the requirements of limitedScopes whose
	// scope name no requirement of matchedQuotaScopes has.
	UncoveredQuotaScopes(limitedScopes, matchedQuotaScopes []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error)
	// MatchingResources returns the names of input this evaluator charges.
	MatchingResources(input []corev1.ResourceName) []corev1.ResourceName
	// Usage returns what item consumes. A resource item does not use has no
	// key in the result.
	Usage(item runtime.Object) (corev1.ResourceList, error)
	// UsageStats sums the usage of the namespace's matching objects.
	UsageStats(options UsageStatsOptions) (UsageStats, error)
}

// Registry holds the evaluators known to a controller or admission check,
// one per GroupResource.
type Registry interface {
	// Add registers e, replacing any evaluator for the same GroupResource.
	Add(e Evaluator)
	// Remove unregisters the evaluator for e's GroupResource.
	Remove(e Evaluator)
	// Get returns the evaluator for gr, or nil.
	Get(gr schema.GroupResource) Evaluator
	// List returns every registered evaluator.
	List() []Evaluator
}

// Configuration is what a quota system is set up with: the evaluators to
// register and the resources that are never charged.
type Configuration interface {
	// IgnoredResources are the resources quota never evaluates.
	IgnoredResources() map[schema.GroupResource]struct{}
	// Evaluators are the evaluators to register.
	Evaluators() []Evaluator
}
