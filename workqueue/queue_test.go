package workqueue_test

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/quotakit/quotakit/workqueue"
)

// getAll takes n items from q without calling Done.
func getAll(t *testing.T, q *workqueue.Queue[string], n int) []string {
	t.Helper()
	var got []string
	for range n {
		item, shutdown := q.Get()
		if shutdown {
			t.Fatalf("Get() reported shutdown after %d items, want %d items", len(got), n)
		}
		got = append(got, item)
	}
	return got
}

func TestQueueFIFOAndCollapse(t *testing.T) {
	tests := []struct {
		name    string
		adds    []string
		want    []string
		wantLen int
	}{
		{name: "fifo", adds: []string{"a", "b", "c"}, want: []string{"a", "b", "c"}, wantLen: 3},
		{name: "collapse before processing", adds: []string{"a", "b", "a", "a", "c", "b"}, want: []string{"a", "b", "c"}, wantLen: 3},
		{name: "single", adds: []string{"x", "x"}, want: []string{"x"}, wantLen: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := workqueue.New[string](workqueue.Options{})
			for _, a := range tt.adds {
				q.Add(a)
			}
			if got := q.Len(); got != tt.wantLen {
				t.Errorf("Len() = %d, want %d", got, tt.wantLen)
			}
			got := getAll(t, q, len(tt.want))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Get order (-want +got):\n%s", diff)
			}
			if got := q.Len(); got != 0 {
				t.Errorf("Len() after Get = %d, want 0", got)
			}
		})
	}
}

func TestQueueZeroValue(t *testing.T) {
	var q workqueue.Queue[int]
	q.Done(7) // Done before anything was added is a no-op
	q.Add(1)
	q.Add(2)
	if got, _ := q.Get(); got != 1 {
		t.Fatalf("Get() = %d, want 1", got)
	}
	q.Done(1)
	q.ShutDown()
	if got, shutdown := q.Get(); got != 2 || shutdown {
		t.Fatalf("Get() after ShutDown = %d, %v, want 2, false", got, shutdown)
	}
	if _, shutdown := q.Get(); !shutdown {
		t.Fatalf("Get() on empty shut-down queue: shutdown = false, want true")
	}
}

func TestQueueReAddWhileProcessing(t *testing.T) {
	q := workqueue.New[string](workqueue.Options{})
	q.Add("a")
	item, _ := q.Get()
	// Adds while "a" is processed mark it dirty once; it is not queued
	// and so cannot reach a second worker.
	q.Add("a")
	q.Add("a")
	if got := q.Len(); got != 0 {
		t.Fatalf("Len() while a is processed and dirty = %d, want 0", got)
	}
	q.Add("b")
	if got, _ := q.Get(); got != "b" {
		t.Fatalf("Get() = %q, want b (a must not be handed out twice)", got)
	}
	q.Done(item)
	if got := q.Len(); got != 1 {
		t.Fatalf("Len() after Done(a) = %d, want 1 (exactly one more pass)", got)
	}
	if got, _ := q.Get(); got != "a" {
		t.Fatalf("Get() = %q, want a", got)
	}
	q.Done("a")
	q.Done("b")
	if got := q.Len(); got != 0 {
		t.Fatalf("Len() at end = %d, want 0", got)
	}
	// Done for an item that is not being processed changes nothing.
	q.Add("c")
	q.Done("c")
	if got := q.Len(); got != 1 {
		t.Fatalf("Len() after Done of a queued item = %d, want 1", got)
	}
}

func TestQueueShutDownDrainsQueuedItems(t *testing.T) {
	q := workqueue.New[string](workqueue.Options{})
	q.Add("a")
	q.Add("b")
	q.ShutDown()
	q.Add("c") // ignored after shut down
	if !q.ShuttingDown() {
		t.Fatal("ShuttingDown() = false after ShutDown")
	}
	got := getAll(t, q, 2)
	if diff := cmp.Diff([]string{"a", "b"}, got); diff != "" {
		t.Errorf("Get after ShutDown (-want +got):\n%s", diff)
	}
	if item, shutdown := q.Get(); !shutdown || item != "" {
		t.Errorf("Get() on drained queue = %q, %v, want \"\", true", item, shutdown)
	}
	for _, item := range got {
		q.Done(item)
	}
	q.ShutDown() // idempotent
	q.ShutDownWithDrain()
}

