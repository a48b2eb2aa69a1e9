package cache

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
)

// minimumResyncPeriod is the shortest resync period a handler gets.
const minimumResyncPeriod = time.Second

var (
	errInformerStopped = errors.New("cache: informer has stopped")
	errInformerStarted = errors.New("cache: informer has already started")
	// errNilListerWatcher is logged by Run of an informer built without a
	// ListerWatcher.
	errNilListerWatcher = errors.New("cache: informer has a nil ListerWatcher")
)

// SharedIndexInformerOptions configures a [SharedIndexInformer]. The zero
// value means defaults.
type SharedIndexInformerOptions struct {
	// ResyncPeriod is the resync period of handlers added without one, and
	// the informer's initial resync check period. Defaults to 0: the
	// informer never resyncs, whatever its handlers ask for.
	ResyncPeriod time.Duration
	// Indexers are the indexes of the informer's store, in addition to
	// [NamespaceIndex], which is always present.
	Indexers Indexers
	// Reflector configures the informer's [Reflector]. Its ResyncPeriod,
	// ShouldResync and Transform are set by the informer (see
	// [SharedIndexInformer.SetTransform]).
	Reflector ReflectorOptions
}

// HandlerOptions configures one handler of a [SharedIndexInformer].
type HandlerOptions struct {
	// ResyncPeriod, when not nil, is the handler's resync period; nil means
	// the informer's ResyncPeriod. Zero means no resync. Periods under one
	// second are raised to one second; see
	// [SharedIndexInformer.AddEventHandlerWithOptions] for how the
	// informer's check period limits them.
	ResyncPeriod *time.Duration
}

// SharedIndexInformer keeps an indexed, in-memory copy of one resource and
// tells any number of handlers about its changes. Its pipeline is a
// [Reflector] that lists and watches the resource into a [DeltaFIFO], and a
// loop that pops the deltas, applies them to the [Indexer] and hands a
// notification to each handler's own buffer.
//
// Guarantees:
//
//   - The indexer is updated before the handlers are told, so a handler
//     that reads the indexer sees at least the state it is told of.
//   - Each handler receives its notifications in order from its own
//     goroutine, through an unbounded buffer: a slow handler delays only
//     itself. A panicking handler is recovered and logged and keeps
//     receiving notifications.
//   - A handler added after the informer started first receives every
//     current object as an add with isInInitialList set, then the changes
//     that follow, with nothing missed and nothing repeated.
//   - Resync notifications (updates whose old and new resourceVersion are
//     equal) reach only the handlers whose resync is due. After a relist,
//     handlers are therefore told only of objects that changed, whether or
//     not the informer resyncs (client-go delivers every unchanged object
//     to every handler when the informer's resync period is zero).
//   - [SharedIndexInformer.Run] returns only after every goroutine it
//     started has exited. An informer runs once.
//   - Never a silent wrong type. The store holds only objects of the type
//     the informer was built with, as returned by its transform. A list
//     that delivers any other object (or one the transform fails on) fails
//     whole: nothing of it is stored, the error goes to the watch error
//     handler, the reflector backs off and relists, and HasSynced stays
//     false until a list succeeds entirely. Such an object in a watch ends
//     the watch, reported the same way, and is followed by a relist. So a
//     persistently bad object keeps an informer that never synced
//     unsynced, and relisting, loudly; an informer that had synced stays
//     HasSynced true and keeps the objects it holds, which no longer
//     follow the API until the object is fixed. client-go drops such
//     objects with a log line and reports the informer synced, so that a
//     quota controller would count zero usage.
//
// A SharedIndexInformer is safe for concurrent use. Objects in its store and
// handed to handlers must not be mutated.
type SharedIndexInformer struct {
	lw          ListerWatcher
	exampleType runtime.Object
	indexer     *KeyedStore
	opts        SharedIndexInformerOptions
	processor   processor
	// arenas lets the indexer hold listed objects in place without their
	// lists' arrays outliving them (see arenaSet).
	arenas arenaSet

	// blockDeltas is held while a delta is applied and distributed, and
	// while a handler is added: a late handler's replay of the store and
	// the notifications that follow it neither overlap nor leave a gap.
	blockDeltas sync.Mutex

	mu sync.Mutex
	// guarded by mu
	started, stopped  bool
	resyncCheckPeriod time.Duration
	transform         TransformFunc
	watchErrorHandler func(ctx context.Context, r *Reflector, err error)
	fifo              *DeltaFIFO
	reflector         *Reflector
}

