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
}

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
