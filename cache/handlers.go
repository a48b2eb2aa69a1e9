package cache

import (
	"fmt"
	"reflect"
)

// ResourceEventHandler receives the notifications of a
// [SharedIndexInformer]. The informer calls the methods of one handler from
// one goroutine, in the order the changes were observed; different handlers
// run independently.
//
// Notifications are level-based: a handler is promised to converge on the
// latest state, not to see every intermediate one. OnUpdate is also called
// with an unchanged object on resync (old and new have the same
// resourceVersion). OnDelete may receive a [DeletedFinalStateUnknown] when
// the deletion was missed and found by a relist. A deletion followed by a
// re-creation under the same name may arrive as a single update.
//
// Objects handed to a handler are shared with the informer's store and every
// other handler: they must not be mutated.
type ResourceEventHandler interface {
	// OnAdd is called for an object that appeared. isInInitialList is true
	// for objects of the informer's initial list, and for the current
	// objects replayed to a handler added after the informer started.
	OnAdd(obj any, isInInitialList bool)
	// OnUpdate is called for an object that changed, or on resync.
	OnUpdate(oldObj, newObj any)
	// OnDelete is called for an object that was deleted; obj is its last
	// known state or a [DeletedFinalStateUnknown].
	OnDelete(obj any)
}

// FilteringResourceEventHandler passes to Handler only the notifications of
// objects FilterFunc accepts. An update is translated when the object
// crosses the filter: into an add when only the new object passes, into a
// delete (of the old object) when only the old one does. FilterFunc sees
// deletions' objects as they come, which may be a
// [DeletedFinalStateUnknown].
type FilteringResourceEventHandler struct {
	// FilterFunc reports whether an object is of interest.
	FilterFunc func(obj any) bool
	// Handler receives the notifications of objects of interest.
	Handler ResourceEventHandler
}

var _ ResourceEventHandler = FilteringResourceEventHandler{}

// objectType implements typedHandler for the wrapped handler.
func (f FilteringResourceEventHandler) objectType() reflect.Type {
	if th, ok := f.Handler.(typedHandler); ok {
		return th.objectType()
	}
	return nil
}

// OnAdd forwards the add if the object passes the filter.
func (f FilteringResourceEventHandler) OnAdd(obj any, isInInitialList bool) {
	if f.FilterFunc(obj) {
		f.Handler.OnAdd(obj, isInInitialList)
	}
}

// OnUpdate forwards an update, an add or a delete, depending on which of
// the two objects pass the filter.
func (f FilteringResourceEventHandler) OnUpdate(oldObj, newObj any) {
	oldOK, newOK := f.FilterFunc(oldObj), f.FilterFunc(newObj)
	switch {
	case oldOK && newOK:
		f.Handler.OnUpdate(oldObj, newObj)
	case newOK:
		f.Handler.OnAdd(newObj, false)
	case oldOK:
		f.Handler.OnDelete(oldObj)
	}
}

// OnDelete forwards the delete if the object passes the filter.
func (f FilteringResourceEventHandler) OnDelete(obj any) {
	if f.FilterFunc(obj) {
		f.Handler.OnDelete(obj)
	}
}

// DeletedObject is what a typed handler receives for a deletion.
type DeletedObject[T any] struct {
	// Object is the object's last known state. It is the zero T when the
	// deletion was missed and the informer had no state for it.
	Object T
	// Key is the object's storage key ("namespace/name" or "name").
	Key string
	// FinalStateUnknown is true when the deletion was not observed but
	// inferred by a relist: Object may then be stale.
	FinalStateUnknown bool
}

// ResourceEventHandlerFuncs adapts functions that take T (for example
// *corev1.Pod, or any) to [ResourceEventHandler]; it is the one adapter,
// client-go's ResourceEventHandlerFuncs, ResourceEventHandlerDetailedFuncs
// and ResourceEventHandlerFuncs in one. Tombstones are unwrapped into
// [DeletedObject]. A nil function ignores its notifications.
//
// [SharedIndexInformer.AddEventHandler] refuses it when the informer's
// objects cannot be a T, so it only ever receives T: an informer's store
// holds only objects of its expected type. The one exception is an informer
// built with a nil exampleObject, which accepts every handler and every
// object type; notifications whose objects are not T are then dropped.
type ResourceEventHandlerFuncs[T any] struct {
	// AddFunc is called by OnAdd.
	AddFunc func(obj T, isInInitialList bool)
	// UpdateFunc is called by OnUpdate.
	UpdateFunc func(oldObj, newObj T)
	// DeleteFunc is called by OnDelete.
	DeleteFunc func(obj DeletedObject[T])
}

// objectType implements typedHandler.
func (f ResourceEventHandlerFuncs[T]) objectType() reflect.Type { return reflect.TypeFor[T]() }

// OnAdd calls AddFunc with obj as T.
func (f ResourceEventHandlerFuncs[T]) OnAdd(obj any, isInInitialList bool) {
	if t, ok := obj.(T); ok && f.AddFunc != nil {
		f.AddFunc(t, isInInitialList)
	}
}

// OnUpdate calls UpdateFunc with both objects as T.
func (f ResourceEventHandlerFuncs[T]) OnUpdate(oldObj, newObj any) {
	o, ok1 := oldObj.(T)
	n, ok2 := newObj.(T)
	if ok1 && ok2 && f.UpdateFunc != nil {
		f.UpdateFunc(o, n)
	}
}

// OnDelete calls DeleteFunc with the object, or the tombstone's, as T.
func (f ResourceEventHandlerFuncs[T]) OnDelete(obj any) {
	if f.DeleteFunc == nil {
		return
	}
	var d DeletedObject[T]
	switch o := obj.(type) {
	case DeletedFinalStateUnknown:
		d = deletedFromTombstone[T](o)
	case *DeletedFinalStateUnknown:
		if o == nil {
			return
		}
		d = deletedFromTombstone[T](*o)
	case T:
		d.Object = o
		key, err := DeletionHandlingMetaNamespaceKeyFunc(o)
		if err != nil {
			return
		}
		d.Key = key
	default:
		return
	}
	f.DeleteFunc(d)
}

// deletedFromTombstone unwraps a tombstone whose object may be nil or of
// another type.
func deletedFromTombstone[T any](t DeletedFinalStateUnknown) DeletedObject[T] {
	d := DeletedObject[T]{Key: t.Key, FinalStateUnknown: true}
	if o, ok := t.Obj.(T); ok {
		d.Object = o
	}
	return d
}

// typedHandler is a handler that can only receive objects assignable to
// objectType (nil: any object).
type typedHandler interface {
	objectType() reflect.Type
}

// checkHandlerType returns an error when h is a typed handler that cannot
// receive objects of example's type. A nil example accepts every handler.
func checkHandlerType(h ResourceEventHandler, example any) error {
	th, ok := h.(typedHandler)
	if !ok || example == nil {
		return nil
	}
	want := th.objectType()
	if got := reflect.TypeOf(example); want != nil && !got.AssignableTo(want) {
		return fmt.Errorf("cache: handler for %v cannot receive %v objects", want, got)
	}
	return nil
}
