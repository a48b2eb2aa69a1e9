package clusterquota

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterQuota is a ResourceQuota over a set of namespaces: the namespaces
// its selector picks share one set of hard limits, and what any of them
// uses counts against all of them together.
//
// It is cluster-scoped. Its JSON is that of OpenShift's
// quota.openshift.io/v1 ClusterResourceQuota, field for field, plus
// status.namespacesOmitted; see the package documentation for the mapping.
type ClusterQuota struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata. The name is a DNS subdomain; there is no
	// namespace.
	metav1.ObjectMeta `json:"metadata"`

	// Spec is what the quota selects and limits.
	Spec ClusterQuotaSpec `json:"spec"`

	// Status is what the controller enforces and has counted. Only the
	// status subresource writes it.
	Status ClusterQuotaStatus `json:"status,omitempty"`
}

// ClusterQuotaSpec is the desired state of a [ClusterQuota].
type ClusterQuotaSpec struct {
	// Selector picks the namespaces the quota applies to. It must restrict
	// the selection: a selector that sets nothing selects no namespace and
	// is rejected by [Validate] and by the CRD.
	//
	// Every selected namespace contends for the same status on every
	// charge, so a quota should select a tenant's namespaces, not the
	// cluster's.
	Selector ClusterQuotaSelector `json:"selector"`

	// Quota holds the hard limits and scopes, with the meaning they have
	// in a ResourceQuota: hard is summed over the selected namespaces, and
	// scopes and scopeSelector narrow which objects count.
	Quota corev1.ResourceQuotaSpec `json:"quota"`
}

// ClusterQuotaSelector picks namespaces by label, by annotation, or both.
// A namespace is selected when it matches every part that is set; a
// selector with no part set selects nothing (see [ClusterQuota.Selects]).
type ClusterQuotaSelector struct {
	// LabelSelector selects namespaces by label, with the usual label
	// selector semantics. When set it must have at least one requirement.
	//
	// The JSON field has no omitempty, as in OpenShift: a nil selector is
	// written as null, which the API server drops, since the CRD does not
	// declare the field nullable.
	LabelSelector *metav1.LabelSelector `json:"labels"`

	// AnnotationSelector selects namespaces whose annotations include
	// every key of the map with exactly the value given. Written as null
	// when nil, like LabelSelector.
	AnnotationSelector map[string]string `json:"annotations"`
}

// ClusterQuotaStatus is what a [ClusterQuota] enforces and what it has
// counted.
type ClusterQuotaStatus struct {
	// Total is the status of the quota as a whole: hard is what is
	// enforced (copied from spec.quota.hard), used the sum over every
	// selected namespace, including namespaces that Namespaces omits.
	Total corev1.ResourceQuotaStatus `json:"total"`

	// Namespaces is the usage of the selected namespaces, one entry per
	// namespace, under the bounded-status rule: only namespaces that use
	// something, only their non-zero quantities, sorted by namespace
	// name, and at most [MaxNamespaceStatuses] entries in at most
	// [MaxNamespaceStatusBytes] of JSON. It is a view for people; the
	// controller counts from its own ledger, never from this list.
	// Written as null when nil.
	Namespaces []ResourceQuotaStatusByNamespace `json:"namespaces"`

	// NamespacesOmitted is the number of selected namespaces that use
	// something but are not listed in Namespaces because of the bound.
	// Their usage is in Total.
	//
	// This field is quotakit's addition to OpenShift's layout: an
	// OpenShift ClusterResourceQuota has no such field, and lists every
	// selected namespace.
	NamespacesOmitted int32 `json:"namespacesOmitted,omitempty"`

	// ObservedGeneration is the metadata.generation of the spec the
	// controller last judged: Conditions describe that spec. It lags
	// metadata.generation until the controller has seen an edit.
	//
	// quotakit's addition to OpenShift's layout, as are Conditions.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions are the controller's verdicts on the quota, at
	// ObservedGeneration: [ConditionValid] and [ConditionNamespacesEnforced].
	// Each type appears at most once.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// The condition types of [ClusterQuotaStatus.Conditions], and their
// reasons. Conditions follow the Kubernetes API conventions: a type names
// a state that is good when True, a reason is one CamelCase word a
// program may branch on, and the message is for people.
const (
	// ConditionValid is True when the spec passes [Validate]. While it is
	// False the quota is skipped, loudly, by admission and the controller:
	// it limits nothing and its status.total is not recounted, so that
	// one bad object harms only the tenant it was meant for rather than
	// every namespace of the cluster. A CRD rejects such an object today;
	// one can still be stored by a CRD from before that rule or a direct
	// write to etcd.
	ConditionValid = "Valid"
	// ConditionNamespacesEnforced is True when every namespace the quota
	// selects is one whose requests admission checks (the enforced
	// namespaces' selector), False when some are counted in the total
	// but never checked, so that the quota is not the limit it seems, and
	// Unknown when the controller was not told which namespaces are
	// enforced.
	ConditionNamespacesEnforced = "NamespacesEnforced"

	// ReasonValid is [ConditionValid]'s reason when True.
	ReasonValid = "Valid"
	// ReasonInvalidSpec is [ConditionValid]'s reason when False; the
	// message gives [Validate]'s error.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonAllEnforced is [ConditionNamespacesEnforced]'s reason when
	// True.
	ReasonAllEnforced = "AllEnforced"
	// ReasonNamespacesNotEnforced is [ConditionNamespacesEnforced]'s
	// reason when False; the message counts the namespaces and names the
	// first few.
	ReasonNamespacesNotEnforced = "NamespacesNotEnforced"
	// ReasonEnforcementUnknown is [ConditionNamespacesEnforced]'s reason
	// when Unknown.
	ReasonEnforcementUnknown = "EnforcementUnknown"
)

// ResourceQuotaStatusByNamespace is the usage of one selected namespace.
type ResourceQuotaStatusByNamespace struct {
	// Namespace is the namespace's name.
	Namespace string `json:"namespace"`

	// Status is the namespace's share of the quota. The controller writes
	// Used only (its non-zero quantities); Hard is left empty, since it is
	// the same for every namespace and is in the total.
	Status corev1.ResourceQuotaStatus `json:"status"`
}

// ClusterQuotaList is a list of [ClusterQuota] objects.
type ClusterQuotaList struct {
	metav1.TypeMeta `json:",inline"`
	// Standard list metadata.
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the cluster quotas.
	Items []ClusterQuota `json:"items"`
}
