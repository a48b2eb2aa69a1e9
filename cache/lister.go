package cache

import (
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// AppendFunc receives each object a list helper selects.
type AppendFunc func(obj any)

// ListAll calls appendFn for every object of store whose labels match
// selector. A nil selector matches everything. appendFn runs without any
// store lock held. An object without metadata is an error (when the
// selector needs labels).
func ListAll(store Store, selector labels.Selector, appendFn AppendFunc) error {
	if store == nil || appendFn == nil {
		return errors.New("cache: ListAll: nil store or append function")
	}
	return selectEach(store.List(), "", selector, func(obj any) error {
		appendFn(obj)
		return nil
	})
}

// ListAllByNamespace calls appendFn for every object of indexer in namespace
// whose labels match selector. [metav1.NamespaceAll] means every namespace.
// It uses the [NamespaceIndex] and falls back to a filtered scan when the
// indexer has none.
func ListAllByNamespace(indexer Indexer, namespace string, selector labels.Selector, appendFn AppendFunc) error {
	if indexer == nil || appendFn == nil {
		return errors.New("cache: ListAllByNamespace: nil indexer or append function")
	}
	if namespace == metav1.NamespaceAll {
		return ListAll(indexer, selector, appendFn)
	}
	emit := func(obj any) error {
		appendFn(obj)
		return nil
	}
	items, err := indexer.ByIndex(NamespaceIndex, namespace)
	if err != nil {
		return selectEach(indexer.List(), namespace, selector, emit)
	}
	return selectEach(items, "", selector, emit)
}

// selectEach calls fn for each object in namespace (any when "") whose labels
// match selector, stopping at fn's first error.
func selectEach(items []any, namespace string, selector labels.Selector, fn func(obj any) error) error {
	everything := selector == nil || selector.Empty()
	if !everything && labels.Nothing() == selector {
		return nil
	}
	for _, obj := range items {
		if ok, err := selected(obj, namespace, everything, selector); err != nil {
			return err
		} else if !ok {
			continue
		}
		if err := fn(obj); err != nil {
			return err
		}
	}
	return nil
}

// selected reports whether obj is in namespace (any when "") and matches
// selector.
func selected(obj any, namespace string, everything bool, selector labels.Selector) (bool, error) {
	if everything && namespace == "" {
		return true, nil
	}
	m, err := metaOf(obj)
	if err != nil {
		return false, err
	}
	if namespace != "" && m.GetNamespace() != namespace {
		return false, nil
	}
	return everything || selector.Matches(labels.Set(m.GetLabels())), nil
}

// Lister reads objects of one resource, as values of type T, from
// an [Indexer] that has the [NamespaceIndex]: the typed view of an
// informer's cache. (Upstream calls it listers.ResourceIndexer; the name
// Lister is taken by the list half of [ListerWatcher].) The zero value is
// not usable; see [NewLister].
//
// Objects returned are shared with the cache and must not be mutated. An
// object in the indexer that is not a T is reported as an error, never a
// panic. A Lister is safe for concurrent use.
type Lister[T runtime.Object] struct {
	indexer  Indexer
	resource schema.GroupResource
}

// NewLister returns a Lister over indexer. resource names
// the resource in NotFound errors.
func NewLister[T runtime.Object](indexer Indexer, resource schema.GroupResource) Lister[T] {
	return Lister[T]{indexer: indexer, resource: resource}
}

// GenericLister is a [Lister] of untyped API objects, for code that handles
// resources chosen at run time.
type GenericLister = Lister[runtime.Object]

// GenericNamespaceLister is a [NamespaceLister] of untyped API objects.
type GenericNamespaceLister = NamespaceLister[runtime.Object]

// NewGenericLister returns a [GenericLister] over indexer.
func NewGenericLister(indexer Indexer, resource schema.GroupResource) GenericLister {
	return NewLister[runtime.Object](indexer, resource)
}

// List returns the objects, in every namespace, whose labels match
// selector. A nil selector matches everything.
func (l Lister[T]) List(selector labels.Selector) ([]T, error) {
	return listTyped[T](l.indexer, "", selector, l.resource)
}

// Get returns the cluster-scoped object called name, or an
// apierrors.NewNotFound error.
func (l Lister[T]) Get(name string) (T, error) {
	return getTyped[T](l.indexer, name, name, l.resource)
}

// ByNamespace returns a lister of the objects in namespace.
func (l Lister[T]) ByNamespace(namespace string) NamespaceLister[T] {
	return NamespaceLister[T]{indexer: l.indexer, resource: l.resource, namespace: namespace}
}

// NamespaceLister reads the objects of one namespace; see [Lister].
type NamespaceLister[T runtime.Object] struct {
	indexer   Indexer
	resource  schema.GroupResource
	namespace string
}

// List returns the objects of the namespace whose labels match selector. A
// nil selector matches everything.
func (l NamespaceLister[T]) List(selector labels.Selector) ([]T, error) {
	return listTyped[T](l.indexer, l.namespace, selector, l.resource)
}

// Get returns the object called name in the namespace, or an
// apierrors.NewNotFound error.
func (l NamespaceLister[T]) Get(name string) (T, error) {
	return getTyped[T](l.indexer, joinKey(l.namespace, name), name, l.resource)
}

func getTyped[T runtime.Object](indexer Indexer, key, name string, resource schema.GroupResource) (T, error) {
	var zero T
	if indexer == nil {
		return zero, fmt.Errorf("cache: lister for %s has no indexer", resource)
	}
	obj, exists, err := indexer.GetByKey(key)
	if err != nil {
		return zero, err
	}
	if !exists {
		return zero, apierrors.NewNotFound(resource, name)
	}
	t, ok := obj.(T)
	if !ok {
		return zero, wrongType[T](resource, obj)
	}
	return t, nil
}

func wrongType[T any](resource schema.GroupResource, obj any) error {
	var zero T
	return fmt.Errorf("cache: lister for %s: object of type %T is not a %T", resource, obj, zero)
}

// indexRanger is implemented by this package's indexers: it visits the
// objects under one indexed value without building a slice.
type indexRanger interface {
	rangeIndex(indexName, indexedValue string, fn func(obj any)) bool
}

func (c *KeyedStore) rangeIndex(indexName, indexedValue string, fn func(obj any)) bool {
	return c.ts.rangeIndex(indexName, indexedValue, fn)
}

func listTyped[T runtime.Object](indexer Indexer, namespace string, selector labels.Selector, resource schema.GroupResource) ([]T, error) {
	if indexer == nil {
		return nil, fmt.Errorf("cache: lister for %s has no indexer", resource)
	}
	everything := selector == nil || selector.Empty()
	if !everything && labels.Nothing() == selector {
		return nil, nil
	}
	var out []T
	var firstErr error
	collect := func(obj any) error {
		t, ok := obj.(T)
		if !ok {
			return wrongType[T](resource, obj)
		}
		out = append(out, t)
		return nil
	}
	if namespace != "" {
		if r, ok := indexer.(indexRanger); ok {
			// The callback only reads the object and appends; it runs
			// under the indexer's read lock, which is why no user code is
			// involved here.
			found := r.rangeIndex(NamespaceIndex, namespace, func(obj any) {
				if firstErr != nil {
					return
				}
				if ok, err := selected(obj, "", everything, selector); err != nil {
					firstErr = err
				} else if ok {
					firstErr = collect(obj)
				}
			})
			if found {
				if firstErr != nil {
					return nil, firstErr
				}
				return out, nil
			}
		}
		items, err := indexer.ByIndex(NamespaceIndex, namespace)
		if err != nil {
			items = indexer.List()
		} else {
			namespace = ""
		}
		if err := selectEach(items, namespace, selector, collect); err != nil {
			return nil, err
		}
		return out, nil
	}
	if err := selectEach(indexer.List(), "", selector, collect); err != nil {
		return nil, err
	}
	return out, nil
}
