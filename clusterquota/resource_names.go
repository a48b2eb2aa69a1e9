package clusterquota

// The names of the resources a quota may limit, as kube-apiserver's
// validation of a ResourceQuota tells them apart.

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// isStandardQuotaResource reports whether name is a resource without a
// "/" that a ResourceQuota may limit.
func isStandardQuotaResource(name corev1.ResourceName) bool {
	switch name {
	case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage,
		corev1.ResourceRequestsCPU, corev1.ResourceRequestsMemory,
		corev1.ResourceRequestsStorage, corev1.ResourceRequestsEphemeralStorage,
		corev1.ResourceLimitsCPU, corev1.ResourceLimitsMemory, corev1.ResourceLimitsEphemeralStorage,
		corev1.ResourcePods, corev1.ResourceQuotas, corev1.ResourceServices,
		corev1.ResourceReplicationControllers, corev1.ResourceSecrets,
		corev1.ResourcePersistentVolumeClaims, corev1.ResourceConfigMaps,
		corev1.ResourceServicesNodePorts, corev1.ResourceServicesLoadBalancers:
		return true
	}
	return isHugePages(name)
}

// isStandardResource reports whether name is a resource without a "/"
// that Kubernetes knows at all: the quota resources and "storage".
func isStandardResource(name corev1.ResourceName) bool {
	return name == corev1.ResourceStorage || isStandardQuotaResource(name)
}

// isHugePages reports whether name is a huge-pages resource, as a request
// or bare.
func isHugePages(name corev1.ResourceName) bool {
	return strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) ||
		strings.HasPrefix(string(name), corev1.ResourceRequestsHugePagesPrefix)
}

// isIntegerResource reports whether quantities of name must be whole: the
// object counts of a ResourceQuota and extended resources.
func isIntegerResource(name corev1.ResourceName) bool {
	switch name {
	case corev1.ResourcePods, corev1.ResourceQuotas, corev1.ResourceServices,
		corev1.ResourceReplicationControllers, corev1.ResourceSecrets,
		corev1.ResourceConfigMaps, corev1.ResourcePersistentVolumeClaims,
		corev1.ResourceServicesNodePorts, corev1.ResourceServicesLoadBalancers:
		return true
	}
	return isExtendedResource(name)
}

// isExtendedResource reports whether name is an extended resource: outside
// kubernetes.io, without the "requests." prefix, and still a qualified
// name with that prefix added (as a quota names it).
func isExtendedResource(name corev1.ResourceName) bool {
	s := string(name)
	native := !strings.Contains(s, "/") || strings.Contains(s, corev1.ResourceDefaultNamespacePrefix)
	if native || strings.HasPrefix(s, corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix+s)) == 0
}
