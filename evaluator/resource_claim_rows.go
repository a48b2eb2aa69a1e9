package evaluator

import (
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/quotakit/quotakit/generic"
	"github.com/quotakit/quotakit/quota"
)

// draResources returns the table rows of Dynamic Resource Allocation:
// resourceclaims with their evaluator, and, when claims are charged
// extended resource names, the deviceclasses the evaluator reads to name
// them. None with opts.DisableDynamicResourceAllocation.
func draResources(opts Options) []Resource {
	if opts.DisableDynamicResourceAllocation {
		return nil
	}
	claimOpts := ResourceClaimOptions{DisableExtendedResource: opts.DisableDRAExtendedResource, Pod: opts.Pod}
	rows := []Resource{{
		Resource:   resourceClaimsResource,
		Object:     &resourcev1.ResourceClaim{},
		Namespaced: true,
		NewEvaluator: func(listers generic.ListerForResourceFunc) (quota.Evaluator, error) {
			return NewResourceClaimEvaluator(listers, claimOpts)
		},
		UsageMayChange: func(oldObj, newObj runtime.Object) bool {
			oldClaim, err1 := toClaim(oldObj)
			newClaim, err2 := toClaim(newObj)
			return err1 == nil && err2 == nil && claimUsageMayChange(oldClaim, newClaim, claimOpts)
		},
	}}
	if !opts.DisableDRAExtendedResource {
		rows = append(rows, Resource{
			Resource: deviceClassesResource,
			Object:   &resourcev1.DeviceClass{},
		})
	}
	return rows
}

// claimUsageMayChange reports whether an update of a claim may change what
// it charges: its requests changed (the spec is immutable once stored, but
// an object restored from a backup or written by an older server may
// differ), or, with extended resources, whether it is a claim the
// scheduler made for a pod (the extended-resource-claim annotation and
// the controlling pod). Changes of status, allocation included, never
// change it: quota charges what a claim requests, not what it was given.
//
// Kubernetes 1.37 never recalculates on a claim update (its update filter
// has no case for claims), so an annotation or owner change is seen only at
// the next full resync. The part of a claim's charge that depends on its
// pod changes with the pod: the pod's own updates (becoming terminal,
// passing its deletion grace period) recalculate every quota that charges
// the extended resource names involved, since the pod evaluator charges
// them too.
func claimUsageMayChange(oldClaim, newClaim *resourcev1.ResourceClaim, opts ResourceClaimOptions) bool {
	if !equality.Semantic.DeepEqual(oldClaim.Spec.Devices.Requests, newClaim.Spec.Devices.Requests) {
		return true
	}
	if opts.DisableExtendedResource {
		return false
	}
	isSpecial := func(c *resourcev1.ResourceClaim) bool {
		return c.Annotations[resourcev1.ExtendedResourceClaimAnnotation] == "true"
	}
	if isSpecial(oldClaim) != isSpecial(newClaim) {
		return true
	}
	if !isSpecial(newClaim) {
		return false
	}
	oldOwner, newOwner := podController(oldClaim), podController(newClaim)
	if (oldOwner == nil) != (newOwner == nil) {
		return true
	}
	return oldOwner != nil && (oldOwner.Name != newOwner.Name || oldOwner.UID != newOwner.UID)
}
