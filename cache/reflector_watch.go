package cache

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
)

// This file holds how a Reflector watches: resuming, re-opening, applying
// events, and streaming the initial state (WatchList).

// InitialEventsEndAnnotation marks the bookmark that ends the initial events
// of a watch opened with SendInitialEvents.
const InitialEventsEndAnnotation = "k8s.io/initial-events-end"

// errWatchClosedEarly reports a watch that ended in under a second without
// delivering anything, which usually means the server cannot serve it.
var errWatchClosedEarly = errors.New("watch closed before it delivered anything")

// watch watches from the last synced resourceVersion, re-opening the watch
// each time the server closes it normally. w, when not nil, is an open watch
// to use first (the stream of a WatchList).
func (r *Reflector) watch(ctx context.Context, w watch.Interface) error {
	for {
		if ctx.Err() != nil {
			if w != nil {
				w.Stop()
			}
			return nil
		}
		startRV := r.LastSyncResourceVersion()
		if w == nil {
			timeout := int64((r.opts.MinWatchTimeout + rand.N(r.opts.MinWatchTimeout+1)) / time.Second)
			var err error
			w, err = r.lw.Watch(ctx, metav1.ListOptions{
				ResourceVersion:     startRV,
				TimeoutSeconds:      &timeout,
				AllowWatchBookmarks: true,
			})
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				if isRetriable(err) {
					if !r.backoff.sleep(ctx) {
						return nil
					}
					continue
				}
				return fmt.Errorf("cache: reflector %s: watch: %w", r.name, err)
			}
		}
		start := time.Now()
		events, err := r.handleWatch(ctx, w, startRV == "" || startRV == "0")
		w.Stop()
		w = nil
		switch {
		case ctx.Err() != nil:
			return nil
		case err == nil && events == 0 && time.Since(start) < time.Second:
			return fmt.Errorf("cache: reflector %s: %w", r.name, errWatchClosedEarly)
		case err == nil:
			// A normal close, usually the server-side timeout: resume.
			continue
		case isExpired(err):
			// The watch fell behind the server's history: relist at the
			// last synced version, which the watch cache can still serve.
			logr.FromContextOrDiscard(ctx).V(4).Info("Watch expired, relisting", "err", err)
			return nil
		case apierrors.IsTooManyRequests(err):
			if !r.backoff.sleep(ctx) {
				return nil
			}
			continue
		default:
			return fmt.Errorf("cache: reflector %s: watch ended with an error: %w", r.name, err)
		}
	}
}

// handleWatch applies the events of w to the store until w closes, ctx is
// done, an error event arrives or a resync fails. It returns the number of
// events applied. While holdRV is set (the watch started at "" or "0", so
// its first events may be synthetic adds in no particular order), the
// resourceVersion is not advanced until an event other than an add
// arrives.
func (r *Reflector) handleWatch(ctx context.Context, w watch.Interface, holdRV bool) (int, error) {
	var resync <-chan time.Time
	if r.opts.ResyncPeriod > 0 {
		t := time.NewTicker(r.opts.ResyncPeriod)
		defer t.Stop()
		resync = t.C
	}
	events := 0
	for {
		select {
		case <-ctx.Done():
			return events, nil
		case <-resync:
			if r.opts.ShouldResync == nil || r.opts.ShouldResync() {
				if err := r.store.Resync(); err != nil {
					return events, fmt.Errorf("resync: %w", err)
				}
			}
		case ev, ok := <-w.ResultChan():
			if !ok {
				return events, nil
			}
			if ev.Type == watch.Error {
				return events, apierrors.FromObject(ev.Object)
			}
			obj, rv, err := r.prepareEvent(ev)
			if err != nil {
				return events, err
			}
			switch ev.Type {
			case watch.Added:
				err = r.store.Add(obj)
			case watch.Modified:
				err = r.store.Update(obj)
			case watch.Deleted:
				err = r.store.Delete(obj)
			case watch.Bookmark:
				if b, ok := r.store.(bookmarkStore); ok {
					b.Bookmark(rv)
				}
			}
			if err != nil {
				// The event is not in the store: going on would advance the
				// resourceVersion past it and leave the store wrong until
				// some later relist.
				return events, fmt.Errorf("applying a %s event of resourceVersion %s: %w", ev.Type, rv, err)
			}
			events++
			if holdRV && ev.Type == watch.Added {
				continue
			}
			holdRV = false
			r.setLastSyncResourceVersion(rv)
		}
	}
}

// watchList streams the initial state with a watch that sends initial
// events, replaces the store's contents with it once the end-of-initial-
// events bookmark arrives, and returns the still-open watch.
func (r *Reflector) watchList(ctx context.Context) (watch.Interface, error) {
	r.mu.Lock()
	rv := r.lastSyncRV
	if r.rvUnavailable {
		rv = ""
	}
	r.mu.Unlock()
	timeout := int64((r.opts.MinWatchTimeout + rand.N(r.opts.MinWatchTimeout+1)) / time.Second)
	sendInitial := true
	w, err := r.lw.Watch(ctx, metav1.ListOptions{
		ResourceVersion:      rv,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		SendInitialEvents:    &sendInitial,
		AllowWatchBookmarks:  true,
		TimeoutSeconds:       &timeout,
	})
	if err != nil {
		if isExpired(err) || isTooLargeResourceVersion(err) {
			r.setUnavailable(true)
		}
		return nil, err
	}
	temp := NewStore(DeletionHandlingMetaNamespaceKeyFunc)
	stall := time.NewTimer(r.opts.InitialEventsTimeout)
	defer stall.Stop()
	for {
		select {
		case <-ctx.Done():
			w.Stop()
			return nil, ctx.Err()
		case <-stall.C:
			w.Stop()
			return nil, fmt.Errorf("no %s bookmark within %v of the last initial event", InitialEventsEndAnnotation, r.opts.InitialEventsTimeout)
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil, fmt.Errorf("watch closed before the %s bookmark", InitialEventsEndAnnotation)
			}
			stall.Reset(r.opts.InitialEventsTimeout)
			if ev.Type == watch.Error {
				w.Stop()
				err := apierrors.FromObject(ev.Object)
				if isExpired(err) || isTooLargeResourceVersion(err) {
					r.setUnavailable(true)
				}
				return nil, err
			}
			obj, listRV, err := r.prepareEvent(ev)
			if err != nil {
				w.Stop()
				return nil, err
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				err = temp.Update(obj)
			case watch.Deleted:
				err = temp.Delete(obj)
			case watch.Bookmark:
				if !isInitialEventsEnd(ev.Object) {
					continue
				}
				if err := r.store.Replace(temp.List(), listRV); err != nil {
					w.Stop()
					return nil, fmt.Errorf("replacing the store's contents: %w", err)
				}
				r.setUnavailable(false)
				r.setLastSyncResourceVersion(listRV)
				return w, nil
			}
			if err != nil {
				w.Stop()
				return nil, err
			}
		}
	}
}

// isInitialEventsEnd reports whether a bookmark ends the initial events of a
// streaming list.
func isInitialEventsEnd(obj runtime.Object) bool {
	m, err := meta.Accessor(obj)
	return err == nil && m.GetAnnotations()[InitialEventsEndAnnotation] == "true"
}

// isRetriable reports whether a watch that failed to start should be retried
// after a backoff rather than ending in a relist.
func isRetriable(err error) bool {
	return apierrors.IsTooManyRequests(err) || utilnet.IsConnectionRefused(err)
}
