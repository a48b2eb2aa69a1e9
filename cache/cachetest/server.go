package cachetest

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Options configures a [Server]. The zero value means defaults.
type Options struct {
	// HistorySize is how many events of each resource are kept for watches
	// that resume from an older resourceVersion, like the apiserver's watch
	// cache. A watch or an exact list from before the oldest retained event
	// gets 410 Expired. Defaults to 1000.
	HistorySize int

	// WatchBufferSize is how many events may wait for one watcher's consumer
	// before the server gives up on it and closes its result channel, as the
	// apiserver closes an unresponsive watcher. Events replayed or
	// synthesised when the watch starts do not count. Defaults to 1000; a
	// negative value means unbounded.
	WatchBufferSize int

	// BookmarkInterval is how often a watch opened with
	// AllowWatchBookmarks receives a BOOKMARK event carrying the current
	// resourceVersion. Defaults to one minute, as in the apiserver; a
	// negative value disables periodic bookmarks.
	BookmarkInterval time.Duration

	// FreshnessTimeout is how long a list or a streaming watch that asks for
	// a resourceVersion not older than one the server has not reached yet
	// waits before failing with "Too large resource version". Defaults to
	// 3 seconds, as in the apiserver.
	FreshnessTimeout time.Duration

	// Now returns the time stamped as creationTimestamp. Defaults to
	// time.Now (virtual time under testing/synctest).
	Now func() time.Time

	// NoDefaultResources skips registering the built-in core/v1 and apps/v1
	// resources (see [New]); only resources passed to [Server.Register] are
	// then served.
	NoDefaultResources bool

	// ShareObjects makes reads and watch events return the stored objects
	// themselves instead of deep copies. Callers must then never mutate what
	// they receive. It exists for benchmarks, where copies would dominate.
	ShareObjects bool

	// DisableWatchList makes the server behave like an apiserver whose
	// WatchList feature is off: a watch with SendInitialEvents set is
	// rejected with 422 Invalid.
	DisableWatchList bool

	// OmitInitialEventsEndBookmark makes streaming watches
	// (SendInitialEvents=true) send the initial ADDED events but never the
	// BOOKMARK annotated k8s.io/initial-events-end, to test that a client
	// does not wait for it forever.
	OmitInitialEventsEndBookmark bool
}

// Server is an in-memory API server. It stores objects per
// GroupVersionResource, gives every write a resourceVersion from one
// counter shared by all resources (as etcd does), and serves lists and
// watches with the apiserver's resourceVersion semantics. See the package
// documentation for what is reproduced and what is simplified.
//
// A Server is safe for concurrent use. Its only goroutines are one per open
// watch; [Server.Close] stops them and waits for them to exit.
type Server struct {
	opts Options

	mu sync.Mutex
	// guarded by mu
	rv        uint64
	resources map[schema.GroupVersionResource]*resource
	watchers  map[*watcher]struct{}
	changed   chan struct{} // closed and replaced on every write
	closed    bool
	faults    faults
	requests  []Request
	uids      uint64
	names     uint64

	wg sync.WaitGroup // one per watch goroutine
}

// New returns a Server with no objects. Unless opts.NoDefaultResources is
// set it serves these typed resources: core/v1 pods, services, configmaps,
// secrets, persistentvolumeclaims, replicationcontrollers, resourcequotas,
// limitranges, serviceaccounts, endpoints, events (namespaced), namespaces,
// nodes, persistentvolumes (cluster-scoped), and apps/v1 deployments,
// replicasets, statefulsets and daemonsets. New starts no goroutines.
func New(opts Options) *Server {
	if opts.HistorySize <= 0 {
		opts.HistorySize = 1000
	}
	if opts.WatchBufferSize == 0 {
		opts.WatchBufferSize = 1000
	}
	if opts.BookmarkInterval == 0 {
		opts.BookmarkInterval = time.Minute
	}
	if opts.FreshnessTimeout <= 0 {
		opts.FreshnessTimeout = 3 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Server{
		opts: opts,
		// etcd's first revision is 1; starting there keeps "0" meaning
		// "any" and never a real state.
		rv:        1,
		resources: make(map[schema.GroupVersionResource]*resource),
		watchers:  make(map[*watcher]struct{}),
		changed:   make(chan struct{}),
	}
	if !opts.NoDefaultResources {
		for _, r := range defaultResources() {
			if err := s.Register(r); err != nil {
				panic("cachetest: registering a built-in resource: " + err.Error())
			}
		}
	}
	return s
}

// ResourceVersion returns the server's current resourceVersion: the one of
// the latest write to any resource.
func (s *Server) ResourceVersion() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strconv.FormatUint(s.rv, 10)
}

// Close stops every open watch (their result channels are closed, as when
// an apiserver shuts down) and waits for their goroutines to exit. Later
// watches fail with 503 ServiceUnavailable; reads and writes keep working.
// Close is idempotent.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	for w := range s.watchers {
		w.terminate(nil)
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// resourceFor returns the registered resource for gvr. The caller holds mu.
func (s *Server) resourceFor(gvr schema.GroupVersionResource) (*resource, error) {
	r, ok := s.resources[gvr]
	if !ok {
		return nil, apierrors.NewNotFound(gvr.GroupResource(), "")
	}
	return r, nil
}

// lookup is resourceFor for a caller that does not hold mu. Resources are
// never unregistered and their descriptions never change, so the result
// stays valid after the lock is released.
func (s *Server) lookup(gvr schema.GroupVersionResource) (*resource, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.resourceFor(gvr)
}

// bump advances the resourceVersion for a write and wakes readers waiting
// for freshness. The caller holds mu.
func (s *Server) bump() uint64 {
	s.rv++
	close(s.changed)
	s.changed = make(chan struct{})
	return s.rv
}

// waitFresh blocks until the server's resourceVersion is at least rv, for
// at most FreshnessTimeout, as the apiserver's watch cache does for "not
// older than" reads. It returns the 504 "Too large resource version" error
// on timeout. The caller must not hold mu.
func (s *Server) waitFresh(ctx context.Context, rv uint64) error {
	var timeout <-chan time.Time
	for {
		s.mu.Lock()
		cur, changed := s.rv, s.changed
		s.mu.Unlock()
		if cur >= rv {
			return nil
		}
		if timeout == nil {
			t := time.NewTimer(s.opts.FreshnessTimeout)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-changed:
		case <-timeout:
			return tooLargeResourceVersion(rv, cur)
		case <-ctx.Done():
			return ctxError(ctx)
		}
	}
}

// copyObject returns obj or, unless ShareObjects is set, a deep copy.
func (s *Server) copyObject(obj runtime.Object) runtime.Object {
	if s.opts.ShareObjects {
		return obj
	}
	return obj.DeepCopyObject()
}

// ctxError reports a done context as an API error, the way a client sees a
// request cut short.
func ctxError(ctx context.Context) error {
	return fmt.Errorf("cachetest: %w", context.Cause(ctx))
}
