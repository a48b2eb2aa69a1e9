package cache

import (
	"reflect"
	"sync"
	"sync/atomic"
)

// ThreadSafeStore is a map from storage keys to objects with any number of
// named indexes kept up to date on every write. It is the storage behind
// [NewStore] and [NewIndexer]; use it directly when you compute keys
// yourself.
//
// A ThreadSafeStore is safe for concurrent use. Readers share the stored
// objects: neither the store nor its callers may mutate an object after it
// has been stored, since index entries and every other reader depend on it.
//
// Index functions are called without any lock held. An index function that
// fails on a new object makes the write return the error and leaves the
// store unchanged (upstream client-go panics instead). If it fails on the
// object being replaced or deleted, the key is removed from every index by a
// scan so that the write can still complete.
//
// The zero value is an empty store with no indexes.
type ThreadSafeStore struct {
	// indexers is the current set of index functions. It is only written
	// while mu is held, and read without it so that writers can compute
	// index values before they lock.
	indexers atomic.Pointer[indexerSet]

	mu sync.RWMutex
	// guarded by mu
	items keyTable[any]
	// guarded by mu; index name → indexed value → set of entry ids of
	// items. Every name of indexers has an entry; empty value sets are
	// deleted.
	indices map[string]index
	// guarded by mu; the last resourceVersion written (see
	// LastStoreSyncResourceVersion).
	rv string
	// guarded by mu; incremented on every change, so that a writer that
	// computed index values without the lock can tell whether the store
	// moved under it.
	gen uint64
}

// NewThreadSafeStore returns an empty store indexed by indexers.
func NewThreadSafeStore(indexers Indexers) *ThreadSafeStore {
	s := &ThreadSafeStore{}
	if len(indexers) > 0 {
		set := (*indexerSet)(nil).with(indexers)
		s.indexers.Store(set)
		s.indices = make(map[string]index, len(set.names))
		for _, name := range set.names {
			s.indices[name] = index{}
		}
	}
	return s
}

// Add stores obj under key, replacing any object stored there, and updates
// every index. It fails only when an index function fails on obj, and then
// changes nothing.
func (s *ThreadSafeStore) Add(key string, obj any) error {
	_, _, err := s.put(key, obj)
	return err
}

// Update is [ThreadSafeStore.Add]: a store does not distinguish creation
// from modification.
func (s *ThreadSafeStore) Update(key string, obj any) error {
	_, _, err := s.put(key, obj)
	return err
}

// put stores obj under key and returns what it replaced, if anything.
func (s *ThreadSafeStore) put(key string, obj any) (old any, had bool, err error) {
	for {
		set := s.indexers.Load()
		var nbuf [2][]string
		newVals, err := set.values(nbuf[:0], key, obj)
		if err != nil {
			return nil, false, err
		}
		s.mu.Lock()
		if s.indexers.Load() != set {
			s.mu.Unlock()
			continue
		}
		// One probe finds the key or makes its entry: a new key, the
		// common case while an informer fills its store, is stored at
		// once.
		var id int32
		id, had = s.items.insert(key)
		old = nil
		if had {
			old = s.items.at(id).val
		}
		switch {
		case !had || set == nil:
			s.storeLocked(set, id, obj, nil, newVals)
			s.mu.Unlock()
			return old, had, nil
		case sameObject(old, obj):
			// Storing the object that is already there: its index values
			// cannot have changed, because stored objects are immutable.
			s.items.at(id).val = obj
			s.setRVLocked(obj)
			s.gen++
			s.mu.Unlock()
			return old, true, nil
		}
		gen := s.gen
		s.mu.Unlock()

		var obuf [2][]string
		oldVals, oldErr := set.values(obuf[:0], key, old)

		s.mu.Lock()
		var ok bool
		if id, ok = s.unchangedLocked(set, gen, key, old, id); !ok {
			s.mu.Unlock()
			continue
		}
		if oldErr != nil {
			s.purgeLocked(set, id)
			oldVals = nil
		}
		s.storeLocked(set, id, obj, oldVals, newVals)
		s.mu.Unlock()
		return old, true, nil
	}
}

// unchangedLocked reports whether key still holds old, as entry id when
// nothing changed, under the same indexers as when the caller released mu
// to compute index values; it returns key's current entry id.
func (s *ThreadSafeStore) unchangedLocked(set *indexerSet, gen uint64, key string, old any, id int32) (int32, bool) {
	if s.indexers.Load() != set {
		return -1, false
	}
	if s.gen == gen {
		return id, true
	}
	id, cur, ok := s.items.get(key)
	return id, ok && sameObject(cur, old)
}

// storeLocked writes obj to entry id and moves id from oldVals to newVals
// in every index. oldVals is nil when the entry had no indexed object.
func (s *ThreadSafeStore) storeLocked(set *indexerSet, id int32, obj any, oldVals, newVals [][]string) {
	s.items.at(id).val = obj
	for i := range set.len() {
		idx := s.indices[set.names[i]]
		nv := newVals[i]
		var ov []string
		if oldVals != nil {
			ov = oldVals[i]
			if len(ov) == 1 && len(nv) == 1 && ov[0] == nv[0] {
				continue
			}
		}
		for _, v := range ov {
			idx.remove(v, id)
		}
		for _, v := range nv {
			idx.add(v, id)
		}
	}
	s.setRVLocked(obj)
	s.gen++
}

// purgeLocked removes entry id from every index by scanning all values. It
// is the fallback when the indexed values of the stored object are unknown.
func (s *ThreadSafeStore) purgeLocked(set *indexerSet, id int32) {
	for _, name := range set.names {
		idx := s.indices[name]
		for v := range idx {
			idx.remove(v, id)
		}
	}
}

