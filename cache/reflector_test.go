package cache_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit/cache"
	"github.com/quotakit/quotakit/cache/cachetest"
)

var (
	podsGVR       = corev1.SchemeGroupVersion.WithResource("pods")
	configMapsGVR = corev1.SchemeGroupVersion.WithResource("configmaps")
)

func testPod(ns, name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

func mustCreate(t *testing.T, srv *cachetest.Server, gvr schema.GroupVersionResource, obj runtime.Object) runtime.Object {
	t.Helper()
	out, err := srv.Create(context.Background(), gvr, obj)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	return out
}

// startReflector runs r until the returned stop function is called; stop
// waits for Run to return.
func startReflector(ctx context.Context, r *cache.Reflector) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

// reflectPods runs a reflector from srv's pods into a new store until stop
// is called.
func reflectPods(t *testing.T, srv *cachetest.Server, opts cache.ReflectorOptions) (*cache.Reflector, cache.Store, func()) {
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	r := cache.NewReflector(srv.ListerWatcher(podsGVR, ""), &corev1.Pod{}, store, opts)
	return r, store, startReflector(t.Context(), r)
}

// summarize renders recorded requests as "list rv=0 limit=500" or
// "watch rv=7".
func summarize(reqs []cachetest.Request) []string {
	var out []string
	for _, r := range reqs {
		s := fmt.Sprintf("%s rv=%s", r.Verb, r.Options.ResourceVersion)
		if r.Options.Limit > 0 {
			s += fmt.Sprintf(" limit=%d", r.Options.Limit)
		}
		if r.Options.Continue != "" {
			s += " continue"
		}
		if r.Options.SendInitialEvents != nil && *r.Options.SendInitialEvents {
			s += " initial"
		}
		out = append(out, s)
	}
	return out
}

// storeKeys returns the sorted keys of a store.
func storeKeys(s cache.Store) []string {
	keys := s.ListKeys()
	slicesSort(keys)
	return keys
}

func slicesSort(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func TestReflectorListsThenFollowsTheWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := cachetest.New(cachetest.Options{})
		defer srv.Close()
		mustCreate(t, srv, podsGVR, testPod("ns", "a"))
		mustCreate(t, srv, podsGVR, testPod("ns", "b"))
		r, store, stop := reflectPods(t, srv, cache.ReflectorOptions{})
		defer stop()
		synctest.Wait()
		if diff := cmp.Diff([]string{"ns/a", "ns/b"}, storeKeys(store)); diff != "" {
			t.Fatalf("after list (-want +got):\n%s", diff)
		}

		mustCreate(t, srv, podsGVR, testPod("ns", "c"))
		if err := srv.Delete(t.Context(), podsGVR, "ns", "a", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		p := testPod("ns", "b")
		p.Labels = map[string]string{"x": "y"}
		if _, err := srv.Update(t.Context(), podsGVR, p); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if diff := cmp.Diff([]string{"ns/b", "ns/c"}, storeKeys(store)); diff != "" {
			t.Errorf("after watch (-want +got):\n%s", diff)
		}
		got, _, _ := store.GetByKey("ns/b")
		if got.(*corev1.Pod).Labels["x"] != "y" {
			t.Errorf("update not applied: %v", got)
		}
		if got, want := r.LastSyncResourceVersion(), srv.ResourceVersion(); got != want {
			t.Errorf("LastSyncResourceVersion() = %s, want %s", got, want)
		}
		if diff := cmp.Diff([]string{"list rv=0 limit=500", "watch rv=3"}, summarize(srv.Requests())); diff != "" {
			t.Errorf("requests (-want +got):\n%s", diff)
		}
	})
}

func TestReflectorResourceVersionSequence(t *testing.T) {
	// The first list asks for "0"; after a watch error the relist asks for
	// the last synced version; after that list gets 410, the reflector
	// relists at once at "".
	synctest.Test(t, func(t *testing.T) {
		srv := cachetest.New(cachetest.Options{})
		defer srv.Close()
		mustCreate(t, srv, podsGVR, testPod("ns", "a"))
		_, store, stop := reflectPods(t, srv, cache.ReflectorOptions{})
		defer stop()
		synctest.Wait()
		mustCreate(t, srv, podsGVR, testPod("ns", "b")) // rv 3
		synctest.Wait()

		srv.FailNextLists(1, apierrors.NewResourceExpired("too old resource version"))
		srv.FailAllWatches(apierrors.NewInternalError(errors.New("etcd unavailable")))
		time.Sleep(time.Minute) // past any backoff
		synctest.Wait()

		want := []string{
			"list rv=0 limit=500",
			"watch rv=2",
			"list rv=3",          // relist not older than the last sync, whole
			"list rv= limit=500", // 410: latest state, at once
			"watch rv=3",         // the "" list was served at rv 3
		}
		if diff := cmp.Diff(want, summarize(srv.Requests())); diff != "" {
			t.Errorf("requests (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"ns/a", "ns/b"}, storeKeys(store)); diff != "" {
			t.Errorf("store (-want +got):\n%s", diff)
		}
	})
}

func TestReflectorTooLargeResourceVersionRelistsAtLatest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := cachetest.New(cachetest.Options{})
		defer srv.Close()
		mustCreate(t, srv, podsGVR, testPod("ns", "a"))
		tooLarge := apierrors.NewTimeoutError("Too large resource version", 1)
		tooLarge.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}}
		srv.FailNextLists(1, tooLarge)
		_, _, stop := reflectPods(t, srv, cache.ReflectorOptions{})
		defer stop()
		synctest.Wait()
		want := []string{"list rv=0 limit=500", "list rv= limit=500", "watch rv=2"}
		if diff := cmp.Diff(want, summarize(srv.Requests())); diff != "" {
			t.Errorf("requests (-want +got):\n%s", diff)
		}
	})
}

