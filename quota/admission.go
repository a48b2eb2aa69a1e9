package quota

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit/internal/isnil"
	"github.com/quotakit/quotakit/internal/reslist"
)

// LimitedResource says that consuming a resource requires a covering quota:
// it is one entry of the limitedResources list of kube-apiserver's
// ResourceQuotaConfiguration. A request that charges a resource name
// containing one of MatchContains, or that matches one of MatchScopes, is
// denied unless some quota in the namespace covers it.
type LimitedResource struct {
	// APIGroup is the group of the limited resource ("" for the core group).
	APIGroup string
	// Resource is the limited resource, for example "pods".
	Resource string
	// MatchContains lists substrings of resource names (for example
	// "requests.cpu") whose consumption needs a covering quota.
	MatchContains []string
	// MatchScopes lists scope requirements whose matching objects need a
	// quota with the same scope.
	MatchScopes []corev1.ScopedResourceSelectorRequirement
}

// CheckRequest checks one admission request against the quotas of its
// namespace, as kube-apiserver's ResourceQuota admission plugin does for each
// request, and returns the quotas with status.used advanced by the request's
// usage. It never modifies quotas or the request's objects: the returned
// quotas are copies when anything changed, and the caller persists them (an
// UpdateStatus per changed quota, with the read resourceVersion).
//
// Only status.hard and status.used are consulted, never spec.hard: a quota the
// controller has not yet processed does not apply. The rules, in order:
//
//   - a request the evaluator does not handle changes nothing;
//   - a matching quota whose constraints the object fails denies it
//     ("failed quota: <name>: <err>"), and one with a hard resource that has no
//     used value denies it ("status unknown for quota: <name>, resources: …");
//   - negative usage is denied;
//   - an update is charged what it adds (usage never decreases at admission),
//     except that a quota the old object did not match is charged in full,
//     and an update of an object that has no resourceVersion yet (create on
//     update) is charged in full;
//   - consumption of a limited resource without a covering quota is denied
//     ("insufficient quota to consume: …"), and so is an object in a limited
//     scope that no quota covers ("insufficient quota to match these scopes");
//   - a quota that would go over a hard limit denies the request
//     ("exceeded quota: <name>, requested: …, used: …, limited: …"), except
//     for updates of the status subresource, which are charged but never
//     denied.
//
// Denials are Forbidden API errors (apierrors.IsForbidden) with the same
// messages as kube-apiserver, except the uncovered-scope one, which, as
// upstream, is a plain error.
//
// The return follows one rule: with a nil error, the quotas to persist
// (the input itself when nothing changed, copies otherwise); with an error
// of any kind (a denial, bad input, an evaluator's failure), nil quotas.
// Upstream returns the input quotas with some errors and nil with others, so
// a caller that persists what it gets back on error may write a charge for
// a request it then fails.
//
// Unlike upstream, an error from [Evaluator.MatchingScopes] for the limited
// scopes is returned; upstream ignores it and admits the request unchecked.
func CheckRequest(quotas []corev1.ResourceQuota, a Attributes, evaluator Evaluator, limited []LimitedResource) ([]corev1.ResourceQuota, error) {
	charges, err := ChargeRequest(quotas, a, evaluator, limited)
	if err != nil {
		return nil, err
	}
	if len(charges) == 0 {
		return quotas, nil
	}
	out := make([]corev1.ResourceQuota, len(quotas))
	for i := range quotas {
		quotas[i].DeepCopyInto(&out[i])
	}
	for _, c := range charges {
		out[c.Quota].Status.Used = Add(quotas[c.Quota].Status.Used, c.Added)
	}
	return out, nil
}

// Charge is what an admitted request adds to one quota.
type Charge struct {
	// Quota is the index of the quota in the slice given to
	// [ChargeRequest].
	Quota int
	// Added is what the request adds to the quota's status.used: the
	// quota's status.used becomes [Add] of the two. It is the request's
	// usage of the quota's hard resources, without zero amounts, never
	// empty. It may be the list the evaluator returned as the object's
	// usage: read it, never change it.
	Added corev1.ResourceList
}

