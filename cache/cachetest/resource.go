package cachetest

import (
	"fmt"
	"reflect"
	"slices"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
)

// Resource describes a resource type a [Server] serves.
type Resource struct {
	// GVR names the resource, for example
	// corev1.SchemeGroupVersion.WithResource("pods"). Required.
	GVR schema.GroupVersionResource

	// Namespaced tells whether objects live in namespaces (pods) or are
	// cluster-scoped (nodes).
	Namespaced bool

	// NewList returns an empty list of the resource, for example
	// &corev1.PodList{}; its Items element type is the only object type
	// accepted for the resource. Nil means *unstructured.UnstructuredList
	// holding *unstructured.Unstructured objects.
	NewList func() runtime.Object

	// Kind is the kind of one object, for example "Widget". Required for
	// unstructured resources (it is stamped on objects and bookmarks so that
	// clients checking the GroupVersionKind accept them); for typed ones it
	// defaults to the name of the Go type.
	Kind string
}

// defaultResources are the resources [New] registers.
func defaultResources() []Resource {
	core := corev1.SchemeGroupVersion.WithResource
	apps := appsv1.SchemeGroupVersion.WithResource
	dra := resourcev1.SchemeGroupVersion.WithResource
	list := func(l runtime.Object) func() runtime.Object {
		t := reflect.TypeOf(l).Elem()
		return func() runtime.Object { return reflect.New(t).Interface().(runtime.Object) }
	}
	return []Resource{
		{GVR: core("pods"), Namespaced: true, NewList: list(&corev1.PodList{})},
		{GVR: core("services"), Namespaced: true, NewList: list(&corev1.ServiceList{})},
		{GVR: core("configmaps"), Namespaced: true, NewList: list(&corev1.ConfigMapList{})},
		{GVR: core("secrets"), Namespaced: true, NewList: list(&corev1.SecretList{})},
		{GVR: core("persistentvolumeclaims"), Namespaced: true, NewList: list(&corev1.PersistentVolumeClaimList{})},
		{GVR: core("replicationcontrollers"), Namespaced: true, NewList: list(&corev1.ReplicationControllerList{})},
		{GVR: core("resourcequotas"), Namespaced: true, NewList: list(&corev1.ResourceQuotaList{})},
		{GVR: core("limitranges"), Namespaced: true, NewList: list(&corev1.LimitRangeList{})},
		{GVR: core("serviceaccounts"), Namespaced: true, NewList: list(&corev1.ServiceAccountList{})},
		{GVR: core("endpoints"), Namespaced: true, NewList: list(&corev1.EndpointsList{})},
		{GVR: core("events"), Namespaced: true, NewList: list(&corev1.EventList{})},
		{GVR: core("namespaces"), NewList: list(&corev1.NamespaceList{})},
		{GVR: core("nodes"), NewList: list(&corev1.NodeList{})},
		{GVR: core("persistentvolumes"), NewList: list(&corev1.PersistentVolumeList{})},
		{GVR: apps("deployments"), Namespaced: true, NewList: list(&appsv1.DeploymentList{})},
		{GVR: apps("replicasets"), Namespaced: true, NewList: list(&appsv1.ReplicaSetList{})},
		{GVR: apps("statefulsets"), Namespaced: true, NewList: list(&appsv1.StatefulSetList{})},
		{GVR: apps("daemonsets"), Namespaced: true, NewList: list(&appsv1.DaemonSetList{})},
		{GVR: dra("resourceclaims"), Namespaced: true, NewList: list(&resourcev1.ResourceClaimList{})},
		{GVR: dra("deviceclasses"), NewList: list(&resourcev1.DeviceClassList{})},
	}
}

// Register adds a resource type to the server. Registering a GVR twice is
// an error, as are an empty resource name, a NewList whose result is not a
// list, and an unstructured resource without Kind.
func (s *Server) Register(r Resource) error {
	res, err := newResource(r)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.resources[r.GVR]; ok {
		return fmt.Errorf("cachetest: resource %v is already registered", r.GVR)
	}
	s.resources[r.GVR] = res
	return nil
}

