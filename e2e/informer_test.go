package e2e_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/quotakit/quotakit/cache"
	"github.com/quotakit/quotakit/e2e/internal/cluster"
)

// informerCase is one resource the informer test follows, with the client
// calls it needs. Configmaps are served through kube-apiserver's watch
// cache and secrets straight from etcd (see setUp).
type informerCase struct {
	name     string
	cached   bool
	example  runtime.Object
	lw       func(cs kubernetes.Interface, ns string) *countingLW
	list     func(ctx context.Context, cs kubernetes.Interface, ns string) (runtime.Object, error)
	create   func(ctx context.Context, cs kubernetes.Interface, ns, name string) error
	update   func(ctx context.Context, cs kubernetes.Interface, ns, name, value string) error
	delete   func(ctx context.Context, cs kubernetes.Interface, ns, name string) error
	informer *cache.SharedIndexInformer
	counter  *countingLW
	live     map[string]bool // names that exist
}

func informerCases() []*informerCase {
	return []*informerCase{
		{
			name:    "configmaps",
			cached:  true,
			example: &corev1.ConfigMap{},
			lw: func(cs kubernetes.Interface, ns string) *countingLW {
				c := cs.CoreV1().ConfigMaps(ns)
				return &countingLW{
					list: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return c.List(ctx, o) },
					watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
						return c.Watch(ctx, o)
					},
				}
			},
			list: func(ctx context.Context, cs kubernetes.Interface, ns string) (runtime.Object, error) {
				return cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
			},
			create: func(ctx context.Context, cs kubernetes.Interface, ns, name string) error {
				_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"v": "0"},
				}, metav1.CreateOptions{})
				return err
			},
			update: func(ctx context.Context, cs kubernetes.Interface, ns, name, value string) error {
				c := cs.CoreV1().ConfigMaps(ns)
				cm, err := c.Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				cm.Data = map[string]string{"v": value}
				_, err = c.Update(ctx, cm, metav1.UpdateOptions{})
				return err
			},
			delete: func(ctx context.Context, cs kubernetes.Interface, ns, name string) error {
				return cs.CoreV1().ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{})
			},
		},
		{
			name:    "secrets",
			cached:  false,
			example: &corev1.Secret{},
			lw: func(cs kubernetes.Interface, ns string) *countingLW {
				c := cs.CoreV1().Secrets(ns)
				return &countingLW{
					list: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return c.List(ctx, o) },
					watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
						return c.Watch(ctx, o)
					},
				}
			},
			list: func(ctx context.Context, cs kubernetes.Interface, ns string) (runtime.Object, error) {
				return cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
			},
			create: func(ctx context.Context, cs kubernetes.Interface, ns, name string) error {
				_, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
					ObjectMeta: metav1.ObjectMeta{Name: name}, StringData: map[string]string{"v": "0"},
				}, metav1.CreateOptions{})
				return err
			},
			update: func(ctx context.Context, cs kubernetes.Interface, ns, name, value string) error {
				c := cs.CoreV1().Secrets(ns)
				s, err := c.Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				s.Data = map[string][]byte{"v": []byte(value)}
				_, err = c.Update(ctx, s, metav1.UpdateOptions{})
				return err
			},
			delete: func(ctx context.Context, cs kubernetes.Interface, ns, name string) error {
				return cs.CoreV1().Secrets(ns).Delete(ctx, name, metav1.DeleteOptions{})
			},
		},
	}
}

