package evaluator

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// DefaultUpdateFilter returns the function a quota controller asks, for
// each update of an object it watches, whether the update may change the
// usage charged for it, and so whether the quotas of its namespace must be
// recalculated. Deletions always need that and are not its business.
//
//   - pods: the pod became terminal or passed the end of its deletion grace
//     period (by [PodOptions.Now]), its Terminating/NotTerminating scope
//     flipped, or an in-place resize moved what it is charged (container or
//     pod-level status resources, allocated resources, pod-level
//     spec.resources, the resize becoming or ceasing to be infeasible).
//     Upstream watches container status resources only;
//   - services: the type changed between NodePort, LoadBalancer and
//     anything else, or the number of node ports changed. Upstream looks at
//     the type only and misses ports added to or removed from a NodePort or
//     LoadBalancer service;
//   - persistentvolumeclaims: the allocated storage, a volume attributes
//     class name, the storage class or the storage request changed, each
//     compared by value. Upstream compares the allocated storage as two
//     pointers, which always differ, and so recalculates on every update;
//   - resourceclaims.resource.k8s.io: the requests changed, or (unless
//     extended resources are disabled) the claim became or ceased to be a
//     scheduler-made claim for a pod's extended resources, or its
//     controlling pod changed. Upstream never recalculates on a claim
//     update;
//   - any other resource: never; its usage depends on the object's
//     existence only.
//
// Objects of the wrong type, and nil objects, are never a reason to
// recalculate: the filter returns false rather than panic. The function is
// safe for concurrent use.
func DefaultUpdateFilter(opts Options) func(gvr schema.GroupVersionResource, oldObj, newObj runtime.Object) bool {
	filters := map[schema.GroupResource]func(oldObj, newObj runtime.Object) bool{}
	for _, r := range Resources(opts) {
		if r.UsageMayChange != nil {
			filters[r.Resource.GroupResource()] = r.UsageMayChange
		}
	}
	return func(gvr schema.GroupVersionResource, oldObj, newObj runtime.Object) bool {
		f := filters[gvr.GroupResource()]
		return f != nil && f(oldObj, newObj)
	}
}
