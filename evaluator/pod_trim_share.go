package evaluator

import (
	"hash/maphash"
	"reflect"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/quotakit/quotakit/internal/reslist"
)

// shareContainers returns the kept slice of trimmed containers equal to
// cs, keeping cs when there is none. cs's lists are already shared.
func (t *PodTrimmer) shareContainers(cs []corev1.Container) []corev1.Container {
	if len(cs) == 0 {
		return cs
	}
	var h maphash.Hash
	h.SetSeed(t.seed)
	for i := range cs {
		h.WriteString(cs[i].Name)
		h.WriteByte(0)
		if p := cs[i].RestartPolicy; p != nil {
			h.WriteString(string(*p))
		}
		h.WriteByte(0)
		hashRequirements(&h, &cs[i].Resources)
	}
	key := h.Sum64()
	kept, ok := t.containers[key]
	if ok && slices.EqualFunc(kept, cs, sameTrimmedContainer) {
		return kept
	}
	if !ok {
		t.containers[key] = cs
	}
	return cs
}

// shareStatuses returns the kept slice of trimmed container statuses equal
// to ss, keeping ss when there is none. ss's lists are already shared.
func (t *PodTrimmer) shareStatuses(ss []corev1.ContainerStatus) []corev1.ContainerStatus {
	if len(ss) == 0 {
		return ss
	}
	var h maphash.Hash
	h.SetSeed(t.seed)
	for i := range ss {
		h.WriteString(ss[i].Name)
		h.WriteByte(0)
		writeUint64(&h, listID(ss[i].AllocatedResources))
		if r := ss[i].Resources; r != nil {
			h.WriteByte(1)
			hashRequirements(&h, r)
		}
		h.WriteByte(0)
	}
	key := h.Sum64()
	kept, ok := t.statuses[key]
	if ok && slices.EqualFunc(kept, ss, sameTrimmedStatus) {
		return kept
	}
	if !ok {
		t.statuses[key] = ss
	}
	return ss
}

// hashRequirements writes r to h. Its lists are already shared, so their
// identity stands for their content: equal lists are one map, but for
// the rare list share could not keep, which then only misses a chance to
// share.
func hashRequirements(h *maphash.Hash, r *corev1.ResourceRequirements) {
	writeUint64(h, listID(r.Requests))
	writeUint64(h, listID(r.Limits))
	for _, c := range r.Claims {
		h.WriteString(c.Name)
		h.WriteByte(0)
		h.WriteString(c.Request)
		h.WriteByte(0)
	}
}

// listID identifies a shared list: its map's address, zero for nil.
func listID(rl corev1.ResourceList) uint64 {
	return uint64(reflect.ValueOf(rl).Pointer())
}

func writeUint64(h *maphash.Hash, v uint64) {
	for i := range 8 {
		h.WriteByte(byte(v >> (8 * i)))
	}
}

// sameTrimmedContainer reports whether two trimmed containers are equal in
// everything TrimPod keeps of a container.
func sameTrimmedContainer(a, b corev1.Container) bool {
	return a.Name == b.Name &&
		(a.RestartPolicy == nil) == (b.RestartPolicy == nil) &&
		(a.RestartPolicy == nil || *a.RestartPolicy == *b.RestartPolicy) &&
		sameRequirements(&a.Resources, &b.Resources)
}

// sameTrimmedStatus reports whether two trimmed container statuses are
// equal in everything TrimPod keeps of a status.
func sameTrimmedStatus(a, b corev1.ContainerStatus) bool {
	return a.Name == b.Name &&
		sameList(a.AllocatedResources, b.AllocatedResources) &&
		(a.Resources == nil) == (b.Resources == nil) &&
		(a.Resources == nil || sameRequirements(a.Resources, b.Resources))
}

func sameRequirements(a, b *corev1.ResourceRequirements) bool {
	return sameList(a.Requests, b.Requests) && sameList(a.Limits, b.Limits) && slices.Equal(a.Claims, b.Claims)
}

// sameList is [reslist.Same], telling a nil list from an empty one as the
// evaluators do.
func sameList(a, b corev1.ResourceList) bool {
	if listID(a) == listID(b) {
		return true
	}
	return (a == nil) == (b == nil) && reslist.Same(a, b)
}
