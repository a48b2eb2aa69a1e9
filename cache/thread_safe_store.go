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
	items map[string]any
	// guarded by mu; index name → indexed value → set of keys. Every name
	// of indexers has an entry; empty value sets are deleted.
	indices map[string]index
	// guarded by mu; the last resourceVersion written (see
	// LastStoreSyncResourceVersion).
	rv string
	// guarded by mu; incremented on every change, so that a writer that
	// computed index values without the lock can tell whether the store
	// moved under it.
	gen uint64
}

// index maps an indexed value to the set of keys indexed under it.
type index map[string]map[string]struct{}

func (idx index) add(value, key string) {
	set := idx[value]
	if set == nil {
		set = make(map[string]struct{}, 1)
		idx[value] = set
	}
	set[key] = struct{}{}
}

// remove deletes key from value's set, and the set itself once it is empty,
// so that values that no object has any more do not accumulate
// (kubernetes#84959).
func (idx index) remove(value, key string) {
	set := idx[value]
	if set == nil {
		return
	}
	delete(set, key)
	if len(set) == 0 {
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
		old, had := s.items[key]
		switch {
		case !had || set == nil:
			s.storeLocked(set, key, obj, nil, newVals)
			s.mu.Unlock()
			return nil
		case sameObject(old, obj):
			// Storing the object that is already there: its index values
			// cannot have changed, because stored objects are immutable.
			s.items[key] = obj
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
			s.purgeKeyLocked(set, key)
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
	cur, ok := s.items[key]
	return ok && sameObject(cur, old)
}

// storeLocked writes obj under key and moves key from oldVals to newVals in
// every index. oldVals is nil when key had no indexed object.
func (s *ThreadSafeStore) storeLocked(set *indexerSet, key string, obj any, oldVals, newVals [][]string) {
	if s.items == nil {
		s.items = make(map[string]any)
	}
	s.items[key] = obj
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
			idx.remove(v, key)
		}
		for _, v := range nv {
			idx.add(v, key)
		}
	}
	s.setRVLocked(obj)
	s.gen++
}

// purgeKeyLocked removes key from every index by scanning all values. It is
// the fallback when the indexed values of the stored object are unknown.
func (s *ThreadSafeStore) purgeKeyLocked(set *indexerSet, key string) {
	for _, name := range set.names {
		idx := s.indices[name]
		for v := range idx {
			idx.remove(v, key)
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
		old, had := s.items[key]
		if !had || set == nil {
			if had {
				delete(s.items, key)
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
		if oldErr != nil {
			s.purgeKeyLocked(set, key)
		} else {
			for i, name := range set.names {
				idx := s.indices[name]
				for _, v := range oldVals[i] {
					idx.remove(v, key)
				}
			}
		}
		delete(s.items, key)
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
	item, exists = s.items[key]
	return item, exists
}

// List returns every stored object, in no particular order.
func (s *ThreadSafeStore) List() []any {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]any, 0, len(s.items))
	for _, obj := range s.items {
		out = append(out, obj)
	}
	return out
}

// ListKeys returns every storage key, in no particular order.
func (s *ThreadSafeStore) ListKeys() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]string, 0, len(s.items))
	for key := range s.items {
		out = append(out, key)
	}
	return out
}

// Len returns the number of stored objects.
func (s *ThreadSafeStore) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.items)
}

// rangeItems calls fn for every stored object while holding the read lock.
// fn must not call into s; it is used by [DeltaFIFO] to read its known
// objects without copying the key list.
func (s *ThreadSafeStore) rangeItems(fn func(key string, obj any)) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for key, obj := range s.items {
		fn(key, obj)
	}
}

// Replace discards the contents of the store and stores items instead,
// rebuilding every index, and records resourceVersion as the last written
// one. The store takes ownership of items: the caller must not use the map
// afterwards. If an index function fails, Replace returns the error and the
// store is unchanged.
func (s *ThreadSafeStore) Replace(items map[string]any, resourceVersion string) error {
	if items == nil {
		items = make(map[string]any)
	}
	for {
		set := s.indexers.Load()
		indices, err := buildIndices(set, items)
		if err != nil {
			return err
		}
		s.mu.Lock()
		if s.indexers.Load() != set {
			s.mu.Unlock()
			continue
		}
		s.items = items
		if set != nil {
			s.indices = indices
		}
		s.rv = resourceVersion
		s.gen++
		s.mu.Unlock()
		return nil
	}
}

