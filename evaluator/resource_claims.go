package evaluator

import (
	"errors"
	"fmt"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit/generic"
	"github.com/quotakit/quotakit/quota"
)

// The resources the claim evaluator reads.
var (
	resourceClaimsResource = resourcev1.SchemeGroupVersion.WithResource("resourceclaims")
	deviceClassesResource  = resourcev1.SchemeGroupVersion.WithResource("deviceclasses")
	podsResource           = corev1.SchemeGroupVersion.WithResource("pods")
)

// claimCountName is count/resourceclaims.resource.k8s.io. The claim
// evaluator charges it instead of the object-count evaluator, because it
// owns the resource; there is no legacy alias.
var claimCountName = generic.ObjectCountQuotaResourceNameFor(resourceClaimsResource.GroupResource())

// ResourceByDeviceClass returns the quota resource name that limits the
// devices claims request from one DeviceClass:
// <class>.deviceclass.resource.k8s.io/devices.
func ResourceByDeviceClass(class string) corev1.ResourceName {
	return corev1.ResourceName(class + corev1.ResourceClaimsPerClass)
}

// ResourceClaimOptions configures a [ResourceClaimEvaluator]. The zero value
// is Kubernetes 1.37 with its default feature gates.
type ResourceClaimOptions struct {
	// DisableExtendedResource charges claims only their count and their
	// devices per class, never extended resource names, and makes the
	// evaluator read neither pods nor DeviceClasses, as Kubernetes does
	// with the DRAExtendedResource feature gate off. Defaults to false:
	// the gate is GA and locked on in 1.37.
	DisableExtendedResource bool
	// Pod configures how the usage of a claim's owning pod is computed
	// (see [ResourceClaimEvaluator.Usage]); it should be the options of
	// the pod evaluator in use. Defaults to the zero PodOptions.
	Pod PodOptions
}

// ResourceClaimEvaluator is the [quota.Evaluator] of resource.k8s.io/v1
// ResourceClaims (Dynamic Resource Allocation), with the semantics of
// Kubernetes 1.37; see the package documentation for what it charges.
//
// It keeps no state: the DeviceClasses, the owning pod and the pod's other
// claims are listed when a method needs them, so a ResourceClaimEvaluator
// is safe for concurrent use and always answers from the objects its list
// functions return at the time. It does not modify the objects it is given
// or lists.
type ResourceClaimEvaluator struct {
	claims  generic.ListFuncByNamespace
	pods    generic.ListFuncByNamespace
	classes deviceClassLister
	// podUsage computes the owning pod's charge with the pod options.
	podUsage *PodEvaluator
	opts     ResourceClaimOptions
}

var _ quota.Evaluator = (*ResourceClaimEvaluator)(nil)

