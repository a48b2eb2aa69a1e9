package cache

import "hash/maphash"

// keyTable maps storage keys to objects, like map[string]any, in less
// memory: entries live densely in fixed-size chunks (so growing never
// copies them or leaves slack) and are found through an
// open-addressing table of int32 entry ids, and each live entry has a small
// stable id that indexes can refer to instead of repeating the key. A
// map[string]any spends 32 bytes per slot at 45–90% load; keyTable spends 32
// bytes per entry plus 4 bytes per slot. Indexes keyed by id (4 bytes)
// rather than key (16 bytes) shrink likewise.
//
// A keyTable is not safe for concurrent use; ThreadSafeStore guards it. The
// zero value is empty and ready to use.
type keyTable struct {
	seed maphash.Seed
	// chunks hold entries 0..used-1; entry id is at
	// chunks[id/chunkSize][id%chunkSize].
	chunks []*[chunkSize]tableEntry
	used   int32
	// free lists the ids of unused entries, reused before used grows.
	free []int32
	// slots holds entry id+1 per slot, 0 for an empty slot; linear probing,
	// length a power of two, at most 3/4 full.
	slots []int32
	n     int
}

// chunkSize is the number of entries per chunk (16 KiB).
const chunkSize = 512

type tableEntry struct {
	key string
	obj any
}

func (t *keyTable) at(id int32) *tableEntry {
	return &t.chunks[id/chunkSize][id%chunkSize]
}

// freeEntry marks an unused entry in obj.
type freeEntry struct{}

func (t *keyTable) len() int { return t.n }

func (t *keyTable) home(key string) int {
	return int(maphash.String(t.seed, key)) & (len(t.slots) - 1)
}

// find returns the slot holding key and its entry id, or the empty slot
// where key would go and -1.
func (t *keyTable) find(key string) (slot int, id int32) {
	if len(t.slots) == 0 {
		return -1, -1
	}
	mask := len(t.slots) - 1
	for i := t.home(key); ; i = (i + 1) & mask {
		s := t.slots[i]
		if s == 0 {
			return i, -1
		}
		if t.at(s-1).key == key {
			return i, s - 1
		}
	}
}

// get returns the id and object stored under key.
func (t *keyTable) get(key string) (id int32, obj any, ok bool) {
	_, id = t.find(key)
	if id < 0 {
		return -1, nil, false
	}
	return id, t.at(id).obj, true
}

// put stores obj under key and returns its entry id, which is unchanged if
// key was present.
func (t *keyTable) put(key string, obj any) int32 {
	slot, id := t.find(key)
	if id >= 0 {
		t.at(id).obj = obj
		return id
	}
	if (t.n+1)*4 > len(t.slots)*3 {
		t.grow()
		slot, _ = t.find(key)
	}
	if n := len(t.free); n > 0 {
		id = t.free[n-1]
		t.free = t.free[:n-1]
	} else {
		id = t.used
		if int(id/chunkSize) == len(t.chunks) {
			t.chunks = append(t.chunks, new([chunkSize]tableEntry))
		}
		t.used++
	}
	*t.at(id) = tableEntry{key: key, obj: obj}
	t.slots[slot] = id + 1
	t.n++
	return id
}

func (t *keyTable) grow() {
	size := 2 * len(t.slots)
	if size < 8 {
		size = 8
	}
	if len(t.slots) == 0 {
		t.seed = maphash.MakeSeed()
	}
	t.slots = make([]int32, size)
	mask := size - 1
	for id := range t.used {
		e := t.at(id)
		if _, free := e.obj.(freeEntry); free {
			continue
		}
		i := t.home(e.key)
		for t.slots[i] != 0 {
			i = (i + 1) & mask
		}
		t.slots[i] = id + 1
	}
}

// delete removes key and returns the id it had, or -1.
func (t *keyTable) delete(key string) int32 {
	slot, id := t.find(key)
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
			i = j
		}
	}
	t.slots[i] = 0
	*t.at(id) = tableEntry{obj: freeEntry{}}
	t.free = append(t.free, id)
	t.n--
	return id
}

// each calls fn for every entry.
func (t *keyTable) each(fn func(id int32, key string, obj any)) {
	for id := range t.used {
		e := t.at(id)
		if _, free := e.obj.(freeEntry); free {
			continue
		}
		fn(id, e.key, e.obj)
	}
}

// entry returns the key and object of a live id.
func (t *keyTable) entry(id int32) (string, any) {
	e := t.at(id)
	return e.key, e.obj
}
