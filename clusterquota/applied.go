package clusterquota

import (
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// AppliedClusterQuota is a namespaced, read-only copy of a [ClusterQuota]
// in one namespace that the quota selects, so that the namespace's users
// can read the cluster quotas that apply to them with the namespaced
// permissions they already have, and no other. It is named after its
// ClusterQuota: `kubectl get appliedclusterquotas -n a-dev` lists the
// quotas of a-dev, and the name in a refusal ("exceeded quota:
// clusterquota/team-a") is the one to get.
//
// Its layout is that of OpenShift's AppliedClusterResourceQuota: the
// ClusterQuota's spec and status, in a namespaced object. Unlike
// OpenShift, where an aggregated API server computes the view on each
// read, a controller writes it (kube.AppliedQuotaWriter, in the kube
// module), so that no API server of quotakit's own is needed; it can lag
// the ClusterQuota by the writer's interval, and it is information only:
// admission and the controller never read it.
//
// Only one namespace's share of the usage is in it: status.namespaces
// holds at most the entry of its own namespace, so that a tenant's user
// learns nothing of namespaces it may not read, and the copies of a quota
// over N namespaces take O(N) space rather than O(N²). See [Applied].
type AppliedClusterQuota struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata. The name is the ClusterQuota's, the
	// namespace one that the quota selects.
	metav1.ObjectMeta `json:"metadata"`

	// Spec is the ClusterQuota's spec.
	Spec ClusterQuotaSpec `json:"spec"`

	// Status is the ClusterQuota's status, its status.namespaces cut to
	// this namespace's entry (see [Applied]).
	Status ClusterQuotaStatus `json:"status,omitempty"`
}

// AppliedClusterQuotaList is a list of [AppliedClusterQuota] objects.
type AppliedClusterQuotaList struct {
	metav1.TypeMeta `json:",inline"`
	// Standard list metadata.
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the applied cluster quotas.
	Items []AppliedClusterQuota `json:"items"`
}

const (
	// AppliedResourcePlural is the resource name of [AppliedClusterQuota]
	// objects, as in the path
	// /apis/quota.quotakit.io/v1alpha1/namespaces/NS/appliedclusterquotas.
	AppliedResourcePlural = "appliedclusterquotas"

	// AppliedLabel is the label that marks an [AppliedClusterQuota] as
	// written by a writer of copies, with the value "true". A writer
	// lists, changes and deletes only the objects that carry it, so that
	// an object of that kind that someone else wrote is never touched.
	AppliedLabel = "quota.quotakit.io/applied"
)

// AppliedClusterQuotas is the GroupVersionResource of
// [AppliedClusterQuota]. It is a value to read: the library keeps its
// own.
var AppliedClusterQuotas = SchemeGroupVersion.WithResource(AppliedResourcePlural)

// Applied returns the [AppliedClusterQuota] of cq in namespace: cq's
// name, its spec, and its status with status.namespaces cut to
// namespace's entry, labelled [AppliedLabel] and owned by cq (an owner
// reference without blockOwnerDeletion, so that Kubernetes' garbage
// collector removes the copies of a deleted quota even when no writer
// runs). The copy shares no memory with cq.
//
// The namespace's own usage is exact whenever cq's bounded status can
// tell it: when status.namespaces lists namespace, the entry is copied;
// when it does not and the bound left no namespace out, or left out only
// namespaces that sort before the last one listed (none: the list keeps
// the first names), the namespace uses nothing, and the copy lists no
// entry and omits none; otherwise its usage is not known from the
// status, and the copy lists no entry and sets status.namespacesOmitted
// to 1.
//
// A nil cq, an empty name or uid, or a namespace that is not a DNS label
// is an error.
func Applied(cq *ClusterQuota, namespace string) (*AppliedClusterQuota, error) {
	if cq == nil {
		return nil, errors.New("clusterquota: Applied: nil ClusterQuota")
	}
	if cq.Name == "" || cq.UID == "" {
		return nil, fmt.Errorf("clusterquota: Applied: ClusterQuota %q has no name or uid", cq.Name)
	}
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return nil, fmt.Errorf("clusterquota: Applied: namespace %q: %v", namespace, errs)
	}
	out := &AppliedClusterQuota{
		TypeMeta: metav1.TypeMeta{APIVersion: SchemeGroupVersion.String(), Kind: "AppliedClusterQuota"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      cq.Name,
			Namespace: namespace,
			Labels:    map[string]string{AppliedLabel: "true"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: SchemeGroupVersion.String(),
				Kind:       "ClusterQuota",
				Name:       cq.Name,
				UID:        cq.UID,
			}},
		},
	}
	cq.Spec.DeepCopyInto(&out.Spec)
	in := &cq.Status
	in.Total.DeepCopyInto(&out.Status.Total)
	out.Status.ObservedGeneration = in.ObservedGeneration
	if in.Conditions != nil {
		out.Status.Conditions = make([]metav1.Condition, len(in.Conditions))
		for i := range in.Conditions {
			in.Conditions[i].DeepCopyInto(&out.Status.Conditions[i])
		}
	}
	last := ""
	for i := range in.Namespaces {
		e := &in.Namespaces[i]
		if e.Namespace == namespace {
			out.Status.Namespaces = []ResourceQuotaStatusByNamespace{*e.DeepCopy()}
			return out, nil
		}
		last = max(last, e.Namespace)
	}
	if in.NamespacesOmitted > 0 && namespace > last {
		out.Status.NamespacesOmitted = 1
	}
	return out, nil
}
