package workqueue

import (
	"sync"
	"time"

	"github.com/quotakit/quotakit/internal/table"
)

// Options configures a [Queue], [DelayingQueue] or [RateLimitingQueue]. The
// zero value means an unnamed queue without metrics.
type Options struct {
	// Name identifies the queue to the metrics provider; it becomes the
	// "name" label of the Prometheus series listed in the package
	// documentation. Give every queue that shares a provider a unique name.
	// Defaults to "".
	Name string

	// MetricsProvider receives the queue's metrics. Unlike client-go, there
	// is no process-wide provider and an unnamed queue still reports when a
	// provider is set (client-go drops the metrics of unnamed queues,
	// kubernetes-retired/kubefed#1371). Defaults to nil: no metrics, and no
	// clock reads on the hot path.
	MetricsProvider MetricsProvider
}

// Queue is a work queue of distinct items: a fair FIFO in which an item is
// never handed to two workers at once.
//
// Its guarantees are those of client-go's workqueue:
//
//   - Items are handed out by [Queue.Get] in the order they were added.
//   - Adding an item that is already queued does nothing: adds before
//     processing collapse into one.
//   - Adding an item while a worker processes it marks it dirty; it is not
//     handed to a second worker, but queued again when the first worker calls
//     [Queue.Done], so it gets exactly one more pass.
//   - After [Queue.ShutDown], Get keeps handing out queued items until the
//     queue is empty and only then reports shutdown; adds are ignored.
//   - The queue keeps no reference to an item after Done, so the item can be
//     garbage-collected.
//
// The zero value is an empty, ready-to-use queue without metrics; use [New]
// to name the queue or attach a [MetricsProvider]. A Queue starts no
// goroutine. It is safe for concurrent use and must not be copied after first
// use. Items are compared with ==, as map keys are, so an item of interface
// type whose dynamic value is not comparable makes Add panic, as it would
// as a map key. The queue hands out the values it was given and never
// modifies them.
type Queue[T comparable] struct {
	// The fields are laid out for workers on different cores that take
	// turns at the lock: every cache line that one holder writes must move
	// to the next holder's core, while the others wait. So mu and the state
	// that every operation writes come first, packed into one line (in a
	// queue from New, whose address the allocator aligns to a line); then
	// the state that only growth, sleeping workers, shutdown and metrics
	// write, which stays in every core's cache between those events; and
	// last, behind a pad, the fields that nothing writes once the queue is
	// shared. Reading metrics right after Unlock from a line shared with
	// mu would pull the line away from the next holder, which would then
	// wait to get it back before it could write.

	// mu guards the queue's state. Add, Get and Done take it with lock,
	// which polls before it blocks. Release it with unlock, never
	// mu.Unlock: unlock also wakes the goroutines handed an item meanwhile.
	mu sync.Mutex

	// guarded by mu
	// fifo holds the slots of the items waiting for Get, oldest first.
	fifo ring
	// woken lists the waiters handed an item (or shutdown) under mu, to be
	// woken by unlock once mu is released.
	woken *sleeper[T]
	// items holds an entry for every item that is queued or being
	// processed, found through its index: Add and Done hash the item
	// before locking and probe the index once under the lock, and Get
	// works on slot numbers, so a pass through the queue hashes the item
	// twice, outside the lock, where client-go hashes it seven times under
	// its lock. Go's own map, which must hash under the lock for the
	// lookup, the insert and the delete, took about twice the CPU time per
	// item in the serial benchmark. The items being processed are those
	// in items but not in fifo. The table's counters share the first cache
	// line with the fields above; its slices, on the next, are written only
	// when it grows.
	items itemTable[T, entry]

	// guarded by mu
	shuttingDown bool
	// waiting lists the goroutines blocked in Get, longest waiting first.
	// An item that arrives while one waits is handed to it directly, so
	// the woken goroutine returns without taking mu again. Only an empty
	// fifo has waiters.
	waiting sleeperList[T]
	// running lists the slots of the items being processed, in no order,
	// and stamps their times, for the metrics; entry.pos is an item's
	// position in running. Both are kept only with metrics.
	running []int32
	stamps  []*[chunkSlots]stamp
	// drained is closed when no item is queued or in flight during
	// ShutDownWithDrain, or by ShutDown; nil when nobody waits.
	drained chan struct{}
	// shutdownCh is closed on shut down; made on demand.
	shutdownCh chan struct{}

	_ linePad

	// metrics is set once by New before the queue is shared; nil means no
	// metrics, and every metrics branch of the hot path is skipped.
	metrics *queueMetrics
	// sleepers recycles the records of goroutines waiting in Get.
	sleepers sync.Pool

	// The pad keeps the fields above off the cache lines of whatever
	// follows the queue in memory, such as a DelayingQueue's own state.
	_ linePad
}

