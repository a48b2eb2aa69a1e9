package cache_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quotakit/quotakit/cache"
	"github.com/quotakit/quotakit/cache/cachetest"
)

// recorder is a handler that records what it is told as strings such as
// "add ns/a initial", "update ns/a 3->4", "delete ns/a", "delete ns/a
// tombstone".
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) record(s string) {
	r.mu.Lock()
	r.events = append(r.events, s)
	r.mu.Unlock()
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.events
	r.events = nil
	return out
}

func podKey(obj any) string {
	p := obj.(*corev1.Pod)
	return p.Namespace + "/" + p.Name
}

func (r *recorder) OnAdd(obj any, initial bool) {
	s := "add " + podKey(obj)
	if initial {
		s += " initial"
	}
	r.record(s)
}

func (r *recorder) OnUpdate(oldObj, newObj any) {
	r.record(fmt.Sprintf("update %s %s->%s", podKey(newObj), oldObj.(*corev1.Pod).ResourceVersion, newObj.(*corev1.Pod).ResourceVersion))
}

func (r *recorder) OnDelete(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		r.record("delete " + t.Key + " tombstone")
		return
	}
	r.record("delete " + podKey(obj))
}

// startInformer runs inf until the returned function is called, which waits
// for Run to return.
func startInformer(ctx context.Context, inf *cache.SharedIndexInformer) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		inf.Run(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

func newPodInformer(srv *cachetest.Server, opts cache.SharedIndexInformerOptions) *cache.SharedIndexInformer {
	return cache.NewSharedIndexInformer(srv.ListerWatcher(podsGVR, ""), &corev1.Pod{}, opts)
}

func update(t *testing.T, srv *cachetest.Server, ns, name string, labels map[string]string) {
	t.Helper()
	obj, err := srv.Get(context.Background(), podsGVR, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	p := obj.(*corev1.Pod)
	p.Labels = labels
	if _, err := srv.Update(context.Background(), podsGVR, p); err != nil {
		t.Fatal(err)
	}
}

func del(t *testing.T, srv *cachetest.Server, ns, name string) {
	t.Helper()
	if err := srv.Delete(context.Background(), podsGVR, ns, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestInformerNotifiesHandlers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := cachetest.New(cachetest.Options{})
		defer srv.Close()
		mustCreate(t, srv, podsGVR, testPod("ns", "a")) // rv 2
		inf := newPodInformer(srv, cache.SharedIndexInformerOptions{})
		rec := &recorder{}
		reg, err := inf.AddEventHandler(rec)
		if err != nil {
			t.Fatal(err)
		}
		if inf.HasSynced() || reg.HasSynced() {
			t.Fatal("synced before Run")
		}
		stop := startInformer(t.Context(), inf)
		defer stop()
		if !cache.WaitForCacheSync(t.Context(), inf.HasSynced, reg.HasSynced) {
			t.Fatal("WaitForCacheSync = false")
		}
		mustCreate(t, srv, podsGVR, testPod("ns", "b")) // rv 3
		synctest.Wait()
		update(t, srv, "ns", "a", map[string]string{"v": "1"})
		synctest.Wait()
		del(t, srv, "ns", "b") // rv 5
		synctest.Wait()
		want := []string{"add ns/a initial", "add ns/b", "update ns/a 2->4", "delete ns/b"}
		if diff := cmp.Diff(want, rec.take()); diff != "" {
			t.Errorf("notifications (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"ns/a"}, storeKeys(inf.GetStore())); diff != "" {
			t.Errorf("store (-want +got):\n%s", diff)
		}
		if got := inf.LastSyncResourceVersion(); got != "5" {
			t.Errorf("LastSyncResourceVersion() = %q, want 5", got)
		}
	})
}

func TestInformerLateHandlerGetsCurrentObjectsFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := cachetest.New(cachetest.Options{})
		defer srv.Close()
		mustCreate(t, srv, podsGVR, testPod("ns", "a"))
		mustCreate(t, srv, podsGVR, testPod("ns", "b"))
		inf := newPodInformer(srv, cache.SharedIndexInformerOptions{})
		stop := startInformer(t.Context(), inf)
		defer stop()
		synctest.Wait()
		if !inf.HasSynced() {
			t.Fatal("informer not synced")
		}

		// A handler that blocks on its first call, to see its HasSynced
		// false while initial adds are pending.
		release := make(chan struct{})
		rec := &recorder{}
		var first sync.Once
		reg, err := inf.AddEventHandler(firstBlocks{recorder: rec, first: &first, release: release})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if reg.HasSynced() {
			t.Error("late handler synced before handling its initial adds")
		}
		close(release)
		mustCreate(t, srv, podsGVR, testPod("ns", "c"))
		synctest.Wait()
		if !reg.HasSynced() {
			t.Error("late handler not synced after its initial adds")
		}
		got := rec.take()
		initial := got[:2]
		slicesSort(initial)
		if diff := cmp.Diff([]string{"add ns/a initial", "add ns/b initial", "add ns/c"}, got); diff != "" {
			t.Errorf("late handler notifications (-want +got):\n%s", diff)
		}
	})
}

