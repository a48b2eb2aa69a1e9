package cache

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
