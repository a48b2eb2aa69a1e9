package generic

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
)

// MatchesScopeFunc reports whether object matches one scope requirement of a
// quota. It returns an error for an object of the wrong type or a
// requirement it cannot evaluate (an unknown operator, invalid values).
type MatchesScopeFunc func(scope corev1.ScopedResourceSelectorRequirement, object runtime.Object) (bool, error)

// UsageFunc returns the usage of one object.
type UsageFunc func(object runtime.Object) (corev1.ResourceList, error)

// MatchingResourceNamesFunc returns the names of input that an evaluator
// charges.
type MatchingResourceNamesFunc func(input []corev1.ResourceName) []corev1.ResourceName

// MatchesNoScopeFunc is the [MatchesScopeFunc] of a resource that has no
// scopes: it matches nothing, so a quota with any scope or scope selector
// never counts the resource.
func MatchesNoScopeFunc(scope corev1.ScopedResourceSelectorRequirement, object runtime.Object) (bool, error) {
	return false, nil
}

// errNilQuota and errNilItem report missing arguments to [Matches].
var (
	errNilQuota = errors.New("generic: nil resource quota")
	errNilItem  = errors.New("generic: nil object")
)

// Matches reports whether item is charged to resourceQuota. That is the case
// when matchFunc matches at least one name of the quota's status.hard (not
// spec.hard: the controller copies spec to status, and admission charges
// what the controller has accepted) and item matches every scope
// requirement, as built by [ScopeRequirements] from spec.scopes and
// spec.scopeSelector. A quota with no scopes matches every item.
//
// Every requirement is evaluated, so a requirement scopeFunc cannot evaluate
// is reported even when the quota would not match anyway, as upstream does.
// A nil quota or item is an error.
func Matches(resourceQuota *corev1.ResourceQuota, item runtime.Object, matchFunc MatchingResourceNamesFunc, scopeFunc MatchesScopeFunc) (bool, error) {
	if resourceQuota == nil {
		return false, errNilQuota
	}
	if item == nil {
		return false, errNilItem
	}
	if matchFunc == nil || scopeFunc == nil {
		return false, errors.New("generic: Matches needs a match func and a scope func")
	}
	names := make([]corev1.ResourceName, 0, len(resourceQuota.Status.Hard))
	for name := range resourceQuota.Status.Hard {
		names = append(names, name)
	}
	matched := len(matchFunc(names)) > 0
	scopesMatch := true
	for _, req := range ScopeRequirements(resourceQuota.Spec.Scopes, resourceQuota.Spec.ScopeSelector) {
		ok, err := scopeFunc(req, item)
		if err != nil {
			return false, fmt.Errorf("generic: quota %s/%s: %w", resourceQuota.Namespace, resourceQuota.Name, err)
		}
		scopesMatch = scopesMatch && ok
	}
	return matched && scopesMatch, nil
}

// ScopeRequirements returns the requirements an object must match to be
// charged to a quota with the given spec.scopes and spec.scopeSelector: each
// scope as an Exists requirement, followed by the selector's match
// expressions. It returns nil when there are none.
func ScopeRequirements(scopes []corev1.ResourceQuotaScope, selector *corev1.ScopeSelector) []corev1.ScopedResourceSelectorRequirement {
	n := len(scopes)
	if selector != nil {
		n += len(selector.MatchExpressions)
	}
	if n == 0 {
		return nil
	}
	reqs := make([]corev1.ScopedResourceSelectorRequirement, 0, n)
	for _, scope := range scopes {
		reqs = append(reqs, corev1.ScopedResourceSelectorRequirement{ScopeName: scope, Operator: corev1.ScopeSelectorOpExists})
	}
	if selector != nil {
		reqs = append(reqs, selector.MatchExpressions...)
	}
	return reqs
}

// ScopeLabelSelector turns a scope requirement into a label selector over
// one label whose key is the scope name, as Kubernetes does for value-based
// scopes (PriorityClass, VolumeAttributesClass): an object matches when the
// label set {<scope name>: <its value>} (or the empty set, when it has no
// value) matches the selector. The operators In, NotIn, Exists and
// DoesNotExist are supported; any other operator, a scope name that is not a
// valid label key, In or NotIn without values, and Exists or DoesNotExist
// with values are errors.
func ScopeLabelSelector(req corev1.ScopedResourceSelectorRequirement) (labels.Selector, error) {
	var op selection.Operator
	switch req.Operator {
	case corev1.ScopeSelectorOpIn:
		op = selection.In
	case corev1.ScopeSelectorOpNotIn:
		op = selection.NotIn
	case corev1.ScopeSelectorOpExists:
		op = selection.Exists
	case corev1.ScopeSelectorOpDoesNotExist:
		op = selection.DoesNotExist
	default:
		return nil, fmt.Errorf("generic: %q is not a valid scope selector operator", req.Operator)
	}
	r, err := labels.NewRequirement(string(req.ScopeName), op, req.Values)
	if err != nil {
		return nil, fmt.Errorf("generic: scope selector %s %s %v: %w", req.ScopeName, req.Operator, req.Values, err)
	}
	return labels.NewSelector().Add(*r), nil
}
