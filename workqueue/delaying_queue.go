package workqueue

import (
	"math"
	"time"

	"github.com/quotakit/quotakit/internal/table"
)

// DelayingQueue is a [Queue] that can also add an item after a delay.
//
// # How waiting works
//
// Waiting is the delaying queue's own state, kept apart from the queue's
// entries: the ready time of each waiting item, in a table of its own, and
// a min-heap of ready times, both guarded by the queue's lock. (Go's map in
// place of that table took about a third more CPU time per item in the
// AddAfter benchmark, most of it probing.) A single goroutine sleeps on one
// timer, set for the earliest ready time; when it fires, the goroutine pops
// what is due and adds it to the queue under the same lock acquisition.
// AddAfter re-arms the timer itself when it adds an item due before it, so
// it never waits for the goroutine. Unlike client-go there is no 10-second
// heartbeat and no 1000-slot channel that a burst of AddAfter calls can
// fill.
//
// The goroutine starts on the first AddAfter with a positive delay.
// [DelayingQueue.ShutDown] and [DelayingQueue.ShutDownWithDrain] stop it
// and wait for it to exit; items still waiting then are dropped.
//
// The zero value is ready to use; [NewDelaying] names the queue or attaches
// metrics. It is safe for concurrent use and must not be copied after first
// use.
type DelayingQueue[T comparable] struct {
	Queue[T]

	// guarded by Queue.mu
	// waiting holds the ready time of each waiting item and the ticket of
	// its live heap entry; heap orders waiting items by ready time and
	// also holds stale entries, which are skipped.
	waiting itemTable[T, readyAt]
	heap    waitHeap
	// tickets counts AddAfter calls that set a ready time; see waitEntry.
	tickets uint64
	// timer fires at armedAt when armed; it is created with the goroutine.
	timer    *time.Timer
	armed    bool
	armedAt  time.Duration
	started  bool
	loopDone chan struct{}
	// due and ready are the goroutine's scratch space.
	due   []waitEntry
	ready []readyItem[T]
}

// readyItem is a waiting item whose ready time has come.
type readyItem[T comparable] struct {
	item T
	hash uint32
	slot int32
}

// readyAt is the ready time of a waiting item and the ticket of its live
// heap entry.
type readyAt struct {
	at     time.Duration
	ticket uint64
}

// NewDelaying returns an empty delaying queue configured by opts. It starts
// no goroutine; see [DelayingQueue].
func NewDelaying[T comparable](opts Options) *DelayingQueue[T] {
	q := new(DelayingQueue[T])
	q.Queue.setUp(opts, true)
	return q
}

// AddAfter adds item to the queue once d has passed; d <= 0 adds it at
// once. When item is already waiting, the earlier of the two ready times
// wins: a later AddAfter never postpones an item, an earlier one brings it
// forward. Items with the same ready time are added in call order. Waiting
// is independent of the queue: an item can wait while it is also queued or
// being processed, and is added (with the usual collapsing) when its time
// comes. AddAfter does nothing after shut down.
func (q *DelayingQueue[T]) AddAfter(item T, d time.Duration) {
	if d <= 0 {
		if q.metrics != nil {
			if q.ShuttingDown() {
				return
			}
			q.metrics.retries.Inc()
		}
		q.Add(item)
		return
	}
	h := table.Hash(item)
	now := sinceOrigin()
	q.mu.Lock()
	if q.shuttingDown {
		q.unlock()
		return
	}
	if !q.started {
		q.started = true
		q.loopDone = make(chan struct{})
		q.timer = time.NewTimer(time.Hour)
		q.timer.Stop()
		go q.loop(q.timer.C, q.shutdownChan())
	}
	at := now + d
	if now > 0 && d > math.MaxInt64-now {
		at = math.MaxInt64
	}
	slot, added := q.waiting.add(item, h)
	if r := q.waiting.at(slot); added || at < r.at {
		q.tickets++
		r.at, r.ticket = at, q.tickets
		q.heap.push(waitEntry{at: at, ticket: q.tickets, slot: slot})
		if !q.armed || at < q.armedAt {
			q.armed, q.armedAt = true, at
			q.timer.Reset(at - now)
		}
	}
	q.unlock()
	if q.metrics != nil {
		q.metrics.retries.Inc()
	}
}

// origin is the origin of the ready times of every delaying queue. It is
// set when the package is initialised and only read afterwards; a fixed
// origin lets AddAfter read the monotonic clock alone, before it locks,
// where time.Now would also read the wall clock.
var origin = time.Now()

