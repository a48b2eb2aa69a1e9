package evaluator

import (
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
)

// The GroupVersionResources of the resources the library knows, as
// informers, fakes, RBAC rules and the in-memory API of cache/cachetest
// name them, so that callers need not spell them. They are values to
// read: the library keeps its own, and assigning to these changes nothing
// in it. [Resources] gives the evaluated ones with their prototypes.
var (
	Pods                   = corev1.SchemeGroupVersion.WithResource("pods")
	Services               = corev1.SchemeGroupVersion.WithResource("services")
	PersistentVolumeClaims = corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")
	ConfigMaps             = corev1.SchemeGroupVersion.WithResource("configmaps")
	Secrets                = corev1.SchemeGroupVersion.WithResource("secrets")
	ReplicationControllers = corev1.SchemeGroupVersion.WithResource("replicationcontrollers")
	ResourceQuotas         = corev1.SchemeGroupVersion.WithResource("resourcequotas")
	Namespaces             = corev1.SchemeGroupVersion.WithResource("namespaces")
	ResourceClaims         = resourcev1.SchemeGroupVersion.WithResource("resourceclaims")
	DeviceClasses          = resourcev1.SchemeGroupVersion.WithResource("deviceclasses")
)
