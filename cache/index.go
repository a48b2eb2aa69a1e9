package cache

import (
	"fmt"
	"maps"
	"slices"
)

// IndexFunc computes the indexed values of an object: the values under which
// [Indexer.ByIndex] finds it. An object may have zero, one or many values.
// Index functions must be deterministic and must not mutate the object; they
// are never called while a store lock is held, so they may be slow, but they
// must not call back into the store that indexes with them.
type IndexFunc func(obj any) ([]string, error)

// Indexers maps index names to index functions.
type Indexers map[string]IndexFunc

// NamespaceIndex is the name of the index by namespace, which informers
// register by default and [Lister.ByNamespace] and [ListAllByNamespace] use.
const NamespaceIndex = "namespace"

// MetaNamespaceIndexFunc indexes an object by its namespace. Cluster-scoped
// objects are indexed under "". Objects without metadata yield an error
// wrapping [ErrNoMeta].
func MetaNamespaceIndexFunc(obj any) ([]string, error) {
	m, err := metaOf(obj)
	if err != nil {
		return nil, err
	}
	return []string{m.GetNamespace()}, nil
}

// Indexer is a [Store] with named indexes. Three kinds of string appear in
// its methods: the storage key of an object (see [KeyFunc]), the name of an
// index (a key of [Indexers]), and an indexed value (one of the strings an
// [IndexFunc] returns).
//
// Objects returned by an Indexer are shared with the store and every other
// reader: they must not be mutated.
type Indexer interface {
	Store
	// Index returns the objects that share at least one indexed value with
	// obj under the named index.
	Index(indexName string, obj any) ([]any, error)
	// IndexKeys returns the sorted storage keys of the objects indexed under
	// indexedValue.
	IndexKeys(indexName, indexedValue string) ([]string, error)
	// ListIndexFuncValues returns the sorted indexed values that currently
	// have at least one object. An unknown index yields nil.
	ListIndexFuncValues(indexName string) []string
	// ByIndex returns the objects indexed under indexedValue.
	ByIndex(indexName, indexedValue string) ([]any, error)
	// GetIndexers returns a copy of the index functions.
	GetIndexers() Indexers
	// AddIndexers adds index functions and indexes every stored object
	// with them. A name that is already registered is an error.
	AddIndexers(newIndexers Indexers) error
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