// linePad separates data written by different cores. It spans two cache
// lines because Intel CPUs fetch lines in adjacent pairs, so that data 64
// bytes apart can still contend.
type linePad [128]byte

// New returns an empty queue configured by opts. It starts no goroutine.
func New[T comparable](opts Options) *Queue[T] {
	q := new(Queue[T])
	q.setUp(opts, false)
	return q
}

// setUp attaches the metrics named by opts. It must run before q is shared.
// The two polled gauges are registered with method values of q, so q must
// already be at its final address.
func (q *Queue[T]) setUp(opts Options, retries bool) {
	if opts.MetricsProvider == nil {
		return
	}
	q.metrics = newQueueMetrics(opts.MetricsProvider, opts.Name, retries)
	opts.MetricsProvider.NewUnfinishedWorkSecondsMetric(opts.Name, q.unfinishedWorkSeconds)
	opts.MetricsProvider.NewLongestRunningProcessorSecondsMetric(opts.Name, q.longestRunningProcessorSeconds)
}

// Add marks item as needing processing. It does nothing after shut down, or
// when item is already queued; when a worker is processing item, item is
// queued again once that worker calls Done.
func (q *Queue[T]) Add(item T) {
	var now time.Duration
	if q.metrics != nil {
		now = q.metrics.since()
	}
	h := table.Hash(item)
	q.lock()
	added := q.addLocked(item, h, now)
	q.unlock()
	if added && q.metrics != nil {
		q.metrics.added(1)
	}
}

// addLocked marks item, whose hash is h, as needing a pass, stamped now,
// and queues it unless it is being processed (Done queues it then). It
// reports whether item became dirty, which is what the adds and depth
// metrics count. Callers hold q.mu.
func (q *Queue[T]) addLocked(item T, h uint32, now time.Duration) bool {
	if q.shuttingDown {
		return false
	}
	slot, _ := q.items.add(item, h)
	e := q.items.at(slot)
	if e.dirty {
		return false
	}
	e.dirty = true
	if q.metrics != nil {
		q.stamp(slot).queued = now
	}
	if !e.processing {
		q.enqueue(slot)
	}
	return true
}

// enqueue hands the dirty item in slot to the longest-waiting goroutine in
// Get, or queues it when none waits. Callers hold q.mu.
func (q *Queue[T]) enqueue(slot int32) {
	s := q.waiting.pop()
	if s == nil {
		q.fifo.push(slot)
		return
	}
	s.item, s.waited = q.start(slot)
	s.next = q.woken
	q.woken = s
}

// start marks the item in slot, the next to be handed out, as being
// processed and returns it with the time it waited (0 without metrics).
// Callers hold q.mu.
func (q *Queue[T]) start(slot int32) (item T, waited time.Duration) {
	e := q.items.at(slot)
	e.dirty = false
	e.processing = true
	if q.metrics != nil {
		e.pos = int32(len(q.running))
		q.running = append(q.running, slot)
		now := q.metrics.since()
		st := q.stamp(slot)
		waited = now - st.queued
		st.started = now
	}
	return q.items.Key(slot), waited
}

// entry is the state of an item that is queued or being processed; the
// item is removed from Queue.items when it is neither. It is small, so
// that with a string item and its hash a record fills half a cache line.
type entry struct {
	// pos is the entry's index in Queue.running while processing, kept
	// only with metrics.
	pos int32
	// dirty means the item needs a (further) pass: it waits in the FIFO, or
	// is being processed and goes back to the FIFO on Done.
	dirty      bool
	processing bool
}

// stamp holds an item's times for the metrics, as offsets from
// queueMetrics.epoch: when it became dirty and when a worker took it.
type stamp struct {
	queued, started time.Duration
}

// stamp returns the times of the item in slot, making room for them as
// the table grows. Callers hold q.mu and have metrics.
func (q *Queue[T]) stamp(slot int32) *stamp {
	for int(slot/chunkSlots) >= len(q.stamps) {
		q.stamps = append(q.stamps, new([chunkSlots]stamp))
	}
	return &q.stamps[slot/chunkSlots][slot%chunkSlots]
}

// Len returns the number of items queued for Get. Items being processed
// are not counted, even when they have been added again, nor are the items
// of a [DelayingQueue] that wait for their ready time.
func (q *Queue[T]) Len() int {
	q.mu.Lock()
	defer q.unlock()
	return q.fifo.len()
}

