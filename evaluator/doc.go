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
//   - ResourceClaims of resource.k8s.io/v1 ([NewResourceClaimEvaluator]):
//     count/resourceclaims.resource.k8s.io, devices per DeviceClass
//     ([ResourceByDeviceClass]) and the extended resource names
//     DeviceClasses back; it reads DeviceClasses and pods too.
//   - ConfigMaps, Secrets, ReplicationControllers, ResourceQuotas: counted
//     by [generic.NewObjectCountEvaluator] under count/<resource> and their
//     legacy names.
//
// [NewEvaluators] and [NewRegistry] build all of them, [DefaultUpdateFilter]
// tells a controller which updates may change usage, and
// [DefaultIgnoredResources] lists what quota never charges.
//
// # Pods
//
// [PodEvaluator] charges a pod what Kubernetes 1.37 charges it. count/pods
// is always 1, even after the pod has ended; a pod in phase Succeeded or
// Failed, or past deletionTimestamp plus its grace period (by
// [PodOptions.Now]), charges nothing else. Otherwise it charges pods, cpu,
// memory and ephemeral-storage under their bare, requests.* and limits.*
// names, hugepages-<size> and requests.hugepages-<size> from requests, and
// requests.<name> for extended resources; a resource the pod lacks has no
// key. Requests and limits are aggregated as component-helpers v0.37 does:
// containers plus sidecars, at least each init container plus the sidecars
// declared before it; for in-place resize the maximum of the pod sums of
// spec, allocated and actuated resources, without the spec when the resize
// is infeasible; pod-level spec.resources for cpu, memory and hugepages;
// overhead on every request and on every non-zero limit. Scopes are
// Terminating, NotTerminating, BestEffort and NotBestEffort ([QOSClass]),
// PriorityClass (Exists, In, NotIn, DoesNotExist) and
// CrossNamespacePodAffinity; any other scope never matches a pod.
//
// [PodEvaluator.UsageStats] sums a namespace without a ResourceList per pod
// and with no allocation per pod, on the caller's goroutine.
// [PodEvaluator.Usage] never modifies the pod; Kubernetes adds the overhead
// into a pod-level request written with a fractional binary unit ("1.5Gi")
// in the pod itself, so a cached pod's usage grows with every evaluation.
// [DefaultUpdateFilter] also fires on pod-level resizes, allocated-resource
// changes and infeasible resizes, which Kubernetes releases only at the next
// full resync.
//
// # Resource claims
//
// [ResourceClaimEvaluator] charges a claim of Dynamic Resource Allocation
// what Kubernetes 1.37 charges it: count/resourceclaims.resource.k8s.io 1;
// <class>.deviceclass.resource.k8s.io/devices per class, the count of an
// ExactCount request, 32 (the most devices one claim can be allocated) for
// All, and for a firstAvailable request the largest of its subrequests per
// class, in every class it names; admin access is not exempt. With the
// DRAExtendedResource behaviour (on by default; see [Options]) it also
// charges each class's devices under
// requests.deviceclass.resource.kubernetes.io/<class>, and under
// requests.<name> when the class declares spec.extendedResourceName. A
// claim the scheduler made for a pod's extended resources (annotated
// resource.kubernetes.io/extended-resource-claim and controlled by the
// pod) is charged those names only beyond what the pod itself is charged
// for them, so that each device counts once per name.
//
// The evaluator keeps no cache. Kubernetes follows DeviceClass events in
// a cache whose content depends on their order; this evaluator lists the
// DeviceClasses when it needs them, and the same classes always give the
// same answer. Without a DeviceClass list function (admission built
// without listers) it knows no class, as Kubernetes before its DeviceClass
// informer has synced: claims are then charged no explicit extended
// resource name, and MatchingResources matches no extended resource name.
//
// Pods are charged requests.<name> for every extended resource their
// containers request, device plugin or DRA, including the implicit
// deviceclass.resource.kubernetes.io/<class> names, whatever the options.
//
// # Guarantees
//
// Evaluators are safe for concurrent use. Wrong object types, nil objects
// and nil maps are errors (or, where the method returns a bool, false),
// never panics. Behaviour that Kubernetes guards with feature gates is an
// option field ([PodOptions], [ResourceClaimOptions], [Options]) whose zero
// value is the 1.37 default; there are no globals.
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
//   - A resource claim update that changes what the claim charges (its
//     requests, its extended-resource-claim annotation, its controlling
//     pod) triggers recalculation; upstream never recalculates on a claim
//     update.
//   - A claim with devices of two DeviceClasses that declare the same
//     extended resource name is charged the sum of their devices under that
//     name, as two claims would be; Kubernetes charges one class's devices,
//     chosen by map iteration order, so its answer varies.
//   - Which extended resource names DeviceClasses back is computed from
//     the classes that exist. Kubernetes' cache forgets a name when a
//     class that lost a clash over it is deleted, although the winner
//     still declares it, and keeps a name a class declared before an
//     update that lost a clash.
//   - A DeviceClass, pod or claim list function that fails, or returns an
//     object of the wrong type, makes the claim's usage an error;
//     Kubernetes then charges a scheduler-made claim in full, without a
//     word.
//   - Scope-matching errors are returned, not swallowed (kubernetes#117676;
//     see [generic.CalculateUsageStats]).
//   - A pod quantity beyond ±(2^63-1) units is capped there, as the
//     Quantity API documents, one finer than a nano-unit is rounded away
//     from zero to ±1n (as parsing rounds), and a zero written with a
//     huge exponent is a zero: resource.ParseQuantity accepts
//     "cpu: 1E222222117", and exact arithmetic on it took minutes; the pod
//     evaluator answers in microseconds.
package evaluator
