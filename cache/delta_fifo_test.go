package cache_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/quotakit/quotakit/cache"
)

// describe renders deltas as "Type:ns/name@rv", tombstones as
// "Type:DFSU(key,rv)", for readable comparisons.
func describe(d cache.Deltas) []string {
	var out []string
	for _, delta := range d {
		out = append(out, string(delta.Type)+":"+describeObj(delta.Object))
	}
	return out
}

func describeObj(obj any) string {
	switch o := obj.(type) {
	case *corev1.Pod:
		return o.Namespace + "/" + o.Name + "@" + o.ResourceVersion
	case cache.DeletedFinalStateUnknown:
		inner := "nil"
		if o.Obj != nil {
			inner = describeObj(o.Obj)
		}
		return "DFSU(" + o.Key + "," + inner + ")"
	}
	return fmt.Sprintf("%v", obj)
}

// popAll pops until the queue is empty and returns what each pop delivered.
func popAll(t *testing.T, f *cache.DeltaFIFO) [][]string {
	t.Helper()
	var out [][]string
	for f.Len() > 0 {
		require.NoError(t, f.Pop(t.Context(), func(d cache.Deltas, _ bool) error {
			out = append(out, describe(d))
			return nil
		}))
	}
	return out
}

func checkPops(t *testing.T, f *cache.DeltaFIFO, want [][]string) {
	t.Helper()
	if got := popAll(t, f); !reflect.DeepEqual(got, want) {
		t.Errorf("popped\n  %v\nwant\n  %v", got, want)
	}
}

