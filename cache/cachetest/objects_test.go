package cachetest_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/quotakit/quotakit/cache/cachetest"
)

func TestCreateSetsServerFields(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := cachetest.New(cachetest.Options{})
		got := create(t, s, podsGVR, newPod("default", "a", nil)).(*corev1.Pod)
		want := newPod("default", "a", nil)
		want.ResourceVersion = "2"
		want.UID = "00000000-0000-4000-8000-000000000001"
		want.CreationTimestamp = metav1.NewTime(time.Now())
		want.Generation = 1
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("Create (-want +got):\n%s", d)
		}

		gen := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", GenerateName: "web-"}}
		g1 := create(t, s, podsGVR, gen).(*corev1.Pod)
		g2 := create(t, s, podsGVR, gen).(*corev1.Pod)
		if g1.Name == g2.Name || len(g1.Name) != len("web-")+5 || g1.Name[:4] != "web-" {
			t.Errorf("generated names %q and %q, want distinct web-xxxxx", g1.Name, g2.Name)
		}

		// Fields the caller sets are kept.
		ts := metav1.NewTime(time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC))
		kept := newPod("default", "b", nil)
		kept.UID, kept.CreationTimestamp = "my-uid", ts
		kept.Status.Phase = corev1.PodSucceeded
		b := create(t, s, podsGVR, kept).(*corev1.Pod)
		if b.UID != "my-uid" || !b.CreationTimestamp.Equal(&ts) || b.Status.Phase != corev1.PodSucceeded {
			t.Errorf("Create dropped caller fields: uid %q, created %v, phase %q", b.UID, b.CreationTimestamp, b.Status.Phase)
		}
	})
}

func TestCreateRejects(t *testing.T) {
	s := cachetest.New(cachetest.Options{})
	create(t, s, podsGVR, newPod("default", "taken", nil))
	withRV := newPod("default", "x", nil)
	withRV.ResourceVersion = "5"
	var nilPod *corev1.Pod
	tests := []struct {
		name string
		gvr  schema.GroupVersionResource
		obj  runtime.Object
		want func(error) bool
	}{
		{name: "taken name", obj: newPod("default", "taken", nil), want: apierrors.IsAlreadyExists},
		{name: "wrong type", obj: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "c"}}, want: apierrors.IsBadRequest},
		{name: "nil", obj: nil, want: apierrors.IsBadRequest},
		{name: "typed nil", obj: nilPod, want: apierrors.IsBadRequest},
		{name: "no namespace", obj: newPod("", "x", nil), want: apierrors.IsBadRequest},
		{name: "resourceVersion set", obj: withRV, want: apierrors.IsBadRequest},
		{name: "no name", obj: newPod("default", "", nil), want: apierrors.IsInvalid},
		{name: "unregistered", gvr: schema.GroupVersionResource{Version: "v1", Resource: "widgets"}, obj: newPod("default", "x", nil), want: apierrors.IsNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gvr := tt.gvr
			if gvr.Resource == "" {
				gvr = podsGVR
			}
			_, err := s.Create(t.Context(), gvr, tt.obj)
			if !tt.want(err) {
				t.Errorf("Create error = %v", err)
			}
		})
	}
}

func TestStaleResourceVersionConflicts(t *testing.T) {
	ctx := t.Context()
	s := cachetest.New(cachetest.Options{})
	old := create(t, s, podsGVR, newPod("default", "a", nil)).(*corev1.Pod)
	cur, err := s.Update(ctx, podsGVR, newPod("default", "a", map[string]string{"v": "2"}))
	if err != nil {
		t.Fatal(err)
	}
	stale := old.DeepCopy()
	stale.Labels = map[string]string{"v": "stale"}
	if _, err := s.Update(ctx, podsGVR, stale); !apierrors.IsConflict(err) {
		t.Errorf("Update(stale rv) error = %v, want 409 Conflict", err)
	}
	if _, err := s.UpdateStatus(ctx, podsGVR, stale); !apierrors.IsConflict(err) {
		t.Errorf("UpdateStatus(stale rv) error = %v, want 409 Conflict", err)
	}
	staleRV, wrongUID := old.ResourceVersion, types.UID("other")
	if err := s.Delete(ctx, podsGVR, "default", "a", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &staleRV}}); !apierrors.IsConflict(err) {
		t.Errorf("Delete(stale rv) error = %v, want 409 Conflict", err)
	}
	if err := s.Delete(ctx, podsGVR, "default", "a", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &wrongUID}}); !apierrors.IsConflict(err) {
		t.Errorf("Delete(wrong uid) error = %v, want 409 Conflict", err)
	}
	malformed := cur.(*corev1.Pod).DeepCopy()
	malformed.ResourceVersion = "x"
	if _, err := s.Update(ctx, podsGVR, malformed); !apierrors.IsBadRequest(err) {
		t.Errorf("Update(malformed rv) error = %v, want 400", err)
	}

	// The current resourceVersion, or none, succeeds.
	fresh := cur.(*corev1.Pod).DeepCopy()
	fresh.Labels = map[string]string{"v": "3"}
	if _, err := s.Update(ctx, podsGVR, fresh); err != nil {
		t.Errorf("Update(current rv): %v", err)
	}
	if _, err := s.Update(ctx, podsGVR, newPod("default", "a", map[string]string{"v": "4"})); err != nil {
		t.Errorf("Update(no rv): %v", err)
	}
	got, _ := s.Get(ctx, podsGVR, "default", "a")
	currentRV := got.(*corev1.Pod).ResourceVersion
	if err := s.Delete(ctx, podsGVR, "default", "a", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &currentRV}}); err != nil {
		t.Errorf("Delete(current rv): %v", err)
	}
}

