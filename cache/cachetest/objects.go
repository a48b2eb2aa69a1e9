package cachetest

import (
	"context"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
)

// Create stores a new object of resource gvr and returns it as stored, with
// its resourceVersion, uid (unless set), creationTimestamp (unless set) and
// generation 1. The namespace and name come from the object; an empty name
// with generateName set gets a generated suffix. The object is copied; the
// caller keeps ownership of obj.
//
// Errors: 409 AlreadyExists for a taken name; 400 BadRequest for an object
// of the wrong type, a missing namespace of a namespaced resource or a
// resourceVersion set on the object; 422 Invalid without a name; 404 for an
// unregistered resource. A namespace on a cluster-scoped object is cleared,
// as the apiserver does.
func (s *Server) Create(ctx context.Context, gvr schema.GroupVersionResource, obj runtime.Object) (runtime.Object, error) {
	r, obj, m, err := s.admitWrite(ctx, gvr, obj)
	if err != nil {
		return nil, err
	}
	if r.Namespaced && m.GetNamespace() == "" {
		return nil, badRequest("%s %q: namespace is required", r.gr, m.GetName())
	}
	if m.GetResourceVersion() != "" {
		return nil, badRequest("resourceVersion should not be set on objects to be created")
	}
	if m.GetName() == "" && m.GetGenerateName() == "" {
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: r.GVR.Group, Kind: r.Kind}, "",
			field.ErrorList{field.Required(field.NewPath("metadata", "name"), "name or generateName is required")})
	}
	if ts := m.GetCreationTimestamp(); ts.IsZero() {
		m.SetCreationTimestamp(metav1.NewTime(s.opts.Now()))
	}
	m.SetGeneration(1)

	s.mu.Lock()
	if m.GetName() == "" {
		s.names++
		m.SetName(m.GetGenerateName() + nameSuffix(s.names))
	}
	key := r.key(m.GetNamespace(), m.GetName())
	if _, ok := r.objects[key]; ok {
		s.mu.Unlock()
		return nil, apierrors.NewAlreadyExists(r.gr, m.GetName())
	}
	if m.GetUID() == "" {
		s.uids++
		m.SetUID(types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012x", s.uids)))
	}
	s.write(r, event{typ: watch.Added, key: key, obj: obj})
	s.mu.Unlock()
	return s.copyObject(obj), nil
}

// nameSuffix turns a counter into the five characters appended to
// generateName, drawn from the apiserver's alphabet (no vowels, no
// look-alike digits) but deterministic, so examples print stable names.
func nameSuffix(n uint64) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	b := make([]byte, 5)
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = alphabet[n%uint64(len(alphabet))]
		n /= uint64(len(alphabet))
	}
	return string(b)
}

// Get returns a copy of the current object namespace/name of resource gvr,
// or a 404 NotFound error.
func (s *Server) Get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (runtime.Object, error) {
	if err := ctx.Err(); err != nil {
		return nil, ctxError(ctx)
	}
	r, err := s.lookup(gvr)
	if err != nil {
		return nil, err
	}
	if err := r.checkNamespace(namespace); err != nil {
		return nil, err
	}
	s.mu.Lock()
	cur, ok := r.objects[r.key(namespace, name)]
	s.mu.Unlock()
	if !ok {
		return nil, apierrors.NewNotFound(r.gr, name)
	}
	// Stored objects are never mutated, so copying after unlocking is safe.
	return s.copyObject(cur), nil
}

// Update replaces an object's spec and metadata and returns it as stored.
// As with a resource that has a status subresource, the status in obj is
// ignored (use [Server.UpdateStatus]); uid and creationTimestamp are kept;
// generation is incremented when anything besides metadata and status
// changed. An update that changes nothing is not written and keeps its
// resourceVersion, as in the apiserver.
//
// If obj carries a resourceVersion other than the stored one, Update fails
// with 409 Conflict; an empty resourceVersion updates unconditionally. A
// missing object is 404 NotFound.
func (s *Server) Update(ctx context.Context, gvr schema.GroupVersionResource, obj runtime.Object) (runtime.Object, error) {
	return s.update(ctx, gvr, obj, false)
}

