// Package clusterquota provides the API of quota across namespaces: the
// cluster-scoped [ClusterQuota] type of API group quota.quotakit.io,
// version v1alpha1, with its list type, deep copies and scheme
// registration; [AppliedClusterQuota], its read-only copy in each
// namespace it selects, which lets the namespace's users read the
// quotas that apply to them ([Applied] builds one); namespace selection ([ClusterQuota.Selects], and [Index],
// which keeps which quotas select which namespaces from informer events
// so that a lookup costs the same with 100 quotas or 5,000), validation
// in kube-apiserver's style ([Validate]) and the bounded per-namespace
// status ([ClusterQuotaStatus.SetNamespaceStatuses], [BoundStatus]). It
// depends on k8s.io/api and k8s.io/apimachinery only; the CRDs that serve
// the types are kube/deploy/crd/clusterquotas.yaml and
// kube/deploy/applied-cluster-quotas/appliedclusterquotas.yaml in this
// repository, and tests keep them and the types in step.
//
// A ClusterQuota is a ResourceQuota whose limits are shared by every
// namespace its selector picks: "team X may use 100 CPUs across all its
// namespaces".
//
// # Guarantees
//
//   - Bad input is an error, never a panic: a nil object, nil maps, a
//     label selector that does not parse.
//   - A selector that restricts nothing selects nothing: a ClusterQuota
//     never applies to every namespace by accident.
//   - One bad object harms only itself. [Validate] bounds what one quota
//     may hold (selector terms and values, resources, quantities up to
//     [MaxQuantity]), so that no quota can make every admission check
//     slow, and the CRD refuses what Validate refuses as far as a schema
//     and CEL can say it. A quota whose spec is invalid all the same
//     (stored under an older CRD; [ValidateSpec]) is skipped by
//     quotakit's admission and controller, loudly, with the condition
//     [ConditionValid] False on it, and limits nothing until it is fixed;
//     it never makes requests fail in namespaces it was not meant for.
//   - status.namespaces is bounded whatever the selection (below), so a
//     quota over 10,000 namespaces can still be written.
//   - The deep copies share no memory with their originals and keep nil
//     and empty apart.
//   - Nothing is registered at init and there is no package state:
//     [AddToScheme] registers the types in the scheme it is given.
//
// # From OpenShift's ClusterResourceQuota
//
// The JSON of a ClusterQuota is that of OpenShift's quota.openshift.io/v1
// ClusterResourceQuota, field for field and with the same tags, so that
// moving a quota over is a change of apiVersion (the group) and kind:
//
//	quota.openshift.io/v1 ClusterResourceQuota   quota.quotakit.io/v1alpha1 ClusterQuota
//	spec.selector.labels (LabelSelector)         spec.selector.labels
//	spec.selector.annotations (exact match)      spec.selector.annotations
//	spec.quota (ResourceQuotaSpec)               spec.quota
//	status.total (ResourceQuotaStatus)           status.total
//	status.namespaces[] ({namespace, status})    status.namespaces[] (bounded)
//	-                                            status.namespacesOmitted (quotakit's addition)
//
// The semantics are OpenShift's too: a namespace is selected when it
// matches every part of the selector that is set, labels by label
// selector, annotations by exact value; spec.quota means what it means in
// a ResourceQuota, summed over the selected namespaces; status.total.hard
// is what is enforced and status.total.used the sum over every selected
// namespace. The Go names follow OpenShift's where they are the same
// concept ([ClusterQuotaSelector.LabelSelector],
// [ResourceQuotaStatusByNamespace]).
//
// Where quotakit differs:
//
//   - status.namespaces is bounded, and status.namespacesOmitted counts
//     what the bound left out. OpenShift lists every selected namespace.
//   - The CRD does not declare selector.labels, selector.annotations and
//     status.namespaces nullable. Go clients write them as null when
//     unset (the tags have no omitempty, as in OpenShift); the API server
//     then drops them, so that the CRD's rule "labels or annotations must
//     be set" sees a null as unset.
//   - Quantities must not be negative nor greater than [MaxQuantity]
//     (2^63-1), and selectors and resource lists are bounded
//     ([MaxSelectorTerms], [MaxSelectorValues], [MaxAnnotationValueLength],
//     [MaxResources]), in the CRD as in [Validate].
//
// # The bounded status
//
// OpenShift's status lists the usage of every selected namespace. Every
// admitted object changes it, and with thousands of namespaces the object
// approaches etcd's request limit (1.5 MiB by default), after which
// nothing can write it, and so nothing in the selected namespaces can be
// admitted. quotakit keeps the list bounded by this rule, which
// [ClusterQuotaStatus.SetNamespaceStatuses] applies:
//
//  1. only namespaces that use something are listed, and of each only the
//     quantities that are not zero;
//  2. entries are sorted by namespace name;
//  3. the list holds at most [MaxNamespaceStatuses] (1,000) entries, in
//     at most [MaxNamespaceStatusBytes] (512 KiB) of JSON, and stops at
//     the first entry past either bound;
//  4. status.namespacesOmitted counts the namespaces of rule 1 that rule
//     3 left out.
//
// status.total always covers every selected namespace, omitted or not.
// The list is a view for people: the controller counts from its own
// ledger, never from the list, so the bound costs no correctness. With
// 10,000 selected namespaces that all use six resources, the whole object
// takes about 175 KB of JSON; listing every namespace, as OpenShift does,
// would take 1.7 MB, past etcd's limit (the package's tests measure both).
//
// # Concurrency
//
// The API types are plain data: not safe for concurrent mutation. An
// [Index] is safe for concurrent use, and keeps the objects it is fed
// without copying them. Objects
// handed out by a cache or informer are shared and must not be modified;
// DeepCopy them first. [ClusterQuota.Selects], [Validate] and the other
// functions only read their arguments, except the two that set a status,
// which write only the status they are given, and may be called
// concurrently on different objects.
package clusterquota
