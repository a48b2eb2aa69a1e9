package clusterquota

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The deep copies below are written by hand, not generated: the package
// has no code generator in its build. They keep nil and empty apart (a nil
// map or slice stays nil, an empty one stays empty), as generated copies
// do, so that a copy encodes to the same JSON as its original. The tests
// walk every type with reflection: they fail when a field is added that
// their fixture does not set, and when a set field is not copied or is
// shared with the original.

var (
	_ runtime.Object = (*ClusterQuota)(nil)
	_ runtime.Object = (*ClusterQuotaList)(nil)
)

// DeepCopyInto copies in into out, sharing no memory with in.
func (in *ClusterQuota) DeepCopyInto(out *ClusterQuota) {
	*out = *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	in.Spec.DeepCopyInto(&out.Spec)
	in.Status.DeepCopyInto(&out.Status)
}

// DeepCopy returns a copy of in that shares no memory with it, or nil
// when in is nil.
func (in *ClusterQuota) DeepCopy() *ClusterQuota {
	if in == nil {
		return nil
	}
	out := new(ClusterQuota)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements [runtime.Object].
func (in *ClusterQuota) DeepCopyObject() runtime.Object {
	if c := in.DeepCopy(); c != nil {
		return c
	}
	return nil
}

// DeepCopyInto copies in into out, sharing no memory with in.
func (in *ClusterQuotaSpec) DeepCopyInto(out *ClusterQuotaSpec) {
	*out = *in
	in.Selector.DeepCopyInto(&out.Selector)
	in.Quota.DeepCopyInto(&out.Quota)
}

// DeepCopy returns a copy of in that shares no memory with it, or nil
// when in is nil.
func (in *ClusterQuotaSpec) DeepCopy() *ClusterQuotaSpec {
	if in == nil {
		return nil
	}
	out := new(ClusterQuotaSpec)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies in into out, sharing no memory with in.
func (in *ClusterQuotaSelector) DeepCopyInto(out *ClusterQuotaSelector) {
	*out = *in
	out.LabelSelector = in.LabelSelector.DeepCopy() // nil stays nil
	if in.AnnotationSelector != nil {
		out.AnnotationSelector = make(map[string]string, len(in.AnnotationSelector))
		for k, v := range in.AnnotationSelector {
			out.AnnotationSelector[k] = v
		}
	}
}

// DeepCopy returns a copy of in that shares no memory with it, or nil
// when in is nil.
func (in *ClusterQuotaSelector) DeepCopy() *ClusterQuotaSelector {
	if in == nil {
		return nil
	}
	out := new(ClusterQuotaSelector)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies in into out, sharing no memory with in.
func (in *ClusterQuotaStatus) DeepCopyInto(out *ClusterQuotaStatus) {
	*out = *in
	in.Total.DeepCopyInto(&out.Total)
	if in.Namespaces != nil {
		out.Namespaces = make([]ResourceQuotaStatusByNamespace, len(in.Namespaces))
		for i := range in.Namespaces {
			in.Namespaces[i].DeepCopyInto(&out.Namespaces[i])
		}
	}
	if in.Conditions != nil {
		out.Conditions = make([]metav1.Condition, len(in.Conditions))
		for i := range in.Conditions {
			in.Conditions[i].DeepCopyInto(&out.Conditions[i])
		}
	}
}

// DeepCopy returns a copy of in that shares no memory with it, or nil
// when in is nil.
func (in *ClusterQuotaStatus) DeepCopy() *ClusterQuotaStatus {
	if in == nil {
		return nil
	}
	out := new(ClusterQuotaStatus)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies in into out, sharing no memory with in.
func (in *ResourceQuotaStatusByNamespace) DeepCopyInto(out *ResourceQuotaStatusByNamespace) {
	*out = *in
	in.Status.DeepCopyInto(&out.Status)
}

// DeepCopy returns a copy of in that shares no memory with it, or nil
// when in is nil.
func (in *ResourceQuotaStatusByNamespace) DeepCopy() *ResourceQuotaStatusByNamespace {
	if in == nil {
		return nil
	}
	out := new(ResourceQuotaStatusByNamespace)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies in into out, sharing no memory with in.
func (in *ClusterQuotaList) DeepCopyInto(out *ClusterQuotaList) {
	*out = *in
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]ClusterQuota, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopy returns a copy of in that shares no memory with it, or nil
// when in is nil.
func (in *ClusterQuotaList) DeepCopy() *ClusterQuotaList {
	if in == nil {
		return nil
	}
	out := new(ClusterQuotaList)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements [runtime.Object].
func (in *ClusterQuotaList) DeepCopyObject() runtime.Object {
	if c := in.DeepCopy(); c != nil {
		return c
	}
	return nil
}
