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
// client-go clientset or dynamic client satisfies it with a short adapter
// (examples/kube has one).
type Client interface {
	// ListerWatcher returns a ListerWatcher of the resource gvr in
	// namespace, or in every namespace when namespace is "". The
	// controller asks for Options.Namespace, every namespace by default.
	ListerWatcher(gvr schema.GroupVersionResource, namespace string) cache.ListerWatcher
	// UpdateStatus writes the status of obj, an object of resource gvr,
	// through the status subresource, with obj's resourceVersion as a
	// precondition, and returns the object as stored. The controller calls
	// it with resourcequotas and a *corev1.ResourceQuota; a conflict is
	// retried later, after the informer has seen the newer object.
	UpdateStatus(ctx context.Context, gvr schema.GroupVersionResource, obj runtime.Object) (runtime.Object, error)
}
