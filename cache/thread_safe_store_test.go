package cache_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/quotakit/quotakit/cache"
)

func namespaceIndexer() cache.Indexer {
	return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
}

// byLabel indexes pods by the value of their "app" label.
func byLabel(obj any) ([]string, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, fmt.Errorf("not a pod: %T", obj)
	}
	if app, ok := p.Labels["app"]; ok {
		return []string{app}, nil
	}
	return nil, nil
}

func TestIndexer_EmptyIndexSetsRemoved(t *testing.T) {
	idx := namespaceIndexer()
	require.NoError(t, idx.Add(pod("a", "p", "1")))
	require.NoError(t, idx.Add(pod("a", "q", "1")))
	require.NoError(t, idx.Delete(pod("a", "q", "2")))
	if got, want := idx.ListIndexFuncValues(cache.NamespaceIndex), []string{"a"}; !slices.Equal(got, want) {
		t.Fatalf("ListIndexFuncValues = %v, want %v", got, want)
	}
	// Moving the only object of "a" elsewhere must drop the "a" set.
	s := cache.NewThreadSafeStore(cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	require.NoError(t, s.Add("k", pod("a", "p", "1")))
	require.NoError(t, s.Update("k", pod("b", "p", "2")))
	if got, want := s.ListIndexFuncValues(cache.NamespaceIndex), []string{"b"}; !slices.Equal(got, want) {
		t.Errorf("after moving namespace, ListIndexFuncValues = %v, want %v", got, want)
	}
	s.Delete("k")
	if got := s.ListIndexFuncValues(cache.NamespaceIndex); len(got) != 0 {
		t.Errorf("after deleting everything, ListIndexFuncValues = %v, want none", got)
	}
	if got, err := s.IndexKeys(cache.NamespaceIndex, "b"); err != nil || len(got) != 0 {
		t.Errorf("IndexKeys(b) = %v, %v, want none", got, err)
	}
}

func TestIndexer_IndexKeysSortedAndIndexUnion(t *testing.T) {
	multi := func(obj any) ([]string, error) {
		p := obj.(*corev1.Pod)
		return []string{p.Labels["x"], p.Labels["y"]}, nil
	}
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{"xy": multi})
	for _, p := range []*corev1.Pod{
		labeledPod("ns", "c", map[string]string{"x": "1", "y": "2"}),
		labeledPod("ns", "a", map[string]string{"x": "1", "y": "3"}),
		labeledPod("ns", "b", map[string]string{"x": "4", "y": "2"}),
		labeledPod("ns", "d", map[string]string{"x": "5", "y": "5"}),
	} {
		require.NoError(t, idx.Add(p))
	}
	if got, err := idx.IndexKeys("xy", "1"); err != nil || !slices.Equal(got, []string{"ns/a", "ns/c"}) {
		t.Errorf("IndexKeys(xy, 1) = %v, %v, want [ns/a ns/c]", got, err)
	}
	got, err := idx.Index("xy", labeledPod("", "probe", map[string]string{"x": "1", "y": "2"}))
	require.NoError(t, err)
	var keys []string
	for _, obj := range got {
		k, _ := cache.MetaNamespaceKeyFunc(obj)
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if want := []string{"ns/a", "ns/b", "ns/c"}; !slices.Equal(keys, want) {
		t.Errorf("Index(xy, {1,2}) = %v, want %v (each once)", keys, want)
	}
	if got, want := idx.ListIndexFuncValues("xy"), []string{"1", "2", "3", "4", "5"}; !slices.Equal(got, want) {
		t.Errorf("ListIndexFuncValues(xy) = %v, want %v", got, want)
	}
}

func TestIndexer_UnknownIndex(t *testing.T) {
	idx := namespaceIndexer()
	if _, err := idx.ByIndex("nope", "x"); err == nil {
		t.Error("ByIndex(nope) succeeded, want error")
	}
	if _, err := idx.IndexKeys("nope", "x"); err == nil {
		t.Error("IndexKeys(nope) succeeded, want error")
	}
	if _, err := idx.Index("nope", pod("a", "b", "1")); err == nil {
		t.Error("Index(nope) succeeded, want error")
	}
	if got := idx.ListIndexFuncValues("nope"); got != nil {
		t.Errorf("ListIndexFuncValues(nope) = %v, want nil", got)
	}
}

func TestIndexer_AddIndexersAfterItemsExist(t *testing.T) {
	idx := namespaceIndexer()
	require.NoError(t, idx.Add(labeledPod("a", "web-1", map[string]string{"app": "web"})))
	require.NoError(t, idx.Add(labeledPod("b", "web-2", map[string]string{"app": "web"})))
	require.NoError(t, idx.Add(labeledPod("a", "db-1", map[string]string{"app": "db"})))

	require.NoError(t, idx.AddIndexers(cache.Indexers{"app": byLabel}))
	if got, err := idx.IndexKeys("app", "web"); err != nil || !slices.Equal(got, []string{"a/web-1", "b/web-2"}) {
		t.Errorf("IndexKeys(app, web) = %v, %v, want [a/web-1 b/web-2]", got, err)
	}
	// Later writes maintain the new index too.
	require.NoError(t, idx.Update(labeledPod("a", "web-1", map[string]string{"app": "db"})))
	if got, _ := idx.IndexKeys("app", "db"); !slices.Equal(got, []string{"a/db-1", "a/web-1"}) {
		t.Errorf("after update, IndexKeys(app, db) = %v", got)
	}
	if got := slices.Sorted(mapKeys(idx.GetIndexers())); !slices.Equal(got, []string{"app", cache.NamespaceIndex}) {
		t.Errorf("GetIndexers() names = %v", got)
	}

	err := idx.AddIndexers(cache.Indexers{"app": byLabel, "other": byLabel})
	if err == nil {
		t.Fatal("AddIndexers with an existing name succeeded, want conflict error")
	}
	if _, err := idx.ByIndex("other", "web"); err == nil {
		t.Error("a conflicting AddIndexers call still registered its other index")
	}
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func TestIndexer_AddIndexersWhileWriting(t *testing.T) {
	s := cache.NewThreadSafeStore(nil)
	for i := range 500 {
		require.NoError(t, s.Add(fmt.Sprint(i), pod(fmt.Sprint("ns", i%7), fmt.Sprint(i), "1")))
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		r := rand.New(rand.NewPCG(1, 2))
		for {
			select {
			case <-stop:
				return
			default:
			}
			k := r.IntN(700)
			if r.IntN(3) == 0 {
				s.Delete(fmt.Sprint(k))
			} else {
				_ = s.Add(fmt.Sprint(k), pod(fmt.Sprint("ns", r.IntN(9)), fmt.Sprint(k), "1"))
			}
		}
	})
	err := s.AddIndexers(cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	close(stop)
	wg.Wait()
	require.NoError(t, err)
	checkNamespaceIndex(t, s)
}

// checkNamespaceIndex verifies that the namespace index of s holds exactly
// the stored keys under their namespaces.
func checkNamespaceIndex(t *testing.T, s *cache.ThreadSafeStore) {
	t.Helper()
	want := map[string][]string{}
	for _, key := range s.ListKeys() {
		obj, _ := s.Get(key)
		ns := obj.(*corev1.Pod).Namespace
		want[ns] = append(want[ns], key)
	}
	got := map[string][]string{}
	for _, ns := range s.ListIndexFuncValues(cache.NamespaceIndex) {
		keys, err := s.IndexKeys(cache.NamespaceIndex, ns)
		require.NoError(t, err)
		got[ns] = keys
	}
	for ns := range want {
		slices.Sort(want[ns])
	}
	if !reflect.DeepEqual(want, got) {
		t.Errorf("namespace index = %v, want %v", got, want)
	}
}

func TestThreadSafeStore_ConcurrentWritesKeepIndexConsistent(t *testing.T) {
	s := cache.NewThreadSafeStore(cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for range 2000 {
				k := fmt.Sprint(r.IntN(50))
				switch r.IntN(4) {
				case 0:
					s.Delete(k)
				default:
					_ = s.Update(k, pod(fmt.Sprint("ns", r.IntN(5)), k, "1"))
				}
			}
		})
	}
	wg.Wait()
	checkNamespaceIndex(t, s)
}

