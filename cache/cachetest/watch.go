package cachetest

import (
	"context"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
)

// Watch opens a watch on resource gvr in namespace ("" for all
// namespaces), following the apiserver's rules for where it starts:
//
//   - resourceVersion "" or "0" without SendInitialEvents: a synthetic
//     ADDED event for every selected object, then every later change.
//   - "N" without SendInitialEvents: every change after N, replayed from
//     the history, then live ones. N older than the retained history (see
//     Options.HistorySize and [Server.Compact]) gets a watch that delivers
//     one watch.Error event with a 410 Expired status and closes, as the
//     apiserver does once the request is accepted. N in the future simply
//     waits for changes after N.
//   - SendInitialEvents=true (ResourceVersionMatch must be NotOlderThan):
//     ADDED events for the current state, which must be at least N (the
//     call waits up to Options.FreshnessTimeout, then delivers a 504
//     "Too large resource version" error event); then, if
//     AllowWatchBookmarks is set, a BOOKMARK annotated
//     k8s.io/initial-events-end: "true" carrying the state's
//     resourceVersion; then later changes.
//   - SendInitialEvents=false: no synthetic events; "" and "0" start at
//     the current resourceVersion, "N" after N.
//
// Label and field selectors filter events the way the apiserver does: an
// object that starts matching arrives as ADDED, one that stops matching as
// DELETED (its previous state stamped with the change's resourceVersion).
// With AllowWatchBookmarks, a BOOKMARK carrying the current resourceVersion
// (an empty object of the resource with only that set) is sent every
// Options.BookmarkInterval and, as the apiserver does, once more two
// seconds before the watch's deadline (TimeoutSeconds or ctx's deadline).
//
// The watch ends, closing the result channel, on Stop, when ctx is done,
// after TimeoutSeconds, on [Server.CloseAllWatches], [Server.FailAllWatches]
// or [Server.Close], and when its consumer falls more than
// Options.WatchBufferSize events behind (events still queued are dropped;
// the client resumes from the last resourceVersion it saw, as with an
// apiserver that drops a slow watcher). Each event's object is a copy.
//
// Errors returned directly, before any watch exists: injected failures
// ([Server.FailNextWatches]), ctx done during an injected delay, 422
// Invalid options, 400 bad selectors or resourceVersion, 404 for an
// unregistered resource and 503 after [Server.Close].
func (s *Server) Watch(ctx context.Context, gvr schema.GroupVersionResource, namespace string, opts metav1.ListOptions) (watch.Interface, error) {
	if err := s.admit(ctx, Request{Verb: "watch", GVR: gvr, Namespace: namespace, Options: opts}); err != nil {
		return nil, err
	}
	if err := s.validateWatchOptions(opts); err != nil {
		return nil, err
	}
	rv, err := parseRV(opts.ResourceVersion)
	if err != nil {
		return nil, err
	}
	r, err := s.lookup(gvr)
	if err != nil {
		return nil, err
	}
	if err := r.checkNamespace(namespace); err != nil {
		return nil, err
	}
	sel, err := newSelector(r, namespace, opts)
	if err != nil {
		return nil, err
	}
	initial := opts.SendInitialEvents != nil && *opts.SendInitialEvents
	if initial && rv > 0 {
		if err := s.waitFresh(ctx, rv); err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			return errorWatch(errorStatus(err)), nil
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, apierrors.NewServiceUnavailable("cachetest: server closed")
	}
	w := &watcher{
		s:         s,
		r:         r,
		sel:       sel,
		after:     max(rv, s.rv),
		bookmarks: opts.AllowWatchBookmarks,
		result:    make(chan watch.Event),
		done:      make(chan struct{}),
		exited:    make(chan struct{}),
		wake:      make(chan struct{}, 1),
	}
	switch {
	case initial || (opts.SendInitialEvents == nil && rv == 0):
		w.queue = s.currentState(r, sel)
		if initial && opts.AllowWatchBookmarks && !s.opts.OmitInitialEventsEndBookmark {
			b := r.newObject(s.rv)
			metaOf(b).SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
			w.queue = append(w.queue, pending{typ: watch.Bookmark, obj: b, own: true})
		}
	case rv > 0:
		if rv < r.compacted {
			return errorWatch(errorStatus(watchTooOld(rv, r.compacted))), nil
		}
		for _, ev := range r.since(rv) {
			if e, ok := w.convert(ev); ok {
				w.queue = append(w.queue, e)
			}
		}
	}
	var timeout time.Duration
	if t := opts.TimeoutSeconds; t != nil && *t > 0 {
		timeout = time.Duration(*t) * time.Second
	}
	s.watchers[w] = struct{}{}
	s.wg.Add(1)
	go w.run(ctx, timeout)
	return w, nil
}