// UpdateStatus replaces the status of an object with the status of obj,
// leaving everything else, generation included, as stored; for
// unstructured objects the top-level "status" field is replaced. Its
// concurrency rules and errors are those of [Server.Update]; a type without
// a Status field gets 405 MethodNotSupported.
func (s *Server) UpdateStatus(ctx context.Context, gvr schema.GroupVersionResource, obj runtime.Object) (runtime.Object, error) {
	return s.update(ctx, gvr, obj, true)
}

// admitWrite is what every write starts with: ctx still live, a registered
// resource, an object of its type (a private copy), and no namespace on a
// cluster-scoped object.
func (s *Server) admitWrite(ctx context.Context, gvr schema.GroupVersionResource, obj runtime.Object) (*resource, runtime.Object, metav1.Object, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, nil, ctxError(ctx)
	}
	r, err := s.lookup(gvr)
	if err != nil {
		return nil, nil, nil, err
	}
	obj, err = r.accept(obj)
	if err != nil {
		return nil, nil, nil, err
	}
	m := metaOf(obj)
	if !r.Namespaced {
		m.SetNamespace("")
	}
	return r, obj, m, nil
}

// update works like the apiserver's guaranteed update: it builds the new
// state from the stored one without holding the lock, then commits it only
// if the stored object is still the one it started from, else starts over.
func (s *Server) update(ctx context.Context, gvr schema.GroupVersionResource, obj runtime.Object, status bool) (runtime.Object, error) {
	r, obj, m, err := s.admitWrite(ctx, gvr, obj)
	if err != nil {
		return nil, err
	}
	wantRV := m.GetResourceVersion()
	if _, err := parseRV(wantRV); err != nil {
		return nil, err
	}
	key := r.key(m.GetNamespace(), m.GetName())
	for {
		s.mu.Lock()
		cur, ok := r.objects[key]
		s.mu.Unlock()
		if !ok {
			return nil, apierrors.NewNotFound(r.gr, m.GetName())
		}
		cm := metaOf(cur)
		if wantRV != "" && wantRV != cm.GetResourceVersion() {
			return nil, apierrors.NewConflict(r.gr, m.GetName(),
				fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
		}
		next, err := nextState(r, cur, obj, status)
		if err != nil {
			return nil, err
		}
		if equality.Semantic.DeepEqual(cur, next) {
			return s.copyObject(cur), nil
		}
		s.mu.Lock()
		if r.objects[key] != cur {
			s.mu.Unlock()
			continue // written meanwhile
		}
		s.write(r, event{typ: watch.Modified, key: key, obj: next, prev: cur})
		s.mu.Unlock()
		return s.copyObject(next), nil
	}
}

// nextState is what an update of cur with obj stores, before its
// resourceVersion is stamped: obj with cur's status and identity for
// Update, cur with obj's status for UpdateStatus.
func nextState(r *resource, cur, obj runtime.Object, status bool) (runtime.Object, error) {
	cm := metaOf(cur)
	if status {
		next := cur.DeepCopyObject()
		if !copyStatus(next, obj) {
			return nil, apierrors.NewMethodNotSupported(r.gr, "update status")
		}
		return next, nil
	}
	// obj is update's private copy. A retried commit passes it again, which
	// is fine: everything set here is taken from the new cur.
	next := obj
	copyStatus(next, cur)
	nm := metaOf(next)
	nm.SetResourceVersion(cm.GetResourceVersion())
	nm.SetUID(cm.GetUID())
	nm.SetCreationTimestamp(cm.GetCreationTimestamp())
	nm.SetGeneration(cm.GetGeneration())
	if specChanged(cur, next) {
		nm.SetGeneration(cm.GetGeneration() + 1)
	}
	return next, nil
}

// Delete removes the object namespace/name of resource gvr. The
// preconditions in opts are checked: a stale resourceVersion or a different
// uid is a 409 Conflict. A missing object is 404 NotFound. Deletion is
// immediate: finalizers and graceful deletion are not modelled.
func (s *Server) Delete(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, opts metav1.DeleteOptions) error {
	if err := ctx.Err(); err != nil {
		return ctxError(ctx)
	}
	r, err := s.lookup(gvr)
	if err != nil {
		return err
	}
	if err := r.checkNamespace(namespace); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := r.key(namespace, name)
	cur, ok := r.objects[key]
	if !ok {
		return apierrors.NewNotFound(r.gr, name)
	}
	cm := metaOf(cur)
	if p := opts.Preconditions; p != nil {
		// The messages are kube-apiserver's, capitals included, so that
		// clients matching on them behave as against a real server.
		if p.UID != nil && *p.UID != cm.GetUID() {
			return apierrors.NewConflict(r.gr, name,
				//lint:ignore ST1005 kube-apiserver's message
				fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", *p.UID, cm.GetUID()))
		}
		if p.ResourceVersion != nil && *p.ResourceVersion != cm.GetResourceVersion() {
			return apierrors.NewConflict(r.gr, name,
				//lint:ignore ST1005 kube-apiserver's message
				fmt.Errorf("Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", *p.ResourceVersion, cm.GetResourceVersion()))
		}
	}
	s.write(r, event{typ: watch.Deleted, key: key, prev: cur})
	return nil
}

// write commits ev: it takes the next resourceVersion, stamps it on ev.obj,
// updates the objects, records the event and hands it to the watchers. The
// caller holds mu.
func (s *Server) write(r *resource, ev event) {
	ev.rv = s.bump()
	if ev.obj != nil {
		setResourceVersion(ev.obj, ev.rv)
	}
	switch ev.typ {
	case watch.Added:
		r.keys = nil
		r.objects[ev.key] = ev.obj
	case watch.Deleted:
		r.keys = nil
		delete(r.objects, ev.key)
	default:
		r.objects[ev.key] = ev.obj
	}
	r.record(ev, s.opts.HistorySize)
	for w := range s.watchers {
		if w.r == r {
			w.send(ev)
		}
	}
}

// accept checks that obj has the resource's type and returns a private
// deep copy of it. Unstructured objects get the resource's apiVersion and
// kind when they have none.
func (r *resource) accept(obj runtime.Object) (runtime.Object, error) {
	if v := reflect.ValueOf(obj); obj == nil || v.Kind() == reflect.Pointer && v.IsNil() {
		return nil, badRequest("nil object for %s", r.gr)
	}
	if t := reflect.TypeOf(obj); t != r.itemType {
		return nil, badRequest("object of type %v for %s, want %v", t, r.gr, r.itemType)
	}
	obj, err := deepCopy(obj)
	if err != nil {
		return nil, badRequest("%s: %v", r.gr, err)
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		want := r.GVR.GroupVersion().WithKind(r.Kind)
		switch gvk := u.GroupVersionKind(); gvk {
		case schema.GroupVersionKind{}:
			u.SetGroupVersionKind(want)
		case want:
		default:
			return nil, badRequest("object of kind %v for %s, want %v", gvk, r.gr, want)
		}
	}
	return obj, nil
}

// deepCopy copies obj. Unstructured content that is not JSON data (an int
// instead of an int64, a struct) makes apimachinery's copy panic; that is
// reported as an error instead.
func deepCopy(obj runtime.Object) (out runtime.Object, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("object is not JSON-compatible data: %v", p)
		}
	}()
	return obj.DeepCopyObject(), nil
}

