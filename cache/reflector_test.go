package cache_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
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
	"k8s.io/apimachinery/pkg/watch"

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

func TestReflectorRewatchesWithoutRelistOnCleanClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := cachetest.New(cachetest.Options{})
		defer srv.Close()
		mustCreate(t, srv, podsGVR, testPod("ns", "a"))
		_, store, stop := reflectPods(t, srv, cache.ReflectorOptions{})
		defer stop()
		synctest.Wait()
		mustCreate(t, srv, podsGVR, testPod("ns", "b"))
		synctest.Wait()
		srv.CloseAllWatches()
		synctest.Wait()
		mustCreate(t, srv, podsGVR, testPod("ns", "c"))
		synctest.Wait()
		want := []string{"list rv=0 limit=500", "watch rv=2", "watch rv=3"}
		if diff := cmp.Diff(want, summarize(srv.Requests())); diff != "" {
			t.Errorf("requests (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"ns/a", "ns/b", "ns/c"}, storeKeys(store)); diff != "" {
			t.Errorf("store (-want +got):\n%s", diff)
		}
	})
}

func TestReflectorRewatchesAfterServerTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := cachetest.New(cachetest.Options{BookmarkInterval: -1})
		defer srv.Close()
		_, _, stop := reflectPods(t, srv, cache.ReflectorOptions{})
		defer stop()
		time.Sleep(25 * time.Minute) // at most 10 minutes per watch
		synctest.Wait()
		reqs := srv.Requests()
		if reqs[0].Verb != "list" {
			t.Fatalf("first request = %v, want a list", summarize(reqs[:1]))
		}
		for _, r := range reqs[1:] {
			if r.Verb != "watch" {
				t.Fatalf("requests = %v, want one list then only watches", summarize(reqs))
			}
			to := *r.Options.TimeoutSeconds
			if to < 300 || to > 600 || !r.Options.AllowWatchBookmarks {
				t.Errorf("watch timeout %ds, bookmarks %v; want 300..600s with bookmarks", to, r.Options.AllowWatchBookmarks)
			}
		}
		if n := len(reqs) - 1; n < 3 || n > 6 {
			t.Errorf("%d watches in 25 minutes, want 3 to 6", n)
		}
	})
}

func TestReflectorRelistsAfterWatchError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := cachetest.New(cachetest.Options{})
		defer srv.Close()
		mustCreate(t, srv, podsGVR, testPod("ns", "a"))
		var handled []error
		var mu sync.Mutex
		store := cache.NewStore(cache.MetaNamespaceKeyFunc)
		r := cache.NewReflector(srv.ListerWatcher(podsGVR, ""), &corev1.Pod{}, store, cache.ReflectorOptions{
			WatchErrorHandler: func(_ context.Context, _ *cache.Reflector, err error) {
				mu.Lock()
				handled = append(handled, err)
				mu.Unlock()
			},
		})
		stop := startReflector(t.Context(), r)
		defer stop()
		synctest.Wait()
		srv.FailAllWatches(apierrors.NewInternalError(errors.New("boom")))
		synctest.Wait()
		if n := len(srv.Requests()); n != 2 {
			t.Fatalf("relisted before the backoff: %v", summarize(srv.Requests()))
		}
		time.Sleep(1600 * time.Millisecond) // the first delay is in [0.8s, 1.6s)
		synctest.Wait()
		want := []string{"list rv=0 limit=500", "watch rv=2", "list rv=2", "watch rv=2"}
		if diff := cmp.Diff(want, summarize(srv.Requests())); diff != "" {
			t.Errorf("requests (-want +got):\n%s", diff)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(handled) != 1 || !apierrors.IsInternalError(handled[0]) || !strings.Contains(handled[0].Error(), "boom") {
			t.Errorf("watch error handler got %v, want the internal error", handled)
		}
	})
}

func TestReflectorShortWatchRelists(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := cachetest.New(cachetest.Options{})
		defer srv.Close()
		_, _, stop := reflectPods(t, srv, cache.ReflectorOptions{})
		defer stop()
		synctest.Wait()
		srv.CloseAllWatches() // at once, with no event: the server is unwell
		time.Sleep(2 * time.Second)
		synctest.Wait()
		got := summarize(srv.Requests())
		if len(got) < 4 || got[2] != "list rv=1" {
			t.Errorf("requests = %v, want a relist after a watch closed at once", got)
		}
	})
}

// timedLW records the virtual time of each List call.
type timedLW struct {
	cache.ListerWatcher
	mu    sync.Mutex
	times []time.Time
}

func (l *timedLW) List(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	l.mu.Lock()
	l.times = append(l.times, time.Now())
	l.mu.Unlock()
	return l.ListerWatcher.List(ctx, opts)
}

func (l *timedLW) gaps() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []time.Duration
	for i := 1; i < len(l.times); i++ {
		out = append(out, l.times[i].Sub(l.times[i-1]))
	}
	return out
}

func TestReflectorBackoffSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := cachetest.New(cachetest.Options{})
		defer srv.Close()
		srv.FailNextLists(9, nil)
		lw := &timedLW{ListerWatcher: srv.ListerWatcher(podsGVR, "")}
		r := cache.NewReflector(lw, &corev1.Pod{}, cache.NewStore(cache.MetaNamespaceKeyFunc), cache.ReflectorOptions{
			Backoff:           cache.Backoff{Jitter: -1},
			WatchErrorHandler: func(context.Context, *cache.Reflector, error) {},
		})
		stop := startReflector(t.Context(), r)
		defer stop()
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		ms := time.Millisecond
		want := []time.Duration{800 * ms, 1600 * ms, 3200 * ms, 6400 * ms, 12800 * ms, 25600 * ms, 30 * time.Second, 30 * time.Second, 30 * time.Second}
		if diff := cmp.Diff(want, lw.gaps()); diff != "" {
			t.Errorf("delays between lists (-want +got):\n%s", diff)
		}
	})
}

func TestReflectorBackoffJitterAndReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := cachetest.New(cachetest.Options{})
		defer srv.Close()
		srv.FailNextLists(4, nil)
		lw := &timedLW{ListerWatcher: srv.ListerWatcher(podsGVR, "")}
		r := cache.NewReflector(lw, &corev1.Pod{}, cache.NewStore(cache.MetaNamespaceKeyFunc), cache.ReflectorOptions{
			WatchErrorHandler: func(context.Context, *cache.Reflector, error) {},
		})
		stop := startReflector(t.Context(), r)
		defer stop()
		time.Sleep(time.Minute)
		synctest.Wait()
		base := []time.Duration{800 * time.Millisecond, 1600 * time.Millisecond, 3200 * time.Millisecond, 6400 * time.Millisecond}
		gaps := lw.gaps()
		if len(gaps) != len(base) {
			t.Fatalf("gaps = %v, want %d", gaps, len(base))
		}
		for i, g := range gaps {
			if g < base[i] || g >= 2*base[i] {
				t.Errorf("delay %d = %v, want in [%v, %v)", i, g, base[i], 2*base[i])
			}
		}

		// After more than two quiet minutes the delay starts over.
		time.Sleep(3 * time.Minute)
		srv.FailNextLists(1, nil)
		srv.FailAllWatches(nil)
		time.Sleep(time.Minute)
		synctest.Wait()
		gaps = lw.gaps()
		// The watch failure is followed by a delay, the failing list by
		// another: both restart at 800ms.
		last := gaps[len(gaps)-1]
		if last < 1600*time.Millisecond || last >= 3200*time.Millisecond {
			t.Errorf("delay after reset = %v, want the second step, in [1.6s, 3.2s)", last)
		}
	})
}

func TestReflectorTooManyRequestsRewatchesWithoutRelist(t *testing.T) {
	for name, err := range map[string]error{
		"429":                apierrors.NewTooManyRequests("slow down", 1),
		"connection refused": fmt.Errorf("dial tcp: %w", syscall.ECONNREFUSED),
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := cachetest.New(cachetest.Options{})
				defer srv.Close()
				srv.FailNextWatches(3, err)
				r := cache.NewReflector(srv.ListerWatcher(podsGVR, ""), &corev1.Pod{}, cache.NewStore(cache.MetaNamespaceKeyFunc), cache.ReflectorOptions{})
				stop := startReflector(t.Context(), r)
				defer stop()
				time.Sleep(time.Minute)
				synctest.Wait()
				want := []string{"list rv=0 limit=500", "watch rv=1", "watch rv=1", "watch rv=1", "watch rv=1"}
				if diff := cmp.Diff(want, summarize(srv.Requests())); diff != "" {
					t.Errorf("requests (-want +got):\n%s", diff)
				}
			})
		})
	}
}

// bookmarkRecorder is a store that records bookmarks.
type bookmarkRecorder struct {
	cache.Store
	mu        sync.Mutex
	bookmarks []string
}

func (b *bookmarkRecorder) Bookmark(rv string) {
	b.mu.Lock()
	b.bookmarks = append(b.bookmarks, rv)
	b.mu.Unlock()
	b.Store.Bookmark(rv)
}

