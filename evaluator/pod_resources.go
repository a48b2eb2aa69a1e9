package evaluator

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// This file computes what one pod charges, the way Kubernetes 1.37's quota
// evaluator does through component-helpers' PodRequests and PodLimits (with
// status resources used and pod-level resources honoured):
//
//   - Regular containers and restartable init containers (sidecars) are
//     summed. Each regular init container needs its own request plus the
//     sidecars declared before it while it runs, so the pod's value is the
//     larger of that sum and the largest such init-container total.
//   - In-place resize: the value above is computed three times, from the
//     spec, from what the kubelet allocated (status.allocatedResources,
//     falling back to the spec) and from what it actuated
//     (status.resources, falling back to allocated, then the spec), and the
//     pod charges the maximum of the three sums. When the pending resize is
//     infeasible the spec is left out, and so are the spec fallbacks. Limits
//     use the spec and the actuated limits only.
//   - Pod-level spec.resources replace that aggregate for cpu, memory and
//     hugepages-*.
//   - spec.overhead is added to every request, and to every limit that is
//     set and non-zero.
//
// Aggregation is per resource name and each name is independent, so the
// calculator computes one name at a time with no intermediate ResourceList:
// that is what makes it allocation-free, where the upstream helpers build a
// dozen maps per pod. cpu, memory and ephemeral-storage, which every pod
// has, are read once per list into int64 milli-units and summed in plain
// integer arithmetic; hugepages, extended resources and amounts that do not
// fit int64 milli-units take an exact path over resource.Quantity.

// Indexes of the lists of a container that the formula reads (see
// resolve).
const (
	specRequests = iota
	allocatedRequests
	actuatedRequests
	specLimits
	actuatedLimits
	numLists
)

// Kinds of container, for the init-container formula.
const (
	regularContainer uint8 = iota
	initContainer
	sidecarContainer
)

// Indexes of the resources every pod is charged for by name.
const (
	fixedCPU = iota
	fixedMemory
	fixedEphemeralStorage
	numFixed
)

var fixedNames = [numFixed]corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage}

// containerAmounts are the cpu, memory and ephemeral-storage amounts of the
// lists of one container, read once per pod so that the formula runs over a
// few hundred bytes of scratch space instead of going back to the maps. It
// holds no pointers, so filling the scratch space costs no write barriers.
type containerAmounts struct {
	milli [numLists][numFixed]int64
	// format is the format of each amount, which decides how a result
	// taken from it prints.
	format [numLists][numFixed]amountFormat
	// set has bit k set in set[l] when list l holds fixedNames[k].
	set [numLists]uint8
	// src[l] is the list that list l is a copy of (l itself when it is
	// not a copy): an allocated list that falls back to the spec, say.
	src  [numLists]int8
	kind uint8
}

// podUsage is what one pod charges, before it becomes resource names.
type podUsage struct {
	// eligible is false for a terminal pod or one past its deletion grace
	// period: such a pod charges count/pods only.
	eligible bool
	requests [numFixed]amount
	limits   [numFixed]amount
	// dyn are the hugepages and extended resource requests; the slice
	// belongs to the podCalc that filled it.
	dyn []dynAmount
}

// podCalc computes pod usage. Its slices are scratch space, reused from pod
// to pod so that summing thousands of pods allocates nothing per pod. A
// podCalc is not safe for concurrent use; each call of an evaluator method
// uses its own.
type podCalc struct {
	opts    PodOptions
	pod     *corev1.Pod
	amounts []containerAmounts
	// useStatus and hasStatuses say whether container statuses are read.
	useStatus, hasStatuses bool
	// infeasible is true when the pod's pending resize is infeasible.
	infeasible bool
	// requestsFromSpec / limitsFromSpec are true when every allocated and
	// actuated list is the spec list itself, so max(spec, actuated,
	// allocated) is the spec aggregate and one pass is enough.
	requestsFromSpec bool
	limitsFromSpec   bool
	// exact is true when some cpu, memory or ephemeral-storage amount does
	// not fit int64 milli-units: those resources then take the exact path.
	exact bool
	// mayHaveDynamic is true when some request list holds a name other
	// than cpu, memory and ephemeral-storage, which may be a hugepages or
	// extended resource.
	mayHaveDynamic bool
	dyn            []dynAmount
	// extended caches isDRAExtendedResourceName, which validates a name and
	// allocates while doing so.
	extended map[corev1.ResourceName]bool
	// reads are the lists prepare reads.
	reads []listRead
}

// usage computes what pod charges at time now into u. u.dyn aliases c's
// scratch space until the next call.
func (c *podCalc) usage(pod *corev1.Pod, now time.Time, u *podUsage) {
	*u = podUsage{eligible: quotaEligible(pod, now)}
	if !u.eligible {
		return
	}
	c.prepare(pod)
	for i, name := range fixedNames {
		u.requests[i] = c.request(i, name)
		u.limits[i] = c.limit(i, name)
	}
	c.dyn = c.dyn[:0]
	if c.mayHaveDynamic {
		c.findDynamic()
		for i := range c.dyn {
			c.dyn[i].value = c.request(-1, c.dyn[i].name)
		}
	}
	u.dyn = c.dyn
}

