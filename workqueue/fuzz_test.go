package workqueue_test

import (
	cmpp "cmp"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/quotakit/quotakit/workqueue"
)

// queueModel is the obvious implementation of the queue's contract.
type queueModel struct {
	fifo       []int
	dirty      map[int]bool
	processing map[int]bool
	shut       bool
}

func (m *queueModel) add(k int) {
	if m.shut || m.dirty[k] {
		return
	}
	m.dirty[k] = true
	if !m.processing[k] {
		m.fifo = append(m.fifo, k)
	}
}

func (m *queueModel) get() (int, bool) {
	if len(m.fifo) == 0 {
		return 0, true
	}
	k := m.fifo[0]
	m.fifo = m.fifo[1:]
	m.dirty[k] = false
	m.processing[k] = true
	return k, false
}

// idle reports whether no item is queued or being processed, which is
// what ShutDownWithDrain waits for.
func (m *queueModel) idle() bool {
	return len(m.fifo) == 0 && m.inFlight() == 0
}

// inFlight returns the number of items being processed.
func (m *queueModel) inFlight() int {
	n := 0
	for _, p := range m.processing {
		if p {
			n++
		}
	}
	return n
}

func (m *queueModel) done(k int) {
	if !m.processing[k] {
		return
	}
	m.processing[k] = false
	if m.dirty[k] {
		m.fifo = append(m.fifo, k)
	}
}

// FuzzQueue runs a sequence of operations, one per input byte, against a
// Queue and the model, and compares every result. The low three bits of a
// byte choose the operation, the rest the item (32 items, enough to grow
// the queue's index several times and to collide in it).
//
// The operation 7 with item 2 starts ShutDownWithDrain in a goroutine.
// After every operation the test checks, under synctest, that each drain
// has returned exactly when the model says: once nothing is queued or
// being processed, or once ShutDown was called after it started. Items
// added while processed before the drain began are queued again by Done
// during the drain, and the drain must wait for their extra pass.
func FuzzQueue(f *testing.F) {
	f.Add([]byte{0, 8, 16, 3, 3, 4, 12, 6})
	f.Add([]byte{0, 3, 0, 0, 5, 3, 6, 7})
	f.Add([]byte{0, 3, 0, 7, 5, 3, 3, 6, 15})
	// Issue #25: add a, b; get a; add a again; drain; get b, done b, done
	// a; the drain waits for a's second pass.
	f.Add([]byte{0, 8, 3, 0, 23, 3, 12, 4, 6, 3, 4})
	// The same with ShutDown releasing the drain early, and a second drain.
	f.Add([]byte{0, 8, 3, 0, 23, 3, 12, 4, 15, 23, 3, 4})
	seed := make([]byte, 0, 256)
	for i := range 128 {
		seed = append(seed, byte(i<<3), byte(i%3)+3)
	}
	f.Add(seed)
	f.Fuzz(func(t *testing.T, ops []byte) {
		synctest.Test(t, func(t *testing.T) { runQueueOps(t, ops) })
	})
}

