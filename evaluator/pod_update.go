package evaluator

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

// podUsageMayChange reports whether an update from oldPod to newPod may
// change what the pod charges, so the controller must recompute the quotas of
// its namespace (deletes always do; creates are charged by admission). It is
// the pod row of the controller's update filter. True when:
//
//   - the pod stopped being charged: it reached a terminal phase, or the
//     update arrived after its deletion grace period ran out;
//   - its Terminating scope flipped (spec.activeDeadlineSeconds);
//   - in-place resize moved what the pod is charged: a container or init
//     container status's resources or allocatedResources changed, the
//     pod-level spec.resources, status.resources or
//     status.allocatedResources changed, or the resize became or stopped
//     being infeasible.
//
// Kubernetes' filter (pkg/quota/v1/install.DefaultUpdateFilter) watches only
// the container status resources, so a pod-level resize (which rewrites
// spec.resources through the resize subresource), a change of allocated
// resources and a resize turning infeasible are released only at the next
// full resync, up to 5 minutes later: the delay kubernetes#127132 fixed for
// container-level resize. Usage is the maximum of spec, actuated and
// allocated resources, drops the spec when a resize is infeasible, and takes
// pod-level spec.resources as written, so each of these changes it. The
// pod-level status.resources and status.allocatedResources do not feed the
// 1.37 quota usage (its evaluator leaves the pod-level resize option of
// component-helpers off); the filter watches them anyway, as the first sign
// of a pod-level resize and for releases that read them. Resizes are rare,
// so the extra recalculations cost little.
//
// Nil pods are never reported as changed.
func podUsageMayChange(oldPod, newPod *corev1.Pod, opts PodOptions) bool {
	if oldPod == nil || newPod == nil {
		return false
	}
	if !opts.DisableInPlacePodVerticalScaling && resizeStatusChanged(oldPod, newPod, opts) {
		return true
	}
	if IsTerminating(oldPod) != IsTerminating(newPod) {
		return true
	}
	now := opts.now()
	return quotaEligible(oldPod, now) && !quotaEligible(newPod, now)
}

// resizeStatusChanged reports whether any input of the in-place resize
// formula changed between oldPod and newPod. Container statuses are paired
// by name, and a status that appears or disappears does not count, as in
// Kubernetes: a new container status follows a spec change admission has
// already charged.
func resizeStatusChanged(oldPod, newPod *corev1.Pod, opts PodOptions) bool {
	if statusesChanged(oldPod.Status.ContainerStatuses, newPod.Status.ContainerStatuses) ||
		statusesChanged(oldPod.Status.InitContainerStatuses, newPod.Status.InitContainerStatuses) {
		return true
	}
	if isResizeInfeasible(oldPod) != isResizeInfeasible(newPod) {
		return true
	}
	if !equality.Semantic.DeepEqual(oldPod.Status.Resources, newPod.Status.Resources) ||
		!equality.Semantic.DeepEqual(oldPod.Status.AllocatedResources, newPod.Status.AllocatedResources) {
		return true
	}
	return !opts.DisablePodLevelResources && !equality.Semantic.DeepEqual(oldPod.Spec.Resources, newPod.Spec.Resources)
}

func statusesChanged(old, updated []corev1.ContainerStatus) bool {
	for i := range old {
		o := &old[i]
		for j := range updated {
			n := &updated[j]
			if n.Name != o.Name {
				continue
			}
			if !equality.Semantic.DeepEqual(o.Resources, n.Resources) ||
				!equality.Semantic.DeepEqual(o.AllocatedResources, n.AllocatedResources) {
				return true
			}
			break
		}
	}
	return false
}