func TestInformerResyncReachesOnlyHandlersDue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := cachetest.New(cachetest.Options{BookmarkInterval: -1})
		defer srv.Close()
		mustCreate(t, srv, podsGVR, testPod("ns", "a"))
		inf := newPodInformer(srv, cache.SharedIndexInformerOptions{ResyncPeriod: time.Minute})
		every, never, fast := &recorder{}, &recorder{}, &recorder{}
		zero, twenty := time.Duration(0), 20*time.Second
		inf.AddEventHandler(every) // the informer's period: 1m
		inf.AddEventHandlerWithOptions(never, cache.HandlerOptions{ResyncPeriod: &zero})
		inf.AddEventHandlerWithOptions(fast, cache.HandlerOptions{ResyncPeriod: &twenty}) // lowers the check period
		stop := startInformer(t.Context(), inf)
		defer stop()
		synctest.Wait()
		for _, r := range []*recorder{every, never, fast} {
			r.take()
		}
		time.Sleep(61 * time.Second)
		synctest.Wait()
		resyncs := func(r *recorder) int {
			n := 0
			for _, e := range r.take() {
				if e == "update ns/a 2->2" {
					n++
				}
			}
			return n
		}
		if got := resyncs(every); got != 1 {
			t.Errorf("1m handler got %d resyncs in 61s, want 1", got)
		}
		if got := resyncs(never); got != 0 {
			t.Errorf("handler without resync got %d resyncs, want 0", got)
		}
		if got := resyncs(fast); got != 3 {
			t.Errorf("20s handler got %d resyncs in 61s, want 3", got)
		}
	})
}

func TestInformerResyncPeriodOfLateHandlerIsRaisedToCheckPeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := cachetest.New(cachetest.Options{BookmarkInterval: -1})
		defer srv.Close()
		mustCreate(t, srv, podsGVR, testPod("ns", "a"))
		inf := newPodInformer(srv, cache.SharedIndexInformerOptions{ResyncPeriod: 30 * time.Second})
		stop := startInformer(t.Context(), inf)
		defer stop()
		synctest.Wait()
		late := &recorder{}
		ms := 500 * time.Millisecond // below the minimum and the check period
		inf.AddEventHandlerWithOptions(late, cache.HandlerOptions{ResyncPeriod: &ms})
		synctest.Wait()
		late.take()
		time.Sleep(61 * time.Second)
		synctest.Wait()
		if got := len(late.take()); got != 2 {
			t.Errorf("late 500ms handler got %d resyncs in 61s, want 2 (raised to 30s)", got)
		}
	})
}

func TestInformerRelistDeliversOnlyChanges(t *testing.T) {
	// After a relist, unchanged objects are resyncs and reach no handler
	// that is not due one, even when the informer never resyncs
	// (client-go delivers them to everyone then; kubernetes#86015).
	synctest.Test(t, func(t *testing.T) {
		srv := cachetest.New(cachetest.Options{})
		defer srv.Close()
		mustCreate(t, srv, podsGVR, testPod("ns", "a"))
		mustCreate(t, srv, podsGVR, testPod("ns", "b"))
		inf := newPodInformer(srv, cache.SharedIndexInformerOptions{})
		inf.SetWatchErrorHandler(func(context.Context, *cache.Reflector, error) {})
		rec := &recorder{}
		inf.AddEventHandler(rec)
		stop := startInformer(t.Context(), inf)
		defer stop()
		synctest.Wait()
		rec.take()

		// Break watches, change the world behind the informer's back, and
		// let it relist.
		srv.FailNextWatches(1000, nil)
		srv.FailAllWatches(nil)
		synctest.Wait()
		update(t, srv, "ns", "a", map[string]string{"v": "2"}) // rv 4
		del(t, srv, "ns", "b")
		srv.FailNextWatches(0, nil)
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		want := []string{"update ns/a 2->4", "delete ns/b tombstone"}
		if diff := cmp.Diff(want, rec.take()); diff != "" {
			t.Errorf("notifications after relist (-want +got):\n%s", diff)
		}
	})
}