// quotaEligible reports whether pod charges compute resources: it is not in
// a terminal phase and not past its deletion grace period at now (what
// upstream calls QuotaV1Pod). Note that the deletion timestamp already
// includes the grace period, so a pod is charged for up to twice its grace
// period after deletion (kubernetes#113292); this follows upstream.
func quotaEligible(pod *corev1.Pod, now time.Time) bool {
	if pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
		return false
	}
	if end, ok := graceEnd(pod); ok && now.After(end) {
		return false
	}
	return true
}

// graceEnd returns the moment after which a pod being deleted stops
// charging compute resources: its deletion timestamp plus its grace
// period. A pod not being deleted has none.
func graceEnd(pod *corev1.Pod) (time.Time, bool) {
	if pod.DeletionTimestamp == nil || pod.DeletionGracePeriodSeconds == nil {
		return time.Time{}, false
	}
	grace := time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	return pod.DeletionTimestamp.Time.Add(grace), true
}

// prepare resolves the lists of every container of pod and reads their
// fixed amounts.
func (c *podCalc) prepare(pod *corev1.Pod) {
	c.pod = pod
	c.amounts = c.amounts[:0]
	c.useStatus = !c.opts.DisableInPlacePodVerticalScaling
	c.hasStatuses = c.useStatus && len(pod.Status.ContainerStatuses)+len(pod.Status.InitContainerStatuses) > 0
	c.infeasible = c.useStatus && isResizeInfeasible(pod)
	c.requestsFromSpec = !c.infeasible
	c.limitsFromSpec = !c.infeasible
	c.exact = false
	c.mayHaveDynamic = len(pod.Spec.Overhead) > 0 ||
		(!c.opts.DisablePodLevelResources && pod.Spec.Resources != nil && len(pod.Spec.Resources.Requests) > 0)
	c.reads = c.reads[:0]
	for i := range pod.Spec.Containers {
		c.addContainer(&pod.Spec.Containers[i], false)
	}
	for i := range pod.Spec.InitContainers {
		c.addContainer(&pod.Spec.InitContainers[i], true)
	}
	// Read resource by resource across all the pod's lists rather than
	// list by list. Summing a namespace is bound by memory latency: a
	// pod's lists are a dozen small maps scattered over the heap, and a
	// cold one costs a few hundred nanoseconds, far more than the
	// arithmetic. The lookups of one round do not depend on each other, so
	// the processor overlaps their misses (about a fifth faster than list
	// by list). A list whose entries are all found is left alone: a lookup
	// that misses reads every key of the map.
	for k, name := range fixedNames {
		for i := range c.reads {
			r := &c.reads[i]
			if r.found == len(r.rl) {
				continue
			}
			q, ok := r.rl[name]
			if !ok {
				continue
			}
			r.found++
			c.store(&c.amounts[r.container], int(r.list), k, &q)
		}
	}
	for i := range c.reads {
		r := &c.reads[i]
		if r.list <= actuatedRequests && len(r.rl) > r.found {
			c.mayHaveDynamic = true
		}
	}
	clear(c.reads)
	for i := range c.amounts {
		a := &c.amounts[i]
		for l := range numLists {
			if from := a.src[l]; from != int8(l) {
				a.milli[l], a.format[l], a.set[l] = a.milli[from], a.format[from], a.set[from]
			}
		}
	}
}

// listRead is a list of a container that prepare reads: the amounts go to
// c.amounts[container].milli[list], found counts the fixed names found.
type listRead struct {
	rl        corev1.ResourceList
	container int
	list      int8
	found     int
}

// store records the amount of fixedNames[k] in list l of a.
func (c *podCalc) store(a *containerAmounts, l, k int, q *resource.Quantity) {
	v := amountOf(q)
	if v.big != nil {
		c.exact = true
	}
	a.milli[l][k] = v.milli
	a.format[l][k] = v.format
	a.set[l] |= 1 << k
}

// addContainer resolves the lists of one container and queues for reading
// those that are not copies of another; prepare copies the rest once they
// are read.
func (c *podCalc) addContainer(ct *corev1.Container, init bool) {
	lists, src, kind := c.resolve(ct, init)
	if src[allocatedRequests] != specRequests || src[actuatedRequests] != specRequests {
		c.requestsFromSpec = false
	}
	if src[actuatedLimits] != specLimits {
		c.limitsFromSpec = false
	}
	c.amounts = append(c.amounts, containerAmounts{kind: kind, src: src})
	for l := range numLists {
		if src[l] == int8(l) && len(lists[l]) > 0 {
			c.reads = append(c.reads, listRead{rl: lists[l], container: len(c.amounts) - 1, list: int8(l)})
		}
	}
}

