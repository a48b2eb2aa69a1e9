package evaluator

import (
	"hash/maphash"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quotakit/quotakit/internal/reslist"
)

// TrimPod returns a new pod holding only what quota reads of pod: every
// field that the pod evaluator, the resource claim evaluator (for the pod
// that owns a claim) and the pod row of [DefaultUpdateFilter] read, plus the
// identity a cache keys and compares objects by. A cache of trimmed pods
// gives every evaluator method and the update filter the same answers as a
// cache of whole pods, in a fraction of the memory; it is meant for an
// informer's transform. A nil pod gives nil.
//
// The result keeps:
//
//   - metadata: apiVersion and kind, name, namespace, uid, resourceVersion,
//     generation, creationTimestamp, deletionTimestamp and
//     deletionGracePeriodSeconds (the grace period that ends a pod's
//     charge). Labels, annotations, owner references, finalizers and
//     managed fields are dropped: no pod scope reads labels (PriorityClass
//     scopes read spec.priorityClassName).
//   - spec: for each container and init container its name, resources and
//     restartPolicy (which makes an init container a sidecar); overhead,
//     pod-level resources, priorityClassName, activeDeadlineSeconds (the
//     Terminating scope), and of the affinity only the first pod affinity
//     or anti-affinity term that names other namespaces or selects them,
//     in its place (all the CrossNamespacePodAffinity scope asks is
//     whether one exists).
//   - status: phase, qosClass, the first PodResizePending condition (an
//     infeasible resize), for each container and init container status its
//     name, resources and allocatedResources (in order, so that statuses
//     pair by name as they do on the whole pod; a status list with the
//     amounts of its container's spec list, as a kubelet reports for a
//     running container, is kept as that spec list), the pod-level resources and
//     allocatedResources, and extendedResourceClaimStatus (which claim the
//     scheduler made for the pod's extended resources).
//
// Everything else (images, commands, probes, volumes, tolerations, node
// name, IPs, container states, …) is dropped.
//
// TrimPod never modifies pod. To cost nothing beyond what it keeps, the
// result shares strings, maps, pointers and small slices with pod rather
// than copying them: neither may be modified afterwards, which is the rule
// for objects in an informer's cache anyway. The slices of containers and
// statuses are new, so the result does not keep pod's large structs alive.
// TrimPod is idempotent: trimming a trimmed pod gives an equal pod, so an
// informer may apply it to an object it has already transformed.
func TrimPod(pod *corev1.Pod) *corev1.Pod {
	if pod == nil {
		return nil
	}
	out := &corev1.Pod{
		TypeMeta: pod.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:                       pod.Name,
			Namespace:                  pod.Namespace,
			UID:                        pod.UID,
			ResourceVersion:            pod.ResourceVersion,
			Generation:                 pod.Generation,
			CreationTimestamp:          pod.CreationTimestamp,
			DeletionTimestamp:          pod.DeletionTimestamp,
			DeletionGracePeriodSeconds: pod.DeletionGracePeriodSeconds,
		},
		Spec: corev1.PodSpec{
			Containers:            trimContainers(pod.Spec.Containers),
			InitContainers:        trimContainers(pod.Spec.InitContainers),
			Overhead:              pod.Spec.Overhead,
			Resources:             pod.Spec.Resources,
			PriorityClassName:     pod.Spec.PriorityClassName,
			ActiveDeadlineSeconds: pod.Spec.ActiveDeadlineSeconds,
			Affinity:              trimAffinity(pod.Spec.Affinity),
		},
		Status: corev1.PodStatus{
			Phase:                       pod.Status.Phase,
			QOSClass:                    pod.Status.QOSClass,
			Conditions:                  trimConditions(pod.Status.Conditions),
			ContainerStatuses:           trimStatuses(pod.Status.ContainerStatuses, pod),
			InitContainerStatuses:       trimStatuses(pod.Status.InitContainerStatuses, pod),
			Resources:                   pod.Status.Resources,
			AllocatedResources:          pod.Status.AllocatedResources,
			ExtendedResourceClaimStatus: pod.Status.ExtendedResourceClaimStatus,
		},
	}
	return out
}