// applyTo returns a process function that applies deltas to store the way an
// informer does.
func applyTo(store cache.Store) cache.PopProcessFunc {
	return func(d cache.Deltas, _ bool) error {
		for _, delta := range d {
			var err error
			if delta.Type == cache.Deleted {
				err = store.Delete(delta.Object)
			} else {
				err = store.Update(delta.Object)
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
}

func knownStore(t *testing.T, objs ...any) cache.Indexer {
	idx := cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, o := range objs {
		require.NoError(t, idx.Add(o))
	}
	return idx
}

func TestDeltaFIFO_LineJumpersKeepPosition(t *testing.T) {
	f := cache.NewDeltaFIFO(cache.DeltaFIFOOptions{})
	require.NoError(t, f.Add(pod("ns", "foo", "1")))
	require.NoError(t, f.Add(pod("ns", "bar", "1")))
	require.NoError(t, f.Add(pod("ns", "foo", "2")))
	require.NoError(t, f.Update(pod("ns", "foo", "3")))
	require.NoError(t, f.Add(pod("ns", "zab", "1")))
	checkPops(t, f, [][]string{
		{"Added:ns/foo@1", "Added:ns/foo@2", "Updated:ns/foo@3"},
		{"Added:ns/bar@1"},
		{"Added:ns/zab@1"},
	})
}

func TestDeltaFIFO_UpdateThenResyncYieldsOnlyUpdated(t *testing.T) {
	f := cache.NewDeltaFIFO(cache.DeltaFIFOOptions{KnownObjects: knownStore(t, pod("ns", "foo", "1"), pod("ns", "bar", "1"))})
	require.NoError(t, f.Update(pod("ns", "foo", "2")))
	require.NoError(t, f.Resync())
	got := popAll(t, f)
	want := [][]string{{"Updated:ns/foo@2"}, {"Sync:ns/bar@1"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("popped %v, want %v", got, want)
	}
}

func TestDeltaFIFO_DeleteThenResyncYieldsOnlyDeleted(t *testing.T) {
	f := cache.NewDeltaFIFO(cache.DeltaFIFOOptions{KnownObjects: knownStore(t, pod("ns", "foo", "1"))})
	require.NoError(t, f.Delete(pod("ns", "foo", "2")))
	require.NoError(t, f.Resync())
	checkPops(t, f, [][]string{{"Deleted:ns/foo@2"}})
}

func TestDeltaFIFO_ResyncWithoutKnownObjectsDoesNothing(t *testing.T) {
	f := cache.NewDeltaFIFO(cache.DeltaFIFOOptions{})
	require.NoError(t, f.Resync())
	if f.Len() != 0 {
		t.Errorf("Len() = %d after Resync without known objects, want 0", f.Len())
	}
}

func TestDeltaFIFO_TombstoneCarriesNewestQueuedObject(t *testing.T) {
	f := cache.NewDeltaFIFO(cache.DeltaFIFOOptions{KnownObjects: knownStore(t, pod("ns", "known", "7"))})
	require.NoError(t, f.Add(pod("ns", "foo", "1")))
	require.NoError(t, f.Update(pod("ns", "foo", "2")))
	require.NoError(t, f.Replace([]any{pod("ns", "bar", "3")}, "10"))
	got := popAll(t, f)
	slices.SortFunc(got[2:], func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	want := [][]string{
		{"Added:ns/foo@1", "Updated:ns/foo@2", "Deleted:DFSU(ns/foo,ns/foo@2)"},
		{"Sync:ns/bar@3"},
		{"Deleted:DFSU(ns/known,ns/known@7)"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("popped\n  %v\nwant\n  %v", got, want)
	}
}

func TestDeltaFIFO_TombstoneOfTombstoneUnwraps(t *testing.T) {
	f := cache.NewDeltaFIFO(cache.DeltaFIFOOptions{KnownObjects: knownStore(t, pod("ns", "foo", "1"))})
	require.NoError(t, f.Replace(nil, "2"))
	require.NoError(t, f.Replace(nil, "3"))
	// The second tombstone carries the pod, not the first tombstone; the two
	// deletions are then merged.
	checkPops(t, f, [][]string{{"Deleted:DFSU(ns/foo,ns/foo@1)"}})
}

func TestDeltaFIFO_ReplaceAfterDeleteKeepsRecreatedObject(t *testing.T) {
	known := knownStore(t, pod("ns", "foo", "1"))
	f := cache.NewDeltaFIFO(cache.DeltaFIFOOptions{KnownObjects: known})
	require.NoError(t, f.Delete(pod("ns", "foo", "2")))
	require.NoError(t, f.Replace([]any{pod("ns", "foo", "3")}, "3"))
	for f.Len() > 0 {
		require.NoError(t, f.Pop(t.Context(), applyTo(known)))
	}
	obj, ok, _ := known.GetByKey("ns/foo")
	if !ok || obj.(*corev1.Pod).ResourceVersion != "3" {
		t.Errorf("after processing, ns/foo = %v (exists %v), want the re-created pod @3", obj, ok)
	}
}

func TestDeltaFIFO_DeleteOfUnknownKeyIsIgnored(t *testing.T) {
	tests := []struct {
		name  string
		known cache.KnownObjects
	}{
		{name: "with known objects", known: knownStore(t, pod("ns", "other", "1"))},
		{name: "without known objects"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := cache.NewDeltaFIFO(cache.DeltaFIFOOptions{KnownObjects: tt.known})
			require.NoError(t, f.Delete(pod("ns", "ghost", "1")))
			if f.Len() != 0 {
				t.Errorf("Delete of an unknown key queued it: Len() = %d", f.Len())
			}
		})
	}
	f := cache.NewDeltaFIFO(cache.DeltaFIFOOptions{KnownObjects: knownStore(t, pod("ns", "known", "1"))})
	require.NoError(t, f.Delete(pod("ns", "known", "2")))
	checkPops(t, f, [][]string{{"Deleted:ns/known@2"}})
}

func TestDeltaFIFO_ConsecutiveDeletesKeepTheOneWithMoreInformation(t *testing.T) {
	full := pod("ns", "foo", "5")
	tomb := cache.DeletedFinalStateUnknown{Key: "ns/foo", Obj: pod("ns", "foo", "4")}
	tests := []struct {
		name   string
		first  any
		second any
		want   []string
	}{
		{name: "object then tombstone", first: full, second: tomb, want: []string{"Deleted:ns/foo@5"}},
		{name: "tombstone then object", first: tomb, second: full, want: []string{"Deleted:ns/foo@5"}},
		{name: "object then object keeps older", first: full, second: pod("ns", "foo", "6"), want: []string{"Deleted:ns/foo@5"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := cache.NewDeltaFIFO(cache.DeltaFIFOOptions{})
			require.NoError(t, f.Add(pod("ns", "foo", "1")))
			require.NoError(t, f.Delete(tt.first))
			require.NoError(t, f.Delete(tt.second))
			checkPops(t, f, [][]string{append([]string{"Added:ns/foo@1"}, tt.want...)})
		})
	}
}

func TestDeltaFIFO_HasSyncedCountsTombstones(t *testing.T) {
	f := cache.NewDeltaFIFO(cache.DeltaFIFOOptions{KnownObjects: knownStore(t, pod("ns", "a", "1"), pod("ns", "b", "1"))})
	if f.HasSynced() {
		t.Fatal("HasSynced() before any write = true")
	}
	require.NoError(t, f.Replace([]any{pod("ns", "a", "2"), pod("ns", "a", "2")}, "2"))
	var initial []bool
	for i := range 2 {
		if f.HasSynced() {
			t.Fatalf("HasSynced() = true after %d of 2 pops", i)
		}
		require.NoError(t, f.Pop(t.Context(), func(_ cache.Deltas, isInInitialList bool) error {
			initial = append(initial, isInInitialList)
			return nil
		}))
	}
	if !f.HasSynced() {
		t.Error("HasSynced() = false after popping the list and its tombstone")
	}
	select {
	case <-f.Synced():
	default:
		t.Error("Synced() channel not closed")
	}
	require.NoError(t, f.Add(pod("ns", "c", "3")))
	require.NoError(t, f.Pop(t.Context(), func(_ cache.Deltas, isInInitialList bool) error {
		initial = append(initial, isInInitialList)
		return nil
	}))
	if want := []bool{true, true, false}; !slices.Equal(initial, want) {
		t.Errorf("isInInitialList = %v, want %v", initial, want)
	}
}

func TestDeltaFIFO_HasSyncedOnlyAfterLastInitialItemIsProcessed(t *testing.T) {
	f := cache.NewDeltaFIFO(cache.DeltaFIFOOptions{})
	require.NoError(t, f.Replace([]any{pod("ns", "a", "1")}, "1"))
	require.NoError(t, f.Pop(t.Context(), func(cache.Deltas, bool) error {
		if f.HasSynced() {
			t.Error("HasSynced() = true while the last initial item is being processed")
		}
		return nil
	}))
	if !f.HasSynced() {
		t.Error("HasSynced() = false after processing")
	}
}

func TestDeltaFIFO_HasSyncedImmediately(t *testing.T) {
	tests := []struct {
		name  string
		write func(f *cache.DeltaFIFO) error
	}{
		{"Add before Replace", func(f *cache.DeltaFIFO) error { return f.Add(pod("ns", "a", "1")) }},
		{"Update before Replace", func(f *cache.DeltaFIFO) error { return f.Update(pod("ns", "a", "1")) }},
		{"ignored Delete", func(f *cache.DeltaFIFO) error { return f.Delete(pod("ns", "a", "1")) }},
		{"empty Replace", func(f *cache.DeltaFIFO) error { return f.Replace(nil, "1") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := cache.NewDeltaFIFO(cache.DeltaFIFOOptions{})
			require.NoError(t, tt.write(f))
			if !f.HasSynced() {
				t.Errorf("HasSynced() = false after %s", tt.name)
			}
		})
	}
}

func TestDeltaFIFO_CloseUnblocksPop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := cache.NewDeltaFIFO(cache.DeltaFIFOOptions{})
		done := make(chan error)
		go func() {
			done <- f.Pop(context.Background(), func(cache.Deltas, bool) error { return nil })
		}()
		synctest.Wait()
		f.Close()
		if err := <-done; !errors.Is(err, cache.ErrFIFOClosed) {
			t.Errorf("Pop after Close = %v, want ErrFIFOClosed", err)
		}
		if !f.IsClosed() {
			t.Error("IsClosed() = false after Close")
		}
		if err := f.Add(pod("ns", "a", "1")); !errors.Is(err, cache.ErrFIFOClosed) {
			t.Errorf("Add after Close = %v, want ErrFIFOClosed", err)
		}
	})
}

func TestDeltaFIFO_CloseDrainsQueuedKeysFirst(t *testing.T) {
	f := cache.NewDeltaFIFO(cache.DeltaFIFOOptions{})
	require.NoError(t, f.Add(pod("ns", "a", "1")))
	f.Close()
	require.NoError(t, f.Pop(t.Context(), func(cache.Deltas, bool) error { return nil }))
	if err := f.Pop(t.Context(), func(cache.Deltas, bool) error { return nil }); !errors.Is(err, cache.ErrFIFOClosed) {
		t.Errorf("second Pop = %v, want ErrFIFOClosed", err)
	}
}

func TestDeltaFIFO_ContextCancelUnblocksPop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := cache.NewDeltaFIFO(cache.DeltaFIFOOptions{})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- f.Pop(ctx, func(cache.Deltas, bool) error { return nil }) }()
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Pop after cancel = %v, want context.Canceled", err)
		}
	})
}

