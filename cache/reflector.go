package cache

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
)

// ReflectorStore is what a [Reflector] writes to: a [Store], a [DeltaFIFO],
// or anything else with these methods. A store that also has a
// Bookmark(resourceVersion string) method is told of every bookmark.
type ReflectorStore interface {
	// Add applies a watch's ADDED event.
	Add(obj any) error
	// Update applies a watch's MODIFIED event.
	Update(obj any) error
	// Delete applies a watch's DELETED event; obj is the final state.
	Delete(obj any) error
	// Replace applies a list: list is the whole resource as of
	// resourceVersion.
	Replace(list []any, resourceVersion string) error
	// Resync is called every ReflectorOptions.ResyncPeriod while a watch
	// is open (when ShouldResync agrees).
	Resync() error
}

// bookmarkStore is the optional interface of a ReflectorStore that tracks
// the resourceVersion of bookmarks.
type bookmarkStore interface {
	Bookmark(resourceVersion string)
}

// ReflectorOptions configures a [Reflector]. The zero value means defaults.
type ReflectorOptions struct {
	// Name identifies the reflector in logs and errors. Defaults to the
	// description of the expected type.
	Name string
	// ResyncPeriod is how often the store's Resync is called while a watch
	// is open. Defaults to 0: never.
	ResyncPeriod time.Duration
	// ShouldResync, when set, is asked at every resync tick whether to call
	// Resync. A SharedIndexInformer uses it to resync only when a handler is
	// due.
	ShouldResync func() bool
	// MinWatchTimeout is the shortest server-side timeout of a watch; each
	// watch asks for a random timeout between it and twice it, so that many
	// reflectors do not re-watch at once. Values below 5 minutes are raised
	// to 5 minutes. Defaults to 5 minutes.
	MinWatchTimeout time.Duration
	// PageSize is the number of objects asked for per page of a list.
	// Defaults to 500. A relist at a known resourceVersion asks for
	// everything at once, as upstream: the apiserver's watch cache serves it
	// without touching etcd.
	PageSize int64
	// Backoff is the delay between list-and-watch attempts and after
	// retriable errors. Its zero fields take the upstream defaults.
	Backoff Backoff
	// UseWatchList streams the initial state through a watch with
	// SendInitialEvents instead of listing it (Kubernetes' WatchList). If
	// the stream fails, or the end-of-initial-events bookmark does not
	// arrive within InitialEventsTimeout of the last event, the reflector
	// reports the error and falls back to a list for that attempt. Defaults
	// to false.
	UseWatchList bool
	// InitialEventsTimeout bounds the wait for the end-of-initial-events
	// bookmark, measured from the last event received. Defaults to 30
	// seconds.
	InitialEventsTimeout time.Duration
	// Transform, when set, is applied to every object a list or watch
	// delivers, before its type is checked and before it is written to the
	// store; expectedType is the type of what Transform returns, so a
	// Transform may convert, for example, *unstructured.Unstructured into
	// *corev1.Pod. An error from it fails the list, or ends the watch, that
	// delivered the object. Bookmarks are not transformed. Defaults to none.
	Transform TransformFunc
	// WatchErrorHandler, when set, is called with every error that ends a
	// list-and-watch attempt, before the reflector backs off and relists.
	// It must return quickly. Defaults to logging the error at the level
	// upstream uses for it.
	WatchErrorHandler func(ctx context.Context, r *Reflector, err error)
}

// Reflector keeps a store in step with one resource of an API: it lists the
// resource into the store with Replace, then watches it from the list's
// resourceVersion and applies each event with Add, Update or Delete. When
// the watch ends it re-watches, and when that is not possible it relists.
//
// The rules, those of client-go's Reflector:
//
//   - The first list asks for resourceVersion "0" (any recent state, served
//     from the apiserver's cache); relists ask for the last synced
//     resourceVersion (not older than), so the store never goes back in
//     time; after 410 Expired/Gone or a "too large resource version" error
//     the reflector relists at once at "" (the latest state).
//   - Lists are paginated with continue tokens; when a continuation expires
//     the whole list is asked for again in one page.
//   - A watch starts at the last synced resourceVersion with bookmarks on
//     and a random timeout; a watch that the server closes normally is
//     re-opened from where it left off without a relist. A watch closed in
//     under a second with no events, or ended by an error, leads to a relist
//     after a backoff. 429 Too Many Requests and connection refusals of a
//     watch back off and re-watch without relisting; a list that fails
//     otherwise than above, refused connections included, is retried
//     after the backoff.
//   - Bookmarks advance the resourceVersion.
//
// Unlike client-go, which drops and logs an object of an unexpected type,
// an object that after [ReflectorOptions.Transform] is not of the expected
// type, has no metadata, or that the transform fails on, is an error
// (wrapping [ErrUnexpectedType] or the transform's error): in a list it
// fails the whole list, so the store is not replaced and a store that has
// never been filled stays unsynced; in a watch it ends the watch before the
// event is applied. Either way the error goes to the WatchErrorHandler and
// the reflector backs off and relists, so an object that stays bad keeps
// the reflector relisting, loudly, while what the store already holds is
// kept.
//
// A Reflector is safe for concurrent use; [Reflector.Run] must be called
// once at a time.
type Reflector struct {
	lw           ListerWatcher
	store        ReflectorStore
	expectedType reflect.Type
	expectedGVK  schema.GroupVersionKind
	name         string
	typeDesc     string
	opts         ReflectorOptions
	// backoff paces relists and watch retries alike, as upstream's one
	// delay function per reflector does.
	backoff *backoffState
	// arenas, set by an informer before Run, makes lists store their
	// items in place (see arenaSet); nil means copy them.
	arenas *arenaSet

	mu sync.Mutex
	// guarded by mu
	lastSyncRV string
	// guarded by mu; set when the last list or watch said lastSyncRV can no
	// longer be served, so the next list asks for the latest state.
	rvUnavailable bool
	// guarded by mu; set when a list at resourceVersion "0" came back in
	// pages: the apiserver has no watch cache, so relists page too.
	paginatedResult bool
}