var errIndex = errors.New("cannot index")

// failOn indexes by namespace, failing for pods named "bad".
func failOn(obj any) ([]string, error) {
	if obj.(*corev1.Pod).Name == "bad" {
		return nil, errIndex
	}
	return cache.MetaNamespaceIndexFunc(obj)
}

func TestIndexer_FailingIndexFuncReturnsErrorAndStoreUnchanged(t *testing.T) {
	indexed := func(t *testing.T) *cache.ThreadSafeStore {
		s := cache.NewThreadSafeStore(cache.Indexers{"ns": failOn})
		require.NoError(t, s.Add("k", pod("a", "good", "1")))
		return s
	}
	unindexed := func(t *testing.T) *cache.ThreadSafeStore {
		s := cache.NewThreadSafeStore(nil)
		require.NoError(t, s.Add("k", pod("a", "good", "1")))
		require.NoError(t, s.Add("k2", pod("a", "bad", "1")))
		return s
	}
	tests := []struct {
		name    string
		setup   func(t *testing.T) *cache.ThreadSafeStore
		op      func(s *cache.ThreadSafeStore) error
		wantErr error
	}{
		{name: "Add", setup: indexed, wantErr: errIndex,
			op: func(s *cache.ThreadSafeStore) error { return s.Add("new", pod("b", "bad", "2")) }},
		{name: "Update", setup: indexed, wantErr: errIndex,
			op: func(s *cache.ThreadSafeStore) error { return s.Update("k", pod("b", "bad", "2")) }},
		{name: "Replace", setup: indexed, wantErr: errIndex, op: func(s *cache.ThreadSafeStore) error {
			return s.Replace(map[string]any{"x": pod("c", "ok", "3"), "y": pod("c", "bad", "3")}, "3")
		}},
		{name: "AddIndexers", setup: unindexed, wantErr: errIndex,
			op: func(s *cache.ThreadSafeStore) error { return s.AddIndexers(cache.Indexers{"second": failOn}) }},
		{name: "panicking index func", setup: unindexed, op: func(s *cache.ThreadSafeStore) error {
			return s.AddIndexers(cache.Indexers{"panics": func(any) ([]string, error) { panic("oops") }})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.setup(t)
			before := storeState(s)
			err := tt.op(s)
			if err == nil {
				t.Fatalf("%s succeeded, want error", tt.name)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("%s error = %v, want it to wrap %v", tt.name, err, tt.wantErr)
			}
			if after := storeState(s); !reflect.DeepEqual(before, after) {
				t.Errorf("%s changed the store: before %+v, after %+v", tt.name, before, after)
			}
		})
	}
}

