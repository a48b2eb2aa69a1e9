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

// timedItem is an item and the virtual time at which Get returned it.
type timedItem struct {
	Item string
	At   time.Duration
}

// collect starts a worker that records every item of q with the time since
// start at which it arrived, until q shuts down. wait returns the records.
func collect(q *workqueue.DelayingQueue[string], start time.Time) (wait func() []timedItem) {
	var (
		wg  sync.WaitGroup
		got []timedItem
	)
	wg.Go(func() {
		for {
			item, shutdown := q.Get()
			if shutdown {
				return
			}
			got = append(got, timedItem{item, time.Since(start)})
			q.Done(item)
		}
	})
	return func() []timedItem {
		wg.Wait()
		return got
	}
}

func TestDelayingQueueOrder(t *testing.T) {
	type call struct {
		item string
		d    time.Duration
	}
	tests := []struct {
		name  string
		calls []call
		want  []timedItem
	}{
		{
			name:  "ready-time order",
			calls: []call{{"c", 3 * time.Second}, {"a", time.Second}, {"b", 2 * time.Second}},
			want:  []timedItem{{"a", time.Second}, {"b", 2 * time.Second}, {"c", 3 * time.Second}},
		},
		{
			name:  "zero and negative delays add at once",
			calls: []call{{"later", time.Second}, {"now", 0}, {"past", -time.Second}},
			want:  []timedItem{{"now", 0}, {"past", 0}, {"later", time.Second}},
		},
		{
			name:  "same ready time in call order",
			calls: []call{{"x", time.Second}, {"y", time.Second}, {"z", time.Second}, {"w", time.Second}},
			want:  []timedItem{{"x", time.Second}, {"y", time.Second}, {"z", time.Second}, {"w", time.Second}},
		},
		{
			name:  "earlier AddAfter brings an item forward",
			calls: []call{{"a", 5 * time.Second}, {"b", 2 * time.Second}, {"a", time.Second}},
			want:  []timedItem{{"a", time.Second}, {"b", 2 * time.Second}},
		},
		{
			name:  "later AddAfter does not postpone",
			calls: []call{{"a", time.Second}, {"a", 5 * time.Second}, {"b", 3 * time.Second}},
			want:  []timedItem{{"a", time.Second}, {"b", 3 * time.Second}},
		},
		{
			name:  "waiting is independent of the queue",
			calls: []call{{"a", 0}, {"a", time.Second}},
			want:  []timedItem{{"a", 0}, {"a", time.Second}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := workqueue.NewDelaying[string](workqueue.Options{})
				start := time.Now()
				wait := collect(q, start)
				for _, c := range tt.calls {
					q.AddAfter(c.item, c.d)
				}
				time.Sleep(time.Hour)
				q.ShutDown()
				if diff := cmp.Diff(tt.want, wait()); diff != "" {
					t.Errorf("items and arrival times (-want +got):\n%s", diff)
				}
			})
		})
	}
}

func TestDelayingQueueManyItems(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// More items than the goroutine queues at once, in reverse order
		// of readiness, each added twice, the second time later.
		const n = 3000
		q := workqueue.NewDelaying[string](workqueue.Options{})
		start := time.Now()
		wait := collect(q, start)
		for i := n; i > 0; i-- {
			q.AddAfter(fmt.Sprint(i), time.Duration(i)*time.Millisecond)
		}
		for i := n; i > 0; i-- {
			q.AddAfter(fmt.Sprint(i), time.Hour)
		}
		time.Sleep(2 * time.Hour)
		q.ShutDown()
		got := wait()
		if len(got) != n {
			t.Fatalf("got %d items, want %d", len(got), n)
		}
		for i, g := range got {
			want := timedItem{fmt.Sprint(i + 1), time.Duration(i+1) * time.Millisecond}
			if g != want {
				t.Fatalf("item %d = %v, want %v", i, g, want)
			}
		}
	})
}

func TestDelayingQueueAddAfterWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := workqueue.NewDelaying[string](workqueue.Options{})
		start := time.Now()
		wait := collect(q, start)
		q.AddAfter("late", 10*time.Second)
		time.Sleep(5 * time.Second)
		// The goroutine sleeps until 10s; an earlier item must wake it.
		q.AddAfter("early", time.Second)
		time.Sleep(time.Minute)
		q.ShutDown()
		want := []timedItem{{"early", 6 * time.Second}, {"late", 10 * time.Second}}
		if diff := cmp.Diff(want, wait()); diff != "" {
			t.Errorf("items and arrival times (-want +got):\n%s", diff)
		}
	})
}