func TestReflectorPaginatesLists(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := cachetest.New(cachetest.Options{})
		defer srv.Close()
		for i := range 1201 {
			mustCreate(t, srv, podsGVR, testPod("ns", fmt.Sprintf("p%04d", i)))
		}
		// "0" is served whole, like a watch cache; the 410 forces a list
		// at "", which is paged.
		srv.FailNextLists(1, apierrors.NewResourceExpired("gone"))
		_, store, stop := reflectPods(t, srv, cache.ReflectorOptions{})
		defer stop()
		synctest.Wait()
		want := []string{
			"list rv=0 limit=500",
			"list rv= limit=500",
			"list rv= limit=500 continue",
			"list rv= limit=500 continue",
			"watch rv=1202",
		}
		if diff := cmp.Diff(want, summarize(srv.Requests())); diff != "" {
			t.Errorf("requests (-want +got):\n%s", diff)
		}
		if n := len(store.List()); n != 1201 {
			t.Errorf("store holds %d objects, want 1201", n)
		}
	})
}

func TestReflectorExpiredContinuationListsWhole(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := cachetest.New(cachetest.Options{})
		defer srv.Close()
		for i := range 700 {
			mustCreate(t, srv, podsGVR, testPod("ns", fmt.Sprintf("p%04d", i)))
		}
		srv.FailNextLists(1, apierrors.NewResourceExpired("gone"))
		lw := srv.ListerWatcher(podsGVR, "")
		// Compact the server between the first and second page, so that
		// the continue token expires.
		var pages int
		wrapped := &cache.ListWatch{
			ListFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
				if opts.Continue != "" {
					pages++
					mustCreate(t, srv, configMapsGVR, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprint("cm", pages)}})
					srv.Compact()
				}
				return lw.List(ctx, opts)
			},
			WatchFunc: lw.Watch,
		}
		store := cache.NewStore(cache.MetaNamespaceKeyFunc)
		r := cache.NewReflector(wrapped, &corev1.Pod{}, store, cache.ReflectorOptions{})
		stop := startReflector(t.Context(), r)
		defer stop()
		synctest.Wait()
		want := []string{
			"list rv=0 limit=500",
			"list rv= limit=500",
			"list rv= limit=500 continue", // 410: the token is too old
			"list rv=",                    // the whole list again, in one page
			"watch rv=702",
		}
		if diff := cmp.Diff(want, summarize(srv.Requests())); diff != "" {
			t.Errorf("requests (-want +got):\n%s", diff)
		}
		if n := len(store.List()); n != 700 {
			t.Errorf("store holds %d objects, want 700", n)
		}
	})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// logLines returns a context whose logger appends to *lines.
func logLines(ctx context.Context, mu *sync.Mutex, lines *[]string) context.Context {
	log := funcr.New(func(prefix, args string) {
		mu.Lock()
		*lines = append(*lines, args)
		mu.Unlock()
	}, funcr.Options{Verbosity: 1})
	return logr.NewContext(ctx, log)
}

// resyncCounter counts Resync calls.
type resyncCounter struct {
	cache.Store
	mu sync.Mutex
	n  int
}

func (c *resyncCounter) Resync() error {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return nil
}

func TestReflectorResync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := cachetest.New(cachetest.Options{})
		defer srv.Close()
		store := &resyncCounter{Store: cache.NewStore(cache.MetaNamespaceKeyFunc)}
		var asked int
		var mu sync.Mutex
		r := cache.NewReflector(srv.ListerWatcher(podsGVR, ""), &corev1.Pod{}, store, cache.ReflectorOptions{
			ResyncPeriod: 10 * time.Second,
			ShouldResync: func() bool {
				mu.Lock()
				defer mu.Unlock()
				asked++
				return asked%2 == 0 // every other tick
			},
		})
		stop := startReflector(t.Context(), r)
		defer stop()
		time.Sleep(65 * time.Second)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		store.mu.Lock()
		defer store.mu.Unlock()
		if asked != 6 || store.n != 3 {
			t.Errorf("ShouldResync asked %d times, Resync called %d times; want 6 and 3", asked, store.n)
		}
	})
}

func TestReflectorRunReturnsWhenCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := cachetest.New(cachetest.Options{})
		defer srv.Close()
		srv.SetListDelay(time.Hour)
		r := cache.NewReflector(srv.ListerWatcher(podsGVR, ""), &corev1.Pod{}, cache.NewStore(cache.MetaNamespaceKeyFunc), cache.ReflectorOptions{})
		stop := startReflector(t.Context(), r)
		synctest.Wait()
		stop() // during the list; synctest fails the test if a goroutine is left
	})
}