// copyStatus sets dst's status to src's, and reports false when the type
// has no status. Both have the same type.
func copyStatus(dst, src runtime.Object) bool {
	if du, ok := dst.(*unstructured.Unstructured); ok {
		su := src.(*unstructured.Unstructured)
		if st, ok := su.Object["status"]; ok {
			du.Object["status"] = runtime.DeepCopyJSONValue(st)
		} else {
			delete(du.Object, "status")
		}
		return true
	}
	d := reflect.ValueOf(dst).Elem().FieldByName("Status")
	if !d.IsValid() || !d.CanSet() {
		return false
	}
	d.Set(reflect.ValueOf(src).Elem().FieldByName("Status"))
	return true
}

// specChanged reports whether anything besides type, metadata and status
// differs between two objects of the same type.
func specChanged(a, b runtime.Object) bool {
	if au, ok := a.(*unstructured.Unstructured); ok {
		bu := b.(*unstructured.Unstructured)
		return !equality.Semantic.DeepEqual(specPart(au.Object), specPart(bu.Object))
	}
	av, bv := reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem()
	for i := range av.NumField() {
		switch av.Type().Field(i).Name {
		case "TypeMeta", "ObjectMeta", "Status":
			continue
		}
		if !equality.Semantic.DeepEqual(av.Field(i).Interface(), bv.Field(i).Interface()) {
			return true
		}
	}
	return false
}

func specPart(obj map[string]any) map[string]any {
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		switch k {
		case "apiVersion", "kind", "metadata", "status":
			continue
		}
		out[k] = v
	}
	return out
}
