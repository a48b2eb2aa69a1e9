package cache

import (
	"errors"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// This file holds what a Reflector accepts from the API: every listed or
// watched object is transformed, then checked against the expected type,
// before anything is written to the store.

// ErrUnexpectedType is wrapped by the error of a list or watch that
// delivered an object which, after the transform, is not of the type its
// [Reflector] or [SharedIndexInformer] was built for, or has no object
// metadata. Watch error handlers can tell it apart with errors.Is.
var ErrUnexpectedType = errors.New("cache: object of an unexpected type")

// prepareList transforms and checks every listed object in place. It stops
// at the first object it cannot accept: a list is applied whole or not at
// all.
func (r *Reflector) prepareList(items []any) error {
	for i, obj := range items {
		out, err := r.prepare(obj)
		if err != nil {
			return err
		}
		items[i] = out
	}
	return nil
}

// prepareEvent returns the object of a watch event as it is to be stored,
// and its resourceVersion. Bookmarks carry only a resourceVersion: they are
// neither transformed nor type-checked (a transform that converts types
// would otherwise reject every bookmark), only read.
func (r *Reflector) prepareEvent(ev watch.Event) (any, string, error) {
	switch ev.Type {
	case watch.Added, watch.Modified, watch.Deleted:
	case watch.Bookmark:
		m, err := meta.Accessor(ev.Object)
		if err != nil {
			return nil, "", fmt.Errorf("%w: bookmark of type %T without metadata", ErrUnexpectedType, ev.Object)
		}
		return ev.Object, m.GetResourceVersion(), nil
	default:
		return nil, "", fmt.Errorf("cache: watch event of unknown type %q", ev.Type)
	}
	obj, err := r.prepare(ev.Object)
	if err != nil {
		return nil, "", fmt.Errorf("%s event: %w", ev.Type, err)
	}
	m, _ := metaOf(obj) // prepare checked it has metadata
	return obj, m.GetResourceVersion(), nil
}

// prepare transforms obj and checks that the result is of the expected
// type and has metadata.
func (r *Reflector) prepare(obj any) (any, error) {
	out := obj
	if r.opts.Transform != nil {
		var err error
		if out, err = callTransform(r.opts.Transform, obj); err != nil {
			return nil, fmt.Errorf("transform of %s: %w", describeObject(obj), err)
		}
	}
	if err := r.checkType(out); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrUnexpectedType, describeObject(obj), err)
	}
	return out, nil
}

// callTransform runs a user transform and turns a panic into an error.
func callTransform(f TransformFunc, obj any) (out any, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("transform panicked: %v", p)
		}
	}()
	return f(obj)
}

// checkType returns an error when obj is not of the expected type (and,
// for an expected *unstructured.Unstructured with a kind, of the expected
// apiVersion and kind), or has no metadata.
func (r *Reflector) checkType(obj any) error {
	if r.expectedType != nil {
		if t := reflect.TypeOf(obj); t != r.expectedType {
			return fmt.Errorf("got %v, want %v", typeName(t), r.expectedType)
		}
	}
	if !r.expectedGVK.Empty() {
		if o, ok := obj.(runtime.Object); ok {
			if gvk := o.GetObjectKind().GroupVersionKind(); gvk != r.expectedGVK {
				return fmt.Errorf("got %s, want %s", gvk, r.expectedGVK)
			}
		}
	}
	if _, err := metaOf(obj); err != nil {
		return err
	}
	return nil
}

// typeName names t for an error message, including nil.
func typeName(t reflect.Type) string {
	if t == nil {
		return "nil"
	}
	return t.String()
}

// describeObject names obj for an error message: its key when it has
// metadata, else its type.
func describeObject(obj any) string {
	if m, err := metaOf(obj); err == nil {
		return fmt.Sprintf("object %q", joinKey(m.GetNamespace(), m.GetName()))
	}
	return fmt.Sprintf("object of type %T", obj)
}
