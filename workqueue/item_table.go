package workqueue

import "github.com/quotakit/quotakit/internal/table"

// itemTable holds one record of type E per item of type T and finds it by
// item: the queue's entries, a delaying queue's waiting items and a rate
// limiter's failure counts are each one itemTable.
//
// Items with their records, and item hashes, live in fixed-size chunks
// addressed by slot number, and the shared open-addressing table maps items
// to slots. Unlike a slice, the chunks are never copied to grow, so no
// caller holding a lock waits for a large copy, and a slot stays put while
// it is in use. An item and its record share a cache line, since most
// operations read both; the hashes are kept apart because deleting from the
// index reads them for neighbouring cells: a few dense arrays stay in cache
// where the records of a large queue do not. Removed slots are zeroed, so
// an item is unreachable from the table once removed.
//
// An itemTable is not safe for concurrent use; the zero value is empty.
type itemTable[T comparable, E any] struct {
	index  table.Table[T]
	chunks []*chunk[T, E]
	// used is the number of slots handed out since the table was last
	// empty; spare lists those of them that were removed since.
	used  int32
	spare []int32
}

// chunk holds chunkSlots slots.
type chunk[T comparable, E any] struct {
	slots  [chunkSlots]itemRecord[T, E]
	hashes [chunkSlots]uint32
}

// itemRecord is an item and its record.
type itemRecord[T comparable, E any] struct {
	item T
	rec  E
}

// chunkSlots is the number of slots per chunk, a power of two.
const chunkSlots = 256

// Key returns the item in slot; with Hash it makes t the owner of t.index.
func (t *itemTable[T, E]) Key(slot int32) T {
	return t.chunks[slot/chunkSlots].slots[slot%chunkSlots].item
}

// Hash returns the hash of the item in slot.
func (t *itemTable[T, E]) Hash(slot int32) uint32 {
	return t.chunks[slot/chunkSlots].hashes[slot%chunkSlots]
}

// at returns the record of slot. The slot must have been handed out since
// the table was created; if it was removed since, the record is zero.
func (t *itemTable[T, E]) at(slot int32) *E {
	return &t.chunks[slot/chunkSlots].slots[slot%chunkSlots].rec
}

// find returns the slot of item, whose hash is h, and whether it is in t.
func (t *itemTable[T, E]) find(item T, h uint32) (slot int32, ok bool) {
	return t.index.Find(h, item, t)
}

// add returns the slot of item, whose hash is h, adding item with a zero
// record if it is not in t, and reports whether it added it.
func (t *itemTable[T, E]) add(item T, h uint32) (slot int32, added bool) {
	if slot, ok := t.index.Find(h, item, t); ok {
		return slot, false
	}
	if n := len(t.spare); n > 0 {
		slot = t.spare[n-1]
		t.spare = t.spare[:n-1]
	} else {
		slot = t.used
		if int(slot/chunkSlots) == len(t.chunks) {
			t.chunks = append(t.chunks, new(chunk[T, E]))
		}
		t.used++
	}
	c := t.chunks[slot/chunkSlots]
	c.slots[slot%chunkSlots].item = item
	c.hashes[slot%chunkSlots] = h
	t.index.Insert(h, slot, t)
	return slot, true
}

// remove removes the item in slot, which must be in use, and zeroes its
// record. Once t is empty it hands out slots from 0 again: the next burst
// fills the chunks in order, which is kinder to caches than a shuffled free
// list.
func (t *itemTable[T, E]) remove(slot int32) {
	c := t.chunks[slot/chunkSlots]
	i := slot % chunkSlots
	t.index.Delete(c.hashes[i], slot, t)
	c.slots[i], c.hashes[i] = itemRecord[T, E]{}, 0
	if t.index.Len() == 0 {
		t.used = 0
		t.spare = t.spare[:0]
	} else {
		t.spare = append(t.spare, slot)
	}
}
