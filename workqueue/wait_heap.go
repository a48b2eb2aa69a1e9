package workqueue

import "time"

// waitEntry is a heap entry: a ready time, the ticket of the AddAfter call
// that set it, and the slot of the waiting item in DelayingQueue.waiting. Tickets order
// equal ready times by AddAfter call and tell an item's live entry from the
// stale ones left by calls whose ready time a later call brought forward
// (or by a slot since reused). They are 64-bit and count up from 1,
// so they cannot wrap: at a billion AddAfter calls a second that would take
// 584 years. At 24 bytes, the four children of a node span one or two
// cache lines.
type waitEntry struct {
	at     time.Duration
	ticket uint64
	slot   int32
}

// before reports whether e is due before f: earlier ready time first and,
// for equal times, in AddAfter order.
func (e *waitEntry) before(f *waitEntry) bool {
	if e.at != f.at {
		return e.at < f.at
	}
	return e.ticket < f.ticket
}

// waitHeap is a 4-ary min-heap of waiting items under [waitEntry.before].
//
// It is written out rather than built on container/heap, whose interface
// calls for Less and Swap, two per level, made popping 100k waiting items
// the largest cost of draining a delaying queue. A 4-ary heap is half as
// deep as a binary one, and a node's children are adjacent in memory, so a
// pop touches fewer cache lines.
type waitHeap struct {
	s []waitEntry
}

const arity = 4

func (h *waitHeap) len() int { return len(h.s) }

// top returns the earliest entry; h must not be empty.
func (h *waitHeap) top() *waitEntry { return &h.s[0] }

// push adds e.
func (h *waitHeap) push(e waitEntry) {
	h.s = append(h.s, e)
	s := h.s
	i := len(s) - 1
	for i > 0 {
		parent := (i - 1) / arity
		if !e.before(&s[parent]) {
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
			if s[c].before(&s[least]) {
				least = c
			}
		}
		if !s[least].before(&last) {
			break
		}
		s[i] = s[least]
		i = least
	}
	s[i] = last
	return top
}
