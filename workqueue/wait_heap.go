package workqueue

import "time"

// waitEntry is a heap entry: a ready time, and a key holding a sequence
// number in its upper half and the item's slot in Queue.entries in its
// lower half. The sequence number orders equal ready times by AddAfter call
// (it wraps after 2^32 calls, which can only misorder items with identical
// ready times across the wrap) and, with the ready time, tells a live entry
// from a stale one. At 16 bytes, the four children of a node span one or
// two cache lines.
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