// buildIndices indexes items with every function of set. It calls user code
// and must run without mu.
func buildIndices(set *indexerSet, items map[string]any) (map[string]index, error) {
	if set == nil {
		return nil, nil
	}
	indices := make(map[string]index, len(set.names))
	for _, name := range set.names {
		indices[name] = index{}
	}
	var buf [2][]string
	for key, obj := range items {
		vals, err := set.values(buf[:0], key, obj)
		if err != nil {
			return nil, err
		}
		for i, name := range set.names {
			idx := indices[name]
			for _, v := range vals[i] {
				idx.add(v, key)
			}
		}
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
		snapshot := maps.Clone(s.items)
		gen := s.gen
		s.mu.Unlock()

		built, err := buildIndices(added, snapshot)
		if err != nil {
			return err
		}
		retry, err := s.installIndices(set, added, built, snapshot, gen)
		if err != nil || !retry {
			return err
		}
	}
}

// installIndices catches built (indices of added over snapshot, taken at
// generation gen) up with writes made since, and installs it once a round
// finds no new writes. It returns retry when other indexers were installed
// meanwhile.
func (s *ThreadSafeStore) installIndices(set, added *indexerSet, built map[string]index, snapshot map[string]any, gen uint64) (retry bool, err error) {
	type change struct {
		key      string
		old, cur any
		had, has bool
	}
	for {
		s.mu.Lock()
		if s.indexers.Load() != set {
			s.mu.Unlock()
			return true, nil
		}
		if s.gen == gen {
			merged := set.with(indexersOf(added))
			if s.indices == nil {
				s.indices = make(map[string]index, len(added.names))
			}
			maps.Copy(s.indices, built)
			s.indexers.Store(merged)
			s.gen++
			s.mu.Unlock()
			return false, nil
		}
		// Writes happened while we were indexing without the lock: find
		// them, then index them without the lock too.
		var changes []change
		for key, old := range snapshot {
			cur, has := s.items[key]
			if !has || !sameObject(cur, old) {
				changes = append(changes, change{key: key, old: old, cur: cur, had: true, has: has})
			}
		}
		for key, cur := range s.items {
			if _, had := snapshot[key]; !had {
				changes = append(changes, change{key: key, cur: cur, has: true})
			}
		}
		gen = s.gen
		s.mu.Unlock()

		for _, c := range changes {
			var obuf, nbuf [2][]string
			var oldVals, newVals [][]string
			if c.has {
				if newVals, err = added.values(nbuf[:0], c.key, c.cur); err != nil {
					return false, err
				}
			}
			if c.had {
				var oldErr error
				oldVals, oldErr = added.values(obuf[:0], c.key, c.old)
				if oldErr != nil {
					for _, name := range added.names {
						for v := range built[name] {
							built[name].remove(v, c.key)
						}
					}
					oldVals = nil
				}
			}
			for i, name := range added.names {
				idx := built[name]
				if oldVals != nil {
					for _, v := range oldVals[i] {
						idx.remove(v, c.key)
					}
				}
				if newVals != nil {
					for _, v := range newVals[i] {
						idx.add(v, c.key)
					}
				}
			}
			if c.has {
				snapshot[c.key] = c.cur
			} else {
				delete(snapshot, c.key)
			}
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
	keys := make(map[string]struct{})
	for _, v := range vals {
		maps.Copy(keys, idx[v])
	}
	return s.objectsLocked(keys), nil
}

func (s *ThreadSafeStore) objectsLocked(keys map[string]struct{}) []any {
	out := make([]any, 0, len(keys))
	for key := range keys {
		out = append(out, s.items[key])
	}
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
	for key := range idx[indexedValue] {
		fn(s.items[key])
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
	return slices.Sorted(maps.Keys(idx[indexedValue])), nil
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
