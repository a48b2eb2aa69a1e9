package cache

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
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

// index maps an indexed value to the set of entry ids indexed under it.
// Ids are 4 bytes where keys would be 16, which is most of the memory an
// index costs.
type index map[string]*idSet

func (idx index) add(value string, id int32) {
	set := idx[value]
	if set == nil {
		set = &idSet{}
		idx[value] = set
	}
	set.add(id)
}

// remove deletes id from value's set, and the set itself once it is empty,
// so that values that no object has any more do not accumulate
// (kubernetes#84959).
func (idx index) remove(value string, id int32) {
	set := idx[value]
	if set == nil {
		return
	}
	set.remove(id)
	if set.len() == 0 {
		delete(idx, value)
	}
}

// indexerSet is an immutable list of index functions sorted by name.
type indexerSet struct {
	names []string
	funcs []IndexFunc
}

// with returns a new set holding the functions of s and add.
func (s *indexerSet) with(add Indexers) *indexerSet {
	out := &indexerSet{}
	if s != nil {
		out.names = slices.Clone(s.names)
		out.funcs = slices.Clone(s.funcs)
	}
	for _, name := range slices.Sorted(maps.Keys(add)) {
		i, _ := slices.BinarySearch(out.names, name)
		out.names = slices.Insert(out.names, i, name)
		out.funcs = slices.Insert(out.funcs, i, add[name])
	}
	return out
}

func (s *indexerSet) len() int {
	if s == nil {
		return 0
	}
	return len(s.names)
}

func (s *indexerSet) lookup(name string) IndexFunc {
	if s == nil {
		return nil
	}
	if i, ok := slices.BinarySearch(s.names, name); ok {
		return s.funcs[i]
	}
	return nil
}

// values appends the indexed values of obj under every function of s to
// dst, one slice per function. It calls user code and must run without mu.
func (s *indexerSet) values(dst [][]string, key string, obj any) ([][]string, error) {
	for i, fn := range s.funcsOrNil() {
		vals, err := callIndexFunc(fn, obj)
		if err != nil {
			return nil, fmt.Errorf("cache: index %q of key %q: %w", s.names[i], key, err)
		}
		dst = append(dst, vals)
	}
	return dst, nil
}

func (s *indexerSet) funcsOrNil() []IndexFunc {
	if s == nil {
		return nil
	}
	return s.funcs
}

// callIndexFunc calls fn and turns a panic into an error, so that a broken
// index function cannot take the informer down.
func callIndexFunc(fn IndexFunc, obj any) (vals []string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("index function panicked: %v", r)
		}
	}()
	return fn(obj)
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
	return s.put(key, obj)
}

// Update is [ThreadSafeStore.Add]: a store does not distinguish creation
// from modification.
func (s *ThreadSafeStore) Update(key string, obj any) error {
	return s.put(key, obj)
}

func (s *ThreadSafeStore) put(key string, obj any) error {
	for {
		set := s.indexers.Load()
		var nbuf [2][]string
		newVals, err := set.values(nbuf[:0], key, obj)
		if err != nil {
			return err
		}
		s.mu.Lock()
		if s.indexers.Load() != set {
			s.mu.Unlock()
			continue
		}
		_, old, had := s.items.get(key)
		switch {
		case !had || set == nil:
			s.storeLocked(set, key, obj, nil, newVals)
			s.mu.Unlock()
			return nil
		case sameObject(old, obj):
			// Storing the object that is already there: its index values
			// cannot have changed, because stored objects are immutable.
			s.items.put(key, obj)
			s.setRVLocked(obj)
			s.gen++
			s.mu.Unlock()
			return nil
		}
		gen := s.gen
		s.mu.Unlock()

		var obuf [2][]string
		oldVals, oldErr := set.values(obuf[:0], key, old)

		s.mu.Lock()
		if !s.unchangedLocked(set, gen, key, old) {
			s.mu.Unlock()
			continue
		}
		if oldErr != nil {
			id, _, _ := s.items.get(key)
			s.purgeLocked(set, id)
			oldVals = nil
		}
		s.storeLocked(set, key, obj, oldVals, newVals)
		s.mu.Unlock()
		return nil
	}
}

// unchangedLocked reports whether key still holds old under the same
// indexers as when the caller released mu to compute index values.
func (s *ThreadSafeStore) unchangedLocked(set *indexerSet, gen uint64, key string, old any) bool {
	if s.indexers.Load() != set {
		return false
	}
	if s.gen == gen {
		return true
	}
	_, cur, ok := s.items.get(key)
	return ok && sameObject(cur, old)
}

