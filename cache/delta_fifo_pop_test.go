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
