package cache

import (
	"fmt"
	"maps"
	"slices"
)

// This file holds the index half of ThreadSafeStore: building indexes,
// adding indexers to a populated store, and the index queries.

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
