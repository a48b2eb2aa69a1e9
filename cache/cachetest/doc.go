// Package cachetest provides an in-memory Kubernetes API for tests and
// demos: a [Server] that stores objects per GroupVersionResource and serves
// list and watch with the resourceVersion semantics of kube-apiserver, plus
// fault injection. It is what quotakit's own Reflector, informer and
// controller tests run against, and library users may use it the same way.
//
// # Guarantees
//
//   - Every write (create, update, status update, delete) of any resource
//     takes the next value of one server-wide resourceVersion counter, as
//     etcd revisions do, so resourceVersions are totally ordered and a list
//     or watch of one resource can be resumed from a resourceVersion seen
//     on another.
//   - Optimistic concurrency: an update, status update or delete that names
//     a resourceVersion other than the stored one fails with 409 Conflict
//     (apierrors.IsConflict). Creating a taken name is 409 AlreadyExists,
//     touching a missing object 404 NotFound.
//   - Objects are stored as private deep copies and every object handed out
//     is a copy the caller may mutate (unless Options.ShareObjects).
//   - Errors are apimachinery status errors with the apiserver's codes,
//     reasons and causes (410 Expired, 504 with cause
//     ResourceVersionTooLarge, 422 Invalid options...), so code that
//     classifies errors with k8s.io/apimachinery/pkg/api/errors behaves as
//     against a cluster.
//   - A Server is safe for concurrent use. Writers never block on watchers.
//     The only goroutines are one per open watch, and each exits on Stop,
//     when its context is done, at its timeout, or on [Server.Close], which
//     waits for all of them. All waiting uses timers from package time, so
//     everything runs under testing/synctest. Create the Server inside the
//     bubble that uses it: its channels then belong to that bubble.
//
// # Resources
//
// [New] registers common core/v1 and apps/v1 types (typed objects such as
// *corev1.Pod, listed as *corev1.PodList). [Server.Register] adds others:
// typed ones by giving a list constructor, unstructured ones
// (*unstructured.Unstructured, listed as *unstructured.UnstructuredList) by
// giving only a Kind. Each resource is namespaced or cluster-scoped.
// [Server.ListerWatcher] adapts any registered resource to
// [github.com/quotakit/quotakit/cache.ListerWatcher].
//
// # Lists
//
// [Server.List] supports label selectors, field selectors on metadata.name
// and metadata.namespace (plus, for pods, spec.nodeName, spec.restartPolicy,
// spec.schedulerName, spec.serviceAccountName, spec.hostNetwork,
// status.phase, status.podIP and status.nominatedNodeName; for secrets,
// type; for nodes, spec.unschedulable; for namespaces, status.phase),
// namespace scoping, and limit/continue paging over
// a consistent snapshot: a continue token carries the snapshot's
// resourceVersion and the last key, so pages of one list show one state
// even while writes go on. resourceVersion "" is a consistent read of the
// latest state, "0" serves the latest state too (and, like the watch cache,
// ignores limit), an exact resourceVersion is served from the event
// history, and "not older than" waits briefly for the server to catch up.
// ListMeta.ResourceVersion is always set.
//
// # Watches
//
// [Server.Watch] resumes from a resourceVersion by replaying a bounded
// per-resource history (Options.HistorySize events) and then streams live
// changes. Starting points, synthetic ADDED events, streaming initial lists
// (SendInitialEvents with the k8s.io/initial-events-end bookmark), periodic
// bookmarks and selector transitions follow kube-apiserver with its watch
// cache; see [Server.Watch] for the exact rules. A watch from before the
// history is accepted and then delivers a single watch.Error event with a
// 410 Expired status, as the apiserver does, rather than failing the call.
//
// # Fault injection and recording
//
// [Server.FailNextLists] and [Server.FailNextWatches] fail the next calls
// with a given error; [Server.SetListDelay] and [Server.SetWatchDelay] slow
// them down; [Server.CloseAllWatches] ends open watches cleanly and
// [Server.FailAllWatches] ends them with an error event; [Server.Compact]
// drops the history so that resuming gets 410 Expired. Options can make
// the server reject streaming watches (DisableWatchList) or never end the
// initial events with a bookmark (OmitInitialEventsEndBookmark).
// [Server.Requests] records the options of every List and Watch call, so a
// test can assert the resourceVersion sequence a Reflector used.
//
// # Simplifications
//
// Compared with kube-apiserver, cachetest does not model admission,
// defaulting, validation of object contents, finalizers and graceful
// deletion (deletes are immediate), managedFields, the field selectors of
// other resources than those listed above, or a separate etcd compaction
// window (the watch history is the only history: an exact list
// or continue token older than it gets 410 Expired, where an apiserver
// might still find it in etcd). Create keeps a status, uid or
// creationTimestamp the caller set, which is convenient in tests; Update
// ignores status changes as for any resource with a status subresource.
// Generation starts at 1 and grows when anything besides metadata and
// status changes. Injected faults and delays apply to every resource.
// A watcher's buffer counts events not yet taken by its goroutine; the
// apiserver's budget is in time rather than events.
package cachetest