// resolve returns the lists of one container the formula reads, its kind,
// and for each list the index of the list it is a copy of (itself when it
// is not a copy). Init containers read their status like the others: 1.37
// aggregates every container at pod level.
func (c *podCalc) resolve(ct *corev1.Container, init bool) (lists [numLists]corev1.ResourceList, src [numLists]int8, kind uint8) {
	kind = regularContainer
	if init {
		kind = initContainer
		if ct.RestartPolicy != nil && *ct.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			kind = sidecarContainer
		}
	}
	for l := range src {
		src[l] = int8(l)
	}
	lists[specRequests] = ct.Resources.Requests
	lists[specLimits] = ct.Resources.Limits
	var cs *corev1.ContainerStatus
	if c.hasStatuses {
		cs = findContainerStatus(c.pod, ct.Name)
	}
	switch {
	case cs != nil && cs.AllocatedResources != nil:
		lists[allocatedRequests] = cs.AllocatedResources
	case !c.infeasible:
		lists[allocatedRequests], src[allocatedRequests] = lists[specRequests], specRequests
	}
	switch {
	case cs != nil && cs.Resources != nil && cs.Resources.Requests != nil:
		lists[actuatedRequests] = cs.Resources.Requests
	case cs != nil && cs.AllocatedResources != nil:
		lists[actuatedRequests], src[actuatedRequests] = lists[allocatedRequests], allocatedRequests
	case !c.infeasible:
		lists[actuatedRequests], src[actuatedRequests] = lists[specRequests], specRequests
	}
	switch {
	case cs != nil && cs.Resources != nil && cs.Resources.Limits != nil:
		lists[actuatedLimits] = cs.Resources.Limits
	case !c.infeasible:
		lists[actuatedLimits], src[actuatedLimits] = lists[specLimits], specLimits
	}
	return lists, src, kind
}

// findContainerStatus returns the status named name, looking at the regular
// container statuses first, as Kubernetes does.
func findContainerStatus(pod *corev1.Pod, name string) *corev1.ContainerStatus {
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == name {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	for i := range pod.Status.InitContainerStatuses {
		if pod.Status.InitContainerStatuses[i].Name == name {
			return &pod.Status.InitContainerStatuses[i]
		}
	}
	return nil
}

// isResizeInfeasible reports whether the first PodResizePending condition
// says Infeasible.
func isResizeInfeasible(pod *corev1.Pod) bool {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodResizePending {
			return pod.Status.Conditions[i].Reason == corev1.PodReasonInfeasible
		}
	}
	return false
}

// isPodLevelResource reports whether pod-level spec.resources may set name.
func isPodLevelResource(name corev1.ResourceName) bool {
	return name == corev1.ResourceCPU || name == corev1.ResourceMemory ||
		strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

// resourceList turns u into the names Kubernetes charges.
func (u *podUsage) resourceList() corev1.ResourceList {
	n := 1
	if u.eligible {
		n++
		for i := range u.requests {
			if u.requests[i].set {
				n += 2
			}
			if u.limits[i].set {
				n++
			}
		}
		n += 2 * len(u.dyn)
	}
	rl := make(corev1.ResourceList, n)
	rl[podCountName] = *resourceOne()
	if !u.eligible {
		return rl
	}
	rl[corev1.ResourcePods] = *resourceOne()
	for i := range u.requests {
		if u.requests[i].set {
			// Two quantities, not one shared: a big one holds a pointer,
			// and a caller adding to one key must not change the other.
			rl[fixedNames[i]] = u.requests[i].quantity()
			rl[requestNames[i]] = u.requests[i].quantity()
		}
		if u.limits[i].set {
			rl[limitNames[i]] = u.limits[i].quantity()
		}
	}
	for i := range u.dyn {
		d := &u.dyn[i]
		if !d.value.set {
			continue
		}
		if !d.extended {
			rl[d.name] = d.value.quantity()
		}
		rl[corev1.DefaultResourceRequestsPrefix+d.name] = d.value.quantity()
	}
	return rl
}

// podCountName is the object-count name of pods.
const podCountName corev1.ResourceName = "count/pods"

// resourceOne is a fresh quantity of 1.
func resourceOne() *resource.Quantity { return resource.NewQuantity(1, resource.DecimalSI) }

var (
	requestNames = [numFixed]corev1.ResourceName{corev1.ResourceRequestsCPU, corev1.ResourceRequestsMemory, corev1.ResourceRequestsEphemeralStorage}
	limitNames   = [numFixed]corev1.ResourceName{corev1.ResourceLimitsCPU, corev1.ResourceLimitsMemory, corev1.ResourceLimitsEphemeralStorage}
)