// NewSharedIndexInformer returns an informer for the resource lw lists and
// watches. exampleObject is an object of the type the informer's store
// holds, after the transform set with [SharedIndexInformer.SetTransform] if
// any; a nil exampleObject accepts objects of any type. An object of
// another type is an error, never stored (see [SharedIndexInformer]), and a
// typed handler that cannot receive exampleObject's type is refused by
// [SharedIndexInformer.AddEventHandler]. It starts nothing: call
// [SharedIndexInformer.Run]. An informer with a nil lw never syncs: its Run
// logs the error and returns.
func NewSharedIndexInformer(lw ListerWatcher, exampleObject runtime.Object, opts SharedIndexInformerOptions) *SharedIndexInformer {
	indexers := Indexers{NamespaceIndex: MetaNamespaceIndexFunc}
	for name, f := range opts.Indexers {
		indexers[name] = f
	}
	return &SharedIndexInformer{
		lw:                lw,
		exampleType:       exampleObject,
		indexer:           &KeyedStore{keyFunc: DeletionHandlingMetaNamespaceKeyFunc, ts: NewThreadSafeStore(indexers)},
		opts:              opts,
		resyncCheckPeriod: opts.ResyncPeriod,
	}
}

// GetIndexer returns the informer's store. It is filled by Run; read it
// once the informer has synced.
func (s *SharedIndexInformer) GetIndexer() Indexer { return s.indexer }

// GetStore returns the informer's store as a [Store].
func (s *SharedIndexInformer) GetStore() Store { return s.indexer }

// AddIndexers adds indexes to the informer's store, indexing the objects
// already in it. It fails on a name conflict or once the informer stopped.
func (s *SharedIndexInformer) AddIndexers(indexers Indexers) error {
	s.mu.Lock()
	stopped := s.stopped
	s.mu.Unlock()
	if stopped {
		return fmt.Errorf("cache: indexers not added: %w", errInformerStopped)
	}
	return s.indexer.AddIndexers(indexers)
}

// SetTransform sets a function applied once to every object the informer
// lists or watches, before it is stored or handed to a handler: for example
// to drop managedFields, or to convert an *unstructured.Unstructured into
// the typed object the informer was built for. Its result must be of the
// informer's type; an error from it, or a result of another type, fails
// the list or watch that delivered the object (see [SharedIndexInformer]).
// It must be idempotent, and be set before Run.
func (s *SharedIndexInformer) SetTransform(f TransformFunc) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return errInformerStarted
	}
	s.transform = f
	return nil
}

// SetWatchErrorHandler sets the handler of errors that end a list-and-watch
// attempt of the informer's reflector. It must be set before Run.
func (s *SharedIndexInformer) SetWatchErrorHandler(h func(ctx context.Context, r *Reflector, err error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return errInformerStarted
	}
	s.watchErrorHandler = h
	return nil
}

// AddEventHandler adds a handler with the informer's resync period.
func (s *SharedIndexInformer) AddEventHandler(h ResourceEventHandler) (ResourceEventHandlerRegistration, error) {
	return s.AddEventHandlerWithOptions(h, HandlerOptions{})
}

