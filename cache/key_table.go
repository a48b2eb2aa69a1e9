package cache

import (
	"hash/maphash"
	"math/bits"
)

// keyTable maps storage keys to values of type V, like map[string]V, in
// less memory and with one probe per operation: entries live densely in
// fixed-size chunks (so growing never copies them or leaves slack) and are
// found through an open-addressing table of int32 entry ids, and each live
// entry has a small stable id that indexes and queues can refer to instead
// of repeating the key. A map[string]any spends 32 bytes per slot at 45–90%
// load; keyTable[any] spends 32 bytes per entry plus 5 bytes per slot.
//
// A keyTable is not safe for concurrent use; its owner guards it. The zero
// value is empty and ready to use.
type keyTable[V any] struct {
	seed maphash.Seed
	// chunks hold entries 0..used-1; entry id is at
	// chunks[id/chunkSize][id%chunkSize].
	chunks []*[chunkSize]tableEntry[V]
	used   int32
	// live has bit id set for every entry in use.
	live []uint64
	// free lists the ids of unused entries, reused before used grows.
	free []int32
	// slots holds entry id+1 per slot, 0 for an empty slot; linear probing,
	// length a power of two, at most 3/4 full. tags holds the top byte of
	// the hash of each slot's key, so that probing compares keys only on a
	// tag match: keys of one namespace share long prefixes and live in
	// memory the probe would otherwise have to load.
	slots []int32
	tags  []uint8
	n     int
}

// chunkSize is the number of entries per chunk.
const chunkSize = 512

type tableEntry[V any] struct {
	key string
	val V
}

func (t *keyTable[V]) len() int { return t.n }

// at returns the entry of id, which must be live.
func (t *keyTable[V]) at(id int32) *tableEntry[V] {
	return &t.chunks[id/chunkSize][id%chunkSize]
}

// hash returns the home slot and tag of key.
func (t *keyTable[V]) hash(key string) (home int, tag uint8) {
	h := maphash.String(t.seed, key)
	return int(h) & (len(t.slots) - 1), uint8(h >> 56)
}

func (t *keyTable[V]) home(key string) int {
	home, _ := t.hash(key)
	return home
}

// find returns the slot holding key and its entry id, or the empty slot
// where key would go and -1, and the tag of key.
func (t *keyTable[V]) find(key string) (slot int, id int32, tag uint8) {
	if len(t.slots) == 0 {
		return -1, -1, 0
	}
	mask := len(t.slots) - 1
	i, tag := t.hash(key)
	for ; ; i = (i + 1) & mask {
		s := t.slots[i]
		if s == 0 {
			return i, -1, tag
		}
		if t.tags[i] == tag && t.at(s-1).key == key {
			return i, s - 1, tag
		}
	}
}

// lookup returns the id of key, or -1.
func (t *keyTable[V]) lookup(key string) int32 {
	_, id, _ := t.find(key)
	return id
}

// get returns the id and value stored under key.
func (t *keyTable[V]) get(key string) (id int32, val V, ok bool) {
	if _, id, _ = t.find(key); id < 0 {
		return -1, val, false
	}
	return id, t.at(id).val, true
}

// insert returns the id of key, adding an entry with the zero value if key
// is absent, and whether it was present.
func (t *keyTable[V]) insert(key string) (id int32, existed bool) {
	slot, id, tag := t.find(key)
	if id >= 0 {
		return id, true
	}
	if (t.n+1)*4 > len(t.slots)*3 {
		t.grow()
		slot, _, tag = t.find(key)
	}
	if n := len(t.free); n > 0 {
		id = t.free[n-1]
		t.free = t.free[:n-1]
	} else {
		id = t.used
		if int(id/chunkSize) == len(t.chunks) {
			t.chunks = append(t.chunks, new([chunkSize]tableEntry[V]))
		}
		if int(id/64) == len(t.live) {
			t.live = append(t.live, 0)
		}
		t.used++
	}
	t.at(id).key = key
	t.live[id/64] |= 1 << (id % 64)
	t.slots[slot] = id + 1
	t.tags[slot] = tag
	t.n++
	return id, false
}

// put stores val under key and returns its entry id, which is unchanged if
// key was present.
func (t *keyTable[V]) put(key string, val V) int32 {
	id, _ := t.insert(key)
	t.at(id).val = val
	return id
}

func (t *keyTable[V]) grow() {
	size := 2 * len(t.slots)
	if size < 8 {
		size = 8
	}
	if len(t.slots) == 0 {
		t.seed = maphash.MakeSeed()
	}
	t.slots = make([]int32, size)
	t.tags = make([]uint8, size)
	mask := size - 1
	t.each(func(id int32, key string, _ V) {
		i, tag := t.hash(key)
		for t.slots[i] != 0 {
			i = (i + 1) & mask
		}
		t.slots[i] = id + 1
		t.tags[i] = tag
	})
}

// delete removes key and returns the id it had, or -1.
func (t *keyTable[V]) delete(key string) int32 {
	slot, id, _ := t.find(key)
	if id < 0 {
		return -1
	}
	// Backward-shift deletion keeps every key reachable from its home slot
	// without tombstones.
	mask := len(t.slots) - 1
	i := slot
	for j := (i + 1) & mask; t.slots[j] != 0; j = (j + 1) & mask {
		k := t.home(t.at(t.slots[j] - 1).key)
		// Move slot j into the hole at i unless its home lies cyclically
		// in (i, j].
		if (j > i && (k <= i || k > j)) || (j < i && k <= i && k > j) {
			t.slots[i] = t.slots[j]
			t.tags[i] = t.tags[j]
			i = j
		}
	}
	t.slots[i] = 0
	*t.at(id) = tableEntry[V]{}
	t.live[id/64] &^= 1 << (id % 64)
	t.free = append(t.free, id)
	t.n--
	return id
}

// each calls fn for every entry, in id order. fn must not add or delete
// entries.
func (t *keyTable[V]) each(fn func(id int32, key string, val V)) {
	for w, word := range t.live {
		for word != 0 {
			b := bits.TrailingZeros64(word)
			word &^= 1 << b
			id := int32(w*64 + b)
			e := t.at(id)
			fn(id, e.key, e.val)
		}
	}
}

// entry returns the key and value of a live id.
func (t *keyTable[V]) entry(id int32) (string, V) {
	e := t.at(id)
	return e.key, e.val
}
