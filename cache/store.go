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
	ListKeys() []string
	GetByKey(key string) (item any, exists bool, err error)
}

// NewStore returns an empty [Store] that keys objects with keyFunc. Use
// [DeletionHandlingMetaNamespaceKeyFunc] for a store fed by a [DeltaFIFO].
func NewStore(keyFunc KeyFunc) Store {
	return &keyedStore{keyFunc: keyFunc, ts: NewThreadSafeStore(nil)}
}

// NewIndexer returns an empty [Indexer] that keys objects with keyFunc and
// indexes them with indexers. Informers use
// Indexers{NamespaceIndex: MetaNamespaceIndexFunc}.
func NewIndexer(keyFunc KeyFunc, indexers Indexers) Indexer {
	return &keyedStore{keyFunc: keyFunc, ts: NewThreadSafeStore(indexers)}
}

// keyedStore is a ThreadSafeStore whose keys come from a KeyFunc. It is safe
// for concurrent use because ThreadSafeStore is.
type keyedStore struct {
	keyFunc KeyFunc
	ts      *ThreadSafeStore
}

var (
	_ Indexer      = (*keyedStore)(nil)
	_ KnownObjects = (*keyedStore)(nil)
)

func (c *keyedStore) key(obj any) (string, error) {
	if c.keyFunc == nil {
		return "", KeyError{Obj: obj, Err: errNoKeyFunc}
	}
	key, err := c.keyFunc(obj)
	if err != nil {
		return "", KeyError{Obj: obj, Err: err}
	}
	return key, nil
}

// Add implements [Store].
func (c *keyedStore) Add(obj any) error {
	key, err := c.key(obj)
	if err != nil {
		return err
	}
	return c.ts.Add(key, obj)
}

// Update implements [Store].
func (c *keyedStore) Update(obj any) error {
	key, err := c.key(obj)
	if err != nil {
		return err
	}
	return c.ts.Update(key, obj)
}

// upsert stores obj and returns the object it replaced, computing obj's key
// once: an informer applies every delta this way.
func (c *keyedStore) upsert(obj any) (old any, existed bool, err error) {
	key, err := c.key(obj)
	if err != nil {
		return nil, false, err
	}
	return c.ts.put(key, obj)
}

// Delete implements [Store].
func (c *keyedStore) Delete(obj any) error {
	key, err := c.key(obj)
	if err != nil {
		return err
	}
	c.ts.DeleteWithObject(key, obj)
	return nil
}

// List implements [Store].
func (c *keyedStore) List() []any { return c.ts.List() }

// ListKeys implements [Store].
func (c *keyedStore) ListKeys() []string { return c.ts.ListKeys() }

// Get implements [Store].
func (c *keyedStore) Get(obj any) (any, bool, error) {
	key, err := c.key(obj)
	if err != nil {
		return nil, false, err
	}
	return c.GetByKey(key)
}

// GetByKey implements [Store].
func (c *keyedStore) GetByKey(key string) (any, bool, error) {
	item, exists := c.ts.Get(key)
	return item, exists, nil
}

// Replace implements [Store]. A key error leaves the store unchanged.
func (c *keyedStore) Replace(list []any, resourceVersion string) error {
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

// Resync implements [Store]; it does nothing.
func (c *keyedStore) Resync() error { return nil }

// Bookmark implements [Store].
func (c *keyedStore) Bookmark(resourceVersion string) { c.ts.Bookmark(resourceVersion) }

// LastStoreSyncResourceVersion implements [Store].
func (c *keyedStore) LastStoreSyncResourceVersion() string {
	return c.ts.LastStoreSyncResourceVersion()
}

// Index implements [Indexer].
func (c *keyedStore) Index(indexName string, obj any) ([]any, error) {
	return c.ts.Index(indexName, obj)
}

// IndexKeys implements [Indexer].
func (c *keyedStore) IndexKeys(indexName, indexedValue string) ([]string, error) {
	return c.ts.IndexKeys(indexName, indexedValue)
}

// ListIndexFuncValues implements [Indexer].
func (c *keyedStore) ListIndexFuncValues(indexName string) []string {
	return c.ts.ListIndexFuncValues(indexName)
}

// ByIndex implements [Indexer].
func (c *keyedStore) ByIndex(indexName, indexedValue string) ([]any, error) {
	return c.ts.ByIndex(indexName, indexedValue)
}

// GetIndexers implements [Indexer].
func (c *keyedStore) GetIndexers() Indexers { return c.ts.GetIndexers() }

// AddIndexers implements [Indexer].
func (c *keyedStore) AddIndexers(newIndexers Indexers) error {
	return c.ts.AddIndexers(newIndexers)
}
