package cachetest_test

import (
	"context"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/quotakit/quotakit/cache/cachetest"
)

// history writes a fixed sequence and returns the server. Resource
// versions: a@2, b@3, c@4, a modified@5, b deleted@6.
func history(t *testing.T, opts cachetest.Options) *cachetest.Server {
	t.Helper()
	s := cachetest.New(opts)
	ctx := t.Context()
	for _, n := range []string{"a", "b", "c"} {
		create(t, s, podsGVR, newPod("default", n, nil))
	}
	a := newPod("default", "a", map[string]string{"v": "2"})
	if _, err := s.Update(ctx, podsGVR, a); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, podsGVR, "default", "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestWatchFromOldResourceVersionReplaysExactlyTheEventsAfterIt(t *testing.T) {
	all := []string{
		"ADDED default/a@2",
		"ADDED default/b@3",
		"ADDED default/c@4",
		"MODIFIED default/a@5",
		"DELETED default/b@6",
	}
	for from := 1; from <= 6; from++ {
		t.Run(formatInt(from), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := history(t, cachetest.Options{})
				defer s.Close()
				w, err := s.Watch(t.Context(), podsGVR, "", metav1.ListOptions{ResourceVersion: formatInt(from)})
				if err != nil {
					t.Fatal(err)
				}
				defer w.Stop()
				create(t, s, podsGVR, newPod("default", "d", nil))
				want := append(append([]string{}, all[from-1:]...), "ADDED default/d@7")
				got, closed := drain(t, w)
				if d := diffStrings(want, got); d != "" || closed {
					t.Errorf("Watch(rv=%d) events (closed=%v):%s", from, closed, d)
				}
			})
		})
	}
}

func formatInt(i int) string { return strconv.Itoa(i) }

func TestWatchBeforeRetainedHistoryGets410Expired(t *testing.T) {
	tests := []struct {
		name    string
		opts    cachetest.Options
		compact bool
		from    string
		want    []string
	}{
		{name: "compacted", compact: true, from: "5", want: []string{"ERROR 410 Expired"}},
		{name: "compacted, from current", compact: true, from: "6", want: []string{"ADDED default/d@7"}},
		// HistorySize 2 keeps the events at 5 and 6; 4 was the last dropped.
		{name: "window", opts: cachetest.Options{HistorySize: 2}, from: "3", want: []string{"ERROR 410 Expired"}},
		{name: "window edge", opts: cachetest.Options{HistorySize: 2}, from: "4", want: []string{
			"MODIFIED default/a@5", "DELETED default/b@6", "ADDED default/d@7"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := history(t, tt.opts)
				defer s.Close()
				if tt.compact {
					s.Compact()
				}
				w, err := s.Watch(t.Context(), podsGVR, "", metav1.ListOptions{ResourceVersion: tt.from})
				if err != nil {
					t.Fatalf("Watch: %v, want a watch delivering the error", err)
				}
				defer w.Stop()
				create(t, s, podsGVR, newPod("default", "d", nil))
				got, _ := drain(t, w)
				if d := diffStrings(tt.want, got); d != "" {
					t.Errorf("events:%s", d)
				}
			})
		})
	}
}

func TestExpiredWatchErrorIsRecognisedByAPIErrors(t *testing.T) {
	s := history(t, cachetest.Options{})
	s.Compact()
	w, err := s.Watch(t.Context(), podsGVR, "", metav1.ListOptions{ResourceVersion: "2"})
	if err != nil {
		t.Fatal(err)
	}
	ev, ok := <-w.ResultChan()
	if !ok || ev.Type != watch.Error {
		t.Fatalf("first event = %v, %v; want an ERROR", ev.Type, ok)
	}
	if err := apierrors.FromObject(ev.Object); !apierrors.IsResourceExpired(err) || !apierrors.IsGone(err) && !apierrors.IsResourceExpired(err) {
		t.Errorf("FromObject = %v; want 410 Expired", err)
	}
	if _, ok := <-w.ResultChan(); ok {
		t.Error("watch still open after the error event")
	}
	w.Stop()
}

