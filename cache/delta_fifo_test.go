package cache_test

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

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
