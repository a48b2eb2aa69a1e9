package cache

import (
	"math/bits"

	"github.com/quotakit/quotakit/internal/table"
)

// keyTable maps storage keys to values of type V, like map[string]V, in
// less memory: entries live densely in fixed-size chunks (so growing never
// copies them or leaves slack) and are found through a [table.Table] of
// entry ids, and each live entry has a small stable id that indexes and
// queues can refer to instead of repeating the key. A map[string]any spends
// 32 bytes per slot at up to 7/8 load; keyTable[any] spends 32 bytes per
// entry plus 5 bytes per slot of the index at up to 3/4 load.
//
// A keyTable is not safe for concurrent use; its owner guards it. The zero
// value is empty and ready to use.
type keyTable[V any] struct {
	// chunks hold entries 0..used-1; entry id is at
	// chunks[id/chunkSize][id%chunkSize].
	chunks []*[chunkSize]tableEntry[V]
	used   int32
	// live has bit id set for every entry in use.
	live []uint64
	// free lists the ids of unused entries, reused before used grows.
	free []int32
	// index finds the id of a key.
	index table.Table[string]
}

// chunkSize is the number of entries per chunk.
const chunkSize = 512

type tableEntry[V any] struct {
	key string
	val V
}

func (t *keyTable[V]) len() int { return t.index.Len() }

// at returns the entry of id, which must be live.
func (t *keyTable[V]) at(id int32) *tableEntry[V] {
	return &t.chunks[id/chunkSize][id%chunkSize]
}

// keys is how t.index reads the keys of t.
type keys[V any] keyTable[V]

// Key returns the key of a live id.
func (k *keys[V]) Key(id int32) string { return (*keyTable[V])(k).at(id).key }

// Hash returns the hash of the key of a live id.
func (k *keys[V]) Hash(id int32) uint32 { return table.Hash(k.Key(id)) }

// owner returns t as the owner of its index.
func (t *keyTable[V]) owner() *keys[V] { return (*keys[V])(t) }

// lookup returns the id of key, or -1.
func (t *keyTable[V]) lookup(key string) int32 {
	id, _ := t.index.Find(table.Hash(key), key, t.owner())
	return id
}

// get returns the id and value stored under key.
func (t *keyTable[V]) get(key string) (id int32, val V, ok bool) {
	if id = t.lookup(key); id < 0 {
		return -1, val, false
	}
	return id, t.at(id).val, true
}

// insert returns the id of key, adding an entry with the zero value if key
// is absent, and whether it was present.
func (t *keyTable[V]) insert(key string) (id int32, existed bool) {
	h := table.Hash(key)
	if id, ok := t.index.Find(h, key, t.owner()); ok {
		return id, true
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
	t.index.Insert(h, id, t.owner())
	return id, false
}

// put stores val under key and returns its entry id, which is unchanged if
// key was present.
func (t *keyTable[V]) put(key string, val V) int32 {
	id, _ := t.insert(key)
	t.at(id).val = val
	return id
}

// delete removes key and returns the id it had, or -1.
func (t *keyTable[V]) delete(key string) int32 {
	h := table.Hash(key)
	id, ok := t.index.Find(h, key, t.owner())
	if !ok {
		return -1
	}
	t.index.Delete(h, id, t.owner())
	*t.at(id) = tableEntry[V]{}
	t.live[id/64] &^= 1 << (id % 64)
	t.free = append(t.free, id)
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