// resource is the state of one registered resource.
type resource struct {
	Resource
	gr       schema.GroupResource
	itemType reflect.Type // pointer type of one object
	// unstructured is true when objects are *unstructured.Unstructured.
	unstructured bool

	// All fields below are guarded by Server.mu.

	objects map[string]runtime.Object // by key; stored objects are never mutated
	keys    []string                  // sorted keys of objects; nil when stale
	// history holds the latest events in resourceVersion order. Every
	// event with a resourceVersion above compacted is in it.
	history   []event
	compacted uint64
}

// event is one write as a watch replays it.
type event struct {
	typ watch.EventType // Added, Modified or Deleted
	rv  uint64
	key string
	// obj is the state after the event, nil for Deleted. (Watchers send a
	// deletion as the last state stamped with the deletion's
	// resourceVersion, as the apiserver does.)
	obj runtime.Object
	// prev is the state before the event, nil for Added.
	prev runtime.Object
}

func newResource(r Resource) (*resource, error) {
	if r.GVR.Resource == "" {
		return nil, fmt.Errorf("cachetest: resource %v has no resource name", r.GVR)
	}
	res := &resource{
		Resource: r,
		gr:       r.GVR.GroupResource(),
		objects:  make(map[string]runtime.Object),
	}
	if r.NewList == nil {
		if r.Kind == "" {
			return nil, fmt.Errorf("cachetest: unstructured resource %v needs a Kind", r.GVR)
		}
		res.unstructured = true
		res.itemType = reflect.TypeOf(&unstructured.Unstructured{})
		res.NewList = func() runtime.Object {
			l := &unstructured.UnstructuredList{}
			l.SetGroupVersionKind(r.GVR.GroupVersion().WithKind(r.Kind + "List"))
			return l
		}
		return res, nil
	}
	l := r.NewList()
	if l == nil || !meta.IsListType(l) {
		return nil, fmt.Errorf("cachetest: NewList of %v returns %T, not a list", r.GVR, l)
	}
	if _, ok := l.(*unstructured.UnstructuredList); ok {
		return nil, fmt.Errorf("cachetest: resource %v: leave NewList nil for unstructured objects", r.GVR)
	}
	v := reflect.ValueOf(l)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("cachetest: NewList of %v returns %T, not a pointer to a struct", r.GVR, l)
	}
	items := v.Elem().FieldByName("Items")
	if !items.IsValid() || items.Kind() != reflect.Slice {
		return nil, fmt.Errorf("cachetest: list %T of %v has no Items slice", l, r.GVR)
	}
	elem := items.Type().Elem()
	if elem.Kind() == reflect.Pointer {
		elem = elem.Elem()
	}
	res.itemType = reflect.PointerTo(elem)
	item, ok := reflect.New(elem).Interface().(runtime.Object)
	if !ok {
		return nil, fmt.Errorf("cachetest: items of %T are not runtime.Objects", l)
	}
	if _, err := meta.Accessor(item); err != nil {
		return nil, fmt.Errorf("cachetest: items of %T have no metadata: %w", l, err)
	}
	if _, err := meta.ListAccessor(l); err != nil {
		return nil, fmt.Errorf("cachetest: %T has no list metadata: %w", l, err)
	}
	if res.Kind == "" {
		res.Kind = elem.Name()
	}
	return res, nil
}

// key is the storage key of an object: "namespace/name" or "name", ordered
// like etcd keys, which is the order lists return.
func (r *resource) key(namespace, name string) string {
	if r.Namespaced {
		return namespace + "/" + name
	}
	return name
}

// checkNamespace rejects a namespace for a cluster-scoped resource.
func (r *resource) checkNamespace(namespace string) error {
	if !r.Namespaced && namespace != "" {
		return apierrors.NewBadRequest(fmt.Sprintf("cachetest: %s is cluster-scoped; namespace %q must be empty", r.gr, namespace))
	}
	return nil
}