// trimContainers keeps what the usage formula and Constraints read of each
// container: its name (Constraints names containers, statuses pair with
// containers by name), its resources, and its restart policy.
func trimContainers(cs []corev1.Container) []corev1.Container {
	if len(cs) == 0 {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i := range cs {
		out[i] = corev1.Container{Name: cs[i].Name, Resources: cs[i].Resources, RestartPolicy: cs[i].RestartPolicy}
	}
	return out
}

// trimStatuses keeps every status, with what the in-place resize formula
// and the update filter read. None is dropped, not even one without
// resources: the first status of a name is the one that counts, and the
// update filter pairs old and new statuses by name.
//
// A kubelet reports, for every running container, allocated and actual
// resources that are usually the amounts of its spec, in lists of their
// own; a status list holding exactly the amounts of its container's spec
// list is replaced by that spec list, so that the cache keeps one map
// instead of up to three. Only the amounts are read, so this changes no
// answer; nil and empty lists, which the formula tells apart from
// non-empty ones, are never replaced.
func trimStatuses(ss []corev1.ContainerStatus, pod *corev1.Pod) []corev1.ContainerStatus {
	if len(ss) == 0 {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(ss))
	for i := range ss {
		s := corev1.ContainerStatus{Name: ss[i].Name, Resources: ss[i].Resources, AllocatedResources: ss[i].AllocatedResources}
		if spec := specOf(pod, s.Name); spec != nil {
			s.AllocatedResources, _ = sameAmounts(spec.Requests, s.AllocatedResources)
			if r := s.Resources; r != nil {
				req, ok1 := sameAmounts(spec.Requests, r.Requests)
				lim, ok2 := sameAmounts(spec.Limits, r.Limits)
				if ok1 || ok2 {
					s.Resources = &corev1.ResourceRequirements{Requests: req, Limits: lim, Claims: r.Claims}
				}
			}
		}
		out[i] = s
	}
	return out
}

// specOf returns the resources of the first container, or else init
// container, named name; nil when there is none.
func specOf(pod *corev1.Pod, name string) *corev1.ResourceRequirements {
	for _, cs := range [2][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range cs {
			if cs[i].Name == name {
				return &cs[i].Resources
			}
		}
	}
	return nil
}

// sameAmounts returns spec and true when it holds the same names with
// equal amounts in the same formats as status, both non-empty; status and
// false otherwise. (An amount prints in its format, so a status list is
// replaced only by one that prints the same.)
func sameAmounts(spec, status corev1.ResourceList) (corev1.ResourceList, bool) {
	if len(spec) == 0 || !reslist.Same(spec, status) {
		return status, false
	}
	return spec, true
}

// trimConditions keeps the first PodResizePending condition, the only one
// read (see isResizeInfeasible).
func trimConditions(conds []corev1.PodCondition) []corev1.PodCondition {
	for i := range conds {
		if conds[i].Type == corev1.PodResizePending {
			return []corev1.PodCondition{conds[i]}
		}
	}
	return nil
}

// trimAffinity keeps the first pod affinity or anti-affinity term that
// makes the pod match the CrossNamespacePodAffinity scope, in the list it
// came from, and drops the rest: node affinity and same-namespace terms
// never change a quota. The search order is that of
// usesCrossNamespacePodAffinity, so a trimmed affinity trims to itself.
func trimAffinity(a *corev1.Affinity) *corev1.Affinity {
	if a == nil {
		return nil
	}
	if pa := a.PodAffinity; pa != nil {
		if req, pref, ok := firstCrossNamespaceTerm(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution); ok {
			return &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: req, PreferredDuringSchedulingIgnoredDuringExecution: pref}}
		}
	}
	if pa := a.PodAntiAffinity; pa != nil {
		if req, pref, ok := firstCrossNamespaceTerm(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution); ok {
			return &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: req, PreferredDuringSchedulingIgnoredDuringExecution: pref}}
		}
	}
	return nil
}

// firstCrossNamespaceTerm returns, as a one-term required or preferred
// list, the first term of required then preferred that names or selects
// other namespaces; ok is false when there is none.
func firstCrossNamespaceTerm(required []corev1.PodAffinityTerm, preferred []corev1.WeightedPodAffinityTerm) (req []corev1.PodAffinityTerm, pref []corev1.WeightedPodAffinityTerm, ok bool) {
	for i := range required {
		if crossNamespaceTerm(&required[i]) {
			return []corev1.PodAffinityTerm{required[i]}, nil, true
		}
	}
	for i := range preferred {
		if crossNamespaceTerm(&preferred[i].PodAffinityTerm) {
			return nil, []corev1.WeightedPodAffinityTerm{preferred[i]}, true
		}
	}
	return nil, nil, false
}

