package cache

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// DeltaFIFOOptions configures a [DeltaFIFO]. The zero value means defaults.
type DeltaFIFOOptions struct {
	// KeyFunction computes storage keys. It must agree with the key
	// function of KnownObjects. Defaults to [MetaNamespaceKeyFunc].
	KeyFunction KeyFunc
	// KnownObjects is the store the consumer maintains from the popped
	// deltas, usually the informer's [Indexer]. Replace uses it to find
	// deletions a relist reveals, Resync to re-deliver, Delete to ignore
	// deletions of objects nobody knows. It is read while the queue's lock
	// is held and must not call back into the queue. Defaults to none:
	// Replace then only detects deletions of queued keys, and Resync does
	// nothing.
	KnownObjects KnownObjects
	// EmitDeltaTypeReplaced makes Replace queue [Replaced] deltas instead
	// of [Sync]. Defaults to false, as upstream, for compatibility.
	EmitDeltaTypeReplaced bool
	// Transformer, when set, is applied exactly once to every object given
	// to Add, Update, Delete and Replace before it is queued. It is never
	// applied to tombstones or to the already-transformed objects that
	// Resync re-delivers. Defaults to none.
	Transformer TransformFunc
}

// DeltaFIFO is a queue of changes keyed by object. Each key is queued at
// most once and keeps its position while further changes for it arrive, so
// the consumer sees every key in the order it first changed and with every
// change since it was last popped. It sits between a [Reflector], which
// writes to it as its [Store], and the consumer that pops deltas and applies
// them to the [Indexer] given as KnownObjects.
//
// The rules, the same as upstream client-go's DeltaFIFO:
//
//   - Two consecutive deletions of one key are merged, keeping the one with
//     more information (the watch's final state over a tombstone).
//   - A Delete for a key that is neither queued nor known is ignored: a
//     relist already reported it.
//   - Replace queues a Sync (or Replaced) delta for every listed object and
//     a Deleted [DeletedFinalStateUnknown] for every queued or known key the
//     list lacks, carrying the newest object the queue or store has.
//   - Resync queues a Sync for every known key with nothing queued, so it
//     never delivers a state older than one already queued.
//   - HasSynced is true once the whole first Replace, deletions included,
//     has been popped and processed, or right after a first Add, Update or
//     Delete.
//
// Unlike upstream, process functions run without the queue's lock held, so
// a slow handler does not block the Reflector. The queue still protects a
// key being processed: it is not popped again until processing ends, and
// Replace, Delete and Resync take its in-flight deltas into account as if
// they had already been applied.
//
// A DeltaFIFO is safe for concurrent use. The zero value is an empty queue
// with default options.
type DeltaFIFO struct {
	keyFunc      KeyFunc
	knownObjects KnownObjects
	emitReplaced bool
	transformer  TransformFunc

	mu sync.Mutex
	// cond is signalled when a key is queued, processing ends or the queue
	// closes. Its L is &mu.
	cond sync.Cond
	// guarded by mu; key → deltas not yet popped. Never holds empty Deltas.
	items keyTable[Deltas]
	// guarded by mu; entry ids of the queued keys in items, in order from
	// queue[head], each once.
	queue []int32
	head  int
	// guarded by mu; keys popped and still being processed.
	inflight []inflightKey
	// guarded by mu; populated is set by the first write. initialToPop
	// counts keys of the first Replace not yet popped, initialUnfinished
	// those not yet processed.
	populated         bool
	initialToPop      int
	initialUnfinished int
	// guarded by mu; synced is closed once HasSynced becomes true.
	synced       chan struct{}
	syncedClosed bool
	closed       bool
}

// inflightKey is a key being processed and the newest of its deltas: the
// state the consumer's store will hold once processing ends.
type inflightKey struct {
	key    string
	newest Delta
}

// NewDeltaFIFO returns an empty queue configured by opts.
func NewDeltaFIFO(opts DeltaFIFOOptions) *DeltaFIFO {
	return &DeltaFIFO{
		keyFunc:      opts.KeyFunction,
		knownObjects: opts.KnownObjects,
		emitReplaced: opts.EmitDeltaTypeReplaced,
		transformer:  opts.Transformer,
	}
}

// initLocked makes the zero value usable.
func (f *DeltaFIFO) initLocked() {
	if f.synced == nil {
		f.cond.L = &f.mu
		f.synced = make(chan struct{})
	}
}

