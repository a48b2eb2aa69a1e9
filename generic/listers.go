package generic

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ListFuncByNamespace lists the objects of one resource in namespace. It is
// the only thing an evaluator needs from a cache, so that this package does
// not depend on one: an informer's indexer or lister adapts to it in one
// line, for example
//
//	func(ns string) ([]runtime.Object, error) { return lister.ByNamespace(ns).List(labels.Everything()) }
//
// Implementations must be safe for concurrent use and must return objects
// that the caller will not modify.
type ListFuncByNamespace func(namespace string) ([]runtime.Object, error)

// ListerForResourceFunc returns the [ListFuncByNamespace] of one resource. A
// controller implements it over its shared informers; evaluator constructors
// call it once per resource they cover. It may return an error when it does
// not serve gvr.
type ListerForResourceFunc func(gvr schema.GroupVersionResource) (ListFuncByNamespace, error)