func TestUpdateKeepsStatusAndUpdateStatusKeepsTheRest(t *testing.T) {
	ctx := t.Context()
	s := cachetest.New(cachetest.Options{})
	p := newPod("default", "a", map[string]string{"v": "1"})
	p.Spec.NodeName = "n1"
	p.Status.Phase = corev1.PodPending
	created := create(t, s, podsGVR, p).(*corev1.Pod)

	// Update: a label change keeps generation; a status change is ignored.
	u := created.DeepCopy()
	u.Labels["v"] = "2"
	u.Status.Phase = corev1.PodFailed
	got, err := s.Update(ctx, podsGVR, u)
	if err != nil {
		t.Fatal(err)
	}
	up := got.(*corev1.Pod)
	if up.Status.Phase != corev1.PodPending || up.Generation != 1 || up.Labels["v"] != "2" || up.UID != created.UID {
		t.Errorf("Update: phase %q generation %d labels %v uid %q; want Pending, 1, v=2, %q", up.Status.Phase, up.Generation, up.Labels, up.UID, created.UID)
	}

	// A spec change bumps generation.
	u = up.DeepCopy()
	u.Spec.NodeName = "n2"
	got, err = s.Update(ctx, podsGVR, u)
	if err != nil {
		t.Fatal(err)
	}
	if g := got.(*corev1.Pod).Generation; g != 2 {
		t.Errorf("generation after spec change = %d, want 2", g)
	}
	up = got.(*corev1.Pod)

	// UpdateStatus changes only status.
	st := up.DeepCopy()
	st.Status.Phase = corev1.PodRunning
	st.Labels = map[string]string{"ignored": "yes"}
	st.Spec.NodeName = "ignored"
	got, err = s.UpdateStatus(ctx, podsGVR, st)
	if err != nil {
		t.Fatal(err)
	}
	want := up.DeepCopy()
	want.Status.Phase = corev1.PodRunning
	want.ResourceVersion = got.(*corev1.Pod).ResourceVersion
	if d := cmp.Diff(want, got); d != "" || want.ResourceVersion == up.ResourceVersion {
		t.Errorf("UpdateStatus (-want +got):\n%s", d)
	}

	// An update that changes nothing is not a write.
	before := s.ResourceVersion()
	again, err := s.Update(ctx, podsGVR, got)
	if err != nil {
		t.Fatal(err)
	}
	if s.ResourceVersion() != before || rvOf(t, again) != rvOf(t, got) {
		t.Errorf("no-op Update moved resourceVersion from %s to %s", before, s.ResourceVersion())
	}

	// A type without status cannot have it updated.
	cmGVR := corev1.SchemeGroupVersion.WithResource("configmaps")
	cm := create(t, s, cmGVR, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "c"}})
	if _, err := s.UpdateStatus(ctx, cmGVR, cm); !apierrors.IsMethodNotSupported(err) {
		t.Errorf("UpdateStatus(configmap) error = %v, want 405", err)
	}
}

func TestUpdateStatusComparesQuantitiesSemantically(t *testing.T) {
	ctx := t.Context()
	s := cachetest.New(cachetest.Options{})
	gvr := corev1.SchemeGroupVersion.WithResource("resourcequotas")
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "q"}}
	q.Status.Used = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
	created := create(t, s, gvr, q).(*corev1.ResourceQuota)
	same := created.DeepCopy()
	same.Status.Used = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.1")}
	got, err := s.UpdateStatus(ctx, gvr, same)
	if err != nil {
		t.Fatal(err)
	}
	if rvOf(t, got) != created.ResourceVersion {
		t.Errorf("UpdateStatus with an equal quantity wrote rv %s, want unchanged %s", rvOf(t, got), created.ResourceVersion)
	}
}

