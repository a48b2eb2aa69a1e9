package cache

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
)

// notification is one call to make on a handler.
type notification struct {
	kind    notificationKind
	oldObj  any // updates only
	newObj  any
	initial bool // adds only: isInInitialList
}

type notificationKind uint8

const (
	addNotification notificationKind = iota
	updateNotification
	deleteNotification
)

// processorListener delivers notifications to one handler, in order, from
// its own goroutine, through an unbounded buffer: a slow handler delays only
// itself, never the informer or the other handlers. The cost is memory: the
// buffer grows while the handler lags.
type processorListener struct {
	handler ResourceEventHandler
	// requestedResync is what the handler asked for; resyncPeriod what it
	// gets given the informer's check period. Both guarded by the
	// processor's mu, like nextResync and syncing.
	requestedResync time.Duration
	resyncPeriod    time.Duration
	nextResync      time.Time
	syncing         bool

	// pendingInitial counts initial adds queued and not yet handled.
	pendingInitial atomic.Int64
	// informerSynced reports whether the informer has synced.
	informerSynced func() bool

	mu   sync.Mutex
	cond sync.Cond // L is &mu; signalled on add and on stop
	// guarded by mu
	buf     []notification
	head    int
	stopped bool
	// launched is set when the listener's goroutine is started; done is
	// closed when it has returned.
	launched atomic.Bool
	done     chan struct{}
}

func newProcessorListener(h ResourceEventHandler, requested, period time.Duration, informerSynced func() bool) *processorListener {
	l := &processorListener{
		handler:         h,
		requestedResync: requested,
		resyncPeriod:    period,
		informerSynced:  informerSynced,
		done:            make(chan struct{}),
	}
	l.cond.L = &l.mu
	return l
}

// add queues n; it never blocks on the handler.
func (l *processorListener) add(n notification) {
	if n.kind == addNotification && n.initial {
		l.pendingInitial.Add(1)
	}
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		if n.kind == addNotification && n.initial {
			l.pendingInitial.Add(-1)
		}
		return
	}
	l.buf = append(l.buf, n)
	l.mu.Unlock()
	l.cond.Signal()
}

// stop makes run return after the call in progress, dropping what is
// buffered.
func (l *processorListener) stop() {
	l.mu.Lock()
	l.stopped = true
	l.mu.Unlock()
	l.cond.Broadcast()
}

// next waits for a notification; ok is false once stopped.
func (l *processorListener) next() (n notification, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for !l.stopped && l.head == len(l.buf) {
		l.cond.Wait()
	}
	if l.stopped {
		return notification{}, false
	}
	n = l.buf[l.head]
	l.buf[l.head] = notification{} // let the objects be collected
	l.head++
	switch {
	case l.head == len(l.buf):
		l.buf, l.head = l.buf[:0], 0
	case l.head >= 1024 && l.head > len(l.buf)/2:
		k := copy(l.buf, l.buf[l.head:])
		clear(l.buf[k:])
		l.buf, l.head = l.buf[:k], 0
	}
	return n, true
}

// run calls the handler for each notification until stopped. Panics are
// logged to log.
func (l *processorListener) run(log logr.Logger) {
	defer close(l.done)
	for {
		n, ok := l.next()
		if !ok {
			return
		}
		l.call(log, n)
	}
}

// call makes one handler call. A panic is recovered and logged: the
// listener goes on with the next notification, and an initial add counts as
// handled, so the registration's HasSynced does not stay false forever
// (unlike upstream, kubernetes#129024).
func (l *processorListener) call(log logr.Logger, n notification) {
	defer func() {
		if n.kind == addNotification && n.initial {
			l.pendingInitial.Add(-1)
		}
		if r := recover(); r != nil {
			log.Error(fmt.Errorf("%v", r), "Observed a panic in an event handler", "handler", fmt.Sprintf("%T", l.handler))
		}
	}()
	switch n.kind {
	case addNotification:
		l.handler.OnAdd(n.newObj, n.initial)
	case updateNotification:
		l.handler.OnUpdate(n.oldObj, n.newObj)
	case deleteNotification:
		l.handler.OnDelete(n.newObj)
	}
}

// HasSynced reports whether the informer has synced and this handler has
// handled every initial add queued for it.
func (l *processorListener) HasSynced() bool {
	return l.informerSynced() && l.pendingInitial.Load() == 0
}

// ResourceEventHandlerRegistration is the handle of a handler added to a
// [SharedIndexInformer]; pass it to [SharedIndexInformer.RemoveEventHandler].
type ResourceEventHandlerRegistration interface {
	// HasSynced reports whether the informer has synced and the handler has
	// handled every object of its initial list (for a handler added after
	// the informer started, the objects replayed to it).
	HasSynced() bool
}

var _ ResourceEventHandlerRegistration = (*processorListener)(nil)

// processor fans notifications out to listeners.
type processor struct {
	mu sync.Mutex
	// guarded by mu
	listeners map[*processorListener]struct{}
	// guarded by mu; set while listeners' goroutines run (between start
	// and stop): new listeners are started at once.
	running bool
	// guarded by mu; set by stop: no listener is started any more.
	stopped bool
	// guarded by mu; the logger of the informer's Run, which listeners
	// started late log handler panics to. It is the logger, not the
	// context: a listener's lifetime is the processor's (start to stop),
	// not a context's.
	log logr.Logger
	wg  sync.WaitGroup
}

// addListener registers l, starting its goroutine if the processor runs.
func (p *processor) addListener(l *processorListener) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return errInformerStopped
	}
	if p.listeners == nil {
		p.listeners = make(map[*processorListener]struct{})
	}
	p.listeners[l] = struct{}{}
	if p.running {
		p.launch(l)
	}
	return nil
}

// removeListener unregisters and stops l; it reports whether l was
// registered.
func (p *processor) removeListener(l *processorListener) bool {
	p.mu.Lock()
	_, ok := p.listeners[l]
	delete(p.listeners, l)
	p.mu.Unlock()
	if ok {
		l.stop()
	}
	return ok
}

// start runs every registered listener's goroutine, and those added later
// until stop; they log handler panics to log.
func (p *processor) start(log logr.Logger) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.log = log
	p.running = true
	for l := range p.listeners {
		p.launch(l)
	}
}

// launch starts l's goroutine. The caller holds mu.
func (p *processor) launch(l *processorListener) {
	l.launched.Store(true)
	log := p.log
	p.wg.Go(func() { l.run(log) })
}

// stop stops every listener and waits for their goroutines.
func (p *processor) stop() {
	p.mu.Lock()
	p.running = false
	p.stopped = true
	ls := p.listeners
	p.listeners = nil
	p.mu.Unlock()
	for l := range ls {
		l.stop()
	}
	p.wg.Wait()
}

// distribute queues n for every listener, or, for a resync, only for the
// listeners due one.
func (p *processor) distribute(n notification, isSync bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for l := range p.listeners {
		if !isSync || l.syncing {
			l.add(n)
		}
	}
}

// shouldResync marks the listeners whose resync is due and reports whether
// any is.
func (p *processor) shouldResync() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	any := false
	for l := range p.listeners {
		l.syncing = false
		if l.resyncPeriod > 0 && !now.Before(l.nextResync) {
			l.syncing = true
			l.nextResync = now.Add(l.resyncPeriod)
			any = true
		}
	}
	return any
}

// resyncCheckPeriodChanged recomputes every listener's period after the
// informer's check period changed.
func (p *processor) resyncCheckPeriodChanged(check time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for l := range p.listeners {
		l.resyncPeriod = effectiveResyncPeriod(l.requestedResync, check)
	}
}