// ChargeRequest checks one admission request against quotas by the rules
// of [CheckRequest], with the same errors, and returns what it charges
// each quota, in the order of quotas; no charge when it changes nothing.
// It neither copies nor modifies quotas and builds no new status.used,
// which makes it the cheaper call for a caller that keeps running totals
// over many requests, as [github.com/quotakit/quotakit/admission]'s
// Evaluator does.
func ChargeRequest(quotas []corev1.ResourceQuota, a Attributes, evaluator Evaluator, limited []LimitedResource) ([]Charge, error) {
	if isnil.Value(a) {
		return nil, errors.New("quota: checking a request: nil attributes")
	}
	if isnil.Value(evaluator) {
		return nil, errors.New("quota: checking a request: nil evaluator")
	}
	if !evaluator.Handles(a) {
		return nil, nil
	}
	obj := a.GetObject()
	if isnil.Value(obj) {
		return nil, fmt.Errorf("quota: checking a request: %s request for %s has no object", a.GetOperation(), a.GetResource().GroupResource())
	}
	obj = withNamespace(obj, a.GetNamespace())

	var limitedScopes []corev1.ScopedResourceSelectorRequirement
	for _, l := range limited {
		matched, err := evaluator.MatchingScopes(obj, l.MatchScopes)
		if err != nil {
			return nil, fmt.Errorf("quota: matching limited scopes: %w", err)
		}
		limitedScopes = append(limitedScopes, matched...)
	}

	// The names that must be covered by some quota: positive usage of a
	// limited resource whose name contains a listed substring.
	var limitedNames []corev1.ResourceName
	if gr := a.GetResource().GroupResource(); hasLimitedResource(limited, gr) {
		usage, err := evaluator.Usage(obj)
		if err != nil {
			return nil, err
		}
		limitedNames = limitedByDefault(usage, limited, gr)
	}

	// The quotas this request is charged to.
	var interesting []int
	var covered []corev1.ResourceName
	var restrictedScopes []corev1.ScopedResourceSelectorRequirement
	for i := range quotas {
		q := &quotas[i]
		scopes, err := evaluator.MatchingScopes(obj, quotaScopeRequirements(q))
		if err != nil {
			return nil, fmt.Errorf("error matching scopes of quota %s, err: %w", q.Name, err)
		}
		restrictedScopes = append(restrictedScopes, scopes...)

		match, err := evaluator.Matches(q, obj)
		if err != nil {
			return nil, err
		}
		if !match {
			continue
		}
		restricted := evaluator.MatchingResources(ResourceNames(q.Status.Hard))
		if err := evaluator.Constraints(restricted, obj); err != nil {
			return nil, forbidden(a, fmt.Errorf("failed quota: %s: %w", q.Name, err))
		}
		if !hasUsageStats(q, restricted) {
			return nil, forbidden(a, fmt.Errorf("status unknown for quota: %s, resources: %s", q.Name, joinNames(restricted)))
		}
		interesting = append(interesting, i)
		covered = append(covered, restricted...)
	}

	usage, err := evaluator.Usage(obj)
	if err != nil {
		return nil, err
	}
	if negative := IsNegative(usage); len(negative) > 0 {
		return nil, forbidden(a, fmt.Errorf("quota usage is negative for resource(s): %s", joinNames(negative)))
	}

	// What each interesting quota is charged; an update charges only the
	// increase, and only to quotas the old object already matched.
	// deltas[k] is what quota interesting[k] is charged.
	deltas := make([]corev1.ResourceList, len(interesting))
	for k := range deltas {
		deltas[k] = usage
	}
	var uncharged corev1.ResourceList // the delta when no quota is interesting
	if a.GetOperation() == admissionv1.Create {
		uncharged = usage
	}
	if a.GetOperation() == admissionv1.Update {
		old := a.GetOldObject()
		if isnil.Value(old) {
			return nil, forbidden(a, errors.New("unable to get previous usage since prior version of object was not found"))
		}
		if m, err := meta.Accessor(old); err == nil {
			if m.GetResourceVersion() != "" {
				oldUsage, err := evaluator.Usage(old)
				if err != nil {
					return nil, err
				}
				increase := SubtractWithNonNegativeResult(usage, oldUsage)
				uncharged = increase
				for k, i := range interesting {
					matched, err := evaluator.Matches(&quotas[i], old)
					if err != nil {
						return nil, err
					}
					if matched {
						deltas[k] = increase
					}
				}
			} else {
				uncharged = usage
			}
		}
	}
	charged := 0
	for k, d := range deltas {
		if deltas[k] = nonZero(d); len(deltas[k]) > 0 {
			charged++
		}
	}
	if len(interesting) > 0 && charged == 0 || len(interesting) == 0 && len(RemoveZeros(uncharged)) == 0 {
		return nil, nil
	}

	if uncovered := Difference(limitedNames, covered); len(uncovered) > 0 {
		return nil, forbidden(a, fmt.Errorf("insufficient quota to consume: %s", joinNames(uncovered)))
	}
	uncoveredScopes, err := evaluator.UncoveredQuotaScopes(limitedScopes, restrictedScopes)
	if err != nil {
		return nil, err
	}
	if len(uncoveredScopes) > 0 {
		return nil, fmt.Errorf("insufficient quota to match these scopes: %v", uncoveredScopes)
	}
	if len(interesting) == 0 {
		return nil, nil
	}

	charges := make([]Charge, 0, charged)
	for k, i := range interesting {
		delta := deltas[k]
		if len(delta) == 0 {
			continue
		}
		q := &quotas[i]
		requested := within(delta, q.Status.Hard)
		if len(requested) == 0 {
			// Nothing the quota limits: its status.used stays as it is.
			continue
		}
		if a.GetSubresource() != "status" {
			if exceeded := exceededBy(q.Status.Used, requested, q.Status.Hard); len(exceeded) > 0 {
				return nil, forbidden(a, fmt.Errorf("exceeded quota: %s, requested: %s, used: %s, limited: %s",
					q.Name, reslist.String(Mask(requested, exceeded)), reslist.String(Mask(q.Status.Used, exceeded)), reslist.String(Mask(q.Status.Hard, exceeded))))
			}
		}
		charges = append(charges, Charge{Quota: i, Added: requested})
	}
	return charges, nil
}