func TestDelayingQueueShutDown(t *testing.T) {
	// shutDown shuts q down and returns a function that waits until the
	// shut down is complete, which it can be only once "ready" is done.
	tests := []struct {
		name     string
		shutDown func(q *workqueue.DelayingQueue[string]) (wait func())
	}{
		{name: "ShutDown", shutDown: func(q *workqueue.DelayingQueue[string]) func() {
			q.ShutDown()
			return func() {}
		}},
		{name: "ShutDownWithDrain", shutDown: func(q *workqueue.DelayingQueue[string]) func() {
			// The drain waits for "ready", which is queued.
			done := make(chan struct{})
			go func() {
				q.ShutDownWithDrain()
				close(done)
			}()
			synctest.Wait()
			return func() { <-done }
		}},
		{name: "embedded Queue.ShutDown", shutDown: func(q *workqueue.DelayingQueue[string]) func() {
			// Shutting the embedded queue down directly also ends the
			// goroutine; the test's leak check proves it.
			q.Queue.ShutDown()
			return func() {}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := workqueue.NewDelaying[string](workqueue.Options{})
				q.AddAfter("waiting", time.Hour)
				q.AddAfter("ready", 0)
				synctest.Wait()
				wait := tt.shutDown(q)
				q.AddAfter("ignored", time.Second)
				q.AddAfter("ignored too", 0)
				time.Sleep(2 * time.Hour)
				if item, shutdown := q.Get(); shutdown || item != "ready" {
					t.Errorf("Get() = %q, %v, want ready, false", item, shutdown)
				}
				q.Done("ready")
				wait()
				if item, shutdown := q.Get(); !shutdown {
					t.Errorf("Get() = %q, want shutdown (waiting items are dropped)", item)
				}
				q.ShutDown() // idempotent, and joins the goroutine if needed
			})
		})
	}
}

func TestDelayingQueueZeroValue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var q workqueue.DelayingQueue[int]
		q.AddAfter(1, time.Second)
		start := time.Now()
		item, _ := q.Get()
		if item != 1 || time.Since(start) != time.Second {
			t.Errorf("Get() = %d after %v, want 1 after 1s", item, time.Since(start))
		}
		q.Done(item)
		q.ShutDown()
	})
}

func TestDelayingQueueNoGoroutineUntilAddAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := workqueue.NewDelaying[string](workqueue.Options{})
		q.AddAfter("now", 0)
		// No ShutDown: had AddAfter(…, 0) or the constructor started the
		// goroutine, synctest would report it as leaked.
		if item, _ := q.Get(); item != "now" {
			t.Errorf("Get() = %q, want now", item)
		}
	})
}

func TestDelayingQueueItemsDroppedAtShutDownAreCollectable(t *testing.T) {
	q := workqueue.NewDelaying[*payload](workqueue.Options{})
	collected := make(chan struct{})
	func() {
		p := new(payload)
		runtime.SetFinalizer(p, func(*payload) { close(collected) })
		q.AddAfter(p, time.Hour)
		q.AddAfter(new(payload), time.Hour)
	}()
	q.ShutDown()
	for range 50 {
		runtime.GC()
		select {
		case <-collected:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatal("waiting item was not garbage-collected after ShutDown")
}

func TestDelayingQueueHammer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const producers, consumers, calls, keys = 20, 5, 50, 60
		q := workqueue.NewRateLimiting(workqueue.NewItemExponentialFailureRateLimiter[string](time.Millisecond, 50*time.Millisecond), workqueue.Options{})
		start := time.Now()
		var (
			mu         sync.Mutex
			inFlight   = map[string]bool{}
			lastCall   = map[string]time.Duration{}
			lastPass   = map[string]time.Duration{}
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
					lastPass[item] = time.Since(start)
					mu.Unlock()
					time.Sleep(time.Millisecond) // work
					mu.Lock()
					inFlight[item] = false
					mu.Unlock()
					if len(item)%2 == 0 {
						q.Forget(item)
					}
					q.Done(item)
				}
			})
		}
		var prod sync.WaitGroup
		for p := range producers {
			prod.Go(func() {
				for i := range calls {
					item := fmt.Sprint("key-", (p*calls+i*7)%keys)
					mu.Lock()
					lastCall[item] = time.Since(start)
					mu.Unlock()
					switch i % 3 {
					case 0:
						q.AddAfter(item, time.Duration(1+(p+i)%40)*time.Millisecond)
					case 1:
						q.AddRateLimited(item)
					default:
						q.Add(item)
					}
					time.Sleep(time.Duration(1+(p*i)%5) * time.Millisecond)
				}
			})
		}
		prod.Wait()
		time.Sleep(time.Second) // everything waiting is due by now
		q.ShutDownWithDrain()
		cons.Wait()

		if violations > 0 {
			t.Errorf("%d times an item was handed to a second worker while being processed", violations)
		}
		for item, call := range lastCall {
			if lastPass[item] < call {
				t.Errorf("item %s: last pass started at %v, before its last add at %v", item, lastPass[item], call)
			}
		}
	})
}