// setRVLocked records obj's resourceVersion as the last written one. Objects
// without metadata leave it unchanged.
func (s *ThreadSafeStore) setRVLocked(obj any) {
	if rv, ok := resourceVersionOf(obj); ok {
		s.rv = rv
	}
}

// Delete removes the object stored under key, if any.
func (s *ThreadSafeStore) Delete(key string) {
	s.remove(key, nil)
}

// DeleteWithObject removes the object stored under key, if any, and records
// obj's resourceVersion (when it has metadata) as the last written one: obj
// is the final state of a deleted object as reported by a watch.
func (s *ThreadSafeStore) DeleteWithObject(key string, obj any) {
	s.remove(key, obj)
}

// remove deletes key and returns the object it held, if any; rvObj, when it
// has metadata, gives the last written resourceVersion.
func (s *ThreadSafeStore) remove(key string, rvObj any) (old any, had bool) {
	for {
		s.mu.Lock()
		set := s.indexers.Load()
		_, old, had = s.items.get(key)
		if !had || set == nil {
			if had {
				s.items.delete(key)
			}
			s.setRVLocked(rvObj)
			s.gen++
			s.mu.Unlock()
			return old, had
		}
		gen := s.gen
		s.mu.Unlock()

		var obuf [2][]string
		oldVals, oldErr := set.values(obuf[:0], key, old)

		s.mu.Lock()
		if _, ok := s.unchangedLocked(set, gen, key, old, -1); !ok {
			s.mu.Unlock()
			continue
		}
		id := s.items.delete(key)
		if oldErr != nil {
			s.purgeLocked(set, id)
		} else {
			for i, name := range set.names {
				idx := s.indices[name]
				for _, v := range oldVals[i] {
					idx.remove(v, id)
				}
			}
		}
		s.setRVLocked(rvObj)
		s.gen++
		s.mu.Unlock()
		return old, true
	}
}

// Get returns the object stored under key.
func (s *ThreadSafeStore) Get(key string) (item any, exists bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, item, exists = s.items.get(key)
	return item, exists
}

// List returns every stored object, in no particular order.
func (s *ThreadSafeStore) List() []any {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]any, 0, s.items.len())
	s.items.each(func(_ int32, _ string, obj any) {
		out = append(out, obj)
	})
	return out
}

// ListKeys returns every storage key, in no particular order.
func (s *ThreadSafeStore) ListKeys() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]string, 0, s.items.len())
	s.items.each(func(_ int32, key string, _ any) {
		out = append(out, key)
	})
	return out
}

// Len returns the number of stored objects.
func (s *ThreadSafeStore) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.items.len()
}

// rewriteValues replaces, under the write lock, every stored object for
// which fn reports a replacement. The replacement must have the same key
// and index values (a copy), since indexes are not updated; fn must not
// call into s.
func (s *ThreadSafeStore) rewriteValues(fn func(obj any) (any, bool)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.items.each(func(id int32, _ string, obj any) {
		if n, ok := fn(obj); ok {
			s.items.at(id).val = n
		}
	})
	s.gen++
}

// rangeItems calls fn for every stored object while holding the read lock.
// fn must not call into s; it is used by [DeltaFIFO] to read its known
// objects without copying the key list.
func (s *ThreadSafeStore) rangeItems(fn func(key string, obj any)) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	s.items.each(func(_ int32, key string, obj any) {
		fn(key, obj)
	})
}

// Replace discards the contents of the store and stores items instead,
// rebuilding every index, and records resourceVersion as the last written
// one. The store does not retain the map. If an index function fails,
// Replace returns the error and the store is unchanged.
func (s *ThreadSafeStore) Replace(items map[string]any, resourceVersion string) error {
	var table keyTable[any]
	for key, obj := range items {
		table.put(key, obj)
	}
	return s.replaceTable(table, resourceVersion)
}

// replaceTable is Replace with the new contents already in a table, which
// the store takes over.
func (s *ThreadSafeStore) replaceTable(table keyTable[any], resourceVersion string) error {
	for {
		set := s.indexers.Load()
		indices, err := buildIndices(set, &table)
		if err != nil {
			return err
		}
		s.mu.Lock()
		if s.indexers.Load() != set {
			s.mu.Unlock()
			continue
		}
		s.items = table
		if set != nil {
			s.indices = indices
		}
		s.rv = resourceVersion
		s.gen++
		s.mu.Unlock()
		return nil
	}
}

// Bookmark records resourceVersion as the last one the store has seen,
// without changing its contents: a watch bookmark says the store is current
// as of that version.
func (s *ThreadSafeStore) Bookmark(resourceVersion string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rv = resourceVersion
}

// LastStoreSyncResourceVersion returns the last resourceVersion written: that
// of the last object added, updated or deleted with its final state, or the
// version given to the last Replace or Bookmark, whichever came last. It is
// the last written version, not the largest.
func (s *ThreadSafeStore) LastStoreSyncResourceVersion() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.rv
}

// sameObject reports whether a and b are certainly the same stored object:
// the same pointer, map or channel, or equal values of a basic kind. It
// never panics, and answers false when it cannot tell cheaply.
func sameObject(a, b any) bool {
	ta := reflect.TypeOf(a)
	if ta == nil || ta != reflect.TypeOf(b) {
		return false
	}
	switch ta.Kind() {
	case reflect.Pointer, reflect.Chan, reflect.UnsafePointer, reflect.String, reflect.Bool,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return a == b
	case reflect.Map:
		return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
	}
	return false
}