// KeyOf returns the key of obj: for [Deltas] that of the newest object, for
// a [DeletedFinalStateUnknown] the key it carries, otherwise what the key
// function returns.
func (f *DeltaFIFO) KeyOf(obj any) (string, error) {
	if d, ok := obj.(Deltas); ok {
		newest := d.Newest()
		if newest == nil {
			return "", ErrZeroLengthDeltas
		}
		obj = newest.Object
	}
	switch d := obj.(type) {
	case DeletedFinalStateUnknown:
		return d.Key, nil
	case *DeletedFinalStateUnknown:
		if d != nil {
			return d.Key, nil
		}
	}
	if f.keyFunc == nil {
		return MetaNamespaceKeyFunc(obj)
	}
	return f.keyFunc(obj)
}

// Transformer returns the transform function of the queue, or nil.
func (f *DeltaFIFO) Transformer() TransformFunc { return f.transformer }

// transform applies the transformer to an object entering the queue.
// Tombstones are skipped: their object has been transformed already.
func (f *DeltaFIFO) transform(obj any) (any, error) {
	if f.transformer == nil || isTombstone(obj) {
		return obj, nil
	}
	out, err := f.transformer(obj)
	if err != nil {
		return nil, fmt.Errorf("cache: DeltaFIFO: transform: %w", err)
	}
	return out, nil
}

// Add queues an [Added] delta for obj.
func (f *DeltaFIFO) Add(obj any) error {
	return f.queueAction(Added, obj)
}

// Update queues an [Updated] delta for obj.
func (f *DeltaFIFO) Update(obj any) error {
	return f.queueAction(Updated, obj)
}

// Delete queues a [Deleted] delta for obj, unless its key is neither queued
// nor known (nor being processed into the known objects): that deletion has
// already been reported by a relist.
func (f *DeltaFIFO) Delete(obj any) error {
	key, obj, err := f.keyAndTransform(obj)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ErrFIFOClosed
	}
	f.initLocked()
	f.populated = true
	f.checkSyncedLocked()
	if f.items.lookup(key) < 0 {
		if f.knownObjects == nil {
			return nil
		}
		if in := f.inflightLocked(key); in != nil {
			if in.newest.Type == Deleted {
				return nil
			}
		} else if _, exists, err := f.knownObjects.GetByKey(key); err == nil && !exists {
			return nil
		}
	}
	f.queueLocked(key, Delta{Type: Deleted, Object: obj})
	return nil
}

// keyAndTransform computes obj's key, then transforms it, before the queue's
// lock is taken: neither may run user code under it.
func (f *DeltaFIFO) keyAndTransform(obj any) (string, any, error) {
	key, err := f.KeyOf(obj)
	if err != nil {
		return "", nil, KeyError{Obj: obj, Err: err}
	}
	obj, err = f.transform(obj)
	if err != nil {
		return "", nil, err
	}
	return key, obj, nil
}

func (f *DeltaFIFO) queueAction(t DeltaType, obj any) error {
	key, obj, err := f.keyAndTransform(obj)
	if err != nil {
		return err
	}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return ErrFIFOClosed
	}
	f.initLocked()
	if !f.populated {
		f.populated = true
		f.checkSyncedLocked()
	}
	f.queueLocked(key, Delta{Type: t, Object: obj})
	f.mu.Unlock()
	return nil
}

// queueLocked appends d to key's deltas, queueing key if it was not, and
// reports whether key was newly queued.
func (f *DeltaFIFO) queueLocked(key string, d Delta) bool {
	id, queued := f.items.insert(key)
	e := f.items.at(id)
	e.val = dedupDeltas(append(e.val, d))
	if !queued {
		f.queue = append(f.queue, id)
		f.cond.Signal()
	}
	return !queued
}

// inflightLocked returns the in-flight entry of key, or nil.
func (f *DeltaFIFO) inflightLocked(key string) *inflightKey {
	for i := range f.inflight {
		if f.inflight[i].key == key {
			return &f.inflight[i]
		}
	}
	return nil
}

// Pop waits until a key is queued, removes it with its deltas, and calls
// process with them; it returns what process returns. The deltas are not
// requeued when process fails. While process runs, the key is not popped
// again, and Replace, Delete and Resync treat its newest delta as already
// applied to the known objects. A panic in process is returned as an error.
//
// Pop returns ctx.Err() when ctx is done (checked before taking a key), and
// [ErrFIFOClosed] once the queue is closed and drained. Several goroutines
// may Pop concurrently; each key is then processed by one of them at a
// time.
func (f *DeltaFIFO) Pop(ctx context.Context, process PopProcessFunc) error {
	if process == nil {
		return errors.New("cache: DeltaFIFO: Pop: nil process function")
	}
	return f.popKeyed(ctx, func(_ string, deltas Deltas, initial bool) error {
		return process(deltas, initial)
	})
}

