package evaluator

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// claimView computes the usage of claims of one namespace against one view
// of what that usage reads besides the claim: the DeviceClasses, the
// namespace's pods and its claims. Each is listed at most once, when a
// claim first needs it. A claimView serves one call and is not shared
// between goroutines.
type claimView struct {
	e         *ResourceClaimEvaluator
	namespace string

	classes       *deviceClassMap
	classesLoaded bool

	pods       map[string]*corev1.Pod
	podsLoaded bool

	claims       []runtime.Object
	claimsListed bool
	// oldest maps a pod's UID to its oldest scheduler-made claim.
	oldest map[types.UID]*resourcev1.ResourceClaim
}

// usage returns what item charges:
//
//  1. count/resourceclaims.resource.k8s.io: 1.
//  2. <class>.deviceclass.resource.k8s.io/devices, summed over the
//     requests: an exactly request adds its count (allocationMode
//     ExactCount) or 32, AllocationResultsMaxSize (All), whatever its
//     adminAccess; a firstAvailable request adds, for each class among
//     its subrequests, the most any one subrequest of that class asks
//     for, because any of them may be the one allocated. An unknown
//     allocation mode (a stored object from a newer version) counts 0:
//     in an exactly request it still creates the key, in a subrequest it
//     does not. A request of neither kind charges nothing.
//  3. Unless extended resources are disabled, for each class c with
//     devices q: requests.deviceclass.resource.kubernetes.io/<c> = q, and
//     requests.<name> = q when c declares the extended resource name
//     <name>. From each, the owning pod's charge under the same name is
//     subtracted when the claim is the one the scheduler made for the
//     pod's extended resources (claimView.verifiedPodUsage); only names
//     left above zero are charged.
//
// When one claim has devices of two classes that declare the same
// extended resource name, requests.<name> is charged the sum of their
// devices, as two claims, one per class, are charged. Kubernetes 1.37
// assigns instead of adding, and charges one class's devices chosen by map
// iteration order: the charge of the same claim varies from one evaluation
// to the next.
func (v *claimView) usage(item runtime.Object) (corev1.ResourceList, error) {
	claim, err := toClaim(item)
	if err != nil {
		return nil, err
	}
	result := corev1.ResourceList{claimCountName: *resource.NewQuantity(1, resource.DecimalSI)}
	// devices holds the device count per class, in the order classes
	// first appear, so that the result does not depend on map order.
	var devices []classDevices
	for i := range claim.Spec.Devices.Requests {
		req := &claim.Spec.Devices.Requests[i]
		switch {
		case len(req.FirstAvailable) > 0:
			var most []classDevices
			for j := range req.FirstAvailable {
				sub := &req.FirstAvailable[j]
				q := deviceCount(sub.AllocationMode, sub.Count)
				// A class is kept only when it asks for more than
				// nothing, as in Kubernetes.
				k := findClass(most, sub.DeviceClassName)
				if k < 0 {
					if q.Sign() > 0 {
						most = append(most, classDevices{class: sub.DeviceClassName, q: q})
					}
					continue
				}
				if q.Cmp(most[k].q) > 0 {
					most[k].q = q
				}
			}
			for _, m := range most {
				devices = addDevices(devices, m.class, m.q)
			}
		case req.Exactly != nil:
			devices = addDevices(devices, req.Exactly.DeviceClassName, deviceCount(req.Exactly.AllocationMode, req.Exactly.Count))
		}
	}
	for _, d := range devices {
		result[ResourceByDeviceClass(d.class)] = d.q
	}
	if v.e.opts.DisableExtendedResource {
		return result, nil
	}
	if err := v.addExtended(claim, devices, result); err != nil {
		return nil, err
	}
	return result, nil
}

// classDevices is the number of devices a claim requests from one class.
type classDevices struct {
	class string
	q     resource.Quantity
}

func findClass(ds []classDevices, class string) int {
	for i := range ds {
		if ds[i].class == class {
			return i
		}
	}
	return -1
}

// addDevices adds q devices of class to ds.
func addDevices(ds []classDevices, class string, q resource.Quantity) []classDevices {
	if k := findClass(ds, class); k >= 0 {
		ds[k].q.Add(q)
		return ds
	}
	return append(ds, classDevices{class: class, q: q})
}

// deviceCount is the number of devices a request in mode may get: count
// for ExactCount, the most one claim can be allocated for All, and 0 for a
// mode this version does not know.
func deviceCount(mode resourcev1.DeviceAllocationMode, count int64) resource.Quantity {
	var n int64
	switch mode {
	case resourcev1.DeviceAllocationModeExactCount:
		n = count
	case resourcev1.DeviceAllocationModeAll:
		n = resourcev1.AllocationResultsMaxSize
	}
	return *resource.NewQuantity(n, resource.DecimalSI)
}

// addExtended adds the extended resource names of devices to result (rule 3
// of usage).
func (v *claimView) addExtended(claim *resourcev1.ResourceClaim, devices []classDevices, result corev1.ResourceList) error {
	// Classes without a name ("") are skipped, as in Kubernetes: they
	// name no extended resource.
	names := make(map[corev1.ResourceName]resource.Quantity, 2*len(devices))
	var classes *deviceClassMap
	for _, d := range devices {
		if d.class == "" {
			continue
		}
		names[corev1.ResourceName(corev1.ResourceImplicitExtendedClaimsPerClass+d.class)] = d.q.DeepCopy()
		if !v.classesLoaded {
			c, err := v.e.classes.load()
			if err != nil {
				return err
			}
			v.classes, v.classesLoaded = c, true
		}
		classes = v.classes
		if ext := classes.extendedName(d.class); ext != "" {
			name := corev1.ResourceName(corev1.DefaultResourceRequestsPrefix + ext)
			q := names[name]
			q.Add(d.q)
			names[name] = q
		}
	}
	if len(names) == 0 {
		return nil
	}
	pod, err := v.verifiedPodUsage(claim)
	if err != nil {
		return err
	}
	for name, q := range names {
		if p, ok := pod[name]; ok {
			q.Sub(p)
		}
		if q.Sign() > 0 {
			result[name] = q
		}
	}
	return nil
}

