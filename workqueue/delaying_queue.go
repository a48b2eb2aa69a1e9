package workqueue

import (
	"math"
	"sync"
	"time"
)

// DelayingQueue is a [Queue] that can also add an item after a delay.
//
// # How waiting works
//
// AddAfter appends the item and its ready time to a short hand-off buffer
// and returns; it never blocks on anything but a brief lock. A single
// goroutine moves the buffered items into a min-heap ordered by ready time,
// sleeps on one timer re-armed for the earliest ready time, and adds the
// items whose time has come to the queue, several at once. AddAfter wakes it
// only when an item is due before the timer, or when the buffer grows long.
// Unlike client-go there is no 10-second heartbeat and no 1000-slot channel
// that a burst of AddAfter calls can fill.
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

	// waiting is owned by the goroutine: nothing else touches it once the
	// goroutine has started.
	waiting waitSet[T]

	waitMu sync.Mutex

	// guarded by waitMu
	// incoming holds the AddAfter calls the goroutine has not taken yet.
	incoming []pending[T]
	// epoch is the origin of the ready times.
	epoch time.Time
	// busy means the goroutine is awake and will look at incoming before
	// it sleeps again, so AddAfter need not wake it.
	busy bool
	// armed means the goroutine sleeps with its timer set for armedAt.
	armed   bool
	armedAt time.Duration
	started bool
	stopped bool
	// wake (buffer 1) wakes the sleeping goroutine.
	wake     chan struct{}
	loopDone chan struct{}
}

// pending is an AddAfter call waiting to be moved into the heap.
type pending[T comparable] struct {
	item T
	tag  uint32
	at   time.Duration
}

// maxIncoming is how many AddAfter calls may wait in the hand-off buffer
// before AddAfter wakes the goroutine early. It bounds the buffer when items
// are added far in the future faster than anything becomes ready.
const maxIncoming = 1024

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
// forward. Items with the same ready time are added in call order. AddAfter
// does nothing after shut down.
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
	tag := hashItem(item)
	q.waitMu.Lock()
	if q.stopped {
		q.waitMu.Unlock()
		return
	}
	if !q.started {
		q.started = true
		q.epoch = time.Now()
		q.wake = make(chan struct{}, 1)
		q.loopDone = make(chan struct{})
		q.busy = true // it looks at incoming first thing
		go q.loop(q.shutdownChan())
	}
	now := time.Since(q.epoch)
	at := now + d
	if d > math.MaxInt64-now {
		at = math.MaxInt64
	}
	q.incoming = append(q.incoming, pending[T]{item: item, tag: tag, at: at})
	if !q.busy && (!q.armed || at < q.armedAt || len(q.incoming) >= maxIncoming) {
		q.busy = true
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
	q.waitMu.Unlock()
	if q.metrics != nil {
		q.metrics.retries.Inc()
	}
}

// loop moves items from AddAfter to the heap and from the heap to the
// queue until the queue shuts down.
func (q *DelayingQueue[T]) loop(stop <-chan struct{}) {
	defer close(q.loopDone)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var (
		in    []pending[T]
		batch = make([]tagged[T], 0, maxBatch)
	)
	for {
		select {
		case <-stop:
			q.stop(timer)
			return
		default:
		}

		q.waitMu.Lock()
		q.busy = true
		// Swap buffers: AddAfter appends to the one from last round.
		in, q.incoming = q.incoming, in[:0]
		if len(in) == 0 {
			now := time.Since(q.epoch)
			if next, ok := q.waiting.next(); !ok || next > now {
				// Nothing new and nothing due: sleep. Under waitMu,
				// so an AddAfter after this sees busy false and the
				// armed time, and wakes us if it must.
				q.busy = false
				q.armed, q.armedAt = ok, next
				if ok {
					timer.Reset(next - now)
				} else {
					timer.Stop()
				}
				q.waitMu.Unlock()
				select {
				case <-stop:
					q.stop(timer)
					return
				case <-timer.C:
				case <-q.wake:
				}
				continue
			}
		}
		q.waitMu.Unlock()

		// Even items that are due already go through the heap, so that
		// everything due is added in ready-time order.
		for _, p := range in {
			q.waiting.add(p)
		}
		clear(in)
		batch = q.waiting.popReady(batch[:0], time.Since(q.epoch), maxBatch)
		if len(batch) > 0 {
			q.addBatch(batch)
			clear(batch)
		}
	}
}

// maxBatch bounds the items moved to the queue at once, so that workers
// get the first ready items while later ones are still being popped.
const maxBatch = 256

// stop ends the goroutine's work: later AddAfter calls are ignored and the
// waiting items are dropped so they can be collected.
func (q *DelayingQueue[T]) stop(timer *time.Timer) {
	timer.Stop()
	q.waitMu.Lock()
	q.stopped = true
	q.incoming = nil
	q.waitMu.Unlock()
	q.waiting = waitSet[T]{}
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
	q.waitMu.Lock()
	q.stopped = true
	q.incoming = nil
	started, done := q.started, q.loopDone
	q.waitMu.Unlock()
	if started {
		<-done
	}
}

// tagged is an item with its hash tag.
type tagged[T comparable] struct {
	item T
	tag  uint32
}
