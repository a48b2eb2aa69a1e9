// Package cache provides the client-side cache of Kubernetes objects that
// controllers run on: keys, a thread-safe indexed [Store], the [DeltaFIFO]
// queue of changes, the [Reflector] that lists and watches an API through
// the [ListerWatcher] seam, the [SharedIndexInformer] that ties them to
// event handlers, typed listers and [WaitForCacheSync]. It depends only on
// k8s.io/apimachinery.
//
// # Guarantees
//
//   - Level-based delivery. A consumer of the pipeline converges on the
//     latest state of every object; it is not promised every intermediate
//     state. Changes to one object are coalesced while it waits in the
//     queue, a watch gap is closed by a relist, and deletions missed during
//     the gap arrive as [DeletedFinalStateUnknown] tombstones whose object
//     may be stale or nil. Write handlers that compute what the world should
//     look like from the current state, not from the sequence of events
//     (client-go#571 asks for the latter; it is not how informers work).
//   - Stored objects are shared and immutable. Everything a [Store],
//     [Indexer] or [Lister] returns is the cached object itself: copy
//     it before changing it.
//   - Safe for concurrent use. [ThreadSafeStore], the stores made by
//     [NewStore] and [NewIndexer], [DeltaFIFO] and the listers may be used
//     from any number of goroutines. No user code (index functions,
//     transforms, handlers) runs while a lock of this package is held, with
//     one exception: an informer applies deltas to its indexer, and so runs
//     its index functions, while holding the lock that orders deltas
//     against the registration of late handlers; an index function must
//     not add handlers to its own informer.
//   - Errors, not panics. An index function that fails makes the write
//     return an error and leaves the store unchanged (upstream client-go
//     panics); objects of the wrong type in a cache are lister errors.
//   - Never a silent wrong type. The type an informer or reflector is built
//     with is the type its store holds after the transform
//     ([SharedIndexInformer.SetTransform], [ReflectorOptions.Transform]),
//     so a transform may convert, say, *unstructured.Unstructured into
//     *corev1.Pod. An object that after the transform is of another type
//     (or has no metadata), or that the transform fails on, is an error
//     wrapping [ErrUnexpectedType] or the transform's error, not a log
//     line (client-go drops it and reports the informer synced): in a list
//     it fails the whole list, so an informer that never synced stays
//     unsynced; in a watch it ends the watch. The error goes to the watch
//     error handler and the reflector backs off and relists; nothing
//     already stored is lost, and an informer that had synced stays
//     synced with the objects it has. A [ResourceEventHandlerFuncs]
//     whose type cannot hold the informer's objects is refused by
//     [SharedIndexInformer.AddEventHandler].
//
// # The pipeline
//
// An informer is four stages:
//
//	Reflector → DeltaFIFO → Indexer → event handlers
//
// The Reflector lists and watches one resource through a [ListerWatcher]
// and writes what it sees to the [DeltaFIFO] as a [Store]: Add, Update and
// Delete for watch events, Replace for a (re)list, Resync on a timer. The
// informer's loop pops the queued [Deltas] of one object at a time, applies
// them to the [Indexer] (which the queue knows as its [KnownObjects]), and
// then notifies handlers.
//
// # The Reflector
//
// A [Reflector] follows client-go's rules: the first list asks for
// resourceVersion "0", relists for the last synced version, and after 410
// Expired or "too large resource version" it relists at once at ""; lists
// are paged, with a whole list when a continuation expires; a watch resumes
// from the last version with bookmarks on and is re-opened without a relist
// when the server closes it normally; other watch failures relist after an
// exponential backoff with jitter (800ms doubling to 30s, restarted at
// 800ms every two minutes even while failures go on, client-go's rule; see
// [Backoff]), except 429 and refused connections while watching, which
// only re-watch. A list that fails otherwise than by 410 or "too large
// resource version", refused connections included, is retried after the
// same backoff.
// [ReflectorOptions.UseWatchList] streams the initial state instead of
// listing it, and falls back to a list, with an error reported, when the
// server does not send the end-of-initial-events bookmark.
//
// # Informers
//
// A [SharedIndexInformer] runs the pipeline and fans notifications out to
// any number of [ResourceEventHandler]s, each with its own unbounded,
// ordered buffer and goroutine, so a slow handler delays only itself. A
// handler added after the informer started first receives every current
// object as an add; its registration's HasSynced says when it has handled
// them. Resync notifications reach only the handlers whose period is due. A
// panicking handler is recovered and logged. [SharedIndexInformer.Run]
// takes a context and returns only after every goroutine it started has
// exited. [ResourceEventHandlerFuncs] adapts functions to handlers, typed
// (ResourceEventHandlerFuncs[*corev1.Pod] hands them pods and unwrapped
// tombstones) or not (ResourceEventHandlerFuncs[any]); it is the one
// adapter, where client-go has three. [FilteringResourceEventHandler]
// passes on the notifications of the objects a filter accepts.
//
// # Untyped stores, typed listers
//
// Stores hold values of type any, like client-go's. An informer's pipeline
// carries more than API objects: tombstones travel through the same queue
// and store methods, keys can be given as [ExplicitKey], and the set of
// resources a controller caches is often decided at run time (for example
// count/<resource>.<group> quotas), so the element type cannot be a compile
// time parameter of every stage. Typed access sits at the edge instead:
// [Lister] converts to T once, with an error rather than a panic on
// a wrong type. Keys of typed objects are computed with a single interface
// assertion and no reflection.
//
// # Keys and indexes
//
// An object's storage key is "namespace/name", or "name" when it is
// cluster-scoped ([MetaNamespaceKeyFunc], [ObjectName]). Indexes map each
// object to zero or more indexed values ([IndexFunc]); [NamespaceIndex] is
// the one every informer has and listers use. [Indexer.ByIndex] and
// [Indexer.IndexKeys] read them; [Indexer.AddIndexers] may add indexes to a
// store that already holds objects.
//
// # The queue
//
// [DeltaFIFO] follows upstream's DeltaFIFO rule for rule (coalescing per key
// without losing its position, merged duplicate deletions, tombstones for
// deletions a relist reveals, Resync that never overtakes queued changes,
// HasSynced that counts tombstones). Upstream client-go 1.37 informers use
// RealFIFO by default instead; this package implements the DeltaFIFO
// semantics, which coalesce changes per key and so keep the handler backlog
// bounded by the number of objects.
//
// # Differences from client-go
//
//   - [DeltaFIFO.Pop] takes a context and a [PopProcessFunc] over [Deltas],
//     and runs it without holding the queue's lock; a key being processed
//     is not popped again, and Replace, Delete and Resync account for it.
//     Panics in process functions and index functions become errors.
//   - Writes to a closed DeltaFIFO return [ErrFIFOClosed].
//   - Index functions that fail are reported to the writer (upstream
//     panics), and the store is left unchanged.
//   - The generic lister is [Lister] (upstream listers.ResourceIndexer);
//     [ListerWatcher] has no separate Lister and Watcher halves.
//   - An informer stores listed objects in place, in their list's items
//     array, instead of copying each into its own allocation as client-go
//     does (meta.ExtractListWithAlloc): listing 100k pods then allocates
//     no copies. So that a few survivors cannot keep a whole list alive,
//     it counts per list how many of its objects are stored and gone, and
//     copies the survivors out once as many are gone as remain: an array
//     never keeps more dead objects alive than it holds live ones. A
//     [Reflector] that does not feed an informer copies, as upstream.
//   - Stores keep objects in a compact table and index entries by 4-byte
//     ids, about 92 bytes per object with the namespace index (keys of
//     about 30 characters) against client-go's 139.
//
// # Resource versions
//
// [Store.LastStoreSyncResourceVersion] is the last resourceVersion written
// to the store: that of the last object added, updated or deleted with its
// final state, or the version given to the last [Store.Replace] or
// [Store.Bookmark]. It is the last one written, not the largest.
package cache
