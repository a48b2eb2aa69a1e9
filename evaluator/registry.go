package evaluator

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit/generic"
	"github.com/quotakit/quotakit/quota"
)

// Options configures [NewEvaluators], [NewRegistry] and
// [DefaultUpdateFilter]. The zero value means Kubernetes 1.37 defaults.
type Options struct {
	// Pod configures the pod evaluator and the pod rows of the update
	// filter. Defaults to the zero PodOptions: Kubernetes 1.37 feature
	// gates and time.Now.
	Pod PodOptions
	// DisableDynamicResourceAllocation leaves resource claims to no
	// evaluator, and deviceclasses out of the table, as Kubernetes does
	// with the DynamicResourceAllocation feature gate off: [Resources] has
	// no resourceclaims.resource.k8s.io or deviceclasses.resource.k8s.io
	// row and [NewEvaluators] no [ResourceClaimEvaluator]. A quota on
	// count/resourceclaims.resource.k8s.io is then counted by an
	// object-count evaluator if the caller creates one. Defaults to false:
	// the gate is GA and locked on since 1.35.
	DisableDynamicResourceAllocation bool
	// DisableDRAExtendedResource charges claims no extended resource names
	// (requests.deviceclass.resource.kubernetes.io/<class> and the
	// requests.<name> a DeviceClass declares), and leaves deviceclasses
	// out of the table, as Kubernetes does with the DRAExtendedResource
	// feature gate off; see [ResourceClaimOptions.DisableExtendedResource].
	// Pods are charged their extended resources either way, as in
	// Kubernetes, whose pod evaluator does not look at this gate. Defaults
	// to false: the gate is GA and locked on in 1.37.
	DisableDRAExtendedResource bool
}

// NewEvaluators returns the evaluators of the core resources, as
// kube-controller-manager and kube-apiserver register them: one for each
// row of [Resources] that has an evaluator, in the table's order.
//
// listers is called for each resource an evaluator lists, with its
// GroupVersionResource, to get the function that lists it; errors are
// returned together. A nil listers, or a nil function for a resource,
// builds evaluators for admission only: they compute the usage of single
// objects, and their UsageStats return an error
// ([generic.ErrNoListFunc] for all but pods). Any
// other resource is counted by the object-count evaluator, which callers
// create on demand with [generic.NewObjectCountEvaluator].
func NewEvaluators(listers generic.ListerForResourceFunc, opts Options) ([]quota.Evaluator, error) {
	var (
		evaluators []quota.Evaluator
		errs       []error
	)
	for _, r := range Resources(opts) {
		if r.NewEvaluator == nil {
			continue
		}
		e, err := r.NewEvaluator(listers)
		if err != nil {
			errs = append(errs, fmt.Errorf("evaluator: lister for %s: %w", r.Resource.GroupResource(), err))
			continue
		}
		evaluators = append(evaluators, e)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return evaluators, nil
}

// NewRegistry returns a registry of the evaluators of [NewEvaluators].
func NewRegistry(listers generic.ListerForResourceFunc, opts Options) (*generic.Registry, error) {
	evaluators, err := NewEvaluators(listers, opts)
	if err != nil {
		return nil, err
	}
	return generic.NewRegistry(evaluators...), nil
}

// DefaultIgnoredResources returns the resources quota ignores by default,
// as Kubernetes does: virtual resources that are never stored (bindings,
// componentstatuses, token and access reviews) and events, in the core and
// events.k8s.io groups. Each call returns a new map.
func DefaultIgnoredResources() map[schema.GroupResource]struct{} {
	const (
		authn = "authentication.k8s.io"
		authz = "authorization.k8s.io"
	)
	return map[schema.GroupResource]struct{}{
		{Resource: "bindings"}:                                {},
		{Resource: "componentstatuses"}:                       {},
		{Group: authn, Resource: "tokenreviews"}:              {},
		{Group: authn, Resource: "selfsubjectreviews"}:        {},
		{Group: authz, Resource: "subjectaccessreviews"}:      {},
		{Group: authz, Resource: "selfsubjectaccessreviews"}:  {},
		{Group: authz, Resource: "localsubjectaccessreviews"}: {},
		{Group: authz, Resource: "selfsubjectrulesreviews"}:   {},
		{Resource: "events"}:                                  {},
		{Group: "events.k8s.io", Resource: "events"}:          {},
	}
}
