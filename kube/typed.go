package kube

import (
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/quotakit/quotakit/cache"
)

// typedListerWatchers are client-go's typed clients of the resources the
// controller may want whole, by resource. Which resources are wanted whole
// comes from [evaluator.Resources], not from here: a table row missing
// here is served through the dynamic client and converted by the
// controller, and a test fails so that it gets a typed client.
// Typed objects decode from protobuf, with no unstructured maps in
// between.
var typedListerWatchers = map[schema.GroupVersionResource]func(cs kubernetes.Interface, namespace string) cache.ListerWatcher{
	corev1.SchemeGroupVersion.WithResource("pods"): func(cs kubernetes.Interface, ns string) cache.ListerWatcher {
		return adapt(corev1.SchemeGroupVersion.WithResource("pods"), cs.CoreV1().Pods(ns))
	},
	corev1.SchemeGroupVersion.WithResource("services"): func(cs kubernetes.Interface, ns string) cache.ListerWatcher {
		return adapt(corev1.SchemeGroupVersion.WithResource("services"), cs.CoreV1().Services(ns))
	},
	corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims"): func(cs kubernetes.Interface, ns string) cache.ListerWatcher {
		return adapt(corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims"), cs.CoreV1().PersistentVolumeClaims(ns))
	},
	corev1.SchemeGroupVersion.WithResource("resourcequotas"): func(cs kubernetes.Interface, ns string) cache.ListerWatcher {
		return adapt(corev1.SchemeGroupVersion.WithResource("resourcequotas"), cs.CoreV1().ResourceQuotas(ns))
	},
	corev1.SchemeGroupVersion.WithResource("configmaps"): func(cs kubernetes.Interface, ns string) cache.ListerWatcher {
		return adapt(corev1.SchemeGroupVersion.WithResource("configmaps"), cs.CoreV1().ConfigMaps(ns))
	},
	corev1.SchemeGroupVersion.WithResource("secrets"): func(cs kubernetes.Interface, ns string) cache.ListerWatcher {
		return adapt(corev1.SchemeGroupVersion.WithResource("secrets"), cs.CoreV1().Secrets(ns))
	},
	corev1.SchemeGroupVersion.WithResource("replicationcontrollers"): func(cs kubernetes.Interface, ns string) cache.ListerWatcher {
		return adapt(corev1.SchemeGroupVersion.WithResource("replicationcontrollers"), cs.CoreV1().ReplicationControllers(ns))
	},
	resourcev1.SchemeGroupVersion.WithResource("resourceclaims"): func(cs kubernetes.Interface, ns string) cache.ListerWatcher {
		return adapt(resourcev1.SchemeGroupVersion.WithResource("resourceclaims"), cs.ResourceV1().ResourceClaims(ns))
	},
	// Device classes are cluster-scoped: the namespace is ignored.
	resourcev1.SchemeGroupVersion.WithResource("deviceclasses"): func(cs kubernetes.Interface, _ string) cache.ListerWatcher {
		return adapt(resourcev1.SchemeGroupVersion.WithResource("deviceclasses"), cs.ResourceV1().DeviceClasses())
	},
}