func TestDeltaFIFO_PopWaitsForAdd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := cache.NewDeltaFIFO(cache.DeltaFIFOOptions{})
		got := make(chan []string)
		go func() {
			_ = f.Pop(t.Context(), func(d cache.Deltas, _ bool) error { got <- describe(d); return nil })
		}()
		synctest.Wait()
		require.NoError(t, f.Add(pod("ns", "a", "1")))
		if d := <-got; !slices.Equal(d, []string{"Added:ns/a@1"}) {
			t.Errorf("popped %v", d)
		}
	})
}

func TestDeltaFIFO_KeyBeingProcessedIsNotPoppedConcurrently(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := cache.NewDeltaFIFO(cache.DeltaFIFOOptions{})
		require.NoError(t, f.Add(pod("ns", "a", "1")))
		release := make(chan struct{})
		firstDone := make(chan struct{})
		go func() {
			defer close(firstDone)
			_ = f.Pop(t.Context(), func(cache.Deltas, bool) error { <-release; return nil })
		}()
		synctest.Wait()
		// "a" changes while it is being processed, and "b" arrives.
		require.NoError(t, f.Update(pod("ns", "a", "2")))
		require.NoError(t, f.Add(pod("ns", "b", "1")))
		var second []string
		require.NoError(t, f.Pop(t.Context(), func(d cache.Deltas, _ bool) error { second = describe(d); return nil }))
		if !slices.Equal(second, []string{"Added:ns/b@1"}) {
			t.Errorf("second Pop took %v while ns/a was being processed, want ns/b", second)
		}
		thirdDone := make(chan []string)
		go func() {
			_ = f.Pop(t.Context(), func(d cache.Deltas, _ bool) error { thirdDone <- describe(d); return nil })
		}()
		synctest.Wait()
		select {
		case d := <-thirdDone:
			t.Fatalf("third Pop took %v before ns/a finished processing", d)
		default:
		}
		close(release)
		<-firstDone
		if d := <-thirdDone; !slices.Equal(d, []string{"Updated:ns/a@2"}) {
			t.Errorf("third Pop = %v, want the update of ns/a", d)
		}
	})
}

