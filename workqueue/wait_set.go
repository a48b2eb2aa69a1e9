package workqueue

import (
	"math"
	"time"
)

// waitSet holds the items of a [DelayingQueue] that wait for their ready
// time: each item once, with the earliest ready time asked for. It is not
// safe for concurrent use; the delaying queue's goroutine owns it.
type waitSet[T comparable] struct {
	// waiters holds one record per waiting item; free slots are zeroed.
	waiters []waiter[T]
	// free lists the unused slots of waiters.
	free []int32
	// index finds the slot of a waiting item, like Queue.index.
	index itemIndex
	// heap orders the waiting items by ready time. Bringing an item
	// forward pushes a new entry instead of moving the old one; the old
	// one no longer matches the waiter's ready time and sequence number and
	// is skipped when it reaches the top. So heap moves never touch waiters.
	heap waitHeap
	seq  uint32
	// due is popReady's scratch space.
	due []waitEntry
}

// waiter is an item waiting for its ready time.
type waiter[T comparable] struct {
	item T
	tag  uint32
	// seq and at identify the item's live heap entry.
	seq uint32
	at  time.Duration
}

// add records that p.item is ready at p.at, unless it already waits for an
// earlier time.
func (s *waitSet[T]) add(p pending[T]) {
	if s.index.cells == nil {
		s.index.resize(16)
	}
	cell, ok := s.lookup(p.tag, p.item)
	var slot int32
	if ok {
		slot = s.index.slotAt(cell)
	} else {
		slot = s.alloc()
		s.index.insert(cell, p.tag, slot)
		s.waiters[slot] = waiter[T]{item: p.item, tag: p.tag, at: math.MaxInt64}
	}
	if w := &s.waiters[slot]; p.at < w.at {
		s.seq++
		w.at, w.seq = p.at, s.seq
		s.heap.push(waitEntry{at: p.at, key: uint64(s.seq)<<32 | uint64(uint32(slot))})
	}
}

// live reports whether e is the live entry of the waiter in its slot. A
// free slot has at 0, which no entry has.
func (s *waitSet[T]) live(e waitEntry) bool {
	slot := e.slot()
	if int(slot) >= len(s.waiters) {
		return false
	}
	w := &s.waiters[slot]
	return w.at == e.at && w.seq == e.seq()
}

// next returns the earliest ready time, or false when nothing waits. It
// may drop stale heap entries.
func (s *waitSet[T]) next() (time.Duration, bool) {
	for s.heap.len() > 0 {
		if top := s.heap.top(); s.live(top) {
			return top.at, true
		}
		s.heap.popMin()
	}
	return 0, false
}

// popReady removes up to limit items ready at now from the set and
// appends them to batch, earliest first.
//
// It works in passes over the due entries rather than item by item: the
// waiters and index cells of 100k waiting items do not fit in a CPU cache,
// and loads that do not depend on each other, as in a pass, are overlapped
// by the CPU, where a dependent chain per item would wait for each miss in
// turn.
func (s *waitSet[T]) popReady(batch []tagged[T], now time.Duration, limit int) []tagged[T] {
	due := s.due[:0]
	for len(due) < limit && s.heap.len() > 0 && s.heap.top().at <= now {
		due = append(due, s.heap.popMin())
	}
	live := due[:0]
	for _, e := range due {
		if !s.live(e) {
			continue // superseded by an earlier ready time
		}
		live = append(live, e)
		w := &s.waiters[e.slot()]
		batch = append(batch, tagged[T]{item: w.item, tag: w.tag})
	}
	for _, e := range live {
		slot := e.slot()
		w := &s.waiters[slot]
		s.index.remove(s.index.cellOf(w.tag, slot))
		*w = waiter[T]{}
		s.free = append(s.free, slot)
	}
	if s.index.n == 0 {
		// Nothing waits: whatever the heap still holds is stale.
		s.heap.reset()
		s.waiters = s.waiters[:0]
		s.free = s.free[:0]
	}
	s.due = due
	return batch
}

// lookup is [Queue.lookup] for the waiting items.
func (s *waitSet[T]) lookup(tag uint32, item T) (cell int, found bool) {
	cells := s.index.cells
	mask := len(cells) - 1
	for i := int(tag) & mask; ; i = (i + 1) & mask {
		c := cells[i]
		if c == 0 {
			return i, false
		}
		if uint32(c>>32) == tag && s.waiters[int32(uint32(c))-1].item == item {
			return i, true
		}
	}
}

// alloc returns an unused, zeroed slot of waiters.
func (s *waitSet[T]) alloc() int32 {
	if n := len(s.free); n > 0 {
		slot := s.free[n-1]
		s.free = s.free[:n-1]
		return slot
	}
	s.waiters = append(s.waiters, waiter[T]{})
	return int32(len(s.waiters) - 1)
}

// waitEntry is a heap entry: a ready time, and a key holding a sequence
// number in its upper half and the waiter's slot in its lower half. The
// sequence number orders equal ready times by AddAfter call (it wraps after
// 2^32 calls, which can only misorder items with identical ready times
// across the wrap) and, with the ready time, tells a live entry from a
// stale one. At 16 bytes, the four children of a node share a cache line.
type waitEntry struct {
	at  time.Duration
	key uint64
}

func (e waitEntry) slot() int32 { return int32(uint32(e.key)) }
func (e waitEntry) seq() uint32 { return uint32(e.key >> 32) }

// before reports whether e is due before f: earlier ready time first and,
// for equal times, in AddAfter order.
func (e waitEntry) before(f waitEntry) bool {
	if e.at != f.at {
		return e.at < f.at
	}
	return e.key < f.key
}

// waitHeap is a d-ary min-heap of waiting items under [waitEntry.before].
//
// It is written out rather than built on container/heap, whose interface
// calls for Less and Swap, two per level, made popping 100k waiting items
// the largest cost of draining a delaying queue. A d-ary heap with d > 2 is
// shallower than a binary one, and a node's children are adjacent in
// memory, so a pop touches fewer cache lines.
type waitHeap struct {
	s []waitEntry
}

const arity = 4

func (h *waitHeap) len() int { return len(h.s) }

// top returns the earliest entry; h must not be empty.
func (h *waitHeap) top() waitEntry { return h.s[0] }

// reset empties h, keeping its storage.
func (h *waitHeap) reset() { h.s = h.s[:0] }

// push adds e.
func (h *waitHeap) push(e waitEntry) {
	h.s = append(h.s, e)
	s := h.s
	i := len(s) - 1
	for i > 0 {
		parent := (i - 1) / arity
		if !e.before(s[parent]) {
			break
		}
		s[i] = s[parent]
		i = parent
	}
	s[i] = e
}

// popMin removes and returns the earliest entry; h must not be empty.
func (h *waitHeap) popMin() waitEntry {
	s := h.s
	top := s[0]
	n := len(s) - 1
	last := s[n]
	s = s[:n]
	h.s = s
	if n == 0 {
		return top
	}
	// Move the hole at the root down to where last belongs.
	i := 0
	for {
		first := arity*i + 1
		if first >= n {
			break
		}
		least := first
		for c := first + 1; c < min(first+arity, n); c++ {
			if s[c].before(s[least]) {
				least = c
			}
		}
		if !s[least].before(last) {
			break
		}
		s[i] = s[least]
		i = least
	}
	s[i] = last
	return top
}