func TestWatchStartingPoints(t *testing.T) {
	yes, no := true, false
	current := []string{"ADDED default/a@5", "ADDED default/c@4"}
	tests := []struct {
		name string
		opts metav1.ListOptions
		want []string
	}{
		{name: "empty rv sends current state", opts: metav1.ListOptions{}, want: current},
		{name: "rv 0 sends current state", opts: metav1.ListOptions{ResourceVersion: "0"}, want: current},
		{name: "sendInitialEvents=false, empty rv", opts: metav1.ListOptions{SendInitialEvents: &no, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}},
		{name: "sendInitialEvents=false, rv 0", opts: metav1.ListOptions{ResourceVersion: "0", SendInitialEvents: &no, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}},
		{name: "sendInitialEvents=false, rv 4", opts: metav1.ListOptions{ResourceVersion: "4", SendInitialEvents: &no, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan},
			want: []string{"MODIFIED default/a@5", "DELETED default/b@6"}},
		{name: "streaming with bookmarks", opts: metav1.ListOptions{SendInitialEvents: &yes, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true},
			want: append(append([]string{}, current...), "BOOKMARK @6 end")},
		{name: "streaming from rv 3", opts: metav1.ListOptions{ResourceVersion: "3", SendInitialEvents: &yes, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true},
			want: append(append([]string{}, current...), "BOOKMARK @6 end")},
		{name: "streaming without bookmarks", opts: metav1.ListOptions{ResourceVersion: "0", SendInitialEvents: &yes, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan},
			want: current},
		{name: "future rv waits for later events", opts: metav1.ListOptions{ResourceVersion: "7"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := history(t, cachetest.Options{})
				defer s.Close()
				w, err := s.Watch(t.Context(), podsGVR, "", tt.opts)
				if err != nil {
					t.Fatal(err)
				}
				defer w.Stop()
				create(t, s, podsGVR, newPod("default", "d", nil)) // rv 7
				create(t, s, podsGVR, newPod("default", "e", nil)) // rv 8
				want := append(append([]string{}, tt.want...), "ADDED default/d@7", "ADDED default/e@8")
				if tt.opts.ResourceVersion == "7" {
					want = want[1:]
				}
				got, _ := drain(t, w)
				if d := diffStrings(want, got); d != "" {
					t.Errorf("events:%s", d)
				}
			})
		})
	}
}

func TestStreamingWatchCanOmitTheEndBookmark(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := history(t, cachetest.Options{OmitInitialEventsEndBookmark: true, BookmarkInterval: -1})
		defer s.Close()
		yes := true
		w, err := s.Watch(t.Context(), podsGVR, "", metav1.ListOptions{SendInitialEvents: &yes,
			ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		time.Sleep(time.Hour)
		got, closed := drain(t, w)
		if d := diffStrings([]string{"ADDED default/a@5", "ADDED default/c@4"}, got); d != "" || closed {
			t.Errorf("events (closed=%v):%s", closed, d)
		}
	})
}

func TestStreamingWatchWaitsForResourceVersionThenFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := history(t, cachetest.Options{})
		defer s.Close()
		yes := true
		opts := metav1.ListOptions{ResourceVersion: "7", SendInitialEvents: &yes,
			ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true}

		// The write arrives within the freshness timeout: the watch starts.
		go func() {
			time.Sleep(2 * time.Second)
			create(t, s, podsGVR, newPod("default", "d", nil))
		}()
		start := time.Now()
		w, err := s.Watch(t.Context(), podsGVR, "", opts)
		if err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(start); waited != 2*time.Second {
			t.Errorf("Watch waited %v, want 2s", waited)
		}
		got, _ := drain(t, w)
		w.Stop()
		want := []string{"ADDED default/a@5", "ADDED default/c@4", "ADDED default/d@7", "BOOKMARK @7 end"}
		if d := diffStrings(want, got); d != "" {
			t.Errorf("events:%s", d)
		}

		// It never arrives: a 504 with cause ResourceVersionTooLarge after 3s.
		opts.ResourceVersion = "9"
		start = time.Now()
		w, err = s.Watch(t.Context(), podsGVR, "", opts)
		if err != nil {
			t.Fatal(err)
		}
		ev := <-w.ResultChan()
		if waited := time.Since(start); waited != 3*time.Second {
			t.Errorf("Watch waited %v, want 3s", waited)
		}
		err = apierrors.FromObject(ev.Object)
		if ev.Type != watch.Error || !apierrors.IsTimeout(err) || !apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge) {
			t.Errorf("event = %v %v; want ERROR 504 with cause ResourceVersionTooLarge", ev.Type, err)
		}
	})
}

func TestWatchBookmarksCarryTheCurrentResourceVersion(t *testing.T) {
	for _, allow := range []bool{true, false} {
		t.Run(map[bool]string{true: "allowed", false: "not allowed"}[allow], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := cachetest.New(cachetest.Options{BookmarkInterval: 30 * time.Second})
				defer s.Close()
				w, err := s.Watch(t.Context(), podsGVR, "", metav1.ListOptions{ResourceVersion: "1", AllowWatchBookmarks: allow})
				if err != nil {
					t.Fatal(err)
				}
				defer w.Stop()
				create(t, s, podsGVR, newPod("default", "a", nil))                                    // 2
				create(t, s, corev1.SchemeGroupVersion.WithResource("configmaps"), &corev1.ConfigMap{ // 3
					ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "c"}})
				time.Sleep(31 * time.Second)
				got, _ := drain(t, w)
				want := []string{"ADDED default/a@2"}
				if allow {
					// The configmap write moved the server's resourceVersion;
					// the pod watch learns it from the bookmark.
					want = append(want, "BOOKMARK @3")
				}
				if d := diffStrings(want, got); d != "" {
					t.Errorf("events:%s", d)
				}
			})
		})
	}
}

