package cache

// Store is a keyed collection of objects: what a [Reflector] writes and what
// informers expose. Keys come from the store's [KeyFunc].
//
// Objects returned by a Store are shared with the store and every other
// reader: they must not be mutated. Copy an object before changing it.
type Store interface {
	// Add stores obj under its key, replacing any previous object.
	Add(obj any) error
	// Update stores obj under its key, replacing any previous object.
	Update(obj any) error
	// Delete removes the object stored under obj's key. obj may be a
	// [DeletedFinalStateUnknown] when the key function accepts it.
	Delete(obj any) error
	// List returns every stored object, in no particular order.
	List() []any
	// ListKeys returns every storage key, in no particular order.
	ListKeys() []string
	// Get returns the object stored under obj's key.
	Get(obj any) (item any, exists bool, err error)
	// GetByKey returns the object stored under key.
	GetByKey(key string) (item any, exists bool, err error)
	// Replace discards the contents of the store and stores list instead;
	// resourceVersion is the version of the list.
	Replace(list []any, resourceVersion string) error
	// Resync is called periodically by a [Reflector]; plain stores have
	// nothing to do, queues re-deliver their known objects.
	Resync() error
	// Bookmark records that the store is current as of resourceVersion.
	Bookmark(resourceVersion string)
	// LastStoreSyncResourceVersion returns the last resourceVersion written
	// by Add, Update, Delete, Replace or Bookmark.
	LastStoreSyncResourceVersion() string
}

// KnownObjects is what a [DeltaFIFO] needs from the store its consumer
// maintains: the keys it holds and the object under a key. Every [Store]
// satisfies it.
type KnownObjects interface {
	// ListKeys returns every key the store holds.
	ListKeys() []string
	// GetByKey returns the object stored under key.
	GetByKey(key string) (item any, exists bool, err error)
}

// NewStore returns an empty store that keys objects with keyFunc. Use
// [DeletionHandlingMetaNamespaceKeyFunc] for a store fed by a [DeltaFIFO].
func NewStore(keyFunc KeyFunc) *KeyedStore {
	return &KeyedStore{keyFunc: keyFunc, ts: NewThreadSafeStore(nil)}
}

// NewIndexer returns an empty store that keys objects with keyFunc and
// indexes them with indexers. Informers use
// Indexers{NamespaceIndex: MetaNamespaceIndexFunc}.
func NewIndexer(keyFunc KeyFunc, indexers Indexers) *KeyedStore {
	return &KeyedStore{keyFunc: keyFunc, ts: NewThreadSafeStore(indexers)}
}

// KeyedStore is the [Store] and [Indexer] made by [NewStore] and
// [NewIndexer]: a [ThreadSafeStore] whose keys come from a [KeyFunc]. It is
// what a [SharedIndexInformer] keeps its objects in.
//
// A KeyedStore is safe for concurrent use. Objects it returns are shared
// with the store and every other reader and must not be mutated. Index
// functions run without its lock held; one that fails makes the write
// return the error and leaves the store unchanged. The zero value is not
// usable: make one with NewStore or NewIndexer, whose key function it
// needs.
type KeyedStore struct {
	keyFunc KeyFunc
	ts      *ThreadSafeStore
}

var (
	_ Indexer      = (*KeyedStore)(nil)
	_ KnownObjects = (*KeyedStore)(nil)
)

func (c *KeyedStore) key(obj any) (string, error) {
	if c.keyFunc == nil {
		return "", KeyError{Obj: obj, Err: errNoKeyFunc}
	}
	key, err := c.keyFunc(obj)
	if err != nil {
		return "", KeyError{Obj: obj, Err: err}
	}
	return key, nil
}

// Add stores obj under its key, replacing any object stored there, and
// updates every index. It fails with a [KeyError] when obj's key cannot be
// computed, or when an index function fails on obj; then nothing changes.
func (c *KeyedStore) Add(obj any) error {
	key, err := c.key(obj)
	if err != nil {
		return err
	}
	return c.ts.Add(key, obj)
}

// Update is [KeyedStore.Add]: a store does not distinguish creation from
// modification.
func (c *KeyedStore) Update(obj any) error {
	key, err := c.key(obj)
	if err != nil {
		return err
	}
	return c.ts.Update(key, obj)
}