// Get blocks until an item is waiting and hands it to the caller, who must
// call [Queue.Done] with it when finished. After shut down Get returns the
// remaining queued items; once there are none it returns the zero T and
// shutdown true.
func (q *Queue[T]) Get() (item T, shutdown bool) {
	q.lock()
	var waited time.Duration
	switch {
	case q.fifo.len() > 0:
		item, waited = q.start(q.fifo.pop())
		q.unlock()
	case q.shuttingDown:
		q.unlock()
		return item, true
	default:
		s := q.newSleeper()
		q.waiting.push(s)
		q.unlock()
		<-s.wake
		item, waited, shutdown = s.item, s.waited, s.shutdown
		q.freeSleeper(s)
		if shutdown {
			return item, true
		}
	}
	if q.metrics != nil {
		q.metrics.got(waited)
	}
	return item, false
}

// Done marks the end of processing item. If item was added while it was
// processed it is queued again; otherwise the queue forgets it. Done for an
// item that is not being processed does nothing.
func (q *Queue[T]) Done(item T) {
	h := table.Hash(item)
	q.lock()
	took, ok := q.doneLocked(item, h)
	q.unlock()
	if ok && q.metrics != nil {
		q.metrics.done(took)
	}
}

// doneLocked ends the processing of item, whose hash is h, and reports
// whether item was being processed, and for how long (0 without metrics).
// Callers hold q.mu.
func (q *Queue[T]) doneLocked(item T, h uint32) (took time.Duration, ok bool) {
	slot, ok := q.items.find(item, h)
	if !ok {
		return 0, false
	}
	e := q.items.at(slot)
	if !e.processing {
		return 0, false
	}
	e.processing = false
	if q.metrics != nil {
		// Swap-remove from running.
		last := len(q.running) - 1
		moved := q.running[last]
		q.running[e.pos] = moved
		q.items.at(moved).pos = e.pos
		q.running = q.running[:last]
		took = q.metrics.since() - q.stamp(slot).started
	}
	if e.dirty {
		q.enqueue(slot)
	} else {
		q.items.remove(slot)
	}
	if q.drained != nil && q.idleLocked() {
		close(q.drained) // release ShutDownWithDrain
		q.drained = nil
	}
	return took, true
}

// ShutDown stops the queue: later adds are ignored, and Get hands out the
// items still queued and then reports shutdown. ShutDown does not wait for
// workers, and it releases any goroutine blocked in
// [Queue.ShutDownWithDrain]. It is idempotent.
func (q *Queue[T]) ShutDown() {
	q.mu.Lock()
	defer q.unlock()
	q.shutDownLocked()
	if q.drained != nil {
		close(q.drained)
		q.drained = nil
	}
}

// ShutDownWithDrain shuts the queue down like [Queue.ShutDown] and then
// waits until no item is queued and none is being processed. Workers must
// keep calling Get until it reports shutdown and call Done for every item
// they got, or ShutDownWithDrain never returns: that includes the extra pass
// of an item added while it was processed, which Done queues again. A
// concurrent ShutDown makes it return early, with items possibly still
// queued or in flight.
//
// client-go's ShutDownWithDrain waits only until nothing is in flight, so it
// can return while such an item is still queued, and a caller that exits
// then loses that pass (kubernetes/kubernetes#141079 proposes the same fix
// there).
func (q *Queue[T]) ShutDownWithDrain() {
	q.mu.Lock()
	q.shutDownLocked()
	if q.idleLocked() {
		q.unlock()
		return
	}
	if q.drained == nil {
		q.drained = make(chan struct{})
	}
	drained := q.drained
	q.unlock()
	<-drained
}

// idleLocked reports whether no item is queued or being processed, the
// condition ShutDownWithDrain waits for: every such item has an entry.
// Once the queue is shutting down only Done can make it true, since adds
// are ignored. Callers hold q.mu.
func (q *Queue[T]) idleLocked() bool {
	return q.items.len() == 0
}

// shutDownLocked marks the queue as shutting down and releases every
// goroutine waiting in Get. Callers hold q.mu.
func (q *Queue[T]) shutDownLocked() {
	if !q.shuttingDown {
		q.shuttingDown = true
		if q.shutdownCh != nil {
			close(q.shutdownCh)
		}
	}
	for s := q.waiting.pop(); s != nil; s = q.waiting.pop() {
		s.shutdown = true
		s.next = q.woken
		q.woken = s
	}
}

// ShuttingDown reports whether [Queue.ShutDown] or
// [Queue.ShutDownWithDrain] has been called.
func (q *Queue[T]) ShuttingDown() bool {
	q.mu.Lock()
	defer q.unlock()
	return q.shuttingDown
}

// shutdownChan returns a channel that is closed when the queue shuts down.
// Callers hold q.mu.
func (q *Queue[T]) shutdownChan() <-chan struct{} {
	if q.shutdownCh == nil {
		q.shutdownCh = make(chan struct{})
		if q.shuttingDown {
			close(q.shutdownCh)
		}
	}
	return q.shutdownCh
}
