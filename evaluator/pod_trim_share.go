package evaluator

import (
	"hash/maphash"
	"reflect"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/quotakit/quotakit/internal/reslist"
)

// shared remembers, for one pod, the lists share returned, by the list
// given: up to eight, which covers the lists of four containers.
type shared struct {
	n   int
	in  [8]uint64 // listID
	out [8]corev1.ResourceList
}

// shareOnce is share, answering from done for a map it was given before.
func (t *PodTrimmer) shareOnce(done *shared, rl corev1.ResourceList) corev1.ResourceList {
	if len(rl) == 0 {
		return rl
	}
	id := listID(rl)
	for i := range done.n {
		if done.in[i] == id {
			return done.out[i]
		}
	}
	out := t.share(rl)
	if done.n < len(done.in) {
		done.in[done.n], done.out[done.n] = id, out
		done.n++
	}
	return out
}

// shareContainers returns the kept slice of trimmed containers equal to
// cs, keeping cs when there is none. cs's lists are already shared.
func (t *PodTrimmer) shareContainers(cs []corev1.Container) []corev1.Container {
	return shareSlice(t.containers, t.seed, cs, hashContainer, sameTrimmedContainer)
}

// shareStatuses returns the kept slice of trimmed container statuses equal
// to ss, keeping ss when there is none. ss's lists are already shared.
func (t *PodTrimmer) shareStatuses(ss []corev1.ContainerStatus) []corev1.ContainerStatus {
	return shareSlice(t.statuses, t.seed, ss, hashStatus, sameTrimmedStatus)
}

// shareSlice returns the slice of kept equal to s by same, keeping s when
// the hash of its elements (by hash) is free. Nil and empty slices are
// returned as they are.
func shareSlice[T any](kept map[uint64][]T, seed maphash.Seed, s []T, hash func(maphash.Seed, *T) uint64, same func(a, b T) bool) []T {
	if len(s) == 0 {
		return s
	}
	key := uint64(len(s))
	for i := range s {
		key = reslist.Mix(key ^ hash(seed, &s[i]))
	}
	k, ok := kept[key]
	if ok && slices.EqualFunc(k, s, same) {
		return k
	}
	if !ok {
		kept[key] = s
	}
	return s
}

func hashContainer(seed maphash.Seed, c *corev1.Container) uint64 {
	h := maphash.String(seed, c.Name)
	if p := c.RestartPolicy; p != nil {
		h = reslist.Mix(h ^ maphash.String(seed, string(*p)))
	}
	return hashRequirements(seed, h, &c.Resources)
}

func hashStatus(seed maphash.Seed, s *corev1.ContainerStatus) uint64 {
	h := reslist.Mix(maphash.String(seed, s.Name) ^ listID(s.AllocatedResources))
	if r := s.Resources; r != nil {
		h = hashRequirements(seed, reslist.Mix(h^1), r)
	}
	return h
}

// hashRequirements combines r with h. Its lists are already shared, so
// their identity stands for their content: equal lists are one map, but
// for the rare list share could not keep, which then only misses a chance
// to share.
func hashRequirements(seed maphash.Seed, h uint64, r *corev1.ResourceRequirements) uint64 {
	h = reslist.Mix(h ^ listID(r.Requests))
	h = reslist.Mix(h ^ listID(r.Limits))
	for _, c := range r.Claims {
		h = reslist.Mix(h ^ maphash.String(seed, c.Name))
		h = reslist.Mix(h ^ maphash.String(seed, c.Request))
	}
	return h
}

// listID identifies a shared list: its map's address, zero for nil.
func listID(rl corev1.ResourceList) uint64 {
	return uint64(reflect.ValueOf(rl).Pointer())
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