func TestThreadSafeStore_DeleteSucceedsWhenIndexFuncFailsOnOldObject(t *testing.T) {
	calls := 0
	flaky := func(obj any) ([]string, error) {
		calls++
		if calls > 1 {
			return nil, errIndex
		}
		return cache.MetaNamespaceIndexFunc(obj)
	}
	s := cache.NewThreadSafeStore(cache.Indexers{"ns": flaky})
	require.NoError(t, s.Add("k", pod("a", "p", "1")))
	s.Delete("k")
	if _, ok := s.Get("k"); ok {
		t.Error("Delete left the object in place")
	}
	if got := s.ListIndexFuncValues("ns"); len(got) != 0 {
		t.Errorf("Delete left index values %v", got)
	}
}

type state struct {
	items    map[string]string
	indexers []string
	values   map[string][]string
	rv       string
}

func storeState(s *cache.ThreadSafeStore) state {
	st := state{items: map[string]string{}, values: map[string][]string{}, rv: s.LastStoreSyncResourceVersion()}
	for _, k := range s.ListKeys() {
		obj, _ := s.Get(k)
		p := obj.(*corev1.Pod)
		st.items[k] = p.Namespace + "/" + p.Name + "@" + p.ResourceVersion
	}
	st.indexers = slices.Sorted(mapKeys(s.GetIndexers()))
	for _, name := range st.indexers {
		st.values[name] = s.ListIndexFuncValues(name)
	}
	return st
}

func TestIndexer_ReplaceRebuildsIndexes(t *testing.T) {
	idx := namespaceIndexer()
	require.NoError(t, idx.Add(pod("old", "p", "1")))
	require.NoError(t, idx.Replace([]any{pod("new1", "p", "2"), pod("new2", "q", "2")}, "5"))
	if got, want := idx.ListIndexFuncValues(cache.NamespaceIndex), []string{"new1", "new2"}; !slices.Equal(got, want) {
		t.Errorf("ListIndexFuncValues = %v, want %v", got, want)
	}
	if got, err := idx.ByIndex(cache.NamespaceIndex, "old"); err != nil || len(got) != 0 {
		t.Errorf("ByIndex(old) = %v, %v, want nothing", got, err)
	}
	if got := idx.ListKeys(); len(got) != 2 {
		t.Errorf("ListKeys = %v, want 2 keys", got)
	}
}

