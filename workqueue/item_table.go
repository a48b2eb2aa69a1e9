package workqueue

import "math/bits"

// itemTable holds one record of type E per item of type T and finds it by
// item: the queue's entries, a delaying queue's waiting items and a rate
// limiter's failure counts are each one itemTable.
//
// Items and their records live in fixed-size chunks addressed by slot
// number, each next to the item's hash; an open-addressing index maps
// items to slots. Unlike a slice, the chunks are never copied to grow, so
// no caller holding a lock waits for a large copy, and a slot stays put
// while it is in use. Removed slots are zeroed, so an item is unreachable
// from the table once removed.
//
// The index is a variant of internal/table's that keeps each item's full
// hash in its cell, next to the slot: 8 bytes a cell, where internal/table
// keeps 5 (a slot and an 8-bit tag, in two arrays) to suit the cache's
// many small tables. A lookup then reads one array and the record of the
// item it finds, a delete that shifts later cells back reads only the
// index, and growing the index reads no record at all. That matters most
// when workers on different cores take turns at the queue's lock: every
// cache line written under the lock by one core is read from that core's
// cache by the next, while the others wait. Per item, the index and the
// hashes together take as much memory as before.
//
// An itemTable is not safe for concurrent use; the zero value is empty.
type itemTable[T comparable, E any] struct {
	// The counters come first and the slices, which only growth writes,
	// last, so that a Queue can keep the counters on the cache line of its
	// lock and the slices on a line that stays in every core's cache.

	// n is the number of items in the table.
	n int32
	// used is the number of slots handed out since the table was last
	// empty. free heads the list of those removed since, most recent
	// first, as slot+1 (0 ends the list); the aux field of each free
	// record holds the next, in the same form. Keeping the list in the
	// records rather than in a slice of its own means that removing and
	// adding an item write only the line of its own record, which the add
	// writes anyway.
	used int32
	free uint32
	// shift is 64 - log2(len(cells)), so that a hash's home cell is its
	// top bits; see home.
	shift uint8

	// cells is the index, empty or a power of two long, at most 3/4 full.
	// A cell holds an item's hash in its high 32 bits and its slot+1 in
	// its low 32 bits; 0 is an empty cell. Probing is linear, and deletes
	// shift later cells of a probe run back instead of leaving tombstones,
	// so a long-lived table with churn never degrades.
	cells  []uint64
	chunks []*chunk[T, E]
}

// chunk holds chunkSlots records.
type chunk[T comparable, E any] [chunkSlots]itemRecord[T, E]

// itemRecord is an item and its record.
type itemRecord[T comparable, E any] struct {
	item T
	rec  E
	// aux is the item's hash while the slot is in use, and the free list's
	// link while it is free.
	aux uint32
}

const (
	// chunkSlots is the number of slots per chunk, a power of two.
	chunkSlots = 256
	// minCells is the length of the index when the first item arrives.
	minCells = 16
)

// Key returns the item in slot.
func (t *itemTable[T, E]) Key(slot int32) T {
	return t.chunks[slot/chunkSlots][slot%chunkSlots].item
}

// Hash returns the hash of the item in slot.
func (t *itemTable[T, E]) Hash(slot int32) uint32 {
	return t.chunks[slot/chunkSlots][slot%chunkSlots].aux
}

// at returns the record of slot. The slot must have been handed out since
// the table was created; if it was removed since, the record is zero.
func (t *itemTable[T, E]) at(slot int32) *E {
	return &t.chunks[slot/chunkSlots][slot%chunkSlots].rec
}

// len returns the number of items in t.
func (t *itemTable[T, E]) len() int { return int(t.n) }

// home returns the first cell probed for hash h. It takes the top bits of
// h, as Fibonacci hashing does.
func (t *itemTable[T, E]) home(h uint32) int {
	return int(uint64(h) << 32 >> t.shift)
}

// find returns the slot of item, whose hash is h, and whether it is in t.
// It compares item only with the items whose full hash is h, so it reads
// no record but the one it finds, barring a 32-bit collision.
func (t *itemTable[T, E]) find(item T, h uint32) (slot int32, ok bool) {
	if t.n == 0 {
		return -1, false
	}
	mask := len(t.cells) - 1
	for i := t.home(h); ; i = (i + 1) & mask {
		c := t.cells[i]
		if c == 0 {
			return -1, false
		}
		if uint32(c>>32) == h {
			if slot := int32(uint32(c)) - 1; t.Key(slot) == item {
				return slot, true
			}
		}
	}
}

// add returns the slot of item, whose hash is h, adding item with a zero
// record if it is not in t, and reports whether it added it.
func (t *itemTable[T, E]) add(item T, h uint32) (slot int32, added bool) {
	if slot, ok := t.find(item, h); ok {
		return slot, false
	}
	if t.free != 0 {
		slot = int32(t.free - 1)
		t.free = t.chunks[slot/chunkSlots][slot%chunkSlots].aux
	} else {
		slot = t.used
		if int(slot/chunkSlots) == len(t.chunks) {
			t.chunks = append(t.chunks, new(chunk[T, E]))
		}
		t.used++
	}
	r := &t.chunks[slot/chunkSlots][slot%chunkSlots]
	r.item, r.aux = item, h
	if int(t.n+1)*4 > len(t.cells)*3 {
		t.grow()
	}
	t.place(uint64(h)<<32 | uint64(slot+1))
	t.n++
	return slot, true
}

// place puts cell c in the first empty cell of its probe run.
func (t *itemTable[T, E]) place(c uint64) {
	mask := len(t.cells) - 1
	i := t.home(uint32(c >> 32))
	for t.cells[i] != 0 {
		i = (i + 1) & mask
	}
	t.cells[i] = c
}

// grow doubles the index. The cells carry their hashes, so it reads
// nothing else.
func (t *itemTable[T, E]) grow() {
	old := t.cells
	size := max(minCells, 2*len(old))
	t.cells = make([]uint64, size)
	t.shift = uint8(64 - bits.TrailingZeros(uint(size)))
	for _, c := range old {
		if c != 0 {
			t.place(c)
		}
	}
}

// remove removes the item in slot, which must be in use, and zeroes its
// record. Once t is empty it hands out slots from 0 again: the next burst
// fills the chunks in order, which is kinder to caches than a shuffled free
// list.
func (t *itemTable[T, E]) remove(slot int32) {
	r := &t.chunks[slot/chunkSlots][slot%chunkSlots]
	mask := len(t.cells) - 1
	hole := t.home(r.aux)
	for uint32(t.cells[hole]) != uint32(slot+1) {
		hole = (hole + 1) & mask
	}
	// Shift back the later cells of the run that the hole would otherwise
	// cut off from their home cell.
	for j := (hole + 1) & mask; t.cells[j] != 0; j = (j + 1) & mask {
		home := t.home(uint32(t.cells[j] >> 32))
		// The cell at j stays unless the hole lies cyclically in
		// [home, j): only then does the hole interrupt its probe run.
		if (j-home)&mask < (j-hole)&mask {
			continue
		}
		t.cells[hole] = t.cells[j]
		hole = j
	}
	t.cells[hole] = 0
	t.n--
	*r = itemRecord[T, E]{}
	if t.n == 0 {
		// Every slot below used is free: hand them out again in order.
		t.used, t.free = 0, 0
		return
	}
	r.aux = t.free
	t.free = uint32(slot) + 1
}