// currentState returns an ADDED event for every selected object, in key
// order. The caller holds mu.
func (s *Server) currentState(r *resource, sel selector) []pending {
	var evs []pending
	for _, k := range r.sortedKeys() {
		if obj := r.objects[k]; sel.matches(obj) {
			evs = append(evs, pending{typ: watch.Added, obj: obj})
		}
	}
	return evs
}

// validateWatchOptions mirrors the apiserver's validation of watch options.
func (s *Server) validateWatchOptions(opts metav1.ListOptions) error {
	var errs field.ErrorList
	match := field.NewPath("resourceVersionMatch")
	m := opts.ResourceVersionMatch
	if opts.SendInitialEvents != nil {
		if m != metav1.ResourceVersionMatchNotOlderThan {
			errs = append(errs, field.Forbidden(match, "sendInitialEvents requires setting resourceVersionMatch to "+string(metav1.ResourceVersionMatchNotOlderThan)))
		}
		if s.opts.DisableWatchList {
			errs = append(errs, field.Forbidden(field.NewPath("sendInitialEvents"), "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"))
		}
	}
	if m != "" {
		if opts.SendInitialEvents == nil {
			errs = append(errs, field.Forbidden(match, "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"))
		}
		if m != metav1.ResourceVersionMatchNotOlderThan {
			errs = append(errs, field.NotSupported(match, m, []string{string(metav1.ResourceVersionMatchNotOlderThan)}))
		}
		if opts.Continue != "" {
			errs = append(errs, field.Forbidden(match, "resourceVersionMatch is forbidden when continue is provided"))
		}
	}
	return invalidOptions(errs)
}

// watcher is one open watch. Writers queue its events under Server.mu
// without ever blocking; its goroutine hands them to the consumer.
type watcher struct {
	s         *Server
	r         *resource
	sel       selector
	after     uint64 // live events at or below this resourceVersion are skipped
	bookmarks bool

	result   chan watch.Event
	done     chan struct{} // closed to stop the goroutine
	stopOnce sync.Once
	exited   chan struct{} // closed when the goroutine has exited
	wake     chan struct{} // buffered 1: the queue grew

	mu sync.Mutex
	// guarded by mu
	queue    []pending
	live     int  // queued events counted against WatchBufferSize
	overflow bool // the consumer fell too far behind
	ending   bool // an error event is queued last; nothing more is accepted
}

var _ watch.Interface = (*watcher)(nil)

// ResultChan returns the channel of events; it is closed when the watch
// ends.
func (w *watcher) ResultChan() <-chan watch.Event { return w.result }

// Stop ends the watch and returns once its goroutine has exited and the
// result channel is closed. It is idempotent.
func (w *watcher) Stop() {
	w.stop()
	<-w.exited
}

func (w *watcher) stop() { w.stopOnce.Do(func() { close(w.done) }) }

// pending is a queued event. Its object is shared with the store until
// the watcher's goroutine delivers it, so that writers never pay for
// copies and no copy is made under a lock.
type pending struct {
	typ watch.EventType
	obj runtime.Object
	// stamp, when non-zero, is the resourceVersion the delivered copy gets.
	stamp uint64
	// own is true when obj belongs to this event alone (errors, bookmarks).
	own bool
}

// event builds the event to deliver.
func (p pending) event(share bool) watch.Event {
	obj := p.obj
	if !p.own && (!share || p.stamp != 0) {
		obj = obj.DeepCopyObject()
	}
	if p.stamp != 0 {
		setResourceVersion(obj, p.stamp)
	}
	return watch.Event{Type: p.typ, Object: obj}
}

// convert turns a stored event into what this watcher sees through its
// selector, if anything.
func (w *watcher) convert(ev event) (pending, bool) {
	cur := ev.typ != watch.Deleted && w.sel.matches(ev.obj)
	old := ev.prev != nil && w.sel.matches(ev.prev)
	switch {
	case cur && old:
		return pending{typ: watch.Modified, obj: ev.obj}, true
	case cur:
		return pending{typ: watch.Added, obj: ev.obj}, true
	case old:
		// Deleted, or left the selection: the apiserver sends DELETED with
		// the last selected state at the change's resourceVersion.
		return pending{typ: watch.Deleted, obj: ev.prev, stamp: ev.rv}, true
	}
	return pending{}, false
}