func TestQueueShutDownWakesGetters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := workqueue.New[int](workqueue.Options{})
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				if _, shutdown := q.Get(); !shutdown {
					t.Error("Get() on empty queue returned an item, want shutdown")
				}
			})
		}
		synctest.Wait() // all three block in Get
		q.ShutDown()
		wg.Wait()
	})
}

// TestQueueShutDownWithDrainWaitsForReAddedItem pins the sequence of issue
// #25: an item added again while it is processed goes back to the queue on
// Done, after every other item has finished, and the drain waits for its
// second pass instead of returning with it queued.
func TestQueueShutDownWithDrainWaitsForReAddedItem(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := workqueue.New[string](workqueue.Options{})
		q.Add("a")
		q.Add("b")
		a, _ := q.Get()
		q.Add("a") // dirty while processed

		drained := make(chan struct{})
		go func() {
			q.ShutDownWithDrain()
			close(drained)
		}()
		stillDraining := func(when string) {
			t.Helper()
			synctest.Wait()
			select {
			case <-drained:
				t.Fatalf("ShutDownWithDrain returned %s", when)
			default:
			}
		}
		stillDraining("with a in flight and b queued")
		if !q.ShuttingDown() {
			t.Fatal("ShuttingDown() = false during ShutDownWithDrain")
		}

		b, shutdown := q.Get()
		if shutdown || b != "b" {
			t.Fatalf("Get() = %q, %v, want b, false", b, shutdown)
		}
		q.Done(b)
		stillDraining("with a in flight")
		q.Done(a) // a goes back to the queue for its second pass
		stillDraining("with a queued")
		if got := q.Len(); got != 1 {
			t.Fatalf("Len() after Done(a) = %d, want 1", got)
		}

		again, shutdown := q.Get()
		if shutdown || again != "a" {
			t.Fatalf("Get() = %q, %v, want a, false", again, shutdown)
		}
		stillDraining("with a's second pass in flight")
		q.Done(again)
		<-drained
		if _, shutdown := q.Get(); !shutdown {
			t.Fatal("Get() after drain: shutdown = false, want true")
		}
	})
}

// TestQueueShutDownWithDrainWaitsForQueuedItems checks that a drain started
// with items queued and none in flight waits until workers have taken and
// finished them all.
func TestQueueShutDownWithDrainWaitsForQueuedItems(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := workqueue.New[int](workqueue.Options{})
		for i := range 3 {
			q.Add(i)
		}
		drained := make(chan struct{})
		go func() {
			q.ShutDownWithDrain()
			close(drained)
		}()
		for i := range 3 {
			synctest.Wait()
			select {
			case <-drained:
				t.Fatalf("ShutDownWithDrain returned with %d items queued", 3-i)
			default:
			}
			item, shutdown := q.Get()
			if shutdown || item != i {
				t.Fatalf("Get() = %d, %v, want %d, false", item, shutdown, i)
			}
			q.Done(item)
		}
		<-drained
	})
}

func TestQueueShutDownReleasesShutDownWithDrain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := workqueue.New[string](workqueue.Options{})
		q.Add("a")
		q.Get() // never Done

		var wg sync.WaitGroup
		for range 2 { // several drainers are all released
			wg.Go(q.ShutDownWithDrain)
		}
		synctest.Wait()
		q.ShutDown()
		wg.Wait()
	})
}

func TestQueueShutDownWithDrainIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := workqueue.New[string](workqueue.Options{})
		q.ShutDownWithDrain() // nothing in flight: returns at once
		if !q.ShuttingDown() {
			t.Fatal("ShuttingDown() = false")
		}
	})
}

