// Package table provides the open-addressing hash index that quotakit's
// containers share. A [Table] maps keys to refs, small non-negative int32
// handles into storage its owner keeps: the owner stores each key once,
// next to its value, and the table stores only the ref and an 8-bit tag
// of the key's hash, 5 bytes a cell.
//
// The table uses linear probing, is at most 3/4 full, and deletes by
// shifting later cells of a probe run back instead of leaving tombstones,
// so that a long-lived table with churn never degrades. Probing compares
// keys only when the tags match, so a lookup rarely reads a key that is
// not the one it looks for.
//
// Callers compute the hash of the key they look up themselves, with [Hash]
// or a function of their own. The one requirement on a hash function is
// that its top bits are well mixed: a key's first cell is chosen by the top
// bits of its hash, and its tag is the low byte.
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

// Owner is how a [Table] reads the keys its owner stores under refs.
type Owner[K comparable] interface {
	// Key returns the key stored under ref.
	Key(ref int32) K
	// Hash returns the hash of the key stored under ref: the value the
	// owner passed when it inserted ref.
	Hash(ref int32) uint32
}

// Table indexes refs by key. Its owner stores the keys and lets the table
// read them through an [Owner]; the table stores refs and tags.
//
// Table is not safe for concurrent use; its owner guards it. The zero value
// is empty and ready to use.
type Table[K comparable] struct {
	// refs holds ref+1 per cell, 0 for an empty cell; its length is 0 or a
	// power of two. tags holds the low byte of the hash of each full
	// cell's key.
	refs []int32
	tags []uint8
	n    int
	// shift is 64 - log2(len(refs)), so that a hash's home cell is its top
	// bits; see home.
	shift uint8
}

// minCells is the size of a table's first allocation: small, because
// the cache keeps one table per indexed value, and most hold one ref.
const minCells = 2

// Len returns the number of refs in t.
func (t *Table[K]) Len() int { return t.n }

// home returns the first cell probed for hash h. It takes the top bits of
// h, as Fibonacci hashing does, so multiplicative hashes of dense ids work.
func (t *Table[K]) home(h uint32) int {
	return int(uint64(h) << 32 >> t.shift)
}

// Find returns the ref of k, whose hash is h, and whether k is present. It
// reads keys from o only in cells whose tag matches h.
func (t *Table[K]) Find(h uint32, k K, o Owner[K]) (ref int32, ok bool) {
	if t.n == 0 {
		return -1, false
	}
	mask := len(t.refs) - 1
	tag := uint8(h)
	for i := t.home(h); ; i = (i + 1) & mask {
		r := t.refs[i]
		if r == 0 {
			return -1, false
		}
		if t.tags[i] == tag && o.Key(r-1) == k {
			return r - 1, true
		}
	}
}

// Insert adds ref under hash h. The key of ref must not be in t already
// (check with [Table.Find]), and ref must be non-negative. When the table
// grows, Insert asks o for the hash of every ref in it.
func (t *Table[K]) Insert(h uint32, ref int32, o Owner[K]) {
	if ref < 0 {
		panic("table: negative ref")
	}
	if (t.n+1)*4 > len(t.refs)*3 {
		t.resize(max(minCells, 2*len(t.refs)), o)
	}
	t.place(h, ref+1)
	t.n++
}

// place puts the cell r, with hash h, in the first empty cell of its probe
// run.
func (t *Table[K]) place(h uint32, r int32) {
	mask := len(t.refs) - 1
	i := t.home(h)
	for t.refs[i] != 0 {
		i = (i + 1) & mask
	}
	t.refs[i] = r
	t.tags[i] = uint8(h)
}

// resize moves the cells to a table of size cells, a power of two.
func (t *Table[K]) resize(size int, o Owner[K]) {
	old := t.refs
	t.refs = make([]int32, size)
	t.tags = make([]uint8, size)
	t.shift = uint8(64 - log2(size))
	for _, r := range old {
		if r != 0 {
			t.place(o.Hash(r-1), r)
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
// it was present. It compares refs, not keys; o gives the hashes of the
// cells it shifts back.
func (t *Table[K]) Delete(h uint32, ref int32, o Owner[K]) bool {
	if t.n == 0 {
		return false
	}
	mask := len(t.refs) - 1
	hole := t.home(h)
	for ; t.refs[hole] != ref+1; hole = (hole + 1) & mask {
		if t.refs[hole] == 0 {
			return false
		}
	}
	// Shift back the later cells of the run that the hole would otherwise
	// cut off from their home cell.
	for j := (hole + 1) & mask; t.refs[j] != 0; j = (j + 1) & mask {
		home := t.home(o.Hash(t.refs[j] - 1))
		// The cell at j stays unless the hole lies cyclically in
		// [home, j): only then does the hole interrupt its probe run.
		if (j-home)&mask < (j-hole)&mask {
			continue
		}
		t.refs[hole], t.tags[hole] = t.refs[j], t.tags[j]
		hole = j
	}
	t.refs[hole] = 0
	t.n--
	return true
}

// Each calls fn for every ref in t, in no particular order. fn must not
// insert or delete.
func (t *Table[K]) Each(fn func(ref int32)) {
	for _, r := range t.refs {
		if r != 0 {
			fn(r - 1)
		}
	}
}