// PodTrimmer trims pods as [TrimPod] does and, besides, makes the pods it
// trims share their resource lists: a list with the same names, amounts
// and formats as one it kept before is replaced by that one. The pods of a
// Deployment state the same requests and limits, so a cache of their
// trimmed pods holds each list once instead of once per pod (a non-empty
// ResourceList is a Go map of about 650 bytes, more than half of a trimmed
// pod). In the same way, a pod's trimmed containers, init containers and
// their statuses, when equal to those of a pod trimmed before, are that
// pod's slices (two containers are 816 bytes of structs, even trimmed).
// Evaluators read amounts and formats only, so sharing changes no answer,
// not even the spelling of a usage.
//
// A PodTrimmer keeps up to 4,096 lists and as many slices of each kind,
// then starts afresh; pods trimmed before keep theirs. What it keeps stays
// alive as long as it does. Because lists and slices are shared between
// pods, a pod it returns must never be modified, which is the rule for
// objects in an informer's cache anyway.
//
// The zero value is ready to use. A PodTrimmer is safe for concurrent use.
type PodTrimmer struct {
	mu sync.Mutex
	// guarded by mu; the tables are made afresh together, with a new seed
	lists      map[uint64]corev1.ResourceList // by reslist.Hash
	containers map[uint64][]corev1.Container  // by shareSlice's hash
	statuses   map[uint64][]corev1.ContainerStatus
	seed       maphash.Seed
}

// maxSharedLists bounds each of PodTrimmer's tables.
const maxSharedLists = 4096

// Trim returns TrimPod(pod) with its resource lists shared with the pods
// trimmed before. A nil pod gives nil. Like TrimPod it never modifies pod
// and is idempotent.
func (t *PodTrimmer) Trim(pod *corev1.Pod) *corev1.Pod {
	out := TrimPod(pod)
	if out == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.lists == nil || len(t.lists) >= maxSharedLists || len(t.containers) >= maxSharedLists || len(t.statuses) >= maxSharedLists {
		t.lists = make(map[uint64]corev1.ResourceList)
		t.containers = make(map[uint64][]corev1.Container)
		t.statuses = make(map[uint64][]corev1.ContainerStatus)
		t.seed = maphash.MakeSeed()
	}
	// The containers and statuses are out's own slices; the
	// ResourceRequirements a status points to is pod's, so it is replaced,
	// not changed. A status list with its container's amounts is that
	// container's list (see trimStatuses), so one pod hands the same map
	// to share several times: done remembers the answers.
	var done shared
	for _, cs := range [2][]corev1.Container{out.Spec.Containers, out.Spec.InitContainers} {
		for i := range cs {
			cs[i].Resources.Requests = t.shareOnce(&done, cs[i].Resources.Requests)
			cs[i].Resources.Limits = t.shareOnce(&done, cs[i].Resources.Limits)
		}
	}
	for _, ss := range [2][]corev1.ContainerStatus{out.Status.ContainerStatuses, out.Status.InitContainerStatuses} {
		for i := range ss {
			ss[i].AllocatedResources = t.shareOnce(&done, ss[i].AllocatedResources)
			if r := ss[i].Resources; r != nil {
				kept := *r
				kept.Requests, kept.Limits = t.shareOnce(&done, r.Requests), t.shareOnce(&done, r.Limits)
				ss[i].Resources = &kept
			}
		}
	}
	out.Spec.Overhead = t.shareOnce(&done, out.Spec.Overhead)
	out.Spec.Containers = t.shareContainers(out.Spec.Containers)
	out.Spec.InitContainers = t.shareContainers(out.Spec.InitContainers)
	out.Status.ContainerStatuses = t.shareStatuses(out.Status.ContainerStatuses)
	out.Status.InitContainerStatuses = t.shareStatuses(out.Status.InitContainerStatuses)
	return out
}

// share returns the kept list with the names, amounts and formats of rl,
// keeping rl when there is none. Nil and empty lists are returned as they
// are: the evaluators tell them apart.
func (t *PodTrimmer) share(rl corev1.ResourceList) corev1.ResourceList {
	if len(rl) == 0 {
		return rl
	}
	h := reslist.Hash(t.seed, rl)
	kept, ok := t.lists[h]
	if ok && reslist.Same(kept, rl) {
		return kept
	}
	if !ok {
		t.lists[h] = rl
	}
	// A list whose hash another list holds is not shared.
	return rl
}