// newObject returns an empty object of the resource, for bookmarks.
func (r *resource) newObject(rv uint64) runtime.Object {
	obj := reflect.New(r.itemType.Elem()).Interface().(runtime.Object)
	if u, ok := obj.(*unstructured.Unstructured); ok {
		u.SetGroupVersionKind(r.GVR.GroupVersion().WithKind(r.Kind))
	}
	setResourceVersion(obj, rv)
	return obj
}

// record appends an event to the history, dropping the oldest beyond
// size. The caller holds Server.mu.
func (r *resource) record(ev event, size int) {
	if len(r.history) >= size {
		drop := len(r.history) - size + 1
		r.compacted = r.history[drop-1].rv
		clear(r.history[:drop]) // let the dropped objects be collected
		// Reslicing from the front lets append reallocate now and then,
		// which keeps the cost per write constant on average.
		r.history = r.history[drop:]
	}
	r.history = append(r.history, ev)
}

// compact forgets all history up to rv. The caller holds Server.mu.
func (r *resource) compact(rv uint64) {
	r.history = nil
	if rv > r.compacted {
		r.compacted = rv
	}
}

// since returns the events after rv. The caller holds Server.mu and has
// checked rv >= r.compacted.
func (r *resource) since(rv uint64) []event {
	i := sort.Search(len(r.history), func(i int) bool { return r.history[i].rv > rv })
	return r.history[i:]
}

// sortedKeys returns the keys of the current objects in order. The slice
// is cached until the next create or delete and must not be modified. The
// caller holds Server.mu.
func (r *resource) sortedKeys() []string {
	if r.keys == nil {
		keys := make([]string, 0, len(r.objects))
		for k := range r.objects {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		r.keys = keys
	}
	return r.keys
}

// view is the state of a resource at one resourceVersion.
type view struct {
	keys []string                    // in order
	get  func(string) runtime.Object // the object of one of keys
}

// snapshot returns the state at rv. Past states are the current one with
// the later events undone, without copying the current objects. The
// caller holds Server.mu, and has checked rv >= r.compacted; the view is
// valid only while the lock is held.
func (r *resource) snapshot(rv uint64) view {
	current := r.sortedKeys()
	later := r.since(rv)
	if len(later) == 0 {
		return view{keys: current, get: func(k string) runtime.Object { return r.objects[k] }}
	}
	// Undo from the newest event: each key ends up with its state before
	// the oldest later event touching it, nil where it did not exist.
	undo := make(map[string]runtime.Object)
	for i := len(later) - 1; i >= 0; i-- {
		undo[later[i].key] = later[i].prev
	}
	var gone []string // keys existing at rv but not now
	for k, obj := range undo {
		if _, ok := r.objects[k]; !ok && obj != nil {
			gone = append(gone, k)
		}
	}
	slices.Sort(gone)
	keys := make([]string, 0, len(current)+len(gone))
	i := 0
	for _, k := range current {
		for i < len(gone) && gone[i] < k {
			keys = append(keys, gone[i])
			i++
		}
		if obj, ok := undo[k]; ok && obj == nil {
			continue // created after rv
		}
		keys = append(keys, k)
	}
	keys = append(keys, gone[i:]...)
	return view{keys: keys, get: func(k string) runtime.Object {
		if obj, ok := undo[k]; ok {
			return obj
		}
		return r.objects[k]
	}}
}

// setResourceVersion stamps rv on obj. Objects of a registered resource
// always have metadata, so the accessor cannot fail.
func setResourceVersion(obj runtime.Object, rv uint64) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetResourceVersion(formatRV(rv))
	}
}

// metaOf returns the metadata accessor of an object of a registered type.
func metaOf(obj runtime.Object) metav1.Object {
	m, err := meta.Accessor(obj)
	if err != nil {
		// Only objects whose type was checked against the resource reach
		// here, and every such type has ObjectMeta.
		panic("cachetest: object without metadata: " + err.Error())
	}
	return m
}