func TestReflectorBookmarksAdvanceResourceVersion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := cachetest.New(cachetest.Options{BookmarkInterval: 10 * time.Second})
		defer srv.Close()
		store := &bookmarkRecorder{Store: cache.NewStore(cache.MetaNamespaceKeyFunc)}
		r := cache.NewReflector(srv.ListerWatcher(podsGVR, ""), &corev1.Pod{}, store, cache.ReflectorOptions{})
		stop := startReflector(t.Context(), r)
		defer stop()
		synctest.Wait()
		// Writes to another resource move the server's version on.
		mustCreate(t, srv, configMapsGVR, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}})
		time.Sleep(11 * time.Second)
		synctest.Wait()
		if got, want := r.LastSyncResourceVersion(), srv.ResourceVersion(); got != want {
			t.Errorf("LastSyncResourceVersion() = %s, want the bookmark's %s", got, want)
		}
		if got := store.LastStoreSyncResourceVersion(); got != srv.ResourceVersion() {
			t.Errorf("store's LastStoreSyncResourceVersion() = %s, want %s", got, srv.ResourceVersion())
		}
		// A relist now starts from the bookmark, not from the list.
		srv.FailAllWatches(nil)
		time.Sleep(time.Minute)
		synctest.Wait()
		reqs := summarize(srv.Requests())
		if want := "list rv=" + srv.ResourceVersion(); !contains(reqs, want) {
			t.Errorf("requests = %v, want %q", reqs, want)
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

func TestReflectorWatchList(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := cachetest.New(cachetest.Options{})
		defer srv.Close()
		mustCreate(t, srv, podsGVR, testPod("ns", "a"))
		mustCreate(t, srv, podsGVR, testPod("ns", "b"))
		r, store, stop := reflectPods(t, srv, cache.ReflectorOptions{UseWatchList: true})
		defer stop()
		synctest.Wait()
		mustCreate(t, srv, podsGVR, testPod("ns", "c"))
		synctest.Wait()
		if diff := cmp.Diff([]string{"ns/a", "ns/b", "ns/c"}, storeKeys(store)); diff != "" {
			t.Errorf("store (-want +got):\n%s", diff)
		}
		// One streaming watch, reused after the initial events: no list.
		if diff := cmp.Diff([]string{"watch rv= initial"}, summarize(srv.Requests())); diff != "" {
			t.Errorf("requests (-want +got):\n%s", diff)
		}
		if got, want := r.LastSyncResourceVersion(), srv.ResourceVersion(); got != want {
			t.Errorf("LastSyncResourceVersion() = %s, want %s", got, want)
		}
	})
}

func TestReflectorWatchListFallsBackToList(t *testing.T) {
	tests := []struct {
		name    string
		opts    cachetest.Options
		wantErr string
	}{
		{"server without WatchList", cachetest.Options{DisableWatchList: true}, "streaming the initial state failed"},
		{"bookmark never sent", cachetest.Options{OmitInitialEventsEndBookmark: true}, "no k8s.io/initial-events-end bookmark within 30s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := cachetest.New(tt.opts)
				defer srv.Close()
				mustCreate(t, srv, podsGVR, testPod("ns", "a"))
				var mu sync.Mutex
				var errs []error
				store := cache.NewStore(cache.MetaNamespaceKeyFunc)
				r := cache.NewReflector(srv.ListerWatcher(podsGVR, ""), &corev1.Pod{}, store, cache.ReflectorOptions{
					UseWatchList: true,
					WatchErrorHandler: func(_ context.Context, _ *cache.Reflector, err error) {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
					},
				})
				stop := startReflector(t.Context(), r)
				defer stop()
				time.Sleep(31 * time.Second)
				synctest.Wait()
				if diff := cmp.Diff([]string{"ns/a"}, storeKeys(store)); diff != "" {
					t.Errorf("store (-want +got):\n%s", diff)
				}
				reqs := summarize(srv.Requests())
				if len(reqs) < 3 || reqs[0] != "watch rv= initial" || reqs[1] != "list rv=0 limit=500" {
					t.Errorf("requests = %v, want a streaming watch then a list", reqs)
				}
				mu.Lock()
				defer mu.Unlock()
				if len(errs) == 0 || !strings.Contains(errs[0].Error(), tt.wantErr) {
					t.Errorf("reported errors = %v, want one containing %q", errs, tt.wantErr)
				}
			})
		})
	}
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

// An error event ends the watch; the relist asks for the version of the
// last event applied.
func TestReflectorErrorEventEndsWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := cachetest.New(cachetest.Options{})
		defer srv.Close()
		lw := srv.ListerWatcher(podsGVR, "")
		fw := watch.NewFake()
		var once sync.Once
		wrapped := &cache.ListWatch{
			ListFunc: lw.List,
			WatchFunc: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
				var w watch.Interface
				once.Do(func() { w = fw })
				if w != nil {
					return w, nil
				}
				return lw.Watch(ctx, opts)
			},
		}
		store := cache.NewStore(cache.MetaNamespaceKeyFunc)
		r := cache.NewReflector(wrapped, &corev1.Pod{}, store, cache.ReflectorOptions{
			WatchErrorHandler: func(context.Context, *cache.Reflector, error) {},
		})
		stop := startReflector(t.Context(), r)
		defer stop()
		synctest.Wait()
		p := testPod("ns", "x")
		p.ResourceVersion = "1"
		fw.Add(p)
		fw.Error(&apierrors.NewBadRequest("nope").ErrStatus)
		time.Sleep(time.Minute)
		synctest.Wait()
		got := summarize(srv.Requests())
		if len(got) < 2 || got[1] != "list rv=1" {
			t.Errorf("requests = %v, want a relist at the last event's version after the error", got)
		}
	})
}
