package cache

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// ListerWatcher is what a [Reflector] needs from an API: list a resource and
// watch it from a resourceVersion. A client-go clientset, a dynamic client
// and [github.com/quotakit/quotakit/cache/cachetest] all satisfy it through
// a few lines of adapter (see [ListWatch]).
type ListerWatcher interface {
	// List lists the objects of the resource. The returned object is a
	// list type (for example *corev1.PodList, or
	// *unstructured.UnstructuredList) whose ListMeta carries the
	// resourceVersion of the list and, when paged, the continue token.
	List(ctx context.Context, options metav1.ListOptions) (runtime.Object, error)
	// Watch opens a watch on the resource.
	Watch(ctx context.Context, options metav1.ListOptions) (watch.Interface, error)
}

// ListWatch adapts two functions to [ListerWatcher].
type ListWatch struct {
	// ListFunc lists the resource.
	ListFunc func(ctx context.Context, options metav1.ListOptions) (runtime.Object, error)
	// WatchFunc watches the resource.
	WatchFunc func(ctx context.Context, options metav1.ListOptions) (watch.Interface, error)
}

var _ ListerWatcher = (*ListWatch)(nil)

// List calls lw.ListFunc.
func (lw *ListWatch) List(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
	return lw.ListFunc(ctx, options)
}

// Watch calls lw.WatchFunc.
func (lw *ListWatch) Watch(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
	return lw.WatchFunc(ctx, options)
}