// NewReflector returns a reflector that keeps store in step with the
// resource lw lists and watches. expectedType is an object of the type the
// store is to hold (for example &corev1.Pod{}, or an
// *unstructured.Unstructured with its apiVersion and kind set), after
// [ReflectorOptions.Transform]; objects of other types are errors (see
// [Reflector]). A nil expectedType accepts everything. It panics if lw or store is nil, which is
// a programming error.
func NewReflector(lw ListerWatcher, expectedType runtime.Object, store ReflectorStore, opts ReflectorOptions) *Reflector {
	if lw == nil || store == nil {
		panic("cache: NewReflector needs a ListerWatcher and a store")
	}
	r := &Reflector{lw: lw, store: store, opts: opts}
	r.typeDesc = "<unspecified>"
	if expectedType != nil {
		r.expectedType = reflect.TypeOf(expectedType)
		r.typeDesc = r.expectedType.String()
		if u, ok := expectedType.(*unstructured.Unstructured); ok {
			if gvk := u.GroupVersionKind(); !gvk.Empty() {
				r.expectedGVK = gvk
				r.typeDesc = gvk.String()
			}
		}
	}
	r.name = opts.Name
	if r.name == "" {
		r.name = r.typeDesc
	}
	if r.opts.MinWatchTimeout < 5*time.Minute {
		r.opts.MinWatchTimeout = 5 * time.Minute
	}
	if r.opts.PageSize <= 0 {
		r.opts.PageSize = 500
	}
	if r.opts.InitialEventsTimeout <= 0 {
		r.opts.InitialEventsTimeout = 30 * time.Second
	}
	r.opts.Backoff = r.opts.Backoff.withDefaults()
	r.backoff = newBackoffState(r.opts.Backoff)
	return r
}

// Name returns the reflector's name.
func (r *Reflector) Name() string { return r.name }

// TypeDescription describes the type of objects the reflector expects.
func (r *Reflector) TypeDescription() string { return r.typeDesc }

// LastSyncResourceVersion returns the resourceVersion the store is known to
// be current with: that of the last list, watch event or bookmark applied.
// It is "" before the first list.
func (r *Reflector) LastSyncResourceVersion() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastSyncRV
}

func (r *Reflector) setLastSyncResourceVersion(rv string) {
	r.mu.Lock()
	r.lastSyncRV = rv
	r.mu.Unlock()
}

// relistResourceVersion is the resourceVersion the next list asks for.
func (r *Reflector) relistResourceVersion() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.rvUnavailable:
		return ""
	case r.lastSyncRV == "":
		return "0"
	default:
		return r.lastSyncRV
	}
}

func (r *Reflector) setUnavailable(v bool) {
	r.mu.Lock()
	r.rvUnavailable = v
	r.mu.Unlock()
}

// Run lists and watches until ctx is done, backing off between attempts,
// and returns when ctx is done. Errors go to the WatchErrorHandler.
func (r *Reflector) Run(ctx context.Context) {
	log := logr.FromContextOrDiscard(ctx).WithValues("reflector", r.name)
	ctx = logr.NewContext(ctx, log)
	for ctx.Err() == nil {
		if err := r.ListAndWatch(ctx); err != nil && ctx.Err() == nil {
			r.handleWatchError(ctx, err)
		}
		if !r.backoff.sleep(ctx) {
			return
		}
	}
}

func (r *Reflector) handleWatchError(ctx context.Context, err error) {
	if h := r.opts.WatchErrorHandler; h != nil {
		h(ctx, r, err)
		return
	}
	log := logr.FromContextOrDiscard(ctx)
	switch {
	case isExpired(err):
		log.V(4).Info("Watch closed", "err", err)
	case errors.Is(err, errWatchClosedEarly):
		log.V(1).Info("Watch closed early", "err", err)
	default:
		log.Error(err, "Failed to watch")
	}
}

// ListAndWatch runs one attempt: it lists (or streams the initial state),
// then watches until the watch cannot be resumed, ctx is done or an error
// needs a relist. It returns nil when ctx is done or after a watch expired,
// and otherwise the error that ended the attempt.
func (r *Reflector) ListAndWatch(ctx context.Context) error {
	var w watch.Interface
	if r.opts.UseWatchList {
		var err error
		w, err = r.watchList(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			r.handleWatchError(ctx, fmt.Errorf("cache: reflector %s: streaming the initial state failed, falling back to a list: %w", r.name, err))
		}
	}
	if w == nil {
		if err := r.list(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
	return r.watch(ctx, w)
}