// TestInformer runs quotakit's SharedIndexInformer against kube-apiserver,
// on a resource served through the watch cache (configmaps) and one served
// from etcd (secrets), through a proxy the test can cut. At every step the
// informer's store must come to equal a fresh LIST, key for key and
// resourceVersion for resourceVersion, and the reflector must have taken
// the path kube-apiserver's answers call for:
//
//   - initial list, paged, then a watch;
//   - events on the open watch;
//   - bookmarks, which the watch cache sends just before a watch's
//     deadline, and watches the server ends at their timeout, re-opened
//     without a relist;
//   - a cut connection: the watch is re-opened from the last
//     resourceVersion, without a relist;
//   - etcd compacted while the client was away: the watch served from
//     etcd fails with 410 Expired and the reflector relists; the watch
//     cache still holds the events and serves them;
//   - kube-apiserver restarted while the client was away: its new watch
//     cache starts after the client's resourceVersion, answers 410 and the
//     reflector relists; the watch served from etcd carries on.
func TestInformer(t *testing.T) {
	ctx := t.Context()
	direct := clientset(t, env.api.Config())
	ns := namespace(t, direct)
	proxy, err := cluster.NewProxy(fmt.Sprintf("127.0.0.1:%d", env.api.Port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	proxied := clientset(t, env.api.ConfigAt("https://"+proxy.Addr))
	rng := rand.New(rand.NewPCG(16, 1))
	cases := informerCases()

	// The initial state: enough objects for several pages.
	for _, c := range cases {
		c.live = map[string]bool{}
		for i := range 23 {
			name := fmt.Sprintf("initial-%02d", i)
			if err := c.create(ctx, direct, ns, name); err != nil {
				t.Fatal(err)
			}
			c.live[name] = true
		}
	}

	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	t.Cleanup(func() {
		stop()
		wg.Wait()
	})
	for _, c := range cases {
		c.counter = c.lw(proxied, ns)
		c.informer = cache.NewSharedIndexInformer(c.counter, c.example, cache.SharedIndexInformerOptions{
			Reflector: cache.ReflectorOptions{Name: c.name, PageSize: 5},
		})
		name := c.name
		if err := c.informer.SetWatchErrorHandler(func(_ context.Context, _ *cache.Reflector, err error) {
			t.Logf("%s: reflector: %v", name, err)
		}); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { c.informer.Run(runCtx) })
	}
	for _, c := range cases {
		if !cache.WaitForCacheSync(ctx, c.informer.HasSynced) {
			t.Fatalf("%s: informer did not sync", c.name)
		}
	}
	step := 0
	// churn creates, updates and deletes a few objects of every case.
	churn := func() {
		step++
		for _, c := range cases {
			for i := range 4 {
				name := fmt.Sprintf("step%d-%d", step, i)
				if err := c.create(ctx, direct, ns, name); err != nil {
					t.Fatal(err)
				}
				c.live[name] = true
			}
			names := sortedKeys(c.live)
			for range 3 {
				name := names[rng.IntN(len(names))]
				if err := c.update(ctx, direct, ns, name, fmt.Sprint(step)); err != nil {
					t.Fatal(err)
				}
			}
			for range 2 {
				names := sortedKeys(c.live)
				name := names[rng.IntN(len(names))]
				if err := c.delete(ctx, direct, ns, name); err != nil {
					t.Fatal(err)
				}
				delete(c.live, name)
			}
		}
	}
	// converge waits until every informer holds what a fresh LIST holds.
	converge := func(what string) {
		t.Helper()
		for _, c := range cases {
			waitStoreEqualsList(t, c.informer.GetStore(), func() (runtime.Object, error) { return c.list(ctx, direct, ns) }, c.name+" "+what)
		}
	}
	// settle waits until cutting the informers' watches is a clean cut.
	settle := func() {
		t.Helper()
		waitFor(t, 30*time.Second, "watches open long enough to cut", func() bool {
			for _, c := range cases {
				if !c.counter.settled() {
					return false
				}
			}
			return true
		})
	}
	snapshot := func() map[string]counts {
		m := map[string]counts{}
		for _, c := range cases {
			m[c.name] = c.counter.counts()
		}
		return m
	}

	converge("after the initial list")
	for _, c := range cases {
		if got := c.counter.counts(); got.lists != 1 {
			t.Errorf("%s: %d lists for the initial sync, want 1", c.name, got.lists)
		}
		// etcd pages a list; kube-apiserver's watch cache may serve a
		// list at resourceVersion "0" whole.
		if pages := c.counter.pages.Load(); !c.cached && pages < 2 {
			t.Errorf("%s: initial list in %d pages of 5 for 23 objects, want several", c.name, pages)
		}
	}

	churn()
	converge("after events on the open watch")

	t.Run("bookmarks and watch timeouts", func(t *testing.T) {
		before := snapshot()
		for _, c := range cases {
			c.counter.watchTimeout.Store(3)
		}
		// The open watches were asked for minutes: end them, so that
		// the next ones are asked for 3 seconds.
		settle()
		proxy.Cut()
		// After the watch the cut ends, two must have run to their 3
		// second timeout. Waiting
		// for the server is waiting for time: there is nothing else
		// to wait on.
		waitFor(t, 30*time.Second, "watches ended by timeout and re-opened", func() bool {
			for _, c := range cases {
				if c.counter.counts().watches < before[c.name].watches+3 {
					return false
				}
				if c.cached && c.counter.counts().bookmarks == before[c.name].bookmarks {
					return false
				}
			}
			return true
		})
		for _, c := range cases {
			c.counter.watchTimeout.Store(0)
		}
		churn()
		converge("after watch timeouts")
		for _, c := range cases {
			if got := c.counter.counts(); got.lists != before[c.name].lists {
				t.Errorf("%s: %d relists after watches ended at their timeout, want none", c.name, got.lists-before[c.name].lists)
			}
		}
	})

	t.Run("cut watch", func(t *testing.T) {
		before := snapshot()
		settle()
		proxy.Cut()
		churn()
		converge("after a cut watch")
		for _, c := range cases {
			got := c.counter.counts()
			if got.lists != before[c.name].lists {
				t.Errorf("%s: %d relists after a cut, want none: the watch re-opens from its resourceVersion", c.name, got.lists-before[c.name].lists)
			}
			if got.watches == before[c.name].watches {
				t.Errorf("%s: no watch re-opened after a cut", c.name)
			}
		}
	})

	t.Run("compaction while away", func(t *testing.T) {
		before := snapshot()
		settle()
		proxy.Hold()
		proxy.Cut()
		churn()
		rev, err := env.etcd.Compact(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("compacted etcd at revision %d", rev)
		proxy.Release()
		churn()
		converge("after a compaction")
		for _, c := range cases {
			got := c.counter.counts()
			relisted := got.lists > before[c.name].lists
			expired := got.expired > before[c.name].expired
			// The watch cache keeps its own history, so only the
			// resource served from etcd loses the events.
			if want := !c.cached; relisted != want || expired != want {
				t.Errorf("%s (watch cache %v): relisted %v, saw 410 %v; want %v, %v", c.name, c.cached, relisted, expired, want, want)
			}
		}
	})

	t.Run("apiserver restart while away", func(t *testing.T) {
		before := snapshot()
		settle()
		proxy.Hold()
		proxy.Cut()
		churn()
		if err := env.api.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		proxy.Release()
		churn()
		converge("after kube-apiserver restarted")
		for _, c := range cases {
			got := c.counter.counts()
			relisted := got.lists > before[c.name].lists
			expired := got.expired > before[c.name].expired
			// A new watch cache starts at the resourceVersion it
			// listed at; etcd still has every revision since the
			// compaction.
			if want := c.cached; relisted != want || expired != want {
				t.Errorf("%s (watch cache %v): relisted %v, saw 410 %v; want %v, %v", c.name, c.cached, relisted, expired, want, want)
			}
		}
	})

	converge("at the end")
	for _, c := range cases {
		t.Logf("%s: %+v, %d list pages", c.name, c.counter.counts(), c.counter.pages.Load())
	}
}

// waitStoreEqualsList waits until store holds exactly the objects a fresh
// list returns, compared by key and resourceVersion, and fails the test
// with the difference if it does not within 30 seconds.
func waitStoreEqualsList(t *testing.T, store cache.Store, list func() (runtime.Object, error), what string) {
	t.Helper()
	var diff string
	ok := poll(30*time.Second, func() bool {
		obj, err := list()
		if err != nil {
			diff = err.Error()
			return false
		}
		want := map[string]string{}
		items, err := meta.ExtractList(obj)
		if err != nil {
			diff = err.Error()
			return false
		}
		for _, item := range items {
			m, _ := meta.Accessor(item)
			want[m.GetNamespace()+"/"+m.GetName()] = m.GetResourceVersion()
		}
		got := map[string]string{}
		for _, item := range store.List() {
			m, _ := meta.Accessor(item)
			got[m.GetNamespace()+"/"+m.GetName()] = m.GetResourceVersion()
		}
		diff = cmp.Diff(want, got)
		return diff == ""
	})
	if !ok {
		t.Fatalf("%s: store differs from a fresh list (-list +store):\n%s", what, diff)
	}
}

func sortedKeys(m map[string]bool) []string { return slices.Sorted(maps.Keys(m)) }