// nonZero returns rl without its zero amounts: rl itself when it has none.
func nonZero(rl corev1.ResourceList) corev1.ResourceList {
	for _, q := range rl {
		if q.IsZero() {
			return RemoveZeros(rl)
		}
	}
	return rl
}

// within returns rl restricted to the names of limits: rl itself when
// limits has all of them.
func within(rl, limits corev1.ResourceList) corev1.ResourceList {
	for name := range rl {
		if _, ok := limits[name]; !ok {
			return Mask(rl, ResourceNames(limits))
		}
	}
	return rl
}

// exceededBy returns, sorted, the names of requested whose amount added to
// the one in used is over the one in hard.
func exceededBy(used, requested, hard corev1.ResourceList) []corev1.ResourceName {
	var exceeded []corev1.ResourceName
	for name, r := range requested {
		h, ok := hard[name]
		if !ok {
			continue
		}
		// A copy of its own: a decimal Quantity shares its value.
		u := used[name].DeepCopy()
		u.Add(r)
		if u.Cmp(h) > 0 {
			exceeded = append(exceeded, name)
		}
	}
	slices.Sort(exceeded)
	return exceeded
}

// withNamespace returns obj with its namespace defaulted from the request,
// copying it rather than changing the caller's object. Some usage depends on
// the namespace of an object created without one in its metadata.
func withNamespace(obj runtime.Object, namespace string) runtime.Object {
	if namespace == "" {
		return obj
	}
	m, err := meta.Accessor(obj)
	if err != nil || m.GetNamespace() != "" {
		return obj
	}
	obj = obj.DeepCopyObject()
	if m, err := meta.Accessor(obj); err == nil {
		m.SetNamespace(namespace)
	}
	return obj
}

// hasLimitedResource reports whether limited has an entry for gr.
func hasLimitedResource(limited []LimitedResource, gr schema.GroupResource) bool {
	for _, l := range limited {
		if l.APIGroup == gr.Group && l.Resource == gr.Resource {
			return true
		}
	}
	return false
}

// limitedByDefault returns the names of usage, with positive values, that
// contain a substring listed by an entry of limited for gr.
func limitedByDefault(usage corev1.ResourceList, limited []LimitedResource, gr schema.GroupResource) []corev1.ResourceName {
	var out []corev1.ResourceName
	for _, l := range limited {
		if l.APIGroup != gr.Group || l.Resource != gr.Resource {
			continue
		}
		for name, q := range usage {
			if q.Sign() <= 0 {
				continue
			}
			for _, s := range l.MatchContains {
				if strings.Contains(string(name), s) {
					out = append(out, name)
					break
				}
			}
		}
	}
	return out
}

// quotaScopeRequirements returns a quota's spec.scopes as Exists
// requirements followed by its scope selector's requirements.
func quotaScopeRequirements(q *corev1.ResourceQuota) []corev1.ScopedResourceSelectorRequirement {
	reqs := make([]corev1.ScopedResourceSelectorRequirement, 0, len(q.Spec.Scopes))
	for _, s := range q.Spec.Scopes {
		reqs = append(reqs, corev1.ScopedResourceSelectorRequirement{ScopeName: s, Operator: corev1.ScopeSelectorOpExists})
	}
	if q.Spec.ScopeSelector != nil {
		reqs = append(reqs, q.Spec.ScopeSelector.MatchExpressions...)
	}
	return reqs
}

// hasUsageStats reports whether every hard resource among names has a used
// value.
func hasUsageStats(q *corev1.ResourceQuota, names []corev1.ResourceName) bool {
	for name := range q.Status.Hard {
		if !Contains(names, name) {
			continue
		}
		if _, ok := q.Status.Used[name]; !ok {
			return false
		}
	}
	return true
}

// forbidden wraps err as kube-apiserver's admission does: a Forbidden error
// for the request's resource and the object's name (or generateName, or
// "Unknown" when the object has none).
func forbidden(a Attributes, err error) error {
	gr := a.GetResource().GroupResource()
	name := a.GetName()
	if name == "" {
		name = "Unknown"
		if obj := a.GetObject(); !isnil.Value(obj) {
			m, merr := meta.Accessor(obj)
			switch {
			case merr != nil:
				name = "Unknown/errorGettingName"
			case m.GetName() != "":
				name = m.GetName()
			case m.GetGenerateName() != "":
				name = m.GetGenerateName()
			}
		}
	}
	return apierrors.NewForbidden(gr, name, err)
}

// joinNames returns names sorted and comma-joined.
func joinNames(names []corev1.ResourceName) string {
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = string(n)
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}