// storeLocked writes obj under key and moves key from oldVals to newVals in
// every index. oldVals is nil when key had no indexed object.
func (s *ThreadSafeStore) storeLocked(set *indexerSet, key string, obj any, oldVals, newVals [][]string) {
	id := s.items.put(key, obj)
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

func (s *ThreadSafeStore) remove(key string, rvObj any) {
	for {
		s.mu.Lock()
		set := s.indexers.Load()
		_, old, had := s.items.get(key)
		if !had || set == nil {
			if had {
				s.items.delete(key)
			}
			s.setRVLocked(rvObj)
			s.gen++
			s.mu.Unlock()
			return
		}
		gen := s.gen
		s.mu.Unlock()

		var obuf [2][]string
		oldVals, oldErr := set.values(obuf[:0], key, old)

		s.mu.Lock()
		if !s.unchangedLocked(set, gen, key, old) {
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
		return
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

// buildIndices indexes the entries of table with every function of set. It
// calls user code and must run without mu; table must not change meanwhile.
func buildIndices(set *indexerSet, table *keyTable[any]) (map[string]index, error) {
	if set == nil {
		return nil, nil
	}
	indices := make(map[string]index, len(set.names))
	for _, name := range set.names {
		indices[name] = index{}
	}
	var buf [2][]string
	var err error
	table.each(func(id int32, key string, obj any) {
		if err != nil {
			return
		}
		var vals [][]string
		if vals, err = set.values(buf[:0], key, obj); err != nil {
			return
		}
		for i, name := range set.names {
			idx := indices[name]
			for _, v := range vals[i] {
				idx.add(v, id)
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return indices, nil
}

// AddIndexers adds index functions and indexes every stored object with
// them; it may be called at any time, also while other goroutines write. A
// name that is already registered is an error, as is a failing index
// function; in both cases nothing changes.
func (s *ThreadSafeStore) AddIndexers(newIndexers Indexers) error {
	if len(newIndexers) == 0 {
		return nil
	}
	added := (*indexerSet)(nil).with(newIndexers)
	for {
		s.mu.Lock()
		set := s.indexers.Load()
		var conflicts []string
		for _, name := range added.names {
			if set.lookup(name) != nil {
				conflicts = append(conflicts, name)
			}
		}
		if len(conflicts) > 0 {
			s.mu.Unlock()
			return fmt.Errorf("cache: indexer conflict: %v", conflicts)
		}
		snapshot := make(map[string]snapshotEntry, s.items.len())
		s.items.each(func(id int32, key string, obj any) {
			snapshot[key] = snapshotEntry{id: id, obj: obj}
		})
		gen := s.gen
		s.mu.Unlock()

		built := make(map[string]index, len(added.names))
		for _, name := range added.names {
			built[name] = index{}
		}
		for key, e := range snapshot {
			if err := addToIndices(added, built, key, e.id, e.obj); err != nil {
				return err
			}
		}
		retry, err := s.installIndices(set, added, built, snapshot, gen)
		if err != nil || !retry {
			return err
		}
	}
}

// snapshotEntry is a stored object and its entry id, as AddIndexers saw it.
type snapshotEntry struct {
	id  int32
	obj any
}

// addToIndices indexes entry id (key, obj) with every function of set into
// indices. It calls user code and must run without mu.
func addToIndices(set *indexerSet, indices map[string]index, key string, id int32, obj any) error {
	var buf [2][]string
	vals, err := set.values(buf[:0], key, obj)
	if err != nil {
		return err
	}
	for i, name := range set.names {
		for _, v := range vals[i] {
			indices[name].add(v, id)
		}
	}
	return nil
}

// installIndices catches built (indices of added over snapshot, taken at
// generation gen) up with writes made since, and installs it once a round
// finds no new writes. It returns retry when other indexers were installed
// meanwhile.
func (s *ThreadSafeStore) installIndices(set, added *indexerSet, built map[string]index, snapshot map[string]snapshotEntry, gen uint64) (retry bool, err error) {
	type change struct {
		key      string
		old, cur snapshotEntry
		had, has bool
	}
	for {
		s.mu.Lock()
		if s.indexers.Load() != set {
			s.mu.Unlock()
			return true, nil
		}
		if s.gen == gen {
			if s.indices == nil {
				s.indices = make(map[string]index, len(added.names))
			}
			maps.Copy(s.indices, built)
			s.indexers.Store(set.with(indexersOf(added)))
			s.gen++
			s.mu.Unlock()
			return false, nil
		}
		// Writes happened while we were indexing without the lock: find
		// them, then index them without the lock too.
		var changes []change
		for key, old := range snapshot {
			id, cur, has := s.items.get(key)
			if !has || id != old.id || !sameObject(cur, old.obj) {
				changes = append(changes, change{key: key, old: old, cur: snapshotEntry{id: id, obj: cur}, had: true, has: has})
			}
		}
		s.items.each(func(id int32, key string, obj any) {
			if _, had := snapshot[key]; !had {
				changes = append(changes, change{key: key, cur: snapshotEntry{id: id, obj: obj}, has: true})
			}
		})
		gen = s.gen
		s.mu.Unlock()

		// Remove every old entry before adding any new one: ids freed
		// since the snapshot may have been reused by other changed keys.
		for _, c := range changes {
			if !c.had {
				continue
			}
			var buf [2][]string
			oldVals, oldErr := added.values(buf[:0], c.key, c.old.obj)
			for i, name := range added.names {
				idx := built[name]
				if oldErr != nil {
					for v := range idx {
						idx.remove(v, c.old.id)
					}
					continue
				}
				for _, v := range oldVals[i] {
					idx.remove(v, c.old.id)
				}
			}
			delete(snapshot, c.key)
		}
		for _, c := range changes {
			if !c.has {
				continue
			}
			if err := addToIndices(added, built, c.key, c.cur.id, c.cur.obj); err != nil {
				return false, err
			}
			snapshot[c.key] = c.cur
		}
	}
}

// indexersOf converts a set back to the map form.
func indexersOf(set *indexerSet) Indexers {
	out := make(Indexers, set.len())
	if set == nil {
		return out
	}
	for i, name := range set.names {
		out[name] = set.funcs[i]
	}
	return out
}

// Index returns the objects that share at least one indexed value with obj
// under indexName.
func (s *ThreadSafeStore) Index(indexName string, obj any) ([]any, error) {
	fn := s.indexers.Load().lookup(indexName)
	if fn == nil {
		return nil, fmt.Errorf("cache: index with name %s does not exist", indexName)
	}
	vals, err := callIndexFunc(fn, obj)
	if err != nil {
		return nil, fmt.Errorf("cache: index %q: %w", indexName, err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	idx := s.indices[indexName]
	if len(vals) == 1 {
		return s.objectsLocked(idx[vals[0]]), nil
	}
	var union idSet
	for _, v := range vals {
		if set := idx[v]; set != nil {
			set.each(union.add)
		}
	}
	return s.objectsLocked(&union), nil
}

// objectsLocked returns the objects of ids, which may be nil.
func (s *ThreadSafeStore) objectsLocked(ids *idSet) []any {
	if ids == nil {
		return []any{}
	}
	out := make([]any, 0, ids.len())
	ids.each(func(id int32) {
		_, obj := s.items.entry(id)
		out = append(out, obj)
	})
	return out
}

// ByIndex returns the objects indexed under indexedValue by indexName.
func (s *ThreadSafeStore) ByIndex(indexName, indexedValue string) ([]any, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	idx, ok := s.indices[indexName]
	if !ok {
		return nil, fmt.Errorf("cache: index with name %s does not exist", indexName)
	}
	return s.objectsLocked(idx[indexedValue]), nil
}

// rangeIndex calls fn for each object indexed under indexedValue while
// holding the read lock, and reports whether the index exists. fn must not
// call into s; listers use it to avoid an intermediate slice.
func (s *ThreadSafeStore) rangeIndex(indexName, indexedValue string, fn func(obj any)) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	idx, ok := s.indices[indexName]
	if !ok {
		return false
	}
	if set := idx[indexedValue]; set != nil {
		set.each(func(id int32) {
			_, obj := s.items.entry(id)
			fn(obj)
		})
	}
	return true
}

// IndexKeys returns the sorted keys indexed under indexedValue by
// indexName.
func (s *ThreadSafeStore) IndexKeys(indexName, indexedValue string) ([]string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	idx, ok := s.indices[indexName]
	if !ok {
		return nil, fmt.Errorf("cache: index with name %s does not exist", indexName)
	}
	set := idx[indexedValue]
	if set == nil {
		return []string{}, nil
	}
	keys := make([]string, 0, set.len())
	set.each(func(id int32) {
		key, _ := s.items.entry(id)
		keys = append(keys, key)
	})
	slices.Sort(keys)
	return keys, nil
}

// ListIndexFuncValues returns the sorted values indexName currently holds.
// An unknown index yields nil.
func (s *ThreadSafeStore) ListIndexFuncValues(indexName string) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	idx := s.indices[indexName]
	if len(idx) == 0 {
		return nil
	}
	return slices.Sorted(maps.Keys(idx))
}

// GetIndexers returns a copy of the index functions.
func (s *ThreadSafeStore) GetIndexers() Indexers {
	return indexersOf(s.indexers.Load())
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
