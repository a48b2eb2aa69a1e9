package cachetest_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quotakit/quotakit/cache/cachetest"
)

func TestFailNextListsAndWatches(t *testing.T) {
	ctx := t.Context()
	s := cachetest.New(cachetest.Options{})
	defer s.Close()
	tooMany := apierrors.NewTooManyRequests("slow down", 1)

	s.FailNextLists(2, tooMany)
	for i := range 2 {
		if _, err := s.List(ctx, podsGVR, "", metav1.ListOptions{}); !apierrors.IsTooManyRequests(err) {
			t.Errorf("List %d error = %v, want the injected 429", i, err)
		}
	}
	if _, err := s.List(ctx, podsGVR, "", metav1.ListOptions{}); err != nil {
		t.Errorf("List after the failures: %v", err)
	}

	s.FailNextWatches(1, nil)
	if _, err := s.Watch(ctx, podsGVR, "", metav1.ListOptions{}); !apierrors.IsInternalError(err) {
		t.Errorf("Watch error = %v, want an injected 500", err)
	}
	w, err := s.Watch(ctx, podsGVR, "", metav1.ListOptions{})
	if err != nil {
		t.Fatalf("Watch after the failure: %v", err)
	}
	w.Stop()

	s.FailNextLists(1, cachetest.NewTooLargeResourceVersionError(10, 2))
	_, err = s.List(ctx, podsGVR, "", metav1.ListOptions{})
	if !apierrors.IsTimeout(err) || !apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge) || err.Error() != "Timeout: Too large resource version: 10, current: 2" {
		t.Errorf("injected too-large error = %v", err)
	}

	// n <= 0 cancels pending failures.
	s.FailNextLists(5, tooMany)
	s.FailNextLists(0, nil)
	if _, err := s.List(ctx, podsGVR, "", metav1.ListOptions{}); err != nil {
		t.Errorf("List after cancelling failures: %v", err)
	}
}

func TestDelaysHonourTheContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := cachetest.New(cachetest.Options{})
		defer s.Close()
		s.SetListDelay(5 * time.Second)
		s.SetWatchDelay(7 * time.Second)

		start := time.Now()
		if _, err := s.List(t.Context(), podsGVR, "", metav1.ListOptions{}); err != nil || time.Since(start) != 5*time.Second {
			t.Errorf("List = %v after %v, want success after 5s", err, time.Since(start))
		}
		start = time.Now()
		w, err := s.Watch(t.Context(), podsGVR, "", metav1.ListOptions{})
		if err != nil || time.Since(start) != 7*time.Second {
			t.Fatalf("Watch = %v after %v, want success after 7s", err, time.Since(start))
		}
		w.Stop()

		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		start = time.Now()
		if _, err := s.List(ctx, podsGVR, "", metav1.ListOptions{}); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != time.Second {
			t.Errorf("List = %v after %v, want the deadline after 1s", err, time.Since(start))
		}
		if _, err := s.Watch(ctx, podsGVR, "", metav1.ListOptions{}); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Watch with a done context = %v", err)
		}

		s.SetListDelay(0)
		start = time.Now()
		if _, err := s.List(t.Context(), podsGVR, "", metav1.ListOptions{}); err != nil || time.Since(start) != 0 {
			t.Errorf("List without delay = %v after %v", err, time.Since(start))
		}
	})
}

func TestRequestsRecordEveryListAndWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := cachetest.New(cachetest.Options{})
		defer s.Close()
		lw := s.ListerWatcher(podsGVR, "ns")
		ctx := t.Context()
		s.FailNextLists(1, apierrors.NewResourceExpired("expired"))
		if _, err := lw.List(ctx, metav1.ListOptions{ResourceVersion: "0"}); err == nil {
			t.Fatal("injected failure did not happen")
		}
		if _, err := lw.List(ctx, metav1.ListOptions{ResourceVersion: "1"}); err != nil {
			t.Fatal(err)
		}
		w, err := lw.Watch(ctx, metav1.ListOptions{ResourceVersion: "1", AllowWatchBookmarks: true})
		if err != nil {
			t.Fatal(err)
		}
		w.Stop()
		if _, err := lw.List(ctx, metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
		want := []cachetest.Request{
			{Verb: "list", GVR: podsGVR, Namespace: "ns", Options: metav1.ListOptions{ResourceVersion: "0"}},
			{Verb: "list", GVR: podsGVR, Namespace: "ns", Options: metav1.ListOptions{ResourceVersion: "1"}},
			{Verb: "watch", GVR: podsGVR, Namespace: "ns", Options: metav1.ListOptions{ResourceVersion: "1", AllowWatchBookmarks: true}},
			{Verb: "list", GVR: podsGVR, Namespace: "ns", Options: metav1.ListOptions{}},
		}
		if d := cmp.Diff(want, s.Requests()); d != "" {
			t.Errorf("Requests (-want +got):\n%s", d)
		}
		s.ResetRequests()
		if got := s.Requests(); len(got) != 0 {
			t.Errorf("Requests after reset = %v", got)
		}
	})
}

