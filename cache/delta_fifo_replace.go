package cache

// This file holds how a relist (Replace) and a periodic resync (Resync)
// enter a DeltaFIFO: the rules that turn a full listing into per-key deltas
// and tombstones.

// Replace queues the state of a relist: a [Sync] (or [Replaced]) delta for
// every object of list, then a Deleted [DeletedFinalStateUnknown] for every
// key that is queued, being processed or known but absent from list. A
// tombstone carries the newest object the queue has for its key, else the
// known object (nil if the lookup fails). resourceVersion is not used by the
// queue. Keys and transforms are computed before anything is queued, so an
// error leaves the queue unchanged.
func (f *DeltaFIFO) Replace(list []any, resourceVersion string) error {
	type listed struct {
		key string
		obj any
	}
	entries := make([]listed, len(list))
	for i, obj := range list {
		key, err := f.KeyOf(obj)
		if err != nil {
			return KeyError{Obj: obj, Err: err}
		}
		if obj, err = f.transform(obj); err != nil {
			return err
		}
		entries[i] = listed{key: key, obj: obj}
	}
	action := Sync
	if f.emitReplaced {
		action = Replaced
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ErrFIFOClosed
	}
	f.initLocked()

	// Keys queued before this relist; those the list lacks get tombstones.
	// Every listed key is in items once queued, so after the loop "not in
	// items" means "neither listed nor queued before".
	var unlisted map[string]struct{}
	if f.items.len() > 0 {
		unlisted = make(map[string]struct{}, f.items.len())
		f.items.each(func(_ int32, key string, _ Deltas) {
			unlisted[key] = struct{}{}
		})
	}
	listedKeys := 0
	for _, e := range entries {
		if f.queueLocked(e.key, Delta{Type: action, Object: e.obj}) {
			listedKeys++
		} else if _, ok := unlisted[e.key]; ok {
			delete(unlisted, e.key)
			listedKeys++
		}
	}

	deletions := 0
	if len(unlisted) > 0 {
		for _, id := range f.queue[f.head:] {
			e := f.items.at(id)
			if _, ok := unlisted[e.key]; !ok {
				continue
			}
			f.queueLocked(e.key, Delta{Type: Deleted, Object: tombstone(e.key, e.val.Newest())})
			deletions++
		}
	}
	for _, in := range f.inflight {
		if f.items.lookup(in.key) >= 0 || in.newest.Type == Deleted {
			continue
		}
		f.queueLocked(in.key, Delta{Type: Deleted, Object: tombstone(in.key, &in.newest)})
		deletions++
	}
	if f.knownObjects != nil {
		f.rangeKnownLocked(func(key string, obj any) {
			if f.items.lookup(key) >= 0 || f.inflightLocked(key) != nil {
				return
			}
			f.queueLocked(key, Delta{Type: Deleted, Object: DeletedFinalStateUnknown{Key: key, Obj: obj}})
			deletions++
		})
	}

	if !f.populated {
		f.populated = true
		f.initialToPop = listedKeys + deletions
		f.initialUnfinished = f.initialToPop
		f.checkSyncedLocked()
	}
	return nil
}

// tombstone returns the tombstone of key whose newest state is d.
func tombstone(key string, d *Delta) DeletedFinalStateUnknown {
	var obj any
	if d != nil {
		obj = d.Object
		switch t := obj.(type) {
		case DeletedFinalStateUnknown:
			obj = t.Obj
		case *DeletedFinalStateUnknown:
			obj = t.Obj
		}
	}
	return DeletedFinalStateUnknown{Key: key, Obj: obj}
}

// knownRanger is implemented by this package's stores: it visits keys and
// objects in one pass under the store's read lock, without copying the key
// list or looking each key up again.
type knownRanger interface {
	rangeItems(fn func(key string, obj any))
}

func (s *KeyedStore) rangeItems(fn func(key string, obj any)) { s.ts.rangeItems(fn) }

// rangeKnownLocked calls fn for every known key and its object. The object
// is nil when a lookup fails or finds nothing.
func (f *DeltaFIFO) rangeKnownLocked(fn func(key string, obj any)) {
	if r, ok := f.knownObjects.(knownRanger); ok {
		r.rangeItems(fn)
		return
	}
	for _, key := range f.knownObjects.ListKeys() {
		obj, exists, err := f.knownObjects.GetByKey(key)
		if err != nil || !exists {
			obj = nil
		}
		fn(key, obj)
	}
}

// Resync queues a [Sync] delta with the known object for every known key
// that has no queued deltas and is not being processed: queued deltas
// already carry a newer state. Without KnownObjects it does nothing.
func (f *DeltaFIFO) Resync() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ErrFIFOClosed
	}
	f.initLocked()
	if f.knownObjects == nil {
		return nil
	}
	f.rangeKnownLocked(func(key string, obj any) {
		if obj == nil {
			return
		}
		if f.items.lookup(key) >= 0 || f.inflightLocked(key) != nil {
			return
		}
		f.queueLocked(key, Delta{Type: Sync, Object: obj})
	})
	return nil
}
