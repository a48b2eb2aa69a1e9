package cachetest

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/quotakit/quotakit/cache"
)

// ListerWatcher returns a [cache.ListerWatcher] for resource gvr in
// namespace ("" for all namespaces), which is what a Reflector or an
// informer needs. Its calls go through [Server.List] and [Server.Watch], so
// they are recorded and subject to injected faults. A GVR that is not
// registered yields 404 NotFound errors from both methods.
func (s *Server) ListerWatcher(gvr schema.GroupVersionResource, namespace string) cache.ListerWatcher {
	return &cache.ListWatch{
		ListFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return s.List(ctx, gvr, namespace, opts)
		},
		WatchFunc: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return s.Watch(ctx, gvr, namespace, opts)
		},
	}
}