// AddEventHandlerWithOptions adds a handler. It may be called before or
// after Run; a handler added after Run first receives every current object
// as an add with isInInitialList set. A [ResourceEventHandlerFuncs]
// whose type parameter cannot hold the informer's objects (the type of its
// exampleObject is not assignable to it) is refused with an error, also
// when wrapped in a [FilteringResourceEventHandler].
//
// Resync periods follow upstream: the informer checks for due resyncs every
// check period, which starts as its ResyncPeriod. A handler added before Run
// with a shorter positive period lowers the check period to it; one added
// after Run gets at least the check period. An informer whose ResyncPeriod
// is zero never resyncs.
func (s *SharedIndexInformer) AddEventHandlerWithOptions(h ResourceEventHandler, opts HandlerOptions) (ResourceEventHandlerRegistration, error) {
	if h == nil {
		return nil, errors.New("cache: nil event handler")
	}
	if err := checkHandlerType(h, s.exampleType); err != nil {
		return nil, err
	}
	requested := s.opts.ResyncPeriod
	if opts.ResyncPeriod != nil {
		requested = *opts.ResyncPeriod
	}
	if requested > 0 && requested < minimumResyncPeriod {
		requested = minimumResyncPeriod
	}

	// Holding blockDeltas across the decision keeps Run from starting, and
	// deltas from being applied, between the check and the registration:
	// the handler sees either every notification or the replay of the
	// store followed by every later notification.
	s.blockDeltas.Lock()
	defer s.blockDeltas.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil, fmt.Errorf("cache: handler not added: %w", errInformerStopped)
	}
	if requested > 0 && requested < s.resyncCheckPeriod {
		if s.started {
			requested = s.resyncCheckPeriod
		} else {
			s.resyncCheckPeriod = requested
			s.processor.resyncCheckPeriodChanged(requested)
		}
	}
	l := newProcessorListener(h, requested, effectiveResyncPeriod(requested, s.resyncCheckPeriod), s.HasSynced)
	if s.started {
		for _, obj := range s.indexer.List() {
			l.add(notification{kind: addNotification, newObj: obj, initial: true})
		}
	}
	if err := s.processor.addListener(l); err != nil {
		return nil, err
	}
	return l, nil
}

// effectiveResyncPeriod is the period a handler asking for desired gets when
// the informer checks every check.
func effectiveResyncPeriod(desired, check time.Duration) time.Duration {
	switch {
	case desired == 0, check == 0:
		return 0
	case desired < check:
		return check
	default:
		return desired
	}
}

// RemoveEventHandler stops notifications to the handler of reg: what is
// buffered for it is dropped, and a call in progress finishes. Removing a
// handler twice, or one of another informer, does nothing.
func (s *SharedIndexInformer) RemoveEventHandler(reg ResourceEventHandlerRegistration) error {
	l, ok := reg.(*processorListener)
	if !ok {
		return fmt.Errorf("cache: RemoveEventHandler: registration of type %T was not made by an informer", reg)
	}
	s.processor.removeListener(l)
	return nil
}

// RemoveEventHandlerAndWait is RemoveEventHandler that also waits until the
// handler's call in progress, if any, has returned, or ctx is done. Calling
// it from the handler itself would wait until ctx is done.
func (s *SharedIndexInformer) RemoveEventHandlerAndWait(ctx context.Context, reg ResourceEventHandlerRegistration) error {
	if err := s.RemoveEventHandler(reg); err != nil {
		return err
	}
	l := reg.(*processorListener)
	if !l.launched.Load() {
		// Its goroutine never ran: nothing can be in progress.
		return nil
	}
	select {
	case <-l.done:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// HasSynced reports whether the informer's store holds the first complete
// list of the resource, every object of it processed. It says nothing of
// the handlers: use their registrations' HasSynced for that.
func (s *SharedIndexInformer) HasSynced() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hasSyncedLocked()
}

func (s *SharedIndexInformer) hasSyncedLocked() bool {
	return s.fifo != nil && s.fifo.HasSynced()
}

// LastSyncResourceVersion returns the resourceVersion the store is current
// with, or "" before the first list.
func (s *SharedIndexInformer) LastSyncResourceVersion() string {
	s.mu.Lock()
	r := s.reflector
	s.mu.Unlock()
	if r == nil {
		return ""
	}
	return r.LastSyncResourceVersion()
}

// IsStopped reports whether Run has returned.
func (s *SharedIndexInformer) IsStopped() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopped
}