func TestMissingObjectsAreNotFound(t *testing.T) {
	ctx := t.Context()
	s := cachetest.New(cachetest.Options{})
	p := newPod("default", "ghost", nil)
	if _, err := s.Get(ctx, podsGVR, "default", "ghost"); !apierrors.IsNotFound(err) {
		t.Errorf("Get error = %v", err)
	}
	if _, err := s.Update(ctx, podsGVR, p); !apierrors.IsNotFound(err) {
		t.Errorf("Update error = %v", err)
	}
	if _, err := s.UpdateStatus(ctx, podsGVR, p); !apierrors.IsNotFound(err) {
		t.Errorf("UpdateStatus error = %v", err)
	}
	if err := s.Delete(ctx, podsGVR, "default", "ghost", metav1.DeleteOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Delete error = %v", err)
	}
}

func TestObjectsAreCopiedInAndOut(t *testing.T) {
	ctx := t.Context()
	s := cachetest.New(cachetest.Options{})
	in := newPod("default", "a", map[string]string{"v": "1"})
	out := create(t, s, podsGVR, in).(*corev1.Pod)
	in.Labels["v"] = "mutated input"
	out.Labels["v"] = "mutated output"
	got, err := s.Get(ctx, podsGVR, "default", "a")
	if err != nil {
		t.Fatal(err)
	}
	got.(*corev1.Pod).Labels["v"] = "mutated get"
	list, err := s.List(ctx, podsGVR, "", metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v := list.(*corev1.PodList).Items[0].Labels["v"]; v != "1" {
		t.Errorf("stored label = %q, want 1", v)
	}
}

func TestNamespacedAndClusterScoped(t *testing.T) {
	ctx := t.Context()
	s := cachetest.New(cachetest.Options{})
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Namespace: "ignored", Name: "n1"}}
	got := create(t, s, nodesGVR, node).(*corev1.Node)
	if got.Namespace != "" {
		t.Errorf("cluster-scoped object kept namespace %q", got.Namespace)
	}
	create(t, s, podsGVR, newPod("a", "n1", nil))
	create(t, s, podsGVR, newPod("b", "n1", nil)) // same name, other namespace
	if _, err := s.Get(ctx, nodesGVR, "", "n1"); err != nil {
		t.Errorf("Get(node): %v", err)
	}
	if _, err := s.Get(ctx, nodesGVR, "a", "n1"); !apierrors.IsBadRequest(err) {
		t.Errorf("Get(node in namespace) error = %v, want 400", err)
	}
	if err := s.Delete(ctx, podsGVR, "a", "n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	pods, _ := s.List(ctx, podsGVR, "", metav1.ListOptions{})
	nodes, _ := s.List(ctx, nodesGVR, "", metav1.ListOptions{})
	pk, _ := listKeys(t, pods)
	nk, _ := listKeys(t, nodes)
	if d := diffStrings([]string{"b/n1"}, pk) + diffStrings([]string{"n1"}, nk); d != "" {
		t.Errorf("lists:%s", d)
	}
}

