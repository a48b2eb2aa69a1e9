package workqueue

import "time"

// entry is the state of one item that is queued or being processed; it is
// freed when it is neither.
type entry[T comparable] struct {
	item T
	// queued is when the item became dirty and started when a worker took
	// it, as offsets from queueMetrics.epoch; set only with metrics.
	queued, started time.Duration
	// pos is the entry's index in Queue.running while processing.
	pos int32
	// dirty means the item needs a (further) pass: it waits in the FIFO, or
	// is being processed and goes back to the FIFO on Done.
	dirty      bool
	processing bool
}

// slab stores entries in fixed-size chunks addressed by slot number. Unlike
// a slice it never copies its entries to grow, so no caller holding the
// queue's lock ever waits for a large copy, and a slot stays valid for as
// long as it is allocated. Freed entries are zeroed, so an item is
// unreachable from the queue once its slot is freed.
type slab[T comparable] struct {
	chunks []*chunk[T]
	// used is the number of slots handed out since the last reset; spare
	// lists those of them that were freed since.
	used  int32
	spare []int32
}

// chunk holds slabChunk entries and the hashes of their items. The hashes
// are kept apart because deleting from the queue's index reads the hashes
// of several neighbouring cells' items: 4 bytes each in a few dense arrays
// stay in cache, where the entries of a large queue do not.
type chunk[T comparable] struct {
	entries [slabChunk]entry[T]
	hashes  [slabChunk]uint32
}

// slabChunk is the number of entries per chunk, a power of two.
const slabChunk = 256

// at returns the entry of slot, which must be allocated.
func (s *slab[T]) at(slot int32) *entry[T] {
	return &s.chunks[slot/slabChunk].entries[slot%slabChunk]
}

// hash returns a pointer to the hash of the item in slot.
func (s *slab[T]) hash(slot int32) *uint32 {
	return &s.chunks[slot/slabChunk].hashes[slot%slabChunk]
}

// alloc returns an unused, zeroed slot.
func (s *slab[T]) alloc() int32 {
	if n := len(s.spare); n > 0 {
		slot := s.spare[n-1]
		s.spare = s.spare[:n-1]
		return slot
	}
	slot := s.used
	if int(slot/slabChunk) == len(s.chunks) {
		s.chunks = append(s.chunks, new(chunk[T]))
	}
	s.used++
	return slot
}

// free zeroes the entry of slot and makes slot available again.
func (s *slab[T]) free(slot int32) {
	*s.at(slot) = entry[T]{}
	s.spare = append(s.spare, slot)
}

// reset makes every slot available again, in order; no slot may be in use.
// The chunks are kept for the next burst.
func (s *slab[T]) reset() {
	s.used = 0
	s.spare = s.spare[:0]
}

// slabKeys is how Queue.index reads the items of a slab.
type slabKeys[T comparable] slab[T]

// owner returns s as the owner of the queue's index.
func (s *slab[T]) owner() *slabKeys[T] { return (*slabKeys[T])(s) }

// Key returns the item in slot.
func (k *slabKeys[T]) Key(slot int32) T { return (*slab[T])(k).at(slot).item }

// Hash returns the hash of the item in slot, stored when it was added.
func (k *slabKeys[T]) Hash(slot int32) uint32 { return *(*slab[T])(k).hash(slot) }