// A key popped as Added but not yet applied to the store is absent from a
// relist: Replace must still queue its deletion, or the object would stay in
// the store forever (kubernetes#115658).
func TestDeltaFIFO_ReplaceDuringProcessingTombstonesInFlightKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		known := knownStore(t)
		f := cache.NewDeltaFIFO(cache.DeltaFIFOOptions{KnownObjects: known})
		require.NoError(t, f.Add(pod("ns", "a", "1")))
		release := make(chan struct{})
		done := make(chan error)
		go func() {
			done <- f.Pop(t.Context(), func(d cache.Deltas, init bool) error {
				<-release
				return applyTo(known)(d, init)
			})
		}()
		synctest.Wait()
		require.NoError(t, f.Replace(nil, "2"))
		close(release)
		require.NoError(t, <-done)
		require.NoError(t, f.Pop(t.Context(), applyTo(known)))
		if keys := known.ListKeys(); len(keys) != 0 {
			t.Errorf("store = %v after relist without ns/a, want empty", keys)
		}
	})
}

func TestDeltaFIFO_TransformerRunsOncePerObject(t *testing.T) {
	var transformed []string
	transform := func(obj any) (any, error) {
		p := obj.(*corev1.Pod)
		transformed = append(transformed, p.Name+"@"+p.ResourceVersion)
		c := p.DeepCopy()
		c.Annotations = map[string]string{"transformed": "yes"}
		return c, nil
	}
	known := knownStore(t)
	f := cache.NewDeltaFIFO(cache.DeltaFIFOOptions{KnownObjects: known, Transformer: transform})
	require.NoError(t, f.Add(pod("ns", "a", "1")))
	require.NoError(t, f.Update(pod("ns", "a", "2")))
	require.NoError(t, f.Replace([]any{pod("ns", "b", "3")}, "3")) // tombstone for a: no transform
	for f.Len() > 0 {
		require.NoError(t, f.Pop(t.Context(), applyTo(known)))
	}
	require.NoError(t, f.Resync()) // Sync of b: no transform
	require.NoError(t, f.Delete(pod("ns", "b", "4")))
	var seen []cache.Delta
	for f.Len() > 0 {
		require.NoError(t, f.Pop(t.Context(), func(d cache.Deltas, _ bool) error { seen = append(seen, d...); return nil }))
	}
	if want := []string{"a@1", "a@2", "b@3", "b@4"}; !slices.Equal(transformed, want) {
		t.Errorf("transformer called on %v, want %v", transformed, want)
	}
	for _, d := range seen {
		if d.Object.(*corev1.Pod).Annotations["transformed"] != "yes" {
			t.Errorf("%s delta carries an untransformed object", d.Type)
		}
	}

	failing := cache.NewDeltaFIFO(cache.DeltaFIFOOptions{Transformer: func(any) (any, error) { return nil, errIndex }})
	if err := failing.Add(pod("ns", "a", "1")); !errors.Is(err, errIndex) {
		t.Errorf("Add with failing transformer = %v, want its error", err)
	}
	if err := failing.Replace([]any{pod("ns", "a", "1")}, "1"); !errors.Is(err, errIndex) || failing.Len() != 0 {
		t.Errorf("Replace with failing transformer = %v, Len %d; want its error and nothing queued", err, failing.Len())
	}
}

