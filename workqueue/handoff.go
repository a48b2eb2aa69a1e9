package workqueue

import (
	"runtime"
	"time"
)

// lock locks q.mu for Add, Get and Done.
//
// Their critical sections last tens of nanoseconds, but sync.Mutex blocks
// a goroutine that finds it held at once whenever other goroutines are
// runnable on the goroutine's P, which is the usual case with more workers
// than GOMAXPROCS. A blocked waiter costs a round trip through the
// runtime's semaphore, microseconds of CPU time, and each Unlock then wakes
// one, which finds the lock taken again more often than not. With workers
// on two cores taking turns at the lock, that was most of the queue's
// cost: about 60% of the CPU time of 8 producers and 8 consumers went to
// blocking and waking. So lock first polls the lock, with pauses that grow
// to about two hundred nanoseconds, for a few microseconds in all, and
// blocks only if it is still held then. With one CPU the holder cannot
// run while the caller polls, so it blocks at once.
func (q *Queue[T]) lock() {
	if q.mu.TryLock() {
		return
	}
	if runtime.NumCPU() > 1 {
		for i := range lockPolls {
			pause(32 << min(i, 4))
			if q.mu.TryLock() {
				return
			}
		}
	}
	q.mu.Lock()
}

// lockPolls is the number of times lock polls the lock before it blocks.
const lockPolls = 32

// pause keeps the CPU busy for n iterations of an empty loop, about n/3
// nanoseconds, without touching memory that other cores write.
func pause(n int) {
	for range n {
	}
}

// unlock releases q.mu, which every critical section of the queue ends
// with, and then wakes the goroutines in Get that were handed an item, or
// shutdown, under it. Waking them after releasing q.mu keeps the channel
// operations out of the critical section, and a woken goroutine returns its
// item without taking q.mu again.
func (q *Queue[T]) unlock() {
	woken := q.woken
	if woken != nil {
		q.woken = nil
	}
	q.mu.Unlock()
	for s := woken; s != nil; {
		next := s.next // s belongs to its Get once woken
		s.wake <- struct{}{}
		s = next
	}
}

// sleeper is a goroutine blocked in Get.
type sleeper[T comparable] struct {
	// next links the sleeper in Queue.waiting or Queue.woken.
	next *sleeper[T]
	// wake receives one value when the fields below are set.
	wake     chan struct{}
	item     T
	waited   time.Duration
	shutdown bool
}

// newSleeper returns a sleeper ready to wait.
func (q *Queue[T]) newSleeper() *sleeper[T] {
	if s, ok := q.sleepers.Get().(*sleeper[T]); ok {
		return s
	}
	return &sleeper[T]{wake: make(chan struct{}, 1)}
}

// freeSleeper recycles s once its Get has read it.
func (q *Queue[T]) freeSleeper(s *sleeper[T]) {
	*s = sleeper[T]{wake: s.wake}
	q.sleepers.Put(s)
}

// sleeperList is a FIFO of sleepers.
type sleeperList[T comparable] struct {
	head, tail *sleeper[T]
}

func (l *sleeperList[T]) push(s *sleeper[T]) {
	s.next = nil
	if l.tail == nil {
		l.head = s
	} else {
		l.tail.next = s
	}
	l.tail = s
}

// pop removes and returns the oldest sleeper, or nil.
func (l *sleeperList[T]) pop() *sleeper[T] {
	s := l.head
	if s == nil {
		return nil
	}
	l.head = s.next
	if l.head == nil {
		l.tail = nil
	}
	s.next = nil
	return s
}
