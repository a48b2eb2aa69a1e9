// Package evaluator provides the quota evaluators of the core Kubernetes
// resources, with the semantics of Kubernetes 1.37: the numbers they compute
// are the numbers kube-apiserver's ResourceQuota admission and
// kube-controller-manager's quota controller compute.
//
//   - Pods ([NewPodEvaluator]): count/pods, pods, cpu, memory,
//     ephemeral-storage, their requests.* and limits.*, hugepages and
//     extended resources, aggregated over containers, sidecars, init
//     containers, overhead, pod-level resources and in-place resizes;
//     scopes Terminating, NotTerminating, BestEffort, NotBestEffort,
//     PriorityClass and CrossNamespacePodAffinity.
//   - Services ([NewServiceEvaluator]): services, count/services,
//     services.loadbalancers, services.nodeports.
//   - PersistentVolumeClaims ([NewPersistentVolumeClaimEvaluator]):
//     persistentvolumeclaims, requests.storage, their per-storage-class
//     forms ([ResourceByStorageClass]); scope VolumeAttributesClass.
//   - ConfigMaps, Secrets, ReplicationControllers, ResourceQuotas: counted
//     by [generic.NewObjectCountEvaluator] under count/<resource> and their
//     legacy names.
//
// [NewEvaluators] and [NewRegistry] build all of them, [DefaultUpdateFilter]
// tells a controller which updates may change usage, and
// [DefaultIgnoredResources] lists what quota never charges.
//
// # Guarantees
//
// Evaluators are safe for concurrent use. Wrong object types, nil objects
// and nil maps are errors (or, where the method returns a bool, false),
// never panics. Behaviour that Kubernetes guards with feature gates is an
// option field ([PodOptions]) whose zero value is the 1.37 default; there are
// no globals.
//
// # Listing
//
// Evaluators list objects through [generic.ListFuncByNamespace], which a
// controller builds from its informers; [NewEvaluators] asks a
// [generic.ListerForResourceFunc] for one per resource. Without one an
// evaluator serves admission only: it computes the usage of single objects,
// and its UsageStats return an error.
//
// # Differences from upstream
//
// Where Kubernetes is wrong this package does the right thing:
//
//   - A status update of a PersistentVolumeClaim goes through quota, and a
//     claim update triggers recalculation, only when the allocated storage
//     or a volume attributes class really changed. Upstream compares two
//     *resource.Quantity pointers, which always differ.
//   - A service update whose number of node ports changed triggers
//     recalculation; upstream looks at the service type only.
//   - Scope-matching errors are returned, not swallowed (kubernetes#117676;
//     see [generic.CalculateUsageStats]).
package evaluator
