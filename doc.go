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
// validating webhook; examples/clusterquota a tenant under a ClusterQuota. The module github.com/quotakit/quotakit/kube, kept
// apart so that the library never requires client-go, is the Client over
// client-go, Prometheus metrics, a controller binary with leader election
// and its deployment manifests (its package kube/manager adds the
// controller to a controller-runtime manager); the module in e2e/ tests all of it against
// a real kube-apiserver and etcd.
package quotakit
