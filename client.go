package quotakit

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit/cache"
)

// Client is everything a [Controller] needs of an API server: a way to
// list and watch each resource it counts, and a way to write a
// ResourceQuota's status. A *cachetest.Server satisfies it as it is; a
// client-go clientset, metadata client or dynamic client satisfies it with
// a short adapter. A Client may also implement [Discoverer], and then the
// controller counts any resource the server serves that a quota names.
//
// What the ListerWatchers may return, per resource:
//
//   - A resource whose evaluator reads whole objects (pods, services,
//     persistentvolumeclaims, resourceclaims, a [Resource] with an
//     Evaluator and an Object): objects of the typed form
//     ([evaluator.Resource].Object, such as *corev1.Pod), or
//     *unstructured.Unstructured holding that kind, which the controller
//     converts to the typed form once, as the informer stores it.
//   - A resource that is only counted (configmaps, secrets,
//     replicationcontrollers, resourcequotas as a counted resource,
//     discovered resources, a [Resource] without an Evaluator): any object
//     with object metadata — typed, unstructured or
//     *metav1.PartialObjectMetadata, as a metadata-only client returns.
//   - ResourceQuotas, which the controller keeps the status of:
//     *corev1.ResourceQuota or unstructured ResourceQuotas.
//
// Lists hold the matching list types (a *corev1.PodList, an
// *unstructured.UnstructuredList, a *metav1.PartialObjectMetadataList) and
// watch events the matching objects. An object of any other type, or one
// that does not convert, is an error, never dropped in silence: that
// resource's informer fails its list (or ends its watch), reports the error
// to the log at error level, retries with backoff, and does not count as
// synced; the quotas that charge the resource keep their last used values
// until it does.
type Client interface {
	// ListerWatcher returns a ListerWatcher of the resource gvr in
	// namespace, or in every namespace when namespace is "" (always "" for
	// a cluster-scoped resource). The controller asks for
	// Options.Namespace, every namespace by default.
	ListerWatcher(gvr schema.GroupVersionResource, namespace string) cache.ListerWatcher
	// UpdateStatus writes the status of obj, an object of resource gvr,
	// through the status subresource, with obj's resourceVersion as a
	// precondition, and returns the object as stored. The controller calls
	// it with resourcequotas and a *corev1.ResourceQuota; a conflict is
	// retried later, after the informer has seen the newer object.
	UpdateStatus(ctx context.Context, gvr schema.GroupVersionResource, obj runtime.Object) (runtime.Object, error)
}

// Discoverer is implemented by a [Client] that can tell which resources
// the API server serves, as a discovery client does.
type Discoverer interface {
	// NamespacedResources returns the namespaced resources the server
	// serves, one version of each (the preferred one), that support the
	// verbs create, list, watch and delete, as kube-controller-manager
	// selects them for quota. A partial result may come with an error (a
	// group whose discovery failed); the controller uses what it got and
	// logs the error.
	NamespacedResources(ctx context.Context) ([]schema.GroupVersionResource, error)
}