// NewResourceClaimEvaluator returns the evaluator of resource claims. It
// asks listers for resource.k8s.io/v1 resourceclaims and, unless
// opts.DisableExtendedResource is set, for v1 pods and resource.k8s.io/v1
// deviceclasses (a cluster-scoped resource, listed with namespace ""); the
// errors listers returns are returned together.
//
// A nil listers, or a nil function for a resource, is allowed and serves
// admission:
//
//   - without resourceclaims, UsageStats returns [generic.ErrNoListFunc];
//   - without deviceclasses, no DeviceClass is known, which is what
//     Kubernetes does before its DeviceClass informer has synced: claims
//     are charged the implicit extended resource name of their classes
//     but no explicit one, and MatchingResources matches no extended
//     resource name;
//   - without pods (or without resourceclaims, when the pod does not name
//     its claim), no claim's owning pod can be verified, so scheduler-made
//     claims are charged in full.
func NewResourceClaimEvaluator(listers generic.ListerForResourceFunc, opts ResourceClaimOptions) (*ResourceClaimEvaluator, error) {
	e := &ResourceClaimEvaluator{opts: opts, podUsage: NewPodEvaluator(nil, opts.Pod)}
	var errs []error
	var err error
	if e.claims, err = lister(listers, resourceClaimsResource); err != nil {
		errs = append(errs, fmt.Errorf("evaluator: lister for %s: %w", resourceClaimsResource.GroupResource(), err))
	}
	if !opts.DisableExtendedResource {
		if e.pods, err = lister(listers, podsResource); err != nil {
			errs = append(errs, fmt.Errorf("evaluator: lister for %s: %w", podsResource.GroupResource(), err))
		}
		var classes generic.ListFuncByNamespace
		if classes, err = lister(listers, deviceClassesResource); err != nil {
			errs = append(errs, fmt.Errorf("evaluator: lister for %s: %w", deviceClassesResource.GroupResource(), err))
		}
		e.classes = deviceClassLister(classes)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return e, nil
}

// ErrNilResourceClaim is returned for a nil *resourcev1.ResourceClaim.
var ErrNilResourceClaim = errors.New("evaluator: nil resource claim")

// toClaim returns item as a claim, or an error for any other type or a nil
// claim.
func toClaim(item runtime.Object) (*resourcev1.ResourceClaim, error) {
	claim, ok := item.(*resourcev1.ResourceClaim)
	if !ok {
		return nil, fmt.Errorf("evaluator: expected *v1.ResourceClaim, got %T", item)
	}
	if claim == nil {
		return nil, ErrNilResourceClaim
	}
	return claim, nil
}

// Constraints does nothing: a claim needs to state nothing to be charged.
func (e *ResourceClaimEvaluator) Constraints(required []corev1.ResourceName, item runtime.Object) error {
	return nil
}

// GroupResource returns resourceclaims.resource.k8s.io.
func (e *ResourceClaimEvaluator) GroupResource() schema.GroupResource {
	return resourceClaimsResource.GroupResource()
}

// Handles reports whether a is a create or update of a claim itself (no
// subresource). Status writes, which record allocations, are never
// charged: quota counts what claims request, not what they got.
func (e *ResourceClaimEvaluator) Handles(a quota.Attributes) bool {
	if a == nil || a.GetSubresource() != "" {
		return false
	}
	op := a.GetOperation()
	return op == admissionv1.Create || op == admissionv1.Update
}

// Matches reports whether item, a claim, is charged to resourceQuota: its
// status.hard names a resource claims are charged under (see
// [ResourceClaimEvaluator.MatchingResources]) and it has no scopes. Claims
// have no scopes, so a quota with any scope or scope selector never counts
// them.
//
// An item that is not a claim, and DeviceClasses that cannot be listed
// when a name depends on them, are errors. Kubernetes never looks at the
// item, so it matches a pod or a nil object like a claim.
func (e *ResourceClaimEvaluator) Matches(resourceQuota *corev1.ResourceQuota, item runtime.Object) (bool, error) {
	if _, err := toClaim(item); err != nil {
		return false, err
	}
	if resourceQuota == nil {
		return generic.Matches(nil, item, e.MatchingResources, generic.MatchesNoScopeFunc)
	}
	var classes *deviceClassMap
	if e.needClasses(quota.ResourceNames(resourceQuota.Status.Hard)) {
		var err error
		if classes, err = e.classes.load(); err != nil {
			return false, err
		}
	}
	match := func(input []corev1.ResourceName) []corev1.ResourceName {
		return e.matchingResources(input, classes, false)
	}
	return generic.Matches(resourceQuota, item, match, generic.MatchesNoScopeFunc)
}

// MatchingScopes returns an empty list: claims have no scopes.
func (e *ResourceClaimEvaluator) MatchingScopes(item runtime.Object, scopes []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	return []corev1.ScopedResourceSelectorRequirement{}, nil
}

// UncoveredQuotaScopes returns an empty list: claims have no scopes.
func (e *ResourceClaimEvaluator) UncoveredQuotaScopes(limitedScopes, matchedQuotaScopes []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	return []corev1.ScopedResourceSelectorRequirement{}, nil
}

// MatchingResources returns the names of input, in input order, that claims
// are charged under:
//
//   - count/resourceclaims.resource.k8s.io;
//   - any <class>.deviceclass.resource.k8s.io/devices, whether or not the
//     class exists;
//   - requests.deviceclass.resource.kubernetes.io/<class> for a class that
//     exists;
//   - requests.<name> for an extended resource name some DeviceClass
//     declares in spec.extendedResourceName.
//
// The last two need the DeviceClasses, are never matched with
// [ResourceClaimOptions.DisableExtendedResource], and are never matched
// when the evaluator has no DeviceClass list function. If the
// DeviceClasses cannot be listed, every name of those two shapes is
// matched, so that a controller evaluates claims for it and sees the
// listing error from UsageStats rather than silently leaving the name
// uncounted; [ResourceClaimEvaluator.Matches] returns that error.
//
// Pods are charged under the same extended resource names whether or not a
// DeviceClass backs them (see [PodEvaluator.MatchingResources]).
func (e *ResourceClaimEvaluator) MatchingResources(input []corev1.ResourceName) []corev1.ResourceName {
	var classes *deviceClassMap
	failed := false
	if e.needClasses(input) {
		var err error
		classes, err = e.classes.load()
		failed = err != nil
	}
	return e.matchingResources(input, classes, failed)
}

// needClasses reports whether matching input needs the DeviceClasses.
func (e *ResourceClaimEvaluator) needClasses(input []corev1.ResourceName) bool {
	if e.opts.DisableExtendedResource || e.classes == nil {
		return false
	}
	for _, name := range input {
		if needsDeviceClasses(name) {
			return true
		}
	}
	return false
}

// matchingResources is MatchingResources with the DeviceClasses given;
// failed says that they could not be listed.
func (e *ResourceClaimEvaluator) matchingResources(input []corev1.ResourceName, classes *deviceClassMap, failed bool) []corev1.ResourceName {
	result := []corev1.ResourceName{}
	for _, name := range input {
		if name == claimCountName || strings.HasSuffix(string(name), corev1.ResourceClaimsPerClass) {
			result = append(result, name)
			continue
		}
		if e.opts.DisableExtendedResource {
			continue
		}
		implicit := strings.HasPrefix(string(name), corev1.ResourceImplicitExtendedClaimsPerClass)
		extended := isExtendedResourceNameForQuota(name)
		switch {
		case failed && (implicit || extended):
			result = append(result, name)
		case implicit && classes.extendedName(string(name[len(corev1.ResourceImplicitExtendedClaimsPerClass):])) != "":
			result = append(result, name)
		case extended && classes.classFor(name[len(corev1.DefaultResourceRequestsPrefix):]) != nil:
			result = append(result, name)
		}
	}
	return result
}

// UsageStats sums the usage of the claims in options.Namespace. Claims have
// no scopes, so a quota with any scope or scope selector sums to zero. The
// result has every name of options.Resources, zero when nothing uses it,
// and every name any claim charges; callers mask it to what they need.
//
// The claims, and if needed the DeviceClasses and the namespace's pods, are
// listed once per call, so that every claim is charged against the same
// view. An error from a list function, or a listed object of the wrong
// type, is returned: Kubernetes charges a claim whose owning pod it cannot
// read in full, which is right for a pod not yet seen but not for a cache
// that fails.
func (e *ResourceClaimEvaluator) UsageStats(options quota.UsageStatsOptions) (quota.UsageStats, error) {
	if e.claims == nil {
		return quota.UsageStats{}, generic.ErrNoListFunc
	}
	items, err := e.claims(options.Namespace)
	if err != nil {
		return quota.UsageStats{}, fmt.Errorf("evaluator: resource claims: listing namespace %q: %w", options.Namespace, err)
	}
	v := &claimView{e: e, namespace: options.Namespace, claims: items, claimsListed: true}
	list := func(string) ([]runtime.Object, error) { return items, nil }
	return generic.CalculateUsageStats(options, list, generic.MatchesNoScopeFunc, v.usage)
}

// Usage returns what item, a *resourcev1.ResourceClaim, charges; see the
// package documentation for the rules. With extended resources enabled it
// lists the DeviceClasses and, for a claim the scheduler made for a pod's
// extended resources, the pod and its other claims; their errors are
// returned.
func (e *ResourceClaimEvaluator) Usage(item runtime.Object) (corev1.ResourceList, error) {
	claim, err := toClaim(item)
	if err != nil {
		return nil, err
	}
	v := &claimView{e: e, namespace: claim.Namespace}
	return v.usage(claim)
}
