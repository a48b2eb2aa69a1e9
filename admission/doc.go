// Package admission provides ResourceQuota admission for validating
// webhooks, extension API servers and multi-tenant platforms: the checks and
// messages of kube-apiserver's ResourceQuota admission plugin, for many
// concurrent requests, without k8s.io/apiserver or k8s.io/client-go.
//
// # The Evaluator
//
// [Evaluator] is the engine. [Evaluator.Evaluate] checks one request
// ([quota.Attributes]) against the ResourceQuotas of its namespace and
// charges it; [Evaluator.Run] does the work. Requests of a namespace are
// batched and checked in arrival order against running totals, so that one
// status write per quota serves many requests, and a namespace is never
// checked twice at once; after a write, the next batch waits briefly for
// the callers just answered ([Options.BatchDelay]), so that callers in a
// loop share one write. Quotas are read and written through a
// [QuotaAccessor], with the read resourceVersion as a precondition; a
// conflict re-reads and re-checks, a bounded number of times.
//
// The guarantees kube-apiserver does not give, stated in full on
// [Evaluator]: a charge is never left in status.used for a request that was
// not admitted, whether it was denied after a partial write across several
// quotas (kubernetes#133274) or its caller stopped waiting; and Evaluate
// returns by its deadline, with kube-apiserver's timeout error.
//
// # Reading and writing quotas
//
// [NewAccessor] builds a [QuotaAccessor] over a lister (the quotas of an
// informer's cache), the cache's HasSynced and a [QuotaClient] (a live
// list and the status write): the cache once it has synced, a live read
// of every namespace until then, and this
// process's own recent writes in place of older cached versions, so that a
// cache that lags behind them does not cause needless conflicts. After a
// write conflicts, the namespace is read live once: the retry re-checks
// against what the other writer wrote, not against the cache's version
// that just conflicted (kube-apiserver re-reads its cache, and with
// several writers its retries often conflict on the same version).
//
// # With other writers
//
// A quota's status.used is written by every engine that charges it and
// by the quota controller; what holds when they are composed:
//
//   - One Evaluator: exactly what fits is admitted, in arrival order.
//   - Several Evaluators over one API (webhook replicas): the same. Each
//     write carries the resourceVersion the check was made against, so
//     a request is allowed only once its charge is in the status it was
//     checked against; a conflict re-reads live and re-checks; a request
//     is denied with the write error only after [Options.ConflictRetries]
//     such re-reads. [Evaluator.Stats] counts conflicts and retries.
//   - kube-apiserver's ResourceQuota plugin and an Evaluator enforcing the
//     same namespaced quotas: both charge every request, so each request
//     is charged twice until the controller's next recount. Enforce a
//     quota in one place: namespaced quotas with the plugin, and this
//     package where the plugin is off (extension API servers, virtual
//     clusters) or for quotas it cannot enforce.
//   - The quota controller: a charge is written before the object is
//     stored, and reaches the controller's caches after that. The
//     controller of package quotakit keeps what status.used holds beyond
//     its caches for a charge window, so that no recount takes back an
//     admitted request whose object is on its way, and releases it once
//     that old if no object followed (a name already taken, a later
//     webhook's denial): see quotakit.Options.ChargeWindow.
//     kube-controller-manager recounts from its caches on deletions,
//     updates and its resync, and can write such a charge away: an
//     Evaluator in front of kube-controller-manager can admit more than
//     hard while a recount races a burst, as kube-apiserver's own plugin
//     can, and keeps a charge no object follows until its next recount
//     (kubernetes#24527, #61530, #119593).
//
// # Cluster quotas
//
// [NewClusterAccessor] adds to the quotas of a namespace every
// ClusterQuota (package clusterquota) that selects it, as a ResourceQuota
// named "clusterquota/<name>", so that one Evaluator checks a request
// against both kinds in one batch, with the same checks and messages,
// and charges a cluster quota's status.total conflict-safely: replicas
// admit exactly what fits across every namespace a cluster quota selects.
// An Evaluator checks the requests of the namespaces that share a cluster
// quota in one batch ([SharedQuotas]), against one running total, with
// one write of the cluster quota per batch. The accessor finds a
// namespace's cluster quotas by one lookup in a clusterquota.Index kept
// from informer events, so a request costs the same whatever the number
// of cluster quotas, and a request to a namespace none selects costs what
// it costs with none; a conflict re-reads the one quota that conflicted.
//
// # Edges
//
// What holds at the edges, where a cache has not synced, an object is
// invalid or a caller is hostile:
//
//   - Exact from the first request. No accessor of this package reports
//     "no quota" for a namespace whose quotas it has not seen: HasSynced is
//     a required argument, asked before the cache is read, and until it
//     reports true the quotas (and cluster quotas) are read live. A
//     namespace whose labels the cache does not hold yet is refused with a
//     429 and a Retry-After of one second, which kube-apiserver passes on
//     and client-go retries. Two Evaluators created with their informers
//     admit exactly the limit from their first request.
//   - Which namespaces are enforced is known. [Options.Enforced] (built by
//     [SelectedNamespaces] from the webhook configuration's
//     namespaceSelector) decides it in the Evaluator: any other namespace's
//     request is allowed without any quota of it being read, charged or
//     named, whoever sent the review.
//   - One bad object harms only itself. A ClusterQuota whose spec fails
//     clusterquota.ValidateSpec (stored before the CRD rejected such specs,
//     or written to etcd directly) is skipped: it limits nothing while it
//     is invalid, every other quota is enforced, each invalid version is
//     logged at error level once, [ClusterAccessor.Invalid] lists it, and
//     the quota controller sets its Valid condition to False.
//   - A new quota is enforced once its status.hard is written (for a
//     ClusterQuota, status.total.hard), by the quota controller, as
//     kube-apiserver's plugin does for ResourceQuotas: until then it
//     limits nothing.
//   - Bounded under a hostile caller. A caller of the [Handler] can hold
//     a slot only while its review is evaluated
//     ([Handler.MaxConcurrentReviews], 100): a body is read and decoded
//     first, within [Handler.BodyReadTimeout] (5s) or answered 408, and
//     the bodies held at once take at most [Handler.MaxBytesInFlight]
//     (64 MiB), reserved as their bytes arrive, never by a declared
//     length. Over a limit the answer is a 429 with Retry-After, at
//     once. A review names any resource it likes: the object-count
//     evaluator of one the registry lacks is made per request and never
//     kept, so forged names leave nothing behind. Connections are the
//     server's to bound (the quotakit-controller binary caps them).
//   - A refusal is not harmless. kube-apiserver handles a 408, 429 or
//     any other failed call by the webhook's failurePolicy: behind
//     failurePolicy: Fail the request being admitted is refused, as a
//     denial would refuse it; behind Ignore it is admitted unchecked.
//
// # Configuration
//
// [LoadConfiguration] reads the file kube-apiserver's plugin reads (a
// ResourceQuotaConfiguration, in any apiVersion kube-apiserver accepts,
// strictly), whose limited resources go to [Options.LimitedResources].
//
// # Webhooks
//
// [Handler] is an http.Handler for admission.k8s.io/v1 AdmissionReviews
// (and v1beta1, answered in v1beta1): it decodes the request's objects
// ([NewAttributes]) into typed k8s.io/api objects, calls the Evaluator, and
// answers with kube-apiserver's status code, reason and message. Its
// limits (see Edges) have safe defaults: the zero value with an
// Evaluator is ready to serve.
//
// # Concurrency
//
// Everything exported is safe for concurrent use. Objects returned by a
// [QuotaAccessor] must not be modified.
package admission
