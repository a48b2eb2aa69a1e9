package clusterquota

import (
	"errors"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const (
	// GroupName is the API group of [ClusterQuota].
	GroupName = "quota.quotakit.io"
	// Version is the API version of [ClusterQuota] in [GroupName].
	Version = "v1alpha1"
	// ResourcePlural is the resource name of [ClusterQuota] objects, as in
	// the path /apis/quota.quotakit.io/v1alpha1/clusterquotas.
	ResourcePlural = "clusterquotas"
)

// SchemeGroupVersion is the group and version of the types of this
// package. It is a variable only because Go has no struct constants: do
// not assign to it.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: Version}

// Resource returns the GroupResource of the named resource in
// [GroupName], as in Resource(ResourcePlural).
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

// Kind returns the GroupKind of the named kind in [GroupName], as in
// Kind("ClusterQuota").
func Kind(kind string) schema.GroupKind {
	return SchemeGroupVersion.WithKind(kind).GroupKind()
}

// AddToScheme registers [ClusterQuota], [ClusterQuotaList],
// [AppliedClusterQuota] and [AppliedClusterQuotaList] in s under
// [SchemeGroupVersion], with the meta/v1 options types that every group
// version carries (ListOptions, WatchEvent, …), so that s can create,
// encode and decode them.
//
// Nothing is registered at init: call AddToScheme on the scheme you use
// (a controller-runtime manager's, a client's, or your own).
func AddToScheme(s *runtime.Scheme) error {
	if s == nil {
		return errors.New("clusterquota: AddToScheme: nil scheme")
	}
	s.AddKnownTypes(SchemeGroupVersion, &ClusterQuota{}, &ClusterQuotaList{},
		&AppliedClusterQuota{}, &AppliedClusterQuotaList{})
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}