// send queues a live event. The caller holds Server.mu.
func (w *watcher) send(ev event) {
	if ev.rv <= w.after {
		return
	}
	e, ok := w.convert(ev)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ending || w.overflow {
		return
	}
	w.queue = append(w.queue, e)
	w.live++
	if limit := w.s.opts.WatchBufferSize; limit >= 0 && w.live > limit {
		// Give up on the consumer: drop what it has not taken and end the
		// watch even if the goroutine is blocked handing it an event.
		w.overflow = true
		w.queue = nil
		w.stop()
	}
	w.notify()
}

// notify wakes the goroutine. The caller holds w.mu.
func (w *watcher) notify() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// terminate ends the watch: at once when st is nil, else after delivering
// the events already queued and an ERROR event carrying st. The caller
// holds Server.mu.
func (w *watcher) terminate(st *metav1.Status) {
	if st == nil {
		w.stop()
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ending {
		return
	}
	w.ending = true
	w.queue = append(w.queue, pending{typ: watch.Error, obj: st.DeepCopy(), own: true})
	w.notify()
}

// bookmark queues a BOOKMARK at the current resourceVersion, which is
// behind no event queued before it and ahead of none queued after.
func (w *watcher) bookmark() {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ending || w.overflow {
		return
	}
	w.queue = append(w.queue, pending{typ: watch.Bookmark, obj: w.r.newObject(w.s.rv), own: true})
	w.notify()
}

// nextBookmark returns when to send the next periodic bookmark: after
// BookmarkInterval, or two seconds before the watch's deadline if that is
// sooner (so that a client re-watching after the timeout resumes from a
// recent resourceVersion), as the apiserver schedules them. It reports
// false once that last pre-timeout moment has come.
func (w *watcher) nextBookmark(deadline time.Time) (time.Duration, bool) {
	now := time.Now()
	next := now.Add(w.s.opts.BookmarkInterval)
	if !deadline.IsZero() {
		pre := deadline.Add(-2 * time.Second)
		if !pre.After(now) {
			return 0, false
		}
		if pre.Before(next) {
			next = pre
		}
	}
	return next.Sub(now), true
}

// run delivers queued events until the watch ends, then unregisters the
// watcher and closes the result channel.
func (w *watcher) run(ctx context.Context, timeout time.Duration) {
	defer func() {
		w.s.mu.Lock()
		delete(w.s.watchers, w)
		w.s.mu.Unlock()
		close(w.result)
		close(w.exited)
		w.s.wg.Done()
	}()
	var expired <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	var tick <-chan time.Time
	var bookmarkTimer *time.Timer
	var deadline time.Time
	if w.bookmarks && w.s.opts.BookmarkInterval > 0 {
		if timeout > 0 {
			deadline = time.Now().Add(timeout)
		}
		if d, ok := ctx.Deadline(); ok && (deadline.IsZero() || d.Before(deadline)) {
			deadline = d
		}
		if d, ok := w.nextBookmark(deadline); ok {
			bookmarkTimer = time.NewTimer(d)
			defer bookmarkTimer.Stop()
			tick = bookmarkTimer.C
		}
	}
	for {
		w.mu.Lock()
		batch, ending, overflow := w.queue, w.ending, w.overflow
		w.queue, w.live = nil, 0
		w.mu.Unlock()
		if overflow {
			return
		}
		for _, p := range batch {
			select {
			case w.result <- p.event(w.s.opts.ShareObjects):
			case <-w.done:
				return
			case <-ctx.Done():
				return
			case <-expired:
				return
			}
		}
		if ending {
			return
		}
		select {
		case <-w.wake:
		case <-tick:
			w.bookmark()
			if d, ok := w.nextBookmark(deadline); ok {
				bookmarkTimer.Reset(d)
			} else {
				tick = nil
			}
		case <-w.done:
			return
		case <-ctx.Done():
			return
		case <-expired:
			return
		}
	}
}

// errWatcher is a finished watch that delivers one ERROR event, as the
// apiserver answers a watch it accepted but cannot serve. It has no
// goroutine.
type errWatcher struct{ ch chan watch.Event }

func errorWatch(st *metav1.Status) watch.Interface {
	ch := make(chan watch.Event, 1)
	ch <- watch.Event{Type: watch.Error, Object: st}
	close(ch)
	return errWatcher{ch}
}

// ResultChan returns the channel holding the error event.
func (w errWatcher) ResultChan() <-chan watch.Event { return w.ch }

// Stop does nothing: the watch is already over.
func (errWatcher) Stop() {}
