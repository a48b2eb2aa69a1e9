package evaluator

import (
	corev1 "k8s.io/api/core/v1"
)

// QOSClass returns the quality-of-service class of pod as Kubernetes 1.37
// determines it for quota scopes: status.qosClass when the kubelet or API
// server has set it, otherwise computed from the spec. When pod-level
// spec.resources set cpu, memory or hugepages, the class follows them alone;
// otherwise a pod is BestEffort when no container or init container requests
// or limits cpu or memory, Guaranteed when every one of them has equal,
// non-zero cpu and memory requests and limits, and Burstable in between.
// A nil pod is BestEffort.
func QOSClass(pod *corev1.Pod) corev1.PodQOSClass {
	if pod == nil {
		return corev1.PodQOSBestEffort
	}
	return qosClass(pod, PodOptions{})
}

// qosClass is QOSClass under opts (pod-level resources may be disabled).
func qosClass(pod *corev1.Pod, opts PodOptions) corev1.PodQOSClass {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	// Since 1.37 (PodLevelResourcesFixKubeletQOSClass, on by default) a
	// spec.resources holding no cpu, memory or hugepages no longer decides
	// the class.
	if !opts.DisablePodLevelResources && isPodLevelResourcesSet(pod) {
		return requirementsQOS(pod.Spec.Resources)
	}
	var class corev1.PodQOSClass
	for _, cs := range [2][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			c := requirementsQOS(&cs[i].Resources)
			switch {
			case c == corev1.PodQOSBurstable:
				return c
			case class == "":
				class = c
			case class != c:
				// One BestEffort and one Guaranteed container.
				return corev1.PodQOSBurstable
			}
		}
	}
	if class == "" {
		return corev1.PodQOSBestEffort
	}
	return class
}

// requirementsQOS is the class of one set of requirements: cpu and memory
// must both be unset/zero (BestEffort) or both have equal non-zero request
// and limit (Guaranteed); anything else is Burstable.
func requirementsQOS(r *corev1.ResourceRequirements) corev1.PodQOSClass {
	if len(r.Requests) == 0 && len(r.Limits) == 0 {
		return corev1.PodQOSBestEffort
	}
	cpu := resourceQOS(r, corev1.ResourceCPU)
	mem := resourceQOS(r, corev1.ResourceMemory)
	if cpu != mem {
		return corev1.PodQOSBurstable
	}
	return cpu
}

func resourceQOS(r *corev1.ResourceRequirements, name corev1.ResourceName) corev1.PodQOSClass {
	req, lim := r.Requests[name], r.Limits[name]
	switch {
	case req.Cmp(lim) != 0:
		return corev1.PodQOSBurstable
	case req.IsZero():
		return corev1.PodQOSBestEffort
	}
	return corev1.PodQOSGuaranteed
}

// isPodLevelResourcesSet reports whether pod-level spec.resources request or
// limit cpu, memory or hugepages (other names there are ignored by
// Kubernetes).
func isPodLevelResourcesSet(pod *corev1.Pod) bool {
	r := pod.Spec.Resources
	if r == nil {
		return false
	}
	return hasPodLevelName(r.Requests) || hasPodLevelName(r.Limits)
}

func hasPodLevelName(rl corev1.ResourceList) bool {
	for name := range rl {
		if isPodLevelResource(name) {
			return true
		}
	}
	return false
}

// isBestEffort reports whether pod is in the BestEffort class.
func isBestEffort(pod *corev1.Pod, opts PodOptions) bool {
	return qosClass(pod, opts) == corev1.PodQOSBestEffort
}