// sinceOrigin returns the monotonic time since origin. Under
// testing/synctest it follows the bubble's clock; it is then negative, which
// only shifts every ready time by the same amount.
func sinceOrigin() time.Duration { return time.Since(origin) }

// loop queues items whose ready time has come until the queue shuts down.
func (q *DelayingQueue[T]) loop(fired <-chan time.Time, stop <-chan struct{}) {
	defer close(q.loopDone)
	for {
		select {
		case <-stop:
			q.dropWaiting()
			return
		case <-fired:
		}
		for q.queueReady() {
		}
	}
}

// maxBatch bounds the items queued under one lock acquisition, so that
// workers and AddAfter callers never wait long for the lock.
const maxBatch = 256

// queueReady adds up to maxBatch items whose ready time has passed to the
// queue, in ready-time order, and reports whether more are ready; otherwise
// it re-arms the timer for the next one.
func (q *DelayingQueue[T]) queueReady() (more bool) {
	q.mu.Lock()
	if q.shuttingDown {
		q.unlock()
		return false
	}
	now := sinceOrigin()
	var stamp time.Duration
	if q.metrics != nil {
		stamp = q.metrics.since()
	}
	// Work in passes: pop the due entries, then read the live ones'
	// items, then move those items to the queue. The waiting items of a
	// large queue do not fit in a CPU cache, and the loads of the middle
	// pass, which do not depend on each other, are overlapped by the CPU,
	// where doing one item at a time would wait for each miss in turn.
	due := q.due[:0]
	for len(due) < maxBatch && q.heap.len() > 0 && q.heap.top().at <= now {
		due = append(due, q.heap.popMin())
	}
	q.due = due
	ready := q.ready[:0]
	for i := range due {
		w := &due[i]
		if !q.live(w) {
			continue // superseded by an earlier ready time
		}
		ready = append(ready, readyItem[T]{
			item: q.waiting.Key(w.slot),
			hash: q.waiting.Hash(w.slot),
			slot: w.slot,
		})
	}
	added := 0
	for i := range ready {
		r := &ready[i]
		q.waiting.remove(r.slot)
		if q.addLocked(r.item, r.hash, stamp) {
			added++
		}
		var zero T
		r.item = zero // keep no reference
	}
	q.ready = ready[:0]
	more = q.heap.len() > 0 && q.heap.top().at <= now
	if more {
		// The loop calls again at once; until then an AddAfter has no
		// reason to re-arm the timer.
		q.armed, q.armedAt = true, now
	} else {
		for q.heap.len() > 0 && !q.live(q.heap.top()) {
			q.heap.popMin()
		}
		q.armed = q.heap.len() > 0
		if q.armed {
			q.armedAt = q.heap.top().at
			q.timer.Reset(q.armedAt - now)
		}
	}
	q.unlock()
	if added > 0 && q.metrics != nil {
		q.metrics.added(added)
	}
	return more
}

// live reports whether w is the heap entry of a waiting item rather than a
// stale one, superseded by an earlier ready time. Callers hold q.mu.
func (q *DelayingQueue[T]) live(w *waitEntry) bool {
	return q.waiting.at(w.slot).ticket == w.ticket
}

// dropWaiting forgets the waiting items at shut down, so that they can be
// collected.
func (q *DelayingQueue[T]) dropWaiting() {
	q.mu.Lock()
	defer q.unlock()
	q.timer.Stop()
	q.waiting = itemTable[T, readyAt]{}
	q.heap = waitHeap{}
}

// ShutDown shuts the queue down like [Queue.ShutDown], drops the waiting
// items and waits for the queue's goroutine to exit. It is idempotent.
func (q *DelayingQueue[T]) ShutDown() {
	q.Queue.ShutDown()
	q.join()
}

// ShutDownWithDrain shuts the queue down like [Queue.ShutDownWithDrain],
// drops the waiting items and waits for the queue's goroutine to exit.
// (client-go's delaying queue leaves its goroutine running for up to 10s in
// this case.)
func (q *DelayingQueue[T]) ShutDownWithDrain() {
	q.Queue.ShutDownWithDrain()
	q.join()
}

// join waits for the goroutine, if it was started, to exit; the queue must
// be shutting down.
func (q *DelayingQueue[T]) join() {
	q.mu.Lock()
	started, done := q.started, q.loopDone
	q.unlock()
	if started {
		<-done
	}
}