// popKeyed is Pop whose process function also receives the key, so that an
// informer stores the objects under the key the queue already computed
// instead of computing it again.
func (f *DeltaFIFO) popKeyed(ctx context.Context, process func(key string, deltas Deltas, initial bool) error) error {
	f.mu.Lock()
	f.initLocked()
	var stopWake func() bool
	defer func() {
		if stopWake != nil {
			stopWake()
		}
	}()
	var key string
	var deltas Deltas
	for {
		if err := ctx.Err(); err != nil {
			f.mu.Unlock()
			return err
		}
		var ok bool
		if key, deltas, ok = f.takeLocked(); ok {
			break
		}
		if f.closed && f.items.len() == 0 {
			f.mu.Unlock()
			return ErrFIFOClosed
		}
		if stopWake == nil {
			stopWake = context.AfterFunc(ctx, func() {
				f.mu.Lock()
				f.cond.Broadcast()
				f.mu.Unlock()
			})
		}
		f.cond.Wait()
	}
	initial := f.initialToPop > 0
	if initial {
		f.initialToPop--
	}
	f.inflight = append(f.inflight, inflightKey{key: key, newest: deltas[len(deltas)-1]})
	f.mu.Unlock()

	defer f.finish(key, initial)
	return callProcess(process, key, deltas, initial)
}

// finish ends the processing of key. It runs deferred, so that the
// key is released even if process exits its goroutine (runtime.Goexit).
func (f *DeltaFIFO) finish(key string, initial bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.inflight {
		if f.inflight[i].key == key {
			last := len(f.inflight) - 1
			f.inflight[i] = f.inflight[last]
			f.inflight[last] = inflightKey{}
			f.inflight = f.inflight[:last]
			break
		}
	}
	if initial {
		f.initialUnfinished--
		f.checkSyncedLocked()
	}
	if f.items.lookup(key) >= 0 {
		// A Pop may be waiting for this key to finish.
		f.cond.Broadcast()
	}
}

// takeLocked removes and returns the first queued key that is not being
// processed, with its deltas.
func (f *DeltaFIFO) takeLocked() (string, Deltas, bool) {
	i := f.head
	for ; i < len(f.queue); i++ {
		if len(f.inflight) == 0 || f.inflightLocked(f.items.at(f.queue[i]).key) == nil {
			break
		}
	}
	if i == len(f.queue) {
		return "", nil, false
	}
	id := f.queue[i]
	if i == f.head {
		f.head++
	} else {
		copy(f.queue[i:], f.queue[i+1:])
		f.queue = f.queue[:len(f.queue)-1]
	}
	switch {
	case f.head == len(f.queue):
		f.queue = f.queue[:0]
		f.head = 0
	case f.head >= 1024 && f.head > len(f.queue)/2:
		n := copy(f.queue, f.queue[f.head:])
		f.queue = f.queue[:n]
		f.head = 0
	}
	e := f.items.at(id)
	key, deltas := e.key, e.val
	f.items.delete(key)
	return key, deltas, true
}

// callProcess runs process and turns a panic into an error, so that the
// queue's bookkeeping survives a broken handler.
func callProcess(process func(string, Deltas, bool) error, key string, deltas Deltas, initial bool) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("cache: DeltaFIFO: process panicked: %v", r)
		}
	}()
	return process(key, deltas, initial)
}

// Close closes the queue: writes fail with [ErrFIFOClosed], and Pop returns
// it once the queued keys are drained. Close is idempotent.
func (f *DeltaFIFO) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.initLocked()
	f.closed = true
	f.cond.Broadcast()
}

// IsClosed reports whether Close has been called.
func (f *DeltaFIFO) IsClosed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.closed
}

// Len returns the number of queued keys.
func (f *DeltaFIFO) Len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.items.len()
}

// HasSynced reports whether the initial population has been delivered: the
// objects and tombstones queued by the first Replace have all been popped
// and processed, or an Add, Update or Delete came before any Replace.
func (f *DeltaFIFO) HasSynced() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.syncedClosed
}

// Synced returns a channel that is closed when HasSynced becomes true.
func (f *DeltaFIFO) Synced() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.initLocked()
	return f.synced
}

func (f *DeltaFIFO) checkSyncedLocked() {
	if f.populated && f.initialUnfinished == 0 && !f.syncedClosed {
		f.syncedClosed = true
		close(f.synced)
	}
}