// runQueueOps is one run of FuzzQueue; it runs in a synctest bubble.
func runQueueOps(t *testing.T, ops []byte) {
	q := workqueue.New[int](workqueue.Options{})
	m := &queueModel{dirty: map[int]bool{}, processing: map[int]bool{}}
	// drains holds a channel per ShutDownWithDrain call, closed when it
	// returns, and released whether the model has let it return.
	var drains []chan struct{}
	var released []bool
	checkDrains := func(i int) {
		t.Helper()
		synctest.Wait()
		for d, ch := range drains {
			if m.idle() {
				released[d] = true
			}
			select {
			case <-ch:
				if !released[d] {
					t.Fatalf("op %d: ShutDownWithDrain #%d returned with %d items queued and %d in flight", i, d, len(m.fifo), m.inFlight())
				}
			default:
				if released[d] {
					t.Fatalf("op %d: ShutDownWithDrain #%d has not returned, with nothing queued or in flight", i, d)
				}
			}
		}
	}
	doneSmallest := func() {
		for p := range 32 {
			if m.processing[p] {
				q.Done(p)
				m.done(p)
				return
			}
		}
	}
	for i, op := range ops {
		k := int(op >> 3)
		switch op & 7 {
		case 0, 1, 2:
			q.Add(k)
			m.add(k)
		case 3:
			if len(m.fifo) == 0 && !m.shut {
				continue // Get would block
			}
			got, gotShut := q.Get()
			want, wantShut := m.get()
			if got != want || gotShut != wantShut {
				t.Fatalf("op %d: Get() = %d, %v, want %d, %v", i, got, gotShut, want, wantShut)
			}
		case 4:
			q.Done(k)
			m.done(k)
		case 5:
			// Done for the smallest item being processed, so that
			// re-queues happen often.
			doneSmallest()
		case 6:
			if got, want := q.Len(), len(m.fifo); got != want {
				t.Fatalf("op %d: Len() = %d, want %d", i, got, want)
			}
		case 7:
			switch k {
			case 1:
				q.ShutDown()
				m.shut = true
				for d := range released {
					released[d] = true
				}
			case 2:
				ch := make(chan struct{})
				go func() {
					q.ShutDownWithDrain()
					close(ch)
				}()
				m.shut = true
				drains = append(drains, ch)
				released = append(released, false)
			default:
				if got := q.ShuttingDown(); got != m.shut {
					t.Fatalf("op %d: ShuttingDown() = %v, want %v", i, got, m.shut)
				}
			}
		}
		checkDrains(i)
	}
	if len(drains) == 0 {
		// Everything queued comes out in model order.
		for _, want := range m.fifo {
			got, shutdown := q.Get()
			if shutdown || got != want {
				t.Fatalf("end: Get() = %d, %v, want %d, false", got, shutdown, want)
			}
		}
		return
	}
	// Work the queue off as a worker would: every drain returns by the
	// time nothing is queued or in flight, and not before.
	for i := len(ops); !m.idle(); i++ {
		if len(m.fifo) > 0 {
			got, shutdown := q.Get()
			want, _ := m.get()
			if shutdown || got != want {
				t.Fatalf("end: Get() = %d, %v, want %d, false", got, shutdown, want)
			}
		} else {
			doneSmallest()
		}
		checkDrains(i)
	}
	if _, shutdown := q.Get(); !shutdown {
		t.Fatal("end: Get() after the drain: shutdown = false, want true")
	}
}

// FuzzDelayingQueue adds items with delays, one AddAfter per pair of input
// bytes (item, delay in ms), and checks under virtual time that each item
// arrives once, at the earliest time asked for, in ready-time order and,
// for equal times, in the order of the AddAfter call that set that time.
func FuzzDelayingQueue(f *testing.F) {
	f.Add([]byte{1, 5, 2, 5, 1, 3, 3, 0, 2, 9})
	f.Add([]byte{0, 200, 0, 100, 0, 100, 1, 100})
	f.Fuzz(func(t *testing.T, ops []byte) {
		type want struct {
			at  time.Duration
			seq int
		}
		model := map[string]want{}
		var calls []struct {
			item string
			d    time.Duration
		}
		for i := 0; i+1 < len(ops); i += 2 {
			item := string(rune('a' + ops[i]%40))
			// Positive delays only: AddAfter with d <= 0 is a plain Add,
			// covered by FuzzQueue.
			d := time.Duration(ops[i+1]%64+1) * time.Millisecond
			calls = append(calls, struct {
				item string
				d    time.Duration
			}{item, d})
			if w, ok := model[item]; !ok || d < w.at {
				model[item] = want{at: d, seq: i}
			}
		}
		synctest.Test(t, func(t *testing.T) {
			q := workqueue.NewDelaying[string](workqueue.Options{})
			start := time.Now()
			wait := collect(q, start)
			for _, c := range calls {
				q.AddAfter(c.item, c.d)
			}
			time.Sleep(time.Second)
			q.ShutDown()
			got := wait()

			var expected []timedItem
			for item, w := range model {
				expected = append(expected, timedItem{item, w.at})
			}
			slices.SortFunc(expected, func(a, b timedItem) int {
				return cmpp.Or(
					cmpp.Compare(a.At, b.At),
					cmpp.Compare(model[a.Item].seq, model[b.Item].seq),
				)
			})
			if diff := cmp.Diff(expected, got); diff != "" {
				t.Fatalf("arrivals (-want +got):\n%s", diff)
			}
		})
	})
}
