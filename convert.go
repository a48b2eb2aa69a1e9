package quotakit

import (
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit/cache"
)

// storedForm is what an informer of the controller stores: the example
// object it is built with and the transform that makes every listed or
// watched object into that form.
type storedForm struct {
	example   runtime.Object
	transform cache.TransformFunc
}

// typedForm stores objects of typ's type: objects of that type as they
// are, *unstructured.Unstructured objects converted to it. Anything else,
// and an unstructured object that does not convert, is an error, which
// fails the list or watch that delivered it (see [cache.SharedIndexInformer]).
//
// trim, when not nil, then keeps only what the evaluators read (see
// [github.com/quotakit/quotakit/evaluator.Resource.Trim]).
func typedForm(gvr schema.GroupVersionResource, typ runtime.Object, trim func(runtime.Object) runtime.Object) storedForm {
	want := reflect.TypeOf(typ)
	return storedForm{example: typ, transform: func(obj any) (any, error) {
		var out runtime.Object
		switch o := obj.(type) {
		case cache.DeletedFinalStateUnknown:
			return obj, nil
		case *unstructured.Unstructured:
			out = reflect.New(want.Elem()).Interface().(runtime.Object)
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.UnstructuredContent(), out); err != nil {
				return nil, fmt.Errorf("quotakit: %s: converting %s %s/%s to %T: %w", gvr.GroupResource(), o.GetKind(), o.GetNamespace(), o.GetName(), typ, err)
			}
		default:
			if reflect.TypeOf(obj) != want {
				return nil, fmt.Errorf("quotakit: %s: got an object of type %T, want %T or *unstructured.Unstructured", gvr.GroupResource(), obj, typ)
			}
			out = obj.(runtime.Object)
		}
		if trim != nil {
			return trim(out), nil
		}
		dropManagedFields(out)
		return out, nil
	}}
}

// anyForm stores objects of any type that has object metadata, as they
// are, for an evaluator that reads any type.
func anyForm(gvr schema.GroupVersionResource) storedForm {
	return storedForm{transform: func(obj any) (any, error) {
		if _, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			return obj, nil
		}
		if _, err := meta.Accessor(obj); err != nil {
			return nil, fmt.Errorf("quotakit: %s: got an object of type %T without metadata", gvr.GroupResource(), obj)
		}
		dropManagedFields(obj)
		return obj, nil
	}}
}

// metadataForm stores only the metadata of objects of any type, as a
// *metav1.PartialObjectMetadata, for a resource that is only counted.
func metadataForm(gvr schema.GroupVersionResource) storedForm {
	return storedForm{example: &metav1.PartialObjectMetadata{}, transform: func(obj any) (any, error) {
		switch o := obj.(type) {
		case cache.DeletedFinalStateUnknown:
			return obj, nil
		case *metav1.PartialObjectMetadata:
			dropManagedFields(o)
			return o, nil
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			return nil, fmt.Errorf("quotakit: %s: got an object of type %T without metadata", gvr.GroupResource(), obj)
		}
		out := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
			Name:              m.GetName(),
			Namespace:         m.GetNamespace(),
			UID:               m.GetUID(),
			ResourceVersion:   m.GetResourceVersion(),
			Generation:        m.GetGeneration(),
			CreationTimestamp: m.GetCreationTimestamp(),
			DeletionTimestamp: m.GetDeletionTimestamp(),
			Labels:            m.GetLabels(),
			Annotations:       m.GetAnnotations(),
			OwnerReferences:   m.GetOwnerReferences(),
			Finalizers:        m.GetFinalizers(),
		}}
		if ro, ok := obj.(runtime.Object); ok {
			gvk := ro.GetObjectKind().GroupVersionKind()
			out.APIVersion, out.Kind = gvk.GroupVersion().String(), gvk.Kind
		}
		if out.DeletionTimestamp != nil {
			out.DeletionGracePeriodSeconds = m.GetDeletionGracePeriodSeconds()
		}
		return out, nil
	}}
}

// dropManagedFields removes metadata.managedFields, as kube-controller-manager
// does: quota never reads them, and they are often the larger part of an
// object.
func dropManagedFields(obj any) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
}
