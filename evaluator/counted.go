package evaluator

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// countedResource is a core resource whose only quota is its object count,
// charged under count/<resource> and under the name quota used for it
// before count/ names existed.
type countedResource struct {
	gvr   schema.GroupVersionResource
	alias corev1.ResourceName
}

// countedResources returns the resources Kubernetes counts with the generic
// object-count evaluator and a legacy alias, in a fixed order: configmaps,
// replicationcontrollers, resourcequotas, secrets.
func countedResources() []countedResource {
	v1 := corev1.SchemeGroupVersion
	return []countedResource{
		{v1.WithResource("configmaps"), corev1.ResourceConfigMaps},
		{v1.WithResource("replicationcontrollers"), corev1.ResourceReplicationControllers},
		{v1.WithResource("resourcequotas"), corev1.ResourceQuotas},
		{v1.WithResource("secrets"), corev1.ResourceSecrets},
	}
}
