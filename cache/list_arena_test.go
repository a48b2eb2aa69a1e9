package cache_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"weak"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/quotakit/quotakit/cache"
	"github.com/quotakit/quotakit/cache/cachetest"
)

// listArrayLW remembers, weakly, the items array of the first list it
// returns: the test can then tell whether anything still keeps it alive.
type listArrayLW struct {
	cache.ListerWatcher
	mu    sync.Mutex
	first weak.Pointer[corev1.Pod]
	set   bool
}

func (l *listArrayLW) List(ctx context.Context, opts metav1.ListOptions) (apiruntime.Object, error) {
	obj, err := l.ListerWatcher.List(ctx, opts)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if pl := obj.(*corev1.PodList); !l.set && len(pl.Items) > 0 {
		l.first, l.set = weak.Make(&pl.Items[0]), true
	}
	return obj, nil
}

// arrayAlive reports whether the first list's array is still reachable.
func (l *listArrayLW) arrayAlive() bool {
	runtime.GC()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.first.Value() != nil
}

func TestInformerReleasesListArrayOnceHalfOfItIsGone(t *testing.T) {
	for _, change := range []string{"update", "delete"} {
		t.Run(change, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := cachetest.New(cachetest.Options{})
				defer srv.Close()
				const n = 100
				for i := range n {
					mustCreate(t, srv, podsGVR, testPod("ns", fmt.Sprintf("p%03d", i)))
				}
				lw := &listArrayLW{ListerWatcher: srv.ListerWatcher(podsGVR, "")}
				inf := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, cache.SharedIndexInformerOptions{})
				stop := startInformer(t.Context(), inf)
				defer stop()
				synctest.Wait()
				if !inf.HasSynced() {
					t.Fatal("not synced")
				}
				// Listed objects are stored in place, not copied.
				if !lw.arrayAlive() {
					t.Fatal("the list's array was freed after the sync: the informer copied the listed objects")
				}
				apply := func(from, to int) {
					for i := from; i < to; i++ {
						name := fmt.Sprintf("p%03d", i)
						if change == "update" {
							update(t, srv, "ns", name, map[string]string{"v": "2"})
						} else {
							del(t, srv, "ns", name)
						}
					}
					synctest.Wait()
				}
				apply(0, 40)
				if !lw.arrayAlive() {
					t.Fatal("the list's array was freed while 60 of its 100 objects are stored")
				}
				apply(40, 50)
				if lw.arrayAlive() {
					t.Error("the list's array is still alive with half of its objects gone")
				}

				want := n
				if change == "delete" {
					want = n - 50
				}
				if got := len(inf.GetStore().List()); got != want {
					t.Errorf("store holds %d objects, want %d", got, want)
				}
				for i := 50; i < n; i++ {
					obj, ok, _ := inf.GetStore().GetByKey(fmt.Sprintf("ns/p%03d", i))
					if !ok || obj.(*corev1.Pod).Name != fmt.Sprintf("p%03d", i) {
						t.Errorf("survivor p%03d after the copy: %v, %v", i, obj, ok)
					}
				}
				if objs, err := inf.GetIndexer().ByIndex(cache.NamespaceIndex, "ns"); err != nil || len(objs) != want {
					t.Errorf("ByIndex(namespace, ns) = %d objects, %v; want %d", len(objs), err, want)
				}
			})
		})
	}
}