// putKeyed stores obj under key, which the caller computed with c's key
// function, and returns the object it replaced: an informer applies every
// delta this way, with the key its queue already computed.
func (c *KeyedStore) putKeyed(key string, obj any) (old any, existed bool, err error) {
	return c.ts.put(key, obj)
}

// deleteKeyed removes key, computed with c's key function, recording obj's
// resourceVersion, and returns the object it held.
func (c *KeyedStore) deleteKeyed(key string, obj any) (old any, existed bool) {
	return c.ts.remove(key, obj)
}

// Delete removes the object stored under obj's key, if any; obj may be a
// [DeletedFinalStateUnknown] when the key function accepts it. When obj has
// metadata, its resourceVersion becomes the last written one. It fails only
// when obj's key cannot be computed.
func (c *KeyedStore) Delete(obj any) error {
	key, err := c.key(obj)
	if err != nil {
		return err
	}
	c.ts.DeleteWithObject(key, obj)
	return nil
}

// List returns every stored object, in no particular order.
func (c *KeyedStore) List() []any { return c.ts.List() }

// ListKeys returns every storage key, in no particular order.
func (c *KeyedStore) ListKeys() []string { return c.ts.ListKeys() }

// Len returns the number of stored objects.
func (c *KeyedStore) Len() int { return c.ts.Len() }

// Get returns the object stored under obj's key. It fails only when obj's
// key cannot be computed.
func (c *KeyedStore) Get(obj any) (item any, exists bool, err error) {
	key, err := c.key(obj)
	if err != nil {
		return nil, false, err
	}
	return c.GetByKey(key)
}

// GetByKey returns the object stored under key. It never fails.
func (c *KeyedStore) GetByKey(key string) (item any, exists bool, err error) {
	item, exists = c.ts.Get(key)
	return item, exists, nil
}

// Replace discards the contents of the store and stores list instead,
// rebuilding every index, and records resourceVersion as the last written
// one. A key error or a failing index function leaves the store unchanged.
func (c *KeyedStore) Replace(list []any, resourceVersion string) error {
	var table keyTable[any]
	for _, obj := range list {
		key, err := c.key(obj)
		if err != nil {
			return err
		}
		table.put(key, obj)
	}
	return c.ts.replaceTable(table, resourceVersion)
}

// Resync does nothing: a plain store has no one to re-deliver objects to.
// It exists so that a KeyedStore can be a [Reflector]'s store.
func (c *KeyedStore) Resync() error { return nil }

// Bookmark records resourceVersion as the last one the store has seen,
// without changing its contents.
func (c *KeyedStore) Bookmark(resourceVersion string) { c.ts.Bookmark(resourceVersion) }

// LastStoreSyncResourceVersion returns the last resourceVersion written by
// Add, Update, Delete, Replace or Bookmark (see
// [ThreadSafeStore.LastStoreSyncResourceVersion]).
func (c *KeyedStore) LastStoreSyncResourceVersion() string {
	return c.ts.LastStoreSyncResourceVersion()
}

// Index returns the objects that share at least one indexed value with obj
// under the index indexName. An unknown index, or an index function that
// fails on obj, is an error.
func (c *KeyedStore) Index(indexName string, obj any) ([]any, error) {
	return c.ts.Index(indexName, obj)
}

// IndexKeys returns the sorted storage keys of the objects indexed under
// indexedValue by indexName. An unknown index is an error.
func (c *KeyedStore) IndexKeys(indexName, indexedValue string) ([]string, error) {
	return c.ts.IndexKeys(indexName, indexedValue)
}

// ListIndexFuncValues returns the sorted indexed values of indexName that
// have at least one object. An unknown index yields nil.
func (c *KeyedStore) ListIndexFuncValues(indexName string) []string {
	return c.ts.ListIndexFuncValues(indexName)
}

// ByIndex returns the objects indexed under indexedValue by indexName. An
// unknown index is an error.
func (c *KeyedStore) ByIndex(indexName, indexedValue string) ([]any, error) {
	return c.ts.ByIndex(indexName, indexedValue)
}

// GetIndexers returns a copy of the index functions.
func (c *KeyedStore) GetIndexers() Indexers { return c.ts.GetIndexers() }

// AddIndexers adds index functions and indexes every stored object with
// them; it may be called while other goroutines write. A name that is
// already registered, or an index function that fails, is an error, and
// then nothing changes.
func (c *KeyedStore) AddIndexers(newIndexers Indexers) error {
	return c.ts.AddIndexers(newIndexers)
}
