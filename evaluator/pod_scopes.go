package evaluator

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/quotakit/quotakit/generic"
)

// IsTerminating reports whether pod is in the Terminating quota scope: it
// has spec.activeDeadlineSeconds ≥ 0, so it will end on its own. A nil pod
// is not terminating.
func IsTerminating(pod *corev1.Pod) bool {
	return pod != nil && pod.Spec.ActiveDeadlineSeconds != nil && *pod.Spec.ActiveDeadlineSeconds >= 0
}

// podScope is a scope requirement prepared once so that matching it against
// many pods costs no allocation.
type podScope struct {
	req corev1.ScopedResourceSelectorRequirement
	// err is why a PriorityClass requirement cannot be evaluated (an
	// unknown operator, or values that are no label values); it does not
	// depend on the pod.
	err error
}

// compilePodScope prepares req.
//
// Only PriorityClass reads the operator: for the other scopes Kubernetes
// ignores it (API validation allows only Exists there), and so does this.
// For PriorityClass, Exists needs no selector, and In, NotIn and
// DoesNotExist are label requirements over the single label
// PriorityClass=<name>, absent when the pod has no class, so NotIn and
// DoesNotExist match such a pod.
func compilePodScope(req corev1.ScopedResourceSelectorRequirement) podScope {
	s := podScope{req: req}
	if req.ScopeName != corev1.ResourceQuotaScopePriorityClass || req.Operator == corev1.ScopeSelectorOpExists {
		return s
	}
	// Validation is the one Kubernetes applies: the requirement as a label
	// selector over the scope name. Matching, below, does the same without
	// a label map.
	if _, err := generic.ScopeLabelSelector(req); err != nil {
		s.err = fmt.Errorf("evaluator: scope %s: %w", req.ScopeName, err)
	}
	return s
}

// matches reports whether pod is in the scope.
func (s *podScope) matches(pod *corev1.Pod, opts PodOptions) (bool, error) {
	if s.err != nil {
		return false, s.err
	}
	switch s.req.ScopeName {
	case corev1.ResourceQuotaScopeTerminating:
		return IsTerminating(pod), nil
	case corev1.ResourceQuotaScopeNotTerminating:
		return !IsTerminating(pod), nil
	case corev1.ResourceQuotaScopeBestEffort:
		return isBestEffort(pod, opts), nil
	case corev1.ResourceQuotaScopeNotBestEffort:
		return !isBestEffort(pod, opts), nil
	case corev1.ResourceQuotaScopePriorityClass:
		class := pod.Spec.PriorityClassName
		switch s.req.Operator {
		case corev1.ScopeSelectorOpExists:
			return class != "", nil
		case corev1.ScopeSelectorOpIn:
			return class != "" && slices.Contains(s.req.Values, class), nil
		case corev1.ScopeSelectorOpNotIn:
			return class == "" || !slices.Contains(s.req.Values, class), nil
		default: // DoesNotExist; compilePodScope rejected the rest.
			return class == "", nil
		}
	case corev1.ResourceQuotaScopeCrossNamespacePodAffinity:
		return usesCrossNamespacePodAffinity(pod), nil
	}
	// VolumeAttributesClass and unknown scopes never match a pod.
	return false, nil
}

// usesCrossNamespacePodAffinity reports whether any pod affinity or
// anti-affinity term, required or preferred, names namespaces or has a
// namespace selector.
func usesCrossNamespacePodAffinity(pod *corev1.Pod) bool {
	a := pod.Spec.Affinity
	if a == nil {
		return false
	}
	if pa := a.PodAffinity; pa != nil {
		if crossNamespaceTerms(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution) {
			return true
		}
	}
	if pa := a.PodAntiAffinity; pa != nil {
		if crossNamespaceTerms(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution) {
			return true
		}
	}
	return false
}

func crossNamespaceTerms(required []corev1.PodAffinityTerm, preferred []corev1.WeightedPodAffinityTerm) bool {
	for i := range required {
		if crossNamespaceTerm(&required[i]) {
			return true
		}
	}
	for i := range preferred {
		if crossNamespaceTerm(&preferred[i].PodAffinityTerm) {
			return true
		}
	}
	return false
}

func crossNamespaceTerm(t *corev1.PodAffinityTerm) bool {
	return len(t.Namespaces) != 0 || t.NamespaceSelector != nil
}

// podScopes is the compiled form of every requirement a quota puts on pods.
type podScopes []podScope

func compilePodScopes(reqs []corev1.ScopedResourceSelectorRequirement) podScopes {
	s := make(podScopes, len(reqs))
	for i := range reqs {
		s[i] = compilePodScope(reqs[i])
	}
	return s
}

// matches reports whether pod matches every requirement. Like Kubernetes it
// evaluates all of them, so an invalid requirement is reported even after
// one that does not match.
func (s podScopes) matches(pod *corev1.Pod, opts PodOptions) (bool, error) {
	all := true
	for i := range s {
		ok, err := s[i].matches(pod, opts)
		if err != nil {
			return false, err
		}
		all = all && ok
	}
	return all, nil
}
