package cachetest_test

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/quotakit/quotakit/cache/cachetest"
)

var (
	podsGVR  = corev1.SchemeGroupVersion.WithResource("pods")
	nodesGVR = corev1.SchemeGroupVersion.WithResource("nodes")
)

func newPod(namespace, name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels}}
}

// create stores obj and fails the test on error.
func create(t testing.TB, s *cachetest.Server, gvr schema.GroupVersionResource, obj runtime.Object) runtime.Object {
	t.Helper()
	out, err := s.Create(t.Context(), gvr, obj)
	if err != nil {
		t.Fatalf("Create(%v): %v", gvr, err)
	}
	return out
}

// rvOf returns an object's resourceVersion.
func rvOf(t *testing.T, obj runtime.Object) string {
	t.Helper()
	m, err := meta.Accessor(obj)
	if err != nil {
		t.Fatalf("meta.Accessor(%T): %v", obj, err)
	}
	return m.GetResourceVersion()
}

// keyOf returns "namespace/name" or "name".
func keyOf(t *testing.T, obj runtime.Object) string {
	t.Helper()
	m, err := meta.Accessor(obj)
	if err != nil {
		t.Fatalf("meta.Accessor(%T): %v", obj, err)
	}
	if m.GetNamespace() == "" {
		return m.GetName()
	}
	return m.GetNamespace() + "/" + m.GetName()
}

// listKeys returns the keys of a list's items and its resourceVersion.
func listKeys(t *testing.T, list runtime.Object) ([]string, string) {
	t.Helper()
	items, err := meta.ExtractList(list)
	if err != nil {
		t.Fatalf("ExtractList(%T): %v", list, err)
	}
	keys := []string{}
	for _, it := range items {
		keys = append(keys, keyOf(t, it))
	}
	lm, err := meta.ListAccessor(list)
	if err != nil {
		t.Fatalf("ListAccessor(%T): %v", list, err)
	}
	return keys, lm.GetResourceVersion()
}

// describe renders an event as "TYPE key@rv" (bookmarks as "BOOKMARK @rv").
func describe(t *testing.T, ev watch.Event) string {
	t.Helper()
	switch ev.Type {
	case watch.Error:
		st, _ := ev.Object.(*metav1.Status)
		if st == nil {
			return fmt.Sprintf("ERROR %T", ev.Object)
		}
		return fmt.Sprintf("ERROR %d %s", st.Code, st.Reason)
	case watch.Bookmark:
		m, _ := meta.Accessor(ev.Object)
		s := fmt.Sprintf("BOOKMARK @%s", m.GetResourceVersion())
		if m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
			s += " end"
		}
		return s
	}
	return fmt.Sprintf("%s %s@%s", ev.Type, keyOf(t, ev.Object), rvOf(t, ev.Object))
}

// receive reads n events, failing after a minute (virtual under synctest).
func receive(t *testing.T, w watch.Interface, n int) []string {
	t.Helper()
	var out []string
	timeout := time.After(time.Minute)
	for len(out) < n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch closed after %v, want %d events", out, n)
			}
			out = append(out, describe(t, ev))
		case <-timeout:
			t.Fatalf("timed out after %v, want %d events", out, n)
		}
	}
	return out
}

// drain reads every event the watch delivers until the bubble is idle and
// reports whether the channel got closed. Use only inside synctest.Test.
func drain(t *testing.T, w watch.Interface) (events []string, closed bool) {
	t.Helper()
	for {
		synctest.Wait()
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return events, true
			}
			events = append(events, describe(t, ev))
		default:
			return events, false
		}
	}
}

// diffStrings reports the first difference between two string slices.
func diffStrings(want, got []string) string {
	if len(want) == len(got) {
		same := true
		for i := range want {
			if want[i] != got[i] {
				same = false
				break
			}
		}
		if same {
			return ""
		}
	}
	return fmt.Sprintf("\nwant %q\ngot  %q", want, got)
}