// verifiedPodUsage returns the usage of the pod that claim was made for,
// when the claim is the one the scheduler made for the pod's extended
// resources; the pod already charges those names, and the claim is
// charged only what the pod does not (see the package documentation). It
// returns nil, and the claim is charged in full, unless
//
//   - the claim is annotated resource.kubernetes.io/extended-resource-claim
//     "true" and its controller is a v1 Pod;
//   - that pod is listed in the claim's namespace, with the owner's UID;
//   - the pod names this claim in status.extendedResourceClaimStatus or,
//     when it names none, no other such claim of the pod is older (by
//     creationTimestamp, then by name).
//
// Errors from the list functions, and listed objects of the wrong type,
// are returned.
func (v *claimView) verifiedPodUsage(claim *resourcev1.ResourceClaim) (corev1.ResourceList, error) {
	if claim.Annotations[resourcev1.ExtendedResourceClaimAnnotation] != "true" {
		return nil, nil
	}
	owner := podController(claim)
	if owner == nil || v.e.pods == nil {
		return nil, nil
	}
	if err := v.loadPods(); err != nil {
		return nil, err
	}
	pod := v.pods[owner.Name]
	if pod == nil || pod.UID != owner.UID {
		return nil, nil
	}
	if st := pod.Status.ExtendedResourceClaimStatus; st != nil {
		if st.ResourceClaimName != claim.Name {
			return nil, nil
		}
	} else {
		oldest, err := v.isOldestClaimOf(claim, pod)
		if err != nil || !oldest {
			return nil, err
		}
	}
	usage, err := v.e.podUsage.Usage(pod)
	if err != nil {
		return nil, fmt.Errorf("evaluator: usage of pod %s/%s owning resource claim %s: %w", pod.Namespace, pod.Name, claim.Name, err)
	}
	return usage, nil
}

// podController returns claim's controller reference when it is a v1 Pod.
func podController(claim *resourcev1.ResourceClaim) *metav1.OwnerReference {
	ref := metav1.GetControllerOfNoCopy(claim)
	if ref == nil || ref.Kind != "Pod" || ref.APIVersion != "v1" {
		return nil
	}
	return ref
}

// loadPods lists the namespace's pods, once.
func (v *claimView) loadPods() error {
	if v.podsLoaded {
		return nil
	}
	objs, err := v.e.pods(v.namespace)
	if err != nil {
		return fmt.Errorf("evaluator: resource claims: listing pods of namespace %q: %w", v.namespace, err)
	}
	pods := make(map[string]*corev1.Pod, len(objs))
	for _, obj := range objs {
		pod, err := toPod(obj)
		if err != nil {
			return fmt.Errorf("evaluator: resource claims: listing pods of namespace %q: %w", v.namespace, err)
		}
		pods[pod.Name] = pod
	}
	v.pods, v.podsLoaded = pods, true
	return nil
}

// isOldestClaimOf reports whether no other claim the scheduler made for
// pod was created before claim, or at the same time with a smaller name.
// Without a claim list function nothing can be verified: false.
func (v *claimView) isOldestClaimOf(claim *resourcev1.ResourceClaim, pod *corev1.Pod) (bool, error) {
	if err := v.loadOldest(); err != nil || v.oldest == nil {
		return false, err
	}
	first := v.oldest[pod.UID]
	return first == nil || !claimBefore(first, claim), nil
}

// loadOldest finds, once, the oldest scheduler-made claim of every pod that
// has one among the namespace's claims, so that checking a claim costs a
// map lookup instead of a pass over the namespace.
func (v *claimView) loadOldest() error {
	if v.oldest != nil {
		return nil
	}
	if !v.claimsListed {
		if v.e.claims == nil {
			return nil
		}
		objs, err := v.e.claims(v.namespace)
		if err != nil {
			return fmt.Errorf("evaluator: resource claims: listing namespace %q: %w", v.namespace, err)
		}
		v.claims, v.claimsListed = objs, true
	}
	oldest := make(map[types.UID]*resourcev1.ResourceClaim)
	for _, obj := range v.claims {
		other, err := toClaim(obj)
		if err != nil {
			return fmt.Errorf("evaluator: resource claims: listing namespace %q: %w", v.namespace, err)
		}
		if other.Annotations[resourcev1.ExtendedResourceClaimAnnotation] != "true" {
			continue
		}
		ref := podController(other)
		if ref == nil {
			continue
		}
		if first := oldest[ref.UID]; first == nil || claimBefore(other, first) {
			oldest[ref.UID] = other
		}
	}
	v.oldest = oldest
	return nil
}

// claimBefore reports whether a was created before b, or at the same time
// with a smaller name.
func claimBefore(a, b *resourcev1.ResourceClaim) bool {
	switch a.CreationTimestamp.Compare(b.CreationTimestamp.Time) {
	case -1:
		return true
	case 0:
		return a.Name < b.Name
	}
	return false
}
