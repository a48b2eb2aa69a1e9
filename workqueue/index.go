package workqueue

import "hash/maphash"

// hashSeed seeds the item hashes of every queue. It is set once when the
// package is initialised and only read afterwards; a random seed keeps
// adversarial keys from forcing collisions, as in Go's own maps.
var hashSeed = maphash.MakeSeed()

// hashItem returns the tag of item: 32 bits of its hash, which both place it
// in an itemIndex and tell most non-matching cells apart without comparing
// items. Callers compute it before taking the queue's lock, so the hashing
// of concurrent callers runs in parallel.
func hashItem[T comparable](item T) uint32 {
	return uint32(maphash.Comparable(hashSeed, item) >> 32)
}

// itemIndex is the hash table from an item to its slot in Queue.entries.
//
// A Go map would do, but costs two hash computations under the queue's lock
// for each Add (a lookup, then an insert) and two for each Done (a lookup,
// then a delete). This table takes a tag hashed outside the lock and finds
// or frees a cell with a single probe sequence.
//
// It uses open addressing with linear probing, stays at most half full, and
// deletes by shifting later cells back instead of leaving tombstones, so a
// long-lived queue does not degrade. A cell holds tag<<32 | (slot+1); 0 is
// an empty cell. A cell's home position is tag&mask, so growing the table
// needs no rehashing. The table stores no items; [Queue.lookup] probes it
// and compares the item in the slot of each cell whose tag matches.
type itemIndex struct {
	cells []uint64
	n     int
}

// slotAt returns the slot stored in a non-empty cell.
func (x *itemIndex) slotAt(cell int) int32 { return int32(uint32(x.cells[cell])) - 1 }

// cellOf returns the cell holding slot, whose item has tag; slot must be
// in the table. Comparing slots instead of items spares reading the item.
func (x *itemIndex) cellOf(tag uint32, slot int32) int {
	want := uint64(tag)<<32 | uint64(slot+1)
	mask := len(x.cells) - 1
	i := int(tag) & mask
	for x.cells[i] != want {
		i = (i + 1) & mask
	}
	return i
}

// insert stores slot with tag in cell, an empty cell found by lookup. It
// may grow the table, which invalidates cell numbers.
func (x *itemIndex) insert(cell int, tag uint32, slot int32) {
	x.cells[cell] = uint64(tag)<<32 | uint64(slot+1)
	x.n++
	if 2*x.n > len(x.cells) {
		x.resize(2 * len(x.cells))
	}
}

// remove empties cell, shifting back the cells of the same probe run that
// would otherwise become unreachable.
func (x *itemIndex) remove(cell int) {
	mask := len(x.cells) - 1
	hole := cell
	for j := (hole + 1) & mask; x.cells[j] != 0; j = (j + 1) & mask {
		home := int(x.cells[j]>>32) & mask
		// The cell at j may move into the hole unless its home lies
		// cyclically in (hole, j]: then the hole does not interrupt its
		// probe run.
		if hole <= j {
			if hole < home && home <= j {
				continue
			}
		} else if hole < home || home <= j {
			continue
		}
		x.cells[hole] = x.cells[j]
		hole = j
	}
	x.cells[hole] = 0
	x.n--
}

// resize moves the cells to a table of size cells, a power of two.
func (x *itemIndex) resize(size int) {
	old := x.cells
	x.cells = make([]uint64, size)
	mask := size - 1
	for _, c := range old {
		if c == 0 {
			continue
		}
		i := int(c>>32) & mask
		for x.cells[i] != 0 {
			i = (i + 1) & mask
		}
		x.cells[i] = c
	}
}
