package workqueue

import "time"

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
