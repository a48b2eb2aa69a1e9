package clusterquota

import "k8s.io/apimachinery/pkg/runtime"

// The deep copies of the applied types, written by hand as those of
// deepcopy.go are, with the same guarantees: no memory shared with the
// original, nil and empty kept apart.

var (
	_ runtime.Object = (*AppliedClusterQuota)(nil)
	_ runtime.Object = (*AppliedClusterQuotaList)(nil)
)

// DeepCopyInto copies in into out, sharing no memory with in.
func (in *AppliedClusterQuota) DeepCopyInto(out *AppliedClusterQuota) {
	*out = *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	in.Spec.DeepCopyInto(&out.Spec)
	in.Status.DeepCopyInto(&out.Status)
}

// DeepCopy returns a copy of in that shares no memory with it, or nil
// when in is nil.
func (in *AppliedClusterQuota) DeepCopy() *AppliedClusterQuota {
	if in == nil {
		return nil
	}
	out := new(AppliedClusterQuota)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements [runtime.Object].
func (in *AppliedClusterQuota) DeepCopyObject() runtime.Object {
	if c := in.DeepCopy(); c != nil {
		return c
	}
	return nil
}

// DeepCopyInto copies in into out, sharing no memory with in.
func (in *AppliedClusterQuotaList) DeepCopyInto(out *AppliedClusterQuotaList) {
	*out = *in
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]AppliedClusterQuota, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopy returns a copy of in that shares no memory with it, or nil
// when in is nil.
func (in *AppliedClusterQuotaList) DeepCopy() *AppliedClusterQuotaList {
	if in == nil {
		return nil
	}
	out := new(AppliedClusterQuotaList)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements [runtime.Object].
func (in *AppliedClusterQuotaList) DeepCopyObject() runtime.Object {
	if c := in.DeepCopy(); c != nil {
		return c
	}
	return nil
}