func TestWatchSelectorsTurnTransitionsIntoAddsAndDeletes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := cachetest.New(cachetest.Options{})
		defer s.Close()
		ctx := t.Context()
		w, err := s.Watch(ctx, podsGVR, "ns", metav1.ListOptions{ResourceVersion: "1", LabelSelector: "app=x"})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		byName, err := s.Watch(ctx, podsGVR, "", metav1.ListOptions{ResourceVersion: "1", FieldSelector: "metadata.name=p"})
		if err != nil {
			t.Fatal(err)
		}
		defer byName.Stop()

		update := func(labels map[string]string) {
			if _, err := s.Update(ctx, podsGVR, newPod("ns", "p", labels)); err != nil {
				t.Fatal(err)
			}
		}
		create(t, s, podsGVR, newPod("ns", "p", map[string]string{"app": "y"}))           // 2: not selected
		create(t, s, podsGVR, newPod("other", "q", map[string]string{"app": "x"}))        // 3: other namespace
		update(map[string]string{"app": "x"})                                             // 4: starts matching
		update(map[string]string{"app": "x", "v": "2"})                                   // 5: still matching
		update(map[string]string{"app": "z"})                                             // 6: stops matching
		if err := s.Delete(ctx, podsGVR, "ns", "p", metav1.DeleteOptions{}); err != nil { // 7
			t.Fatal(err)
		}
		got, _ := drain(t, w)
		want := []string{"ADDED ns/p@4", "MODIFIED ns/p@5", "DELETED ns/p@6"}
		if d := diffStrings(want, got); d != "" {
			t.Errorf("label selector events:%s", d)
		}
		got, _ = drain(t, byName)
		want = []string{"ADDED ns/p@2", "MODIFIED ns/p@4", "MODIFIED ns/p@5", "MODIFIED ns/p@6", "DELETED ns/p@7"}
		if d := diffStrings(want, got); d != "" {
			t.Errorf("field selector events:%s", d)
		}
	})
}

func TestWatchOfAPodsNodeSeesItScheduled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := cachetest.New(cachetest.Options{})
		defer s.Close()
		ctx := t.Context()
		w, err := s.Watch(ctx, podsGVR, "", metav1.ListOptions{FieldSelector: "spec.nodeName=n1"})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		p := create(t, s, podsGVR, newPod("default", "p", nil)).(*corev1.Pod) // 2: unscheduled
		p.Spec.NodeName = "n1"
		if _, err := s.Update(ctx, podsGVR, p); err != nil { // 3: scheduled to n1
			t.Fatal(err)
		}
		got, _ := drain(t, w)
		if d := diffStrings([]string{"ADDED default/p@3"}, got); d != "" {
			t.Errorf("events:%s", d)
		}
	})
}

func TestWatchEnds(t *testing.T) {
	timeout := int64(10)
	tests := []struct {
		name string
		opts metav1.ListOptions
		end  func(s *cachetest.Server, w watch.Interface, cancel func())
	}{
		{name: "Stop", end: func(_ *cachetest.Server, w watch.Interface, _ func()) { w.Stop() }},
		{name: "context cancelled", end: func(_ *cachetest.Server, _ watch.Interface, cancel func()) { cancel() }},
		{name: "TimeoutSeconds", opts: metav1.ListOptions{TimeoutSeconds: &timeout}, end: func(*cachetest.Server, watch.Interface, func()) {
			time.Sleep(10 * time.Second)
		}},
		{name: "CloseAllWatches", end: func(s *cachetest.Server, _ watch.Interface, _ func()) { s.CloseAllWatches() }},
		{name: "server Close", end: func(s *cachetest.Server, _ watch.Interface, _ func()) { s.Close() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := cachetest.New(cachetest.Options{})
				defer s.Close()
				ctx, cancel := contextWithCancel(t)
				defer cancel()
				tt.opts.AllowWatchBookmarks = true
				w, err := s.Watch(ctx, podsGVR, "", tt.opts)
				if err != nil {
					t.Fatal(err)
				}
				defer w.Stop()
				time.Sleep(9 * time.Second)
				synctest.Wait()
				if n := s.ActiveWatches(); n != 1 {
					t.Fatalf("ActiveWatches = %d before the end, want 1", n)
				}
				tt.end(s, w, cancel)
				if _, closed := drain(t, w); !closed {
					t.Error("result channel still open")
				}
				if n := s.ActiveWatches(); n != 0 {
					t.Errorf("ActiveWatches = %d after the end, want 0", n)
				}
			})
		})
	}
}