func TestUnstructuredResources(t *testing.T) {
	ctx := t.Context()
	gvr := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	s := cachetest.New(cachetest.Options{NoDefaultResources: true})
	if err := s.Register(cachetest.Resource{GVR: gvr, Namespaced: true, Kind: "Widget"}); err != nil {
		t.Fatal(err)
	}
	w := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"namespace": "default", "name": "w1"},
		"spec":     map[string]any{"size": int64(1)},
		"status":   map[string]any{"ready": false},
	}}
	got := create(t, s, gvr, w).(*unstructured.Unstructured)
	if gvk := got.GroupVersionKind(); gvk != gvr.GroupVersion().WithKind("Widget") {
		t.Errorf("created object GVK = %v", gvk)
	}

	// Update ignores status; UpdateStatus replaces it.
	u := got.DeepCopy()
	u.Object["spec"] = map[string]any{"size": int64(2)}
	u.Object["status"] = map[string]any{"ready": true}
	up, err := s.Update(ctx, gvr, u)
	if err != nil {
		t.Fatal(err)
	}
	uu := up.(*unstructured.Unstructured)
	if ready, _, _ := unstructured.NestedBool(uu.Object, "status", "ready"); ready || uu.GetGeneration() != 2 {
		t.Errorf("Update: status.ready %v generation %d, want false and 2", ready, uu.GetGeneration())
	}
	uu.Object["status"] = map[string]any{"ready": true}
	st, err := s.UpdateStatus(ctx, gvr, uu)
	if err != nil {
		t.Fatal(err)
	}
	if ready, _, _ := unstructured.NestedBool(st.(*unstructured.Unstructured).Object, "status", "ready"); !ready {
		t.Error("UpdateStatus did not replace status")
	}

	list, err := s.List(ctx, gvr, "default", metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ul, ok := list.(*unstructured.UnstructuredList)
	if !ok || ul.GetKind() != "WidgetList" || len(ul.Items) != 1 || ul.GetResourceVersion() != s.ResourceVersion() {
		t.Errorf("List = %T kind %q with %d items at %q", list, ul.GetKind(), len(ul.Items), ul.GetResourceVersion())
	}
	if !equality.Semantic.DeepEqual(&ul.Items[0], st) {
		t.Errorf("listed item differs from the stored one:\n%s", cmp.Diff(st, &ul.Items[0]))
	}

	// Objects of another kind, and typed objects, are rejected.
	other := &unstructured.Unstructured{}
	other.SetGroupVersionKind(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Gadget"})
	other.SetNamespace("default")
	other.SetName("g")
	if _, err := s.Create(ctx, gvr, other); !apierrors.IsBadRequest(err) {
		t.Errorf("Create(other kind) error = %v", err)
	}
	if _, err := s.Create(ctx, gvr, newPod("default", "p", nil)); !apierrors.IsBadRequest(err) {
		t.Errorf("Create(pod as widget) error = %v", err)
	}
	notJSON := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"namespace": "default", "name": "bad"},
		"spec":     map[string]any{"size": 1}, // int, not int64
	}}
	if _, err := s.Create(ctx, gvr, notJSON); !apierrors.IsBadRequest(err) {
		t.Errorf("Create(non-JSON content) error = %v, want 400", err)
	}
}

func TestUnstructuredBookmarksCarryTheKind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gvr := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gizmos"}
		s := cachetest.New(cachetest.Options{NoDefaultResources: true})
		defer s.Close()
		if err := s.Register(cachetest.Resource{GVR: gvr, Kind: "Gizmo"}); err != nil {
			t.Fatal(err)
		}
		w, err := s.Watch(t.Context(), gvr, "", metav1.ListOptions{ResourceVersion: "1", AllowWatchBookmarks: true})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		time.Sleep(time.Minute)
		synctest.Wait()
		ev := <-w.ResultChan()
		u, ok := ev.Object.(*unstructured.Unstructured)
		if ev.Type != watch.Bookmark || !ok || u.GroupVersionKind() != gvr.GroupVersion().WithKind("Gizmo") || u.GetResourceVersion() != "1" {
			t.Errorf("event = %v %#v, want a Gizmo bookmark at 1", ev.Type, ev.Object)
		}
	})
}

func TestRegisterRejects(t *testing.T) {
	s := cachetest.New(cachetest.Options{})
	tests := []struct {
		name string
		r    cachetest.Resource
	}{
		{name: "duplicate", r: cachetest.Resource{GVR: podsGVR, Namespaced: true, NewList: func() runtime.Object { return &corev1.PodList{} }}},
		{name: "no resource name", r: cachetest.Resource{GVR: schema.GroupVersionResource{Version: "v1"}, Kind: "X"}},
		{name: "unstructured without kind", r: cachetest.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "xs"}}},
		{name: "not a list", r: cachetest.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "ys"}, NewList: func() runtime.Object { return &corev1.Pod{} }}},
		{name: "nil list", r: cachetest.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "zs"}, NewList: func() runtime.Object { return nil }}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := s.Register(tt.r); err == nil {
				t.Errorf("Register(%+v) succeeded", tt.r.GVR)
			}
		})
	}
	// A typed resource registered by hand works like a built-in one.
	s2 := cachetest.New(cachetest.Options{NoDefaultResources: true})
	if _, err := s2.List(t.Context(), podsGVR, "", metav1.ListOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("List before Register error = %v, want 404", err)
	}
	if err := s2.Register(cachetest.Resource{GVR: podsGVR, Namespaced: true, NewList: func() runtime.Object { return &corev1.PodList{} }}); err != nil {
		t.Fatal(err)
	}
	create(t, s2, podsGVR, newPod("default", "a", nil))
}
