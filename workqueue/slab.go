package workqueue

// slab stores records of type E in fixed-size chunks addressed by slot
// number, each with the hash of its item, so that a [table.Table] can index
// the records by item. Unlike a slice it never copies its records to grow,
// so no caller holding the queue's lock ever waits for a large copy, and a
// slot stays valid for as long as it is allocated. Freed records are
// zeroed, so an item is unreachable from a slab once its slot is freed.
//
// The queue keeps its entries in one slab and a delaying queue its waiting
// items in another.
type slab[E any] struct {
	chunks []*chunk[E]
	// used is the number of slots handed out since the last reset; spare
	// lists those of them that were freed since.
	used  int32
	spare []int32
}

// chunk holds slabChunk records and the hashes of their items. The hashes
// are kept apart because deleting from an index reads the hashes of several
// neighbouring cells' items: 4 bytes each in a few dense arrays stay in
// cache, where the records of a large queue do not.
type chunk[E any] struct {
	records [slabChunk]E
	hashes  [slabChunk]uint32
}

// slabChunk is the number of records per chunk, a power of two.
const slabChunk = 256

// at returns the record of slot, which must have been allocated since the
// slab was created (it may have been freed since).
func (s *slab[E]) at(slot int32) *E {
	return &s.chunks[slot/slabChunk].records[slot%slabChunk]
}

// hash returns a pointer to the hash of the item in slot.
func (s *slab[E]) hash(slot int32) *uint32 {
	return &s.chunks[slot/slabChunk].hashes[slot%slabChunk]
}

// alloc returns an unused, zeroed slot.
func (s *slab[E]) alloc() int32 {
	if n := len(s.spare); n > 0 {
		slot := s.spare[n-1]
		s.spare = s.spare[:n-1]
		return slot
	}
	slot := s.used
	if int(slot/slabChunk) == len(s.chunks) {
		s.chunks = append(s.chunks, new(chunk[E]))
	}
	s.used++
	return slot
}

// free zeroes the record of slot and makes slot available again. When no
// slot is in use any more it starts over at slot 0: the next burst fills
// the slab in order, which is kinder to caches than a shuffled free list.
// The chunks are kept for that burst.
func (s *slab[E]) free(slot int32) {
	var zero E
	*s.at(slot) = zero
	s.spare = append(s.spare, slot)
	if len(s.spare) == int(s.used) {
		s.used = 0
		s.spare = s.spare[:0]
	}
}