func TestInformerTransformRunsOncePerObject(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := cachetest.New(cachetest.Options{})
		defer srv.Close()
		mustCreate(t, srv, podsGVR, testPod("ns", "a"))
		inf := newPodInformer(srv, cache.SharedIndexInformerOptions{ResyncPeriod: time.Minute})
		var mu sync.Mutex
		calls := map[string]int{}
		if err := inf.SetTransform(func(obj any) (any, error) {
			p := obj.(*corev1.Pod)
			mu.Lock()
			calls[p.Name+"@"+p.ResourceVersion]++
			mu.Unlock()
			p.ManagedFields = nil
			p.Annotations = map[string]string{"transformed": "yes"}
			return p, nil
		}); err != nil {
			t.Fatal(err)
		}
		rec := &recorder{}
		inf.AddEventHandler(rec)
		stop := startInformer(t.Context(), inf)
		defer stop()
		synctest.Wait()
		mustCreate(t, srv, podsGVR, testPod("ns", "b"))
		update(t, srv, "ns", "a", map[string]string{"v": "1"})
		time.Sleep(2 * time.Minute) // resyncs do not transform again
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		for k, n := range calls {
			if n != 1 {
				t.Errorf("transform ran %d times for %s, want 1", n, k)
			}
		}
		if len(calls) != 3 {
			t.Errorf("transform saw %v, want 3 object versions", calls)
		}
		for _, obj := range inf.GetStore().List() {
			if obj.(*corev1.Pod).Annotations["transformed"] != "yes" {
				t.Errorf("stored object not transformed: %v", obj)
			}
		}
		if err := inf.SetTransform(nil); err == nil {
			t.Error("SetTransform after Run succeeded, want an error")
		}
	})
}

func TestInformerAddIndexersAfterStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := cachetest.New(cachetest.Options{})
		defer srv.Close()
		p := testPod("ns", "a")
		p.Spec.NodeName = "node-1"
		mustCreate(t, srv, podsGVR, p)
		inf := newPodInformer(srv, cache.SharedIndexInformerOptions{})
		stop := startInformer(t.Context(), inf)
		synctest.Wait()
		err := inf.AddIndexers(cache.Indexers{"node": func(obj any) ([]string, error) {
			return []string{obj.(*corev1.Pod).Spec.NodeName}, nil
		}})
		if err != nil {
			t.Fatalf("AddIndexers after start: %v", err)
		}
		got, err := inf.GetIndexer().ByIndex("node", "node-1")
		if err != nil || len(got) != 1 {
			t.Errorf("ByIndex(node, node-1) = %v, %v; want the pod", got, err)
		}
		stop()
		if !inf.IsStopped() {
			t.Error("IsStopped() = false after Run returned")
		}
		if err := inf.AddIndexers(cache.Indexers{"x": nil}); err == nil {
			t.Error("AddIndexers after stop succeeded")
		}
		if _, err := inf.AddEventHandler(&recorder{}); err == nil {
			t.Error("AddEventHandler after stop succeeded")
		}
	})
}

func TestInformerRunTwiceReturnsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := cachetest.New(cachetest.Options{})
		defer srv.Close()
		inf := newPodInformer(srv, cache.SharedIndexInformerOptions{})
		stop := startInformer(t.Context(), inf)
		defer stop()
		synctest.Wait()
		inf.Run(t.Context()) // must not block
	})
}

func TestWaitForCacheSyncCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if cache.WaitForCacheSync(ctx, func() bool { return true }, func() bool { return false }) {
			t.Error("WaitForCacheSync = true with a never-synced function")
		}
		if !cache.WaitForCacheSync(t.Context()) {
			t.Error("WaitForCacheSync() with nothing to wait for = false")
		}
	})
}

func TestInformerRemoveEventHandlerAndWaitBeforeRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := cachetest.New(cachetest.Options{})
		defer srv.Close()
		inf := newPodInformer(srv, cache.SharedIndexInformerOptions{})
		reg, _ := inf.AddEventHandler(&recorder{})
		if err := inf.RemoveEventHandlerAndWait(t.Context(), reg); err != nil {
			t.Errorf("RemoveEventHandlerAndWait before Run = %v, want nil at once", err)
		}
		// A registration another informer made is not ours to wait for.
		other := newPodInformer(srv, cache.SharedIndexInformerOptions{})
		otherReg, _ := other.AddEventHandler(&recorder{})
		if err := inf.RemoveEventHandlerAndWait(t.Context(), otherReg); err != nil {
			t.Errorf("RemoveEventHandlerAndWait(foreign) = %v, want nil", err)
		}
	})
}

func TestInformerWithoutListerWatcher(t *testing.T) {
	inf := cache.NewSharedIndexInformer(nil, &corev1.Pod{}, cache.SharedIndexInformerOptions{})
	inf.Run(t.Context()) // returns at once, without a panic
	if inf.HasSynced() {
		t.Error("HasSynced() = true without a ListerWatcher")
	}
	if !inf.IsStopped() {
		t.Error("IsStopped() = false after Run returned")
	}
}

// firstBlocks is a recorder whose first add waits for release.
type firstBlocks struct {
	*recorder
	first   *sync.Once
	release chan struct{}
}

func (h firstBlocks) OnAdd(obj any, initial bool) {
	h.first.Do(func() { <-h.release })
	h.recorder.OnAdd(obj, initial)
}
