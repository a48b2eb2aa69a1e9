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

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/quotakit/quotakit/cache"
	"github.com/quotakit/quotakit/cache/cachetest"
)

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