// Run fills the store and notifies handlers until ctx is done, then returns
// once every goroutine it started has exited. An informer runs only once: a
// second call returns at once.
func (s *SharedIndexInformer) Run(ctx context.Context) {
	log := logr.FromContextOrDiscard(ctx)
	s.mu.Lock()
	if s.started {
		s.mu.Unlock()
		log.Error(errInformerStarted, "SharedIndexInformer.Run called more than once")
		return
	}
	s.started = true
	if s.lw == nil {
		s.stopped = true
		s.mu.Unlock()
		log.Error(errNilListerWatcher, "SharedIndexInformer.Run cannot list or watch")
		return
	}
	s.fifo = NewDeltaFIFO(DeltaFIFOOptions{
		KnownObjects:          s.indexer,
		EmitDeltaTypeReplaced: true,
	})
	ropts := s.opts.Reflector
	ropts.ResyncPeriod = s.resyncCheckPeriod
	ropts.ShouldResync = s.processor.shouldResync
	// The reflector, not the queue, transforms: it checks the type of what
	// the transform returns, and fails a list or watch on an object it
	// cannot store.
	ropts.Transform = s.transform
	if s.watchErrorHandler != nil {
		ropts.WatchErrorHandler = s.watchErrorHandler
	}
	s.reflector = NewReflector(s.lw, s.exampleType, s.fifo, ropts)
	s.reflector.arenas = &s.arenas
	fifo, reflector := s.fifo, s.reflector
	s.mu.Unlock()

	s.processor.start(log)

	var wg sync.WaitGroup
	wg.Go(func() { reflector.Run(ctx) })
	wg.Go(func() {
		for {
			err := fifo.popKeyed(ctx, s.processDeltas)
			if ctx.Err() != nil || errors.Is(err, ErrFIFOClosed) {
				return
			}
			if s.arenas.anyCopied.Load() && fifo.Len() == 0 {
				// Nothing of a list copied out is queued any more: no late
				// arrival can come, and the ranges must not outlive their
				// arrays.
				s.arenas.dropCopied()
			}
			if err != nil {
				log.Error(err, "Processing deltas")
			}
		}
	})
	<-ctx.Done()
	fifo.Close()
	wg.Wait()

	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	s.processor.stop()
}

// processDeltas applies the deltas of one key to the store, then tells the
// handlers. The key is the queue's, which is the indexer's: both key with
// DeletionHandlingMetaNamespaceKeyFunc's rules.
func (s *SharedIndexInformer) processDeltas(key string, deltas Deltas, isInInitialList bool) error {
	s.blockDeltas.Lock()
	defer s.blockDeltas.Unlock()
	var errs []error
	for _, d := range deltas {
		switch d.Type {
		case Sync, Replaced, Added, Updated:
			obj := s.arenas.admit(d.Object)
			old, existed, err := s.indexer.putKeyed(key, obj)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if s.arenas.stored(obj, old, existed) {
				s.arenas.copyOut(s.indexer.ts)
			}
			if existed {
				s.processor.distribute(notification{kind: updateNotification, oldObj: old, newObj: obj}, sameResourceVersion(old, obj))
			} else {
				s.processor.distribute(notification{kind: addNotification, newObj: obj, initial: isInInitialList}, false)
			}
		case Deleted:
			if old, existed := s.indexer.deleteKeyed(key, d.Object); existed && s.arenas.removed(old) {
				s.arenas.copyOut(s.indexer.ts)
			}
			s.processor.distribute(notification{kind: deleteNotification, newObj: d.Object}, false)
		}
	}
	return errors.Join(errs...)
}

// sameResourceVersion reports whether an update is a resync: both objects
// have metadata and the same, non-empty resourceVersion. Objects without a
// resourceVersion (from some fake or aggregated APIs) cannot be told apart
// by it, so their updates are delivered as updates: treating them as
// resyncs would hide every change from handlers that do not resync.
func sameResourceVersion(oldObj, newObj any) bool {
	o, err := meta.Accessor(oldObj)
	if err != nil {
		return false
	}
	n, err := meta.Accessor(newObj)
	if err != nil {
		return false
	}
	return o.GetResourceVersion() != "" && o.GetResourceVersion() == n.GetResourceVersion()
}

// InformerSynced reports whether an informer, or a handler registration,
// has synced.
type InformerSynced func() bool

// WaitForCacheSync waits until every synced function reports true, checking
// every 10 milliseconds (client-go checks every 100), and reports whether
// they all did before ctx was done.
func WaitForCacheSync(ctx context.Context, synced ...InformerSynced) bool {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		all := true
		for _, f := range synced {
			if !f() {
				all = false
				break
			}
		}
		if all {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}