func TestSlowWatcherIsClosedAndWritersDoNotBlock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := cachetest.New(cachetest.Options{WatchBufferSize: 5})
		defer s.Close()
		w, err := s.Watch(t.Context(), podsGVR, "", metav1.ListOptions{ResourceVersion: "1"})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		// Nobody reads: the writes must all complete anyway.
		for i := range 20 {
			create(t, s, podsGVR, newPod("default", formatInt(i), nil))
		}
		synctest.Wait()
		if n := s.ActiveWatches(); n != 0 {
			t.Errorf("ActiveWatches = %d, want the slow watcher closed", n)
		}
		if _, closed := drain(t, w); !closed {
			t.Error("slow watcher's channel still open")
		}
		// A consumer that keeps up is never closed.
		w2, err := s.Watch(t.Context(), podsGVR, "", metav1.ListOptions{ResourceVersion: s.ResourceVersion()})
		if err != nil {
			t.Fatal(err)
		}
		defer w2.Stop()
		var got []string
		for i := range 20 {
			create(t, s, podsGVR, newPod("other", formatInt(i), nil))
			got = append(got, receive(t, w2, 1)...)
		}
		if len(got) != 20 {
			t.Errorf("got %d events, want 20", len(got))
		}
	})
}

func TestFailAllWatchesDeliversQueuedEventsThenTheError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := cachetest.New(cachetest.Options{})
		defer s.Close()
		w, err := s.Watch(t.Context(), podsGVR, "", metav1.ListOptions{ResourceVersion: "1"})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		create(t, s, podsGVR, newPod("default", "a", nil))
		s.FailAllWatches(apierrors.NewResourceExpired("gone"))
		create(t, s, podsGVR, newPod("default", "b", nil))
		got, closed := drain(t, w)
		if d := diffStrings([]string{"ADDED default/a@2", "ERROR 410 Expired"}, got); d != "" || !closed {
			t.Errorf("events (closed=%v):%s", closed, d)
		}
	})
}

func TestWatchEventsAreCopies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := cachetest.New(cachetest.Options{})
		defer s.Close()
		create(t, s, podsGVR, newPod("default", "a", nil))
		w, err := s.Watch(t.Context(), podsGVR, "", metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		ev := <-w.ResultChan()
		ev.Object.(*corev1.Pod).Labels = map[string]string{"mutated": "yes"}
		got, err := s.Get(t.Context(), podsGVR, "default", "a")
		if err != nil {
			t.Fatal(err)
		}
		if l := got.(*corev1.Pod).Labels; l != nil {
			t.Errorf("stored labels = %v after mutating an event, want none", l)
		}
	})
}

func TestWatchRejects(t *testing.T) {
	yes := true
	streaming := metav1.ListOptions{SendInitialEvents: &yes, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}
	tests := []struct {
		name      string
		opts      cachetest.Options
		closed    bool
		gvr       schema.GroupVersionResource
		namespace string
		list      metav1.ListOptions
		want      func(error) bool
	}{
		{name: "unregistered resource", gvr: corev1.SchemeGroupVersion.WithResource("widgets"), want: apierrors.IsNotFound},
		{name: "namespace of a cluster-scoped resource", gvr: nodesGVR, namespace: "ns", want: apierrors.IsBadRequest},
		{name: "match without sendInitialEvents", gvr: podsGVR, list: metav1.ListOptions{ResourceVersion: "1", ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}, want: apierrors.IsInvalid},
		{name: "sendInitialEvents without match", gvr: podsGVR, list: metav1.ListOptions{SendInitialEvents: &yes}, want: apierrors.IsInvalid},
		{name: "watch list disabled", opts: cachetest.Options{DisableWatchList: true}, gvr: podsGVR, list: streaming, want: apierrors.IsInvalid},
		{name: "bad label selector", gvr: podsGVR, list: metav1.ListOptions{LabelSelector: "a=(b"}, want: apierrors.IsBadRequest},
		{name: "unsupported field", gvr: podsGVR, list: metav1.ListOptions{FieldSelector: "spec.bogus=n"}, want: apierrors.IsBadRequest},
		{name: "bad resourceVersion", gvr: podsGVR, list: metav1.ListOptions{ResourceVersion: "abc"}, want: apierrors.IsBadRequest},
		{name: "closed server", closed: true, gvr: podsGVR, want: apierrors.IsServiceUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := cachetest.New(tt.opts)
			if tt.closed {
				s.Close()
			}
			w, err := s.Watch(t.Context(), tt.gvr, tt.namespace, tt.list)
			if err == nil {
				w.Stop()
			}
			if !tt.want(err) {
				t.Errorf("Watch() error = %v", err)
			}
			s.Close()
		})
	}
}

func contextWithCancel(t *testing.T) (context.Context, context.CancelFunc) {
	return context.WithCancel(t.Context())
}