func TestDeltaFIFO_EmitDeltaTypeReplaced(t *testing.T) {
	f := cache.NewDeltaFIFO(cache.DeltaFIFOOptions{EmitDeltaTypeReplaced: true})
	require.NoError(t, f.Replace([]any{pod("ns", "a", "1")}, "1"))
	checkPops(t, f, [][]string{{"Replaced:ns/a@1"}})
}

func TestDeltaFIFO_ProcessErrorsAndPanics(t *testing.T) {
	f := cache.NewDeltaFIFO(cache.DeltaFIFOOptions{})
	require.NoError(t, f.Add(pod("ns", "a", "1")))
	require.NoError(t, f.Add(pod("ns", "b", "1")))
	boom := errors.New("boom")
	if err := f.Pop(t.Context(), func(cache.Deltas, bool) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("Pop = %v, want process's error", err)
	}
	if err := f.Pop(t.Context(), func(cache.Deltas, bool) error { panic("handler bug") }); err == nil || !strings.Contains(err.Error(), "handler bug") {
		t.Errorf("Pop with panicking process = %v, want an error naming the panic", err)
	}
	if f.Len() != 0 {
		t.Errorf("failed items were requeued: Len() = %d", f.Len())
	}
	if err := f.Pop(t.Context(), nil); err == nil {
		t.Error("Pop(nil) succeeded, want error")
	}
}