func TestStore_ResourceVersionTracking(t *testing.T) {
	store := namespaceIndexer()
	ts := cache.NewThreadSafeStore(nil)
	steps := []struct {
		name string
		do   func() error
		want string
	}{
		{"Add sets it", func() error { return store.Add(pod("ns", "a", "5")) }, "5"},
		{"last written, not largest", func() error { return store.Add(pod("ns", "b", "3")) }, "3"},
		{"Update sets it", func() error { return store.Update(pod("ns", "a", "8")) }, "8"},
		{"Delete with final state sets it", func() error { return store.Delete(pod("ns", "a", "9")) }, "9"},
		{"tombstone delete leaves it", func() error {
			return cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, nil).Delete(cache.DeletedFinalStateUnknown{Key: "ns/b"})
		}, "9"},
		{"Replace sets the list version", func() error { return store.Replace([]any{pod("ns", "c", "2")}, "20") }, "20"},
		{"Bookmark sets it", func() error { store.Bookmark("25"); return nil }, "25"},
		{"Resync leaves it", func() error { return store.Resync() }, "25"},
	}
	for _, st := range steps {
		require.NoError(t, st.do(), st.name)
		if got := store.LastStoreSyncResourceVersion(); got != st.want {
			t.Errorf("%s: LastStoreSyncResourceVersion() = %q, want %q", st.name, got, st.want)
		}
	}

	require.NoError(t, ts.Add("a", pod("ns", "a", "4")))
	ts.Delete("a")
	if got := ts.LastStoreSyncResourceVersion(); got != "4" {
		t.Errorf("Delete(key) changed the version to %q, want 4", got)
	}
	require.NoError(t, ts.Add("x", "not an object"))
	if got := ts.LastStoreSyncResourceVersion(); got != "4" {
		t.Errorf("an object without meta changed the version to %q, want 4", got)
	}
	ts.DeleteWithObject("gone", pod("ns", "gone", "11"))
	if got := ts.LastStoreSyncResourceVersion(); got != "11" {
		t.Errorf("DeleteWithObject = %q, want 11", got)
	}
}

func TestStore_KeyErrors(t *testing.T) {
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	var ke cache.KeyError
	if err := store.Add(42); !errors.As(err, &ke) || !errors.Is(err, cache.ErrNoMeta) {
		t.Errorf("Add(42) = %v, want a KeyError wrapping ErrNoMeta", err)
	}
	require.NoError(t, store.Add(pod("ns", "a", "1")))
	if err := store.Replace([]any{pod("ns", "b", "1"), "junk"}, "2"); err == nil {
		t.Error("Replace with an object without meta succeeded, want error")
	}
	if got := store.ListKeys(); !slices.Equal(got, []string{"ns/a"}) {
		t.Errorf("a failed Replace changed the store: keys %v", got)
	}
	if _, _, err := store.Get(nil); err == nil {
		t.Error("Get(nil) succeeded, want error")
	}
	if item, ok, err := store.Get(pod("ns", "a", "")); err != nil || !ok || item.(*corev1.Pod).ResourceVersion != "1" {
		t.Errorf("Get(ns/a) = %v, %v, %v", item, ok, err)
	}
}

func TestThreadSafeStore_ZeroValue(t *testing.T) {
	var s cache.ThreadSafeStore
	require.NoError(t, s.Add("a", 1))
	if got, ok := s.Get("a"); !ok || got != 1 {
		t.Errorf("Get(a) = %v, %v, want 1, true", got, ok)
	}
	require.NoError(t, s.AddIndexers(cache.Indexers{"parity": func(obj any) ([]string, error) {
		return []string{fmt.Sprint(obj.(int) % 2)}, nil
	}}))
	if got, err := s.IndexKeys("parity", "1"); err != nil || !slices.Equal(got, []string{"a"}) {
		t.Errorf("IndexKeys(parity, 1) = %v, %v", got, err)
	}
	if s.Len() != 1 || len(s.List()) != 1 {
		t.Errorf("Len() = %d, List() = %v", s.Len(), s.List())
	}
}

// AddIndexers indexes a snapshot without the lock; writes made meanwhile,
// including deletions whose entry ids are reused by other keys, must end up
// in the new index.
func TestThreadSafeStore_AddIndexersCatchesUpWithWritesMadeMeanwhile(t *testing.T) {
	s := cache.NewThreadSafeStore(nil)
	for i := range 20 {
		require.NoError(t, s.Add(fmt.Sprint("k", i), pod(fmt.Sprint("ns", i%3), fmt.Sprint("k", i), "1")))
	}
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	blocking := func(obj any) ([]string, error) {
		once.Do(func() { close(started); <-release })
		return cache.MetaNamespaceIndexFunc(obj)
	}
	errc := make(chan error)
	go func() { errc <- s.AddIndexers(cache.Indexers{cache.NamespaceIndex: blocking}) }()
	<-started
	// k1 (ns1) and k2 (ns2) swap entry ids and namespaces.
	s.Delete("k1")
	s.Delete("k2")
	require.NoError(t, s.Add("k1", pod("ns2", "k1", "2")))
	require.NoError(t, s.Add("k2", pod("ns1", "k2", "2")))
	require.NoError(t, s.Update("k3", pod("ns7", "k3", "2")))
	require.NoError(t, s.Add("new", pod("ns0", "new", "2")))
	s.Delete("k4")
	close(release)
	require.NoError(t, <-errc)
	checkNamespaceIndex(t, s)
}