func TestListerWatcherScopesToItsNamespace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := cachetest.New(cachetest.Options{})
		defer s.Close()
		create(t, s, podsGVR, newPod("a", "p", nil))
		create(t, s, podsGVR, newPod("b", "p", nil))
		lw := s.ListerWatcher(podsGVR, "b")
		list, err := lw.List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, rv := listKeys(t, list)
		if d := diffStrings([]string{"b/p"}, got); d != "" {
			t.Errorf("List:%s", d)
		}
		w, err := lw.Watch(t.Context(), metav1.ListOptions{ResourceVersion: rv})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		create(t, s, podsGVR, newPod("a", "q", nil))
		create(t, s, podsGVR, newPod("b", "q", nil))
		events, _ := drain(t, w)
		if d := diffStrings([]string{"ADDED b/q@5"}, events); d != "" {
			t.Errorf("Watch:%s", d)
		}

		bad := s.ListerWatcher(podsGVR.GroupVersion().WithResource("widgets"), "")
		if _, err := bad.List(t.Context(), metav1.ListOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("List of an unregistered resource = %v, want 404", err)
		}
		if _, err := bad.Watch(t.Context(), metav1.ListOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("Watch of an unregistered resource = %v, want 404", err)
		}
	})
}

func TestCompactKeepsObjects(t *testing.T) {
	s := history(t, cachetest.Options{})
	s.Compact()
	list, err := s.List(t.Context(), podsGVR, "", metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, rv := listKeys(t, list); diffStrings([]string{"default/a", "default/c"}, got) != "" || rv != "6" {
		t.Errorf("List after Compact = %v at %s", got, rv)
	}
}

func TestConcurrentUse(t *testing.T) {
	// Writers, listers and watchers at once, for the race detector; every
	// watcher that keeps up sees every write of its resource in order.
	synctest.Test(t, func(t *testing.T) {
		s := cachetest.New(cachetest.Options{})
		defer s.Close()
		ctx := t.Context()
		const writers, writes = 4, 50
		w, err := s.Watch(ctx, podsGVR, "", metav1.ListOptions{ResourceVersion: "1"})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		done := make(chan struct{})
		for i := range writers {
			go func() {
				defer func() { done <- struct{}{} }()
				for j := range writes {
					p := newPod("ns"+formatInt(i), "p"+formatInt(j), nil)
					if _, err := s.Create(ctx, podsGVR, p); err != nil {
						t.Error(err)
						return
					}
					if _, err := s.List(ctx, podsGVR, "", metav1.ListOptions{Limit: 10}); err != nil {
						t.Error(err)
						return
					}
					if err := s.Delete(ctx, podsGVR, p.Namespace, p.Name, metav1.DeleteOptions{}); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		// Unconditional updates of one object race; none may be lost or
		// fail.
		create(t, s, podsGVR, newPod("shared", "p", nil))
		for i := range writers {
			go func() {
				defer func() { done <- struct{}{} }()
				for j := range writes {
					p := newPod("shared", "p", map[string]string{formatInt(i): formatInt(j)})
					if _, err := s.Update(ctx, podsGVR, p); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		var last int
		for range writers*writes*2 + 1 + writers*writes {
			ev := <-w.ResultChan()
			rv := rvOf(t, ev.Object)
			n := 0
			for _, c := range rv {
				n = n*10 + int(c-'0')
			}
			if n <= last {
				t.Fatalf("event at rv %d after %d", n, last)
			}
			last = n
		}
		for range 2 * writers {
			<-done
		}
	})
}

func TestShareObjectsHandsOutStoredObjects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := cachetest.New(cachetest.Options{ShareObjects: true})
		defer s.Close()
		ctx := t.Context()
		w, err := s.Watch(ctx, podsGVR, "", metav1.ListOptions{ResourceVersion: "1"})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		created := create(t, s, podsGVR, newPod("default", "a", nil))
		got, err := s.Get(ctx, podsGVR, "default", "a")
		if err != nil {
			t.Fatal(err)
		}
		added := <-w.ResultChan()
		if got != created || added.Object != created {
			t.Error("ShareObjects: Create, Get and the watch returned different objects")
		}
		if err := s.Delete(ctx, podsGVR, "default", "a", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// A deletion is stamped with its own resourceVersion, so it is a
		// copy even here, and the shared object keeps its own.
		deleted := <-w.ResultChan()
		if deleted.Object == created || rvOf(t, deleted.Object) != "3" || rvOf(t, created) != "2" {
			t.Errorf("DELETED at %s, stored object at %s; want a copy at 3 and the original at 2", rvOf(t, deleted.Object), rvOf(t, created))
		}
	})
}