func TestDeltaFIFO_KeyOf(t *testing.T) {
	f := cache.NewDeltaFIFO(cache.DeltaFIFOOptions{})
	tests := []struct {
		name    string
		obj     any
		want    string
		wantErr bool
	}{
		{name: "object", obj: pod("ns", "a", "1"), want: "ns/a"},
		{name: "deltas use newest", obj: cache.Deltas{{Type: cache.Added, Object: pod("ns", "a", "1")}, {Type: cache.Deleted, Object: cache.DeletedFinalStateUnknown{Key: "ns/a"}}}, want: "ns/a"},
		{name: "tombstone", obj: cache.DeletedFinalStateUnknown{Key: "x/y"}, want: "x/y"},
		{name: "empty deltas", obj: cache.Deltas{}, wantErr: true},
		{name: "no meta", obj: 3, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := f.KeyOf(tt.obj)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("KeyOf(%v) = %q, %v, want %q (error %v)", tt.obj, got, err, tt.want, tt.wantErr)
			}
		})
	}
	var ke cache.KeyError
	if err := f.Add(3); !errors.As(err, &ke) {
		t.Errorf("Add(3) = %v, want KeyError", err)
	}
}

func TestDeltas_OldestNewest(t *testing.T) {
	var empty cache.Deltas
	if empty.Oldest() != nil || empty.Newest() != nil {
		t.Error("Oldest/Newest of empty Deltas not nil")
	}
	d := cache.Deltas{{Type: cache.Added, Object: 1}, {Type: cache.Updated, Object: 2}}
	if d.Oldest().Object != 1 || d.Newest().Object != 2 {
		t.Errorf("Oldest = %v, Newest = %v", d.Oldest(), d.Newest())
	}
}

func TestDeltaFIFO_ZeroValue(t *testing.T) {
	var f cache.DeltaFIFO
	require.NoError(t, f.Add(pod("ns", "a", "1")))
	checkPops(t, &f, [][]string{{"Added:ns/a@1"}})
	if !f.HasSynced() {
		t.Error("HasSynced() = false after Add")
	}
}

func TestDeltaFIFO_KeyReleasedWhenProcessExitsGoroutine(t *testing.T) {
	f := cache.NewDeltaFIFO(cache.DeltaFIFOOptions{})
	require.NoError(t, f.Add(pod("ns", "a", "1")))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = f.Pop(context.Background(), func(cache.Deltas, bool) error { runtime.Goexit(); return nil })
	}()
	<-done
	require.NoError(t, f.Add(pod("ns", "a", "2")))
	checkPops(t, f, [][]string{{"Added:ns/a@2"}})
}

// Several goroutines pop and apply deltas while one goroutine writes random
// events and relists. Once everything is processed, the consumer's store
// must hold exactly the model: the last relist plus later events.
func TestDeltaFIFO_ConcurrentPoppersConverge(t *testing.T) {
	known := knownStore(t)
	f := cache.NewDeltaFIFO(cache.DeltaFIFOOptions{KnownObjects: known})
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			for {
				if err := f.Pop(t.Context(), applyTo(known)); errors.Is(err, cache.ErrFIFOClosed) {
					return
				} else if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	r := rand.New(rand.NewPCG(5, 6))
	model := map[string]string{}
	for i := range 3000 {
		name := fmt.Sprint("p", r.IntN(30))
		rv := fmt.Sprint(i)
		switch r.IntN(10) {
		case 0:
			var list []any
			clear(model)
			for j := range 30 {
				if r.IntN(2) == 0 {
					list = append(list, pod("ns", fmt.Sprint("p", j), rv))
					model[fmt.Sprint("ns/p", j)] = rv
				}
			}
			require.NoError(t, f.Replace(list, rv))
		case 1:
			require.NoError(t, f.Resync())
		case 2, 3:
			require.NoError(t, f.Delete(pod("ns", name, rv)))
			delete(model, "ns/"+name)
		default:
			require.NoError(t, f.Update(pod("ns", name, rv)))
			model["ns/"+name] = rv
		}
	}
	f.Close()
	wg.Wait()
	got := map[string]string{}
	for _, obj := range known.List() {
		p := obj.(*corev1.Pod)
		got[p.Namespace+"/"+p.Name] = p.ResourceVersion
	}
	if !reflect.DeepEqual(got, model) {
		t.Errorf("consumer store = %v, want %v", got, model)
	}
}