// hammer runs producers and consumers over q and checks that no item is
// ever processed by two consumers at once and that every item is processed
// after its last add. drain selects ShutDownWithDrain over ShutDown.
func hammer(t *testing.T, drain bool) {
	const producers, consumers, perProducer = 50, 10, 200
	q := workqueue.New[string](workqueue.Options{})

	var (
		mu         sync.Mutex
		inFlight   = map[string]bool{}
		lastAdd    = map[string]int{} // add sequence number of the last add
		lastPass   = map[string]int{} // add sequence number seen at the start of the last pass
		seq        int
		violations int
	)
	var cons sync.WaitGroup
	for range consumers {
		cons.Go(func() {
			for {
				item, shutdown := q.Get()
				if shutdown {
					return
				}
				mu.Lock()
				if inFlight[item] {
					violations++
				}
				inFlight[item] = true
				lastPass[item] = lastAdd[item]
				mu.Unlock()
				runtime.Gosched()
				mu.Lock()
				inFlight[item] = false
				mu.Unlock()
				q.Done(item)
			}
		})
	}
	var prod sync.WaitGroup
	for p := range producers {
		prod.Go(func() {
			for i := range perProducer {
				// Overlapping keys between producers, so adds collapse
				// and race with processing.
				item := fmt.Sprintf("item-%d", (p*perProducer+i)%(producers*perProducer/4))
				mu.Lock()
				seq++
				lastAdd[item] = seq
				// Add under mu so that the recorded order is the add order.
				q.Add(item)
				mu.Unlock()
			}
		})
	}
	prod.Wait()
	if drain {
		q.ShutDownWithDrain()
	} else {
		q.ShutDown()
	}
	cons.Wait()

	if violations > 0 {
		t.Errorf("%d times an item was handed to a second worker while being processed", violations)
	}
	for item, last := range lastAdd {
		if lastPass[item] != last {
			t.Errorf("item %s: last pass saw add #%d, want the last add #%d", item, lastPass[item], last)
		}
	}
	if got := q.Len(); got != 0 {
		t.Errorf("Len() after shut down and drain = %d, want 0", got)
	}
}

func TestQueueHammer(t *testing.T) {
	for _, drain := range []bool{false, true} {
		t.Run(fmt.Sprintf("drain=%v", drain), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { hammer(t, drain) })
		})
	}
}

// payload is an item with a finalizer. Its size keeps it out of the
// allocator's tiny blocks, which pack several objects and so may never run
// a finalizer.
type payload struct {
	_ [1 << 10]byte
}

func TestQueueItemCollectableAfterDone(t *testing.T) {
	q := workqueue.New[*payload](workqueue.Options{})
	collected := make(chan struct{})
	func() {
		p := new(payload)
		runtime.SetFinalizer(p, func(*payload) { close(collected) })
		q.Add(p)
		// Keep the queue busy with other items, so it holds storage.
		for range 100 {
			q.Add(new(payload))
		}
		got, _ := q.Get()
		if got != p {
			t.Fatal("Get() returned another item")
		}
		q.Done(got)
	}()
	for range 50 {
		runtime.GC()
		select {
		case <-collected:
			if got := q.Len(); got != 100 {
				t.Errorf("Len() = %d, want 100", got)
			}
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatal("item was not garbage-collected after Done")
}

func TestQueueManyInFlight(t *testing.T) {
	// More items in flight than Done compares one by one, so Done also
	// goes through the index.
	for _, n := range []int{3, 8, 9, 40} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			q := workqueue.New[string](workqueue.Options{})
			for i := range n {
				q.Add(fmt.Sprint(i))
			}
			got := getAll(t, q, n)
			// Every other item is added again while in flight.
			for i := 0; i < n; i += 2 {
				q.Add(got[i])
			}
			q.Done("not in flight") // no-op
			for i := n - 1; i >= 0; i-- {
				q.Done(got[i])
				q.Done(got[i]) // a second Done is a no-op
			}
			var want []string
			for i := n - 1; i >= 0; i-- {
				if i%2 == 0 {
					want = append(want, got[i])
				}
			}
			again := getAll(t, q, len(want))
			if diff := cmp.Diff(want, again); diff != "" {
				t.Errorf("items queued again by Done (-want +got):\n%s", diff)
			}
			if l := q.Len(); l != 0 {
				t.Errorf("Len() = %d, want 0", l)
			}
		})
	}
}

// TestQueueHandsItemToWaitingGet checks that an item added while a worker
// waits in Get goes straight to that worker and counts as being processed
// from then on: it is not queued, and adding it again is deferred until
// Done.
func TestQueueHandsItemToWaitingGet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := workqueue.New[string](workqueue.Options{})
		got := make(chan string)
		go func() {
			item, _ := q.Get()
			got <- item
		}()
		synctest.Wait() // the worker waits in Get
		q.Add("x")
		q.Add("x") // while "x" is being processed: deferred
		if n := q.Len(); n != 0 {
			t.Errorf("Len() after handing x over = %d, want 0", n)
		}
		if item := <-got; item != "x" {
			t.Fatalf("Get() = %q, want x", item)
		}
		q.Done("x")
		if n := q.Len(); n != 1 {
			t.Errorf("Len() after Done = %d, want 1 (the deferred add)", n)
		}
		q.ShutDown()
	})
}
