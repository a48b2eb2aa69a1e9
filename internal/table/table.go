// Package table provides the open-addressing hash index that quotakit's
// containers share. A [Table] maps keys to refs, small non-negative int32
// handles into storage its owner keeps: the owner stores each key once,
// next to its value, and the table stores only a 32-bit hash and the ref,
// 8 bytes a cell.
//
// The table uses linear probing, is at most 3/4 full, and deletes by
// shifting later cells of a probe run back instead of leaving tombstones,
// so that a long-lived table with churn never degrades. Because it keeps
// each key's hash, growing never rehashes a key, and probing compares keys
// only when the hashes match.
//
// Callers compute hashes themselves, with [Hash] or a function of their
// own, so that they can hash before taking the lock that guards a table.
// The one requirement on a hash function is that its top bits are well
// mixed: a key's first cell is chosen by the top bits of its hash.
package table

import "hash/maphash"

// seed seeds [Hash]. It is set once when the package is initialised and
// only read afterwards; a random seed keeps adversarial keys from forcing
// collisions, as in Go's own maps.
var seed = maphash.MakeSeed()

// Hash returns a 32-bit hash of k suitable for a [Table]. It is safe for
// concurrent use. Hashes differ from one process to the next.
func Hash[K comparable](k K) uint32 {
	return uint32(maphash.Comparable(seed, k) >> 32)
}

// Table indexes refs by key. Its owner stores the keys and tells the table
// how to read one with the key function passed to [Table.Find]; the table
// stores refs and hashes.
//
// Table is not safe for concurrent use; its owner guards it. The zero value
// is empty and ready to use.
type Table[K comparable] struct {
	// cells holds hash<<32 | (ref+1) per cell, 0 for an empty cell; its
	// length is 0 or a power of two.
	cells []uint64
	n     int
	// shift is 64 - log2(len(cells)), so that a hash's home cell is its top
	// bits; see home.
	shift uint8
}

// minCells is the size of a table's first allocation.
const minCells = 8

// Len returns the number of refs in t.
func (t *Table[K]) Len() int { return t.n }

// home returns the first cell probed for hash h. It takes the top bits of
// h, as Fibonacci hashing does, so multiplicative hashes of dense ids work.
func (t *Table[K]) home(h uint32) int {
	return int(uint64(h) << 32 >> t.shift)
}

// Find returns the ref of k, whose hash is h, and whether k is present.
// key returns the key the owner stores under a ref; Find calls it only for
// cells whose hash equals h.
func (t *Table[K]) Find(h uint32, k K, key func(ref int32) K) (ref int32, ok bool) {
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
			if r := int32(uint32(c)) - 1; key(r) == k {
				return r, true
			}
		}
	}
}

// Insert adds ref under hash h. The key of ref must not be in t already
// (check with [Table.Find]), and ref must be non-negative.
func (t *Table[K]) Insert(h uint32, ref int32) {
	if ref < 0 {
		panic("table: negative ref")
	}
	if (t.n+1)*4 > len(t.cells)*3 {
		t.resize(max(minCells, 2*len(t.cells)))
	}
	t.place(uint64(h)<<32 | uint64(ref+1))
	t.n++
}

// place puts c in the first empty cell of its probe run.
func (t *Table[K]) place(c uint64) {
	mask := len(t.cells) - 1
	i := t.home(uint32(c >> 32))
	for t.cells[i] != 0 {
		i = (i + 1) & mask
	}
	t.cells[i] = c
}

// resize moves the cells to a table of size cells, a power of two.
func (t *Table[K]) resize(size int) {
	old := t.cells
	t.cells = make([]uint64, size)
	t.shift = uint8(64 - log2(size))
	for _, c := range old {
		if c != 0 {
			t.place(c)
		}
	}
}

// log2 returns the base-2 logarithm of n, a power of two.
func log2(n int) int {
	b := 0
	for n > 1 {
		n >>= 1
		b++
	}
	return b
}

// Delete removes ref, which was inserted under hash h, and reports whether
// it was present. It compares cells, not keys, so it never calls back into
// the owner.
func (t *Table[K]) Delete(h uint32, ref int32) bool {
	if t.n == 0 {
		return false
	}
	want := uint64(h)<<32 | uint64(ref+1)
	mask := len(t.cells) - 1
	hole := t.home(h)
	for ; t.cells[hole] != want; hole = (hole + 1) & mask {
		if t.cells[hole] == 0 {
			return false
		}
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
	return true
}

// Each calls fn for every ref in t, in no particular order. fn must not
// insert or delete.
func (t *Table[K]) Each(fn func(ref int32)) {
	for _, c := range t.cells {
		if c != 0 {
			fn(int32(uint32(c)) - 1)
		}
	}
}
