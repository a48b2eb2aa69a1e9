package cache

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KeyFunc returns the storage key of an object. Keys must be unique within
// one store and stable for the lifetime of the object.
type KeyFunc func(obj any) (string, error)

// ExplicitKey is an object that is its own key: [MetaNamespaceKeyFunc] returns
// it unchanged. Use it to address a store entry whose object you do not have.
type ExplicitKey string

// DeletedFinalStateUnknown is the tombstone placed in a [Deleted] delta when
// a deletion was not observed directly but inferred by a relist: the object
// was known before the relist and is absent from its result. Obj is the last
// state the pipeline knew, which may be stale, and is nil when that state
// could not be found. Key is the object's storage key.
//
// Handlers receiving a deletion must be prepared for either the object itself
// or a DeletedFinalStateUnknown wrapping it.
type DeletedFinalStateUnknown struct {
	// Key is the deleted object's storage key.
	Key string
	// Obj is the object's last known state, which may be stale or nil.
	Obj any
}

// KeyError reports that the key of Obj could not be computed. It unwraps to
// the underlying error, so errors.Is and errors.As see through it.
type KeyError struct {
	// Obj is the object whose key was asked for.
	Obj any
	// Err is why its key could not be computed.
	Err error
}

// Error implements error.
func (e KeyError) Error() string {
	return fmt.Sprintf("cache: couldn't create key for object of type %T: %v", e.Obj, e.Err)
}

// Unwrap returns the underlying error.
func (e KeyError) Unwrap() error { return e.Err }

// ErrNoMeta is returned (wrapped) by key and index functions for objects that
// carry no Kubernetes object metadata.
var ErrNoMeta = errors.New("cache: object has no meta")

// MetaNamespaceKeyFunc returns "namespace/name" for namespaced objects and
// "name" for cluster-scoped ones, the key every informer store uses. An
// [ExplicitKey] is returned as is. Objects without metadata yield an error
// wrapping [ErrNoMeta].
func MetaNamespaceKeyFunc(obj any) (string, error) {
	if key, ok := obj.(ExplicitKey); ok {
		return string(key), nil
	}
	m, err := metaOf(obj)
	if err != nil {
		return "", err
	}
	return joinKey(m.GetNamespace(), m.GetName()), nil
}

// DeletionHandlingMetaNamespaceKeyFunc is [MetaNamespaceKeyFunc] that also
// accepts a [DeletedFinalStateUnknown] (or a pointer to one) and returns the
// key it carries. Stores that receive deletions from a [DeltaFIFO] must use
// it.
func DeletionHandlingMetaNamespaceKeyFunc(obj any) (string, error) {
	switch d := obj.(type) {
	case DeletedFinalStateUnknown:
		return d.Key, nil
	case *DeletedFinalStateUnknown:
		if d != nil {
			return d.Key, nil
		}
	}
	return MetaNamespaceKeyFunc(obj)
}

// SplitMetaNamespaceKey splits a key made by [MetaNamespaceKeyFunc] into its
// namespace and name. A key without "/" is a cluster-scoped name; a key with
// more than one "/" is an error.
func SplitMetaNamespaceKey(key string) (namespace, name string, err error) {
	ns, name, found := strings.Cut(key, "/")
	if !found {
		return "", key, nil
	}
	if strings.Contains(name, "/") {
		return "", "", fmt.Errorf("cache: unexpected key format: %q", key)
	}
	return ns, name, nil
}

// joinKey builds the storage key of a namespace and name.
func joinKey(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// metaOf returns the object metadata of obj. Typed API objects take the fast
// path of a single interface assertion; everything else goes through
// meta.Accessor. Nil objects, including typed nil pointers, are errors rather
// than panics.
func metaOf(obj any) (metav1.Object, error) {
	if obj == nil {
		return nil, fmt.Errorf("%w: object is nil", ErrNoMeta)
	}
	if m, ok := obj.(metav1.Object); ok {
		if v := reflect.ValueOf(obj); v.Kind() == reflect.Pointer && v.IsNil() {
			return nil, fmt.Errorf("%w: nil %T", ErrNoMeta, obj)
		}
		return m, nil
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoMeta, err)
	}
	return m, nil
}

// resourceVersionOf returns the resourceVersion of obj, and false when obj
// has no metadata (tombstones, explicit keys).
func resourceVersionOf(obj any) (string, bool) {
	switch obj.(type) {
	case DeletedFinalStateUnknown, *DeletedFinalStateUnknown, ExplicitKey, nil:
		return "", false
	}
	m, err := metaOf(obj)
	if err != nil {
		return "", false
	}
	return m.GetResourceVersion(), true
}

var errNoKeyFunc = errors.New("no key function")
