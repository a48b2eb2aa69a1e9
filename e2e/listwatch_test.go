package e2e_test

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/quotakit/quotakit/cache"
)

// countingLW is a quotakit ListerWatcher over a client-go client's List and
// Watch that counts what the reflector did and what the server answered,
// and can shorten the server-side timeout of the watches it opens.
type countingLW struct {
	list  func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error)
	watch func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)

	// watchTimeout, when not zero, replaces the timeoutSeconds of every
	// watch: kube-apiserver's watch cache sends a bookmark shortly before
	// a watch's deadline, and ends the watch at it.
	watchTimeout atomic.Int64

	lists, pages, watches, bookmarks, expired atomic.Int64

	// lastWatch is when the latest watch was opened (Unix nanoseconds),
	// and lastWatchShort whether it was given watchTimeout.
	lastWatch      atomic.Int64
	lastWatchShort atomic.Bool
}

var _ cache.ListerWatcher = (*countingLW)(nil)

func (lw *countingLW) List(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	// Only whole lists count: a relist is one list, however many pages.
	if opts.Continue == "" {
		lw.lists.Add(1)
	}
	lw.pages.Add(1)
	obj, err := lw.list(ctx, opts)
	if isExpired(err) {
		lw.expired.Add(1)
	}
	return obj, err
}

func (lw *countingLW) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	lw.watches.Add(1)
	t := lw.watchTimeout.Load()
	if t > 0 {
		opts.TimeoutSeconds = &t
	}
	lw.lastWatch.Store(time.Now().UnixNano())
	lw.lastWatchShort.Store(t > 0)
	w, err := lw.watch(ctx, opts)
	if err != nil {
		if isExpired(err) {
			lw.expired.Add(1)
		}
		return nil, err
	}
	return newObservedWatch(w, lw), nil
}

func isExpired(err error) bool {
	return err != nil && (apierrors.IsResourceExpired(err) || apierrors.IsGone(err))
}

// observedWatch passes a watch's events on, counting bookmarks and 410
// error events.
type observedWatch struct {
	w    watch.Interface
	lw   *countingLW
	out  chan watch.Event
	stop chan struct{}
	once sync.Once
	done chan struct{}
}

func newObservedWatch(w watch.Interface, lw *countingLW) *observedWatch {
	o := &observedWatch{w: w, lw: lw, out: make(chan watch.Event), stop: make(chan struct{}), done: make(chan struct{})}
	go o.run()
	return o
}

func (o *observedWatch) run() {
	defer close(o.done)
	defer close(o.out)
	for ev := range o.w.ResultChan() {
		switch ev.Type {
		case watch.Bookmark:
			o.lw.bookmarks.Add(1)
		case watch.Error:
			if status, ok := ev.Object.(*metav1.Status); ok && isExpired(apierrors.FromObject(status)) {
				o.lw.expired.Add(1)
			}
		}
		select {
		case o.out <- ev:
		case <-o.stop:
			return
		}
	}
}

func (o *observedWatch) ResultChan() <-chan watch.Event { return o.out }

func (o *observedWatch) Stop() {
	o.once.Do(func() {
		close(o.stop)
		o.w.Stop()
	})
	<-o.done
}

// settled reports whether the latest watch was opened with the server's
// usual timeout more than 1.5 seconds ago: cutting it then is a cut, not
// what the reflector takes for a failed watch (one closed within a second
// of opening, without events).
func (lw *countingLW) settled() bool {
	return !lw.lastWatchShort.Load() && time.Since(time.Unix(0, lw.lastWatch.Load())) > 1500*time.Millisecond
}

// counts is a snapshot of a countingLW's counters.
type counts struct{ lists, watches, bookmarks, expired int64 }

func (lw *countingLW) counts() counts {
	return counts{lw.lists.Load(), lw.watches.Load(), lw.bookmarks.Load(), lw.expired.Load()}
}
