package cache_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/quotakit/quotakit/cache"
	"github.com/quotakit/quotakit/cache/cachetest"
)

func TestInformerRemovedHandlerReceivesNothingMore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := cachetest.New(cachetest.Options{})
		defer srv.Close()
		inf := newPodInformer(srv, cache.SharedIndexInformerOptions{})
		kept, removed := &recorder{}, &recorder{}
		inf.AddEventHandler(kept)
		reg, _ := inf.AddEventHandler(removed)
		stop := startInformer(t.Context(), inf)
		defer stop()
		synctest.Wait()
		mustCreate(t, srv, podsGVR, testPod("ns", "a"))
		synctest.Wait()
		if err := inf.RemoveEventHandler(reg); err != nil {
			t.Fatal(err)
		}
		if err := inf.RemoveEventHandler(reg); err != nil {
			t.Errorf("second RemoveEventHandler = %v, want nil", err)
		}
		mustCreate(t, srv, podsGVR, testPod("ns", "b"))
		synctest.Wait()
		if diff := cmp.Diff([]string{"add ns/a"}, removed.take()); diff != "" {
			t.Errorf("removed handler (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"add ns/a", "add ns/b"}, kept.take()); diff != "" {
			t.Errorf("kept handler (-want +got):\n%s", diff)
		}
	})
}

func TestInformerRemoveEventHandlerAndWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := cachetest.New(cachetest.Options{})
		defer srv.Close()
		inf := newPodInformer(srv, cache.SharedIndexInformerOptions{})
		entered, release := make(chan struct{}), make(chan struct{})
		var returned bool
		var mu sync.Mutex
		reg, _ := inf.AddEventHandler(cache.ResourceEventHandlerFuncs[any]{AddFunc: func(any, bool) {
			close(entered)
			<-release
			time.Sleep(time.Second)
			mu.Lock()
			returned = true
			mu.Unlock()
		}})
		stop := startInformer(t.Context(), inf)
		defer stop()
		mustCreate(t, srv, podsGVR, testPod("ns", "a"))
		<-entered
		close(release)
		if err := inf.RemoveEventHandlerAndWait(t.Context(), reg); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if !returned {
			t.Error("RemoveEventHandlerAndWait returned before the handler's call did")
		}
	})
}

func TestInformerHandlerPanicIsRecovered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := cachetest.New(cachetest.Options{})
		defer srv.Close()
		mustCreate(t, srv, podsGVR, testPod("ns", "a"))
		var mu sync.Mutex
		var lines []string
		ctx := logLines(t.Context(), &mu, &lines)
		inf := newPodInformer(srv, cache.SharedIndexInformerOptions{})
		rec := &recorder{}
		reg, _ := inf.AddEventHandler(cache.ResourceEventHandlerFuncs[any]{
			AddFunc: func(obj any, initial bool) {
				if podKey(obj) == "ns/a" {
					panic("handler bug")
				}
				rec.OnAdd(obj, initial)
			},
		})
		stop := startInformer(ctx, inf)
		defer stop()
		synctest.Wait()
		if !reg.HasSynced() {
			t.Error("a handler that panicked on an initial add never synced (kubernetes#129024)")
		}
		mustCreate(t, srv, podsGVR, testPod("ns", "b"))
		synctest.Wait()
		if diff := cmp.Diff([]string{"add ns/b"}, rec.take()); diff != "" {
			t.Errorf("notifications after the panic (-want +got):\n%s", diff)
		}
		mu.Lock()
		defer mu.Unlock()
		if !strings.Contains(strings.Join(lines, "\n"), "handler bug") {
			t.Errorf("panic not logged; log:\n%s", strings.Join(lines, "\n"))
		}
	})
}

func TestInformerSlowHandlerDelaysOnlyItself(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := cachetest.New(cachetest.Options{})
		defer srv.Close()
		inf := newPodInformer(srv, cache.SharedIndexInformerOptions{})
		fast := &recorder{}
		block := make(chan struct{})
		inf.AddEventHandler(fast)
		inf.AddEventHandler(cache.ResourceEventHandlerFuncs[any]{AddFunc: func(any, bool) { <-block }})
		stop := startInformer(t.Context(), inf)
		defer stop()
		for i := range 50 {
			mustCreate(t, srv, podsGVR, testPod("ns", fmt.Sprint("p", i)))
		}
		synctest.Wait()
		if n := len(fast.take()); n != 50 {
			t.Errorf("fast handler got %d of 50 adds while the other is blocked", n)
		}
		if n := len(inf.GetStore().List()); n != 50 {
			t.Errorf("store holds %d of 50 objects while a handler is blocked", n)
		}
		close(block)
	})
}

func TestInformerTypedAndFilteringHandlers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := cachetest.New(cachetest.Options{})
		defer srv.Close()
		inf := newPodInformer(srv, cache.SharedIndexInformerOptions{})
		inf.SetWatchErrorHandler(func(context.Context, *cache.Reflector, error) {})
		var mu sync.Mutex
		var typed, filtered []string
		inf.AddEventHandler(cache.ResourceEventHandlerFuncs[*corev1.Pod]{
			AddFunc: func(p *corev1.Pod, _ bool) {
				mu.Lock()
				typed = append(typed, "add "+p.Name)
				mu.Unlock()
			},
			DeleteFunc: func(d cache.DeletedObject[*corev1.Pod]) {
				mu.Lock()
				typed = append(typed, fmt.Sprintf("delete %s unknown=%v object=%v", d.Key, d.FinalStateUnknown, d.Object != nil))
				mu.Unlock()
			},
		})
		inf.AddEventHandler(cache.FilteringResourceEventHandler{
			FilterFunc: func(obj any) bool {
				p, ok := obj.(*corev1.Pod)
				return ok && p.Labels["team"] == "a"
			},
			Handler: cache.ResourceEventHandlerFuncs[any]{
				AddFunc:    func(obj any, _ bool) { mu.Lock(); filtered = append(filtered, "add "+podKey(obj)); mu.Unlock() },
				UpdateFunc: func(_, obj any) { mu.Lock(); filtered = append(filtered, "update "+podKey(obj)); mu.Unlock() },
				DeleteFunc: func(d cache.DeletedObject[any]) { mu.Lock(); filtered = append(filtered, "delete "+d.Key); mu.Unlock() },
			},
		})
		stop := startInformer(t.Context(), inf)
		defer stop()
		synctest.Wait()
		mustCreate(t, srv, podsGVR, testPod("ns", "x"))
		update(t, srv, "ns", "x", map[string]string{"team": "a"}) // enters the filter: add
		update(t, srv, "ns", "x", map[string]string{"team": "a", "v": "2"})
		update(t, srv, "ns", "x", map[string]string{"team": "b"}) // leaves it: delete
		mustCreate(t, srv, podsGVR, testPod("ns", "y"))
		synctest.Wait()
		// y is deleted while the watch is broken: a tombstone.
		srv.FailNextWatches(1000, nil)
		srv.FailAllWatches(nil)
		synctest.Wait()
		del(t, srv, "ns", "y")
		del(t, srv, "ns", "x")
		srv.FailNextWatches(0, nil)
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		wantTyped := []string{"add x", "add y", "delete ns/x unknown=true object=true", "delete ns/y unknown=true object=true"}
		slicesSort(typed[2:])
		if diff := cmp.Diff(wantTyped, typed); diff != "" {
			t.Errorf("typed handler (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"add ns/x", "update ns/x", "delete ns/x"}, filtered); diff != "" {
			t.Errorf("filtering handler (-want +got):\n%s", diff)
		}
	})
}
