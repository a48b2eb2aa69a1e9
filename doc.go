// Package quotakit is the ResourceQuota machinery of Kubernetes, and the
// informer and workqueue primitives it runs on, for people who build control
// planes without importing k8s.io/kubernetes, k8s.io/apiserver or
// k8s.io/client-go. Its only dependencies are k8s.io/apimachinery and
// k8s.io/api.
//
// The root package holds the ResourceQuota [Controller]: it keeps every
// quota's status.hard and status.used as kube-controller-manager does, over
// one informer per counted resource, and needs of an API server only what
// [Client] names (and, to count any resource a quota names, what
// [Discoverer] names). It accepts typed, unstructured and metadata-only
// objects, and is never wrong in silence: a number it cannot compute is
// logged at error level and keeps its last value. What admission charged
// ahead of the objects is kept for a charge window and released once no
// object followed it (see Charges in flight on [Controller]), so that the
// controller, any number of admission replicas and kube-apiserver's own
// plugin together admit no more than hard. With Options.ClusterQuotas it
// also keeps ClusterQuotas, quota over a selection of namespaces.
//
// # Map of the library
//
//   - [github.com/quotakit/quotakit/quota]: the quota model — the
//     Evaluator and Registry interfaces, the Attributes an evaluator reads
//     of an admission request, ResourceList arithmetic, CalculateUsage, and
//     CheckRequest, the check kube-apiserver's ResourceQuota admission
//     plugin runs.
//   - [github.com/quotakit/quotakit/admission]: ResourceQuota admission for
//     webhooks and extension API servers — a concurrent Evaluator that
//     batches per namespace and never leaves a charge for a request it did
//     not admit, a quota Accessor, LoadConfiguration, and an http.Handler
//     for AdmissionReview v1 (and v1beta1).
//   - [github.com/quotakit/quotakit/clusterquota]: the ClusterQuota API
//     (quota.quotakit.io/v1alpha1, OpenShift's ClusterResourceQuota
//     layout), its namespace selection, validation, bounded status and
//     conditions, and the Index of which cluster quotas select which
//     namespaces; admission.NewClusterAccessor enforces it.
//   - [github.com/quotakit/quotakit/generic]: the object-count evaluator
//     (count/<resource>.<group> for anything) and the building blocks of
//     custom evaluators; a registry.
//   - [github.com/quotakit/quotakit/evaluator]: the one table of core
//     resources (evaluator.Resources), the pods, services,
//     persistentvolumeclaims, resource claims and counted-object evaluators
//     with the exact semantics of Kubernetes 1.37, and the update filter a
//     controller uses to decide when usage may have changed.
//   - [github.com/quotakit/quotakit/cache]: keys, Store, Indexer,
//     DeltaFIFO, Reflector, SharedIndexInformer, event handlers, generic
//     listers and WaitForCacheSync, written from scratch.
//   - [github.com/quotakit/quotakit/cache/cachetest]: an in-memory API with
//     resourceVersions, list paging, watch history, bookmarks, 410 Expired
//     and fault injection, for tests and demos;
//     [github.com/quotakit/quotakit/admission/admissiontest] serves the
//     admission package's quota clients over it.
//   - [github.com/quotakit/quotakit/workqueue]: generic queue, delaying and
//     rate-limiting queues, client-go's rate limiters, metrics hooks and
//     ParallelizeUntil.
//
// Packages lower in this list never import those above them that they do
// not need: quota, generic and evaluator never import cache (evaluators list
// through a function, generic.ListFuncByNamespace, that a controller builds
// from its informers in one line), and cache and workqueue import nothing
// of quota.
//
// The program in examples/quotademo runs the controller over cachetest
// under churn and checks every quota against a recount; examples/usage
// shows the pieces without it (informers over cachetest feeding the
// evaluators, and CalculateUsage over them); examples/admission is a
// validating webhook; examples/clusterquota a tenant under a
// ClusterQuota. The module github.com/quotakit/quotakit/kube, kept apart
// so that the library never requires client-go, is the Client over
// client-go, Prometheus metrics, a controller binary with leader election
// and its deployment manifests (its package kube/manager adds the
// controller to a controller-runtime manager); the module in e2e/ tests
// all of it against a real kube-apiserver and etcd.
//
// # The controller
//
// [Controller] keeps the status of every ResourceQuota (and, with
// Options.ClusterQuotas, every ClusterQuota) true. It runs one informer
// per counted resource (the rows of
// [github.com/quotakit/quotakit/evaluator.Resources], Options.Resources,
// and, with a [Discoverer] client, every served resource some quota
// names) and one for ResourceQuotas, and recalculates a quota:
//
//   - when it is created, or its spec.hard or scope selector changes (a
//     quota whose status.hard differs from spec.hard, or that lacks a used
//     value, goes to a priority queue so that admission can start
//     enforcing it soon);
//   - when an object of its namespace that it may charge is deleted, or
//     updated in a way the update filter says may change usage (the pod
//     became terminal, a resize, a service's node ports, …), or created
//     or updated in any way that changes what the ledger (below) has it
//     charge the quota;
//   - when a pod deleted with a grace period reaches the end of it, which
//     no event marks when no kubelet finishes the deletion;
//   - when another writer changes its status.used (admission charged it),
//     and a charge window later (see Charges in flight below);
//   - every Options.ResyncPeriod.
//
// Both kinds of quota go through one pipeline: a quota is read (the
// cached version, or the controller's own last write while the informer
// has not delivered it), its usage computed (a ResourceQuota's over its
// namespace, a ClusterQuota's over each namespace it selects), settled
// with the charges in flight (below), and its status written when it
// changed, with the quota's resourceVersion as a precondition. What
// differs between the kinds is only how a quota is read, computed and
// written.
//
// # Charges in flight
//
// Admission (kube-apiserver's plugin, or package admission in any number
// of webhook replicas) charges status.used before the object is stored,
// and the object reaches the informers after that. What a quota's
// status.used holds beyond what the cached objects charge is a charge in
// flight: a recalculation never writes it away while it is younger than
// Options.ChargeWindow (default 30 seconds, [DefaultChargeWindow]), so
// that no recount, at any time, takes back an admitted request whose
// object is on its way. What arriving objects have not accounted for
// once it is a window old is released: the creation failed after
// admission (a name already taken, a later webhook's denial, a forged
// review). Every write carries the quota's resourceVersion, so a charge
// made meanwhile makes it conflict and is read again, never lost. A
// status.used changed by someone else is synced at once, to note the
// charge (such a sync writes nothing unless objects came or went).
//
// Each arriving object takes back a charge held, so that what is held is
// only what no object has accounted for yet; an object that reaches the
// caches before the status that charged it is kept as a credit against
// that status, until the quota's resourceVersion passes the object's
// (kube-apiserver numbers both from one etcd revision). Each charge
// held is rechecked at its own expiry: in a quiet namespace a charge no
// object followed is released one window after it was made, plus the
// time to write. status.used does not say which object a charge was made
// for, so an arrival is taken for the oldest charge held, which never
// releases a charge whose object is on its way, whatever order the
// objects arrive in: a charge no object followed, while charges that
// follow it are accounted for by their objects, is released one window
// after the last of them, and no more than the last window's charges are
// ever held. Arriving objects are counted exactly for the resources the
// ledger keeps (the core table's and counted ones); for the caller's own
// evaluators only the growth of their usage is known to have arrived, so
// an object that arrives in the recalculation that also sees another
// deleted is taken for one on its way, and its charge held until it
// leaves the window. Releases are logged and counted
// ([Controller.ReleasedCharges]). A status.used raised by hand is a
// charge like any other, released a window later.
//
// Status writes that only release usage are coalesced: one goes out at
// once, and the releases that follow within 100ms go out together once
// that has passed ([Controller.PutOffWrites]). Each write the controller
// makes is one that admission, writing over the version it read, may
// conflict with, and kube-apiserver's plugin answers a creation 409 once
// its retries, which read its own lagging cache again, are spent.
// Conflicts of the controller's own writes are expected beside admission:
// they are retried, counted ([Controller.StatusConflicts]) and logged at
// V(1), not as errors.
//
// kube-controller-manager has no such rule: it recounts from its caches
// on deletions, updates and its resync, and a recount made while an
// admitted object is on its way writes its charge away, so that
// admission admits more than hard; and a charge no object follows stays
// until its next recount, up to the 5-minute resync, so that a loop of
// creations of a taken name blocks a namespace (kubernetes#24527, #61530,
// #70563, #76787, #110080, #119593). A negative ChargeWindow restores its
// behaviour.
//
// Usage is what [github.com/quotakit/quotakit/quota.CalculateUsage]
// computes over the informers' caches, kept in a ledger: each object's usage is computed once per
// version the informer delivers, and every event moves the totals of the
// quotas it matches by the difference, so that a recalculation costs
// O(quotas × resources), not O(objects in the namespace) as in
// Kubernetes. Each full resync recalculates every quota from the caches,
// writes that, and reports any difference from the ledger
// ([Controller.Drifts]). Status is written only when it changed, with the
// cached quota's resourceVersion as a precondition; failures are retried
// with the queue's rate limiter. Resources whose evaluator failed keep
// their previous used values, as in Kubernetes.
//
// # Never wrong in silence
//
// Objects come typed, unstructured or as metadata only (see [Client]);
// each informer converts them once to the form its evaluator reads, and
// counted resources are cached as metadata. An object that cannot be
// converted fails its informer's list, which is logged at error level and
// retried, and the resource's quotas keep their last used values rather
// than count zero. A quota whose spec.hard names a resource nobody counts
// (count/jobs.batch without discovery, a resource the server does not
// serve, a typo) is logged at error level, once for each change of those
// names, and counted by [Controller.UncountedQuotas]; other quotas are not
// held up. With a [Discoverer] client, table resources of an API group the
// server does not serve (resource claims before Kubernetes 1.34) are left
// out at start rather than listed in vain.
//
// # Where it differs from kube-controller-manager
//
//   - One resource whose informer never syncs (a broken conversion
//     webhook, a missing RBAC rule) does not hold up the others
//     (kubernetes#133737): workers start once the ResourceQuota informer
//     has synced and the others have, or Options.StartGrace has passed;
//     until a resource's informer (and those its evaluator
//     reads) has synced its resources keep their previous used values (a
//     new quota has none, which admission treats as unknown usage and
//     refuses, rather than as zero), and the quotas that charge it are
//     recalculated as soon as it syncs.
//   - Discovered resources are watched only while a quota names them, and
//     their informers really stop when none does. Kubernetes watches every
//     discovered resource and never stops the informer of one that
//     disappears (kubernetes#142072, #79610). Over 20 custom resources of
//     2,000 objects each, a quota naming one of them costs the controller
//     2.1 MiB of heap, against 37.8 MiB when all 20 are watched
//     (BenchmarkDiscoveredMemory). A quota naming a resource
//     discovery has not seen yet asks discovery again at once; Kubernetes
//     waits for its next 30-second round and then for the quota's next
//     recalculation.
//   - A quota's scopeSelector change triggers a recalculation; Kubernetes
//     waits for the next full resync.
//   - A creation, or an update the update filter does not see (a
//     spec-only resize), that changes what an object charges a quota
//     recalculates it. Kubernetes leaves creations to admission's charge
//     and its next recount of the namespace; but a recount made from a
//     cache that had not seen a creation yet overwrites that charge, and
//     the status stays short of it until another event in the namespace,
//     or the next full resync. The ledger makes such recalculations cheap,
//     and an unchanged status is not written.
//   - Used values are written in the format of their hard limit (memory
//     limited in Gi is used in Mi or Ki), so the same usage is always
//     written the same way. Kubernetes writes a sum in the format of
//     whichever object it summed first, 3328Mi one time and 3489660928 the
//     next.
//   - Recalculations caused by deletions and updates go to the priority
//     queue, so that released usage is not stuck behind a full resync of
//     every quota (kubernetes#122483).
//   - A pod deleted with a grace period is released when the period ends;
//     Kubernetes waits for an event or the next full resync.
//   - While the ResourceQuota informer has not delivered the controller's
//     own last status write, a new status is compared with that write,
//     not with the cached one, and written over it. Kubernetes compares
//     with the cache, so a lagging informer can make it skip a write the
//     stored status needs, leaving the quota wrong until the next full
//     resync; and its writes conflict until the informer catches up.
//   - A quota queued on both queues is never synced by two workers at
//     once (Kubernetes does, and the second write conflicts); a sync asked
//     for while one runs follows it.
//   - A quota whose status write conflicted is synced again as soon as the
//     informer delivers its next version, not only after the rate
//     limiter's backoff, which grows while the informer lags
//     (kubernetes#67761 reports those conflicts).
package quotakit
