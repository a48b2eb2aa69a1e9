package cache

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestArenaSetAccounting drives an arenaSet as an informer does, including
// an object of the list that reaches the store only after its survivors
// were copied out: it must be copied on its way in.
func TestArenaSetAccounting(t *testing.T) {
	list := &corev1.PodList{Items: make([]corev1.Pod, 5)}
	for i := range list.Items {
		list.Items[i].ObjectMeta = metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprint(i), ResourceVersion: "1"}
	}
	in := func(i int) *corev1.Pod { return &list.Items[i] }
	var a arenaSet
	ts := NewThreadSafeStore(nil)
	a.add([]runtime.Object{list})
	store := func(i int, obj any) bool {
		obj = a.admit(obj)
		old, existed, err := ts.put(fmt.Sprint(i), obj)
		if err != nil {
			t.Fatal(err)
		}
		return a.stored(obj, old, existed)
	}
	// Objects 0-3 are stored; 4 stays queued.
	for i := range 4 {
		if store(i, in(i)) {
			t.Fatalf("copy due after storing %d listed objects", i+1)
		}
	}
	// A resync stores the same object again: nothing changes.
	if store(0, in(0)) {
		t.Fatal("copy due after a resync")
	}
	updated := func(i int) *corev1.Pod {
		p := in(i).DeepCopy()
		p.ResourceVersion = "2"
		return p
	}
	if store(0, updated(0)) {
		t.Fatal("copy due with 1 of 4 stored objects gone")
	}
	old, _ := ts.remove("1", nil)
	if !a.removed(old) {
		t.Fatal("copy not due with 2 of 4 stored objects gone")
	}
	a.copyOut(ts)
	for _, key := range []string{"2", "3"} {
		obj, _ := ts.Get(key)
		if p := obj.(*corev1.Pod); p == in(2) || p == in(3) || p.Name != key {
			t.Errorf("object %s after the copy: %p %v, want a copy of it", key, p, p.Name)
		}
	}
	// The late arrival is copied too.
	store(4, in(4))
	obj, _ := ts.Get("4")
	if p := obj.(*corev1.Pod); p == in(4) || p.Name != "4" {
		t.Errorf("late object stored as %p (%s), want a copy of %p", p, p.Name, in(4))
	}
	// Once nothing of the list can be queued, its range is forgotten.
	a.dropCopied()
	if got := a.admit(in(4)); got != any(in(4)) {
		t.Errorf("admit after dropCopied = %p, want the object itself", got)
	}
	// Objects of no arena are stored as they are.
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "other"}}
	if got := a.admit(other); got != any(other) {
		t.Errorf("admit(other) = %p, want %p", got, other)
	}
}

// TestArenaSetKeepsOnlyArenasInUse checks which arrays are tracked: not
// those whose objects are not held in place, and not those of an earlier
// list the store holds nothing of.
func TestArenaSetKeepsOnlyArenasInUse(t *testing.T) {
	var a arenaSet
	a.add([]runtime.Object{&metav1.List{Items: []runtime.RawExtension{{Object: &corev1.Pod{}}}}})
	if len(a.arenas) != 0 {
		t.Errorf("a list of RawExtensions has %d arenas, want none: its objects live elsewhere", len(a.arenas))
	}
	first := &corev1.PodList{Items: make([]corev1.Pod, 2)}
	second := &corev1.PodList{Items: make([]corev1.Pod, 2)}
	third := &corev1.PodList{Items: make([]corev1.Pod, 2)}
	a.add([]runtime.Object{first, second}) // two pages of one list
	if len(a.arenas) != 2 {
		t.Fatalf("two pages: %d arenas, want 2", len(a.arenas))
	}
	a.stored(&second.Items[0], nil, false)
	a.add([]runtime.Object{third})
	if len(a.arenas) != 2 || a.findLocked(&first.Items[0]) != nil || a.findLocked(&second.Items[1]) == nil || a.findLocked(&third.Items[0]) == nil {
		t.Errorf("after a relist: arenas %v, want those of the second page (still stored from) and the new list", a.arenas)
	}
}

// TestPagesInPlace checks that a page is tracked only while one of its
// objects is still the one in its array.
func TestPagesInPlace(t *testing.T) {
	page1 := &corev1.PodList{Items: make([]corev1.Pod, 2)}
	page2 := &corev1.PodList{Items: make([]corev1.Pod, 2)}
	pages := []runtime.Object{page1, page2}
	lens := []int{2, 2}
	copied := func(p *corev1.Pod) *corev1.Pod { c := *p; return &c }
	items := []any{copied(&page1.Items[0]), copied(&page1.Items[1]), copied(&page2.Items[0]), &page2.Items[1]}
	got := pagesInPlace(pages, lens, items)
	if len(got) != 1 || got[0] != runtime.Object(page2) {
		t.Errorf("pagesInPlace = %v, want only the second page, whose last object is in place", got)
	}
	if got := pagesInPlace(pages, lens, []any{copied(&page1.Items[0]), copied(&page1.Items[1]), copied(&page2.Items[0]), copied(&page2.Items[1])}); len(got) != 0 {
		t.Errorf("pagesInPlace of transformed objects = %v, want none", got)
	}
}
