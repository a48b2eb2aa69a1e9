package evaluator

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
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
// dozen maps per pod.

// List indexes of containerLists.lists.
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
	regularContainer = iota
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

// containerLists are the resource lists of one container that the formula
// reads, resolved once per pod, and the cpu, memory and ephemeral-storage
// amounts of each, read once so that the formula runs over a few hundred
// bytes of scratch space instead of going back to the maps.
type containerLists struct {
	lists [numLists]corev1.ResourceList
	fixed [numLists][numFixed]amount
	kind  int
}

// dynAmount is a hugepages or extended resource request of a pod.
type dynAmount struct {
	name corev1.ResourceName
	// extended is true for an extended resource (charged only as
	// requests.<name>), false for hugepages (charged under both names).
	extended bool
	value    amount
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
	opts       PodOptions
	pod        *corev1.Pod
	containers []containerLists
	// infeasible is true when the pod's pending resize is infeasible.
	infeasible bool
	// requestsFromSpec / limitsFromSpec are true when every allocated and
	// actuated list is the spec list itself, so max(spec, actuated,
	// allocated) is the spec aggregate and one pass is enough.
	requestsFromSpec bool
	limitsFromSpec   bool
	// mayHaveDynamic is true when some request list holds a name other
	// than cpu, memory and ephemeral-storage, which may be a hugepages or
	// extended resource.
	mayHaveDynamic bool
	dyn            []dynAmount
	// extended caches isDRAExtendedResourceName, which validates a name and
	// allocates while doing so.
	extended map[corev1.ResourceName]bool
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
	if pod.DeletionTimestamp != nil && pod.DeletionGracePeriodSeconds != nil {
		grace := time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
		if now.After(pod.DeletionTimestamp.Time.Add(grace)) {
			return false
		}
	}
	return true
}

// prepare resolves the lists of every container of pod and reads their
// fixed amounts.
func (c *podCalc) prepare(pod *corev1.Pod) {
	c.pod = pod
	c.containers = c.containers[:0]
	useStatus := !c.opts.DisableInPlacePodVerticalScaling
	c.infeasible = useStatus && isResizeInfeasible(pod)
	c.requestsFromSpec = !c.infeasible
	c.limitsFromSpec = !c.infeasible
	c.mayHaveDynamic = len(pod.Spec.Overhead) > 0 ||
		(!c.opts.DisablePodLevelResources && pod.Spec.Resources != nil && len(pod.Spec.Resources.Requests) > 0)
	hasStatuses := useStatus && len(pod.Status.ContainerStatuses)+len(pod.Status.InitContainerStatuses) > 0
	for i := range pod.Spec.Containers {
		c.addContainer(&pod.Spec.Containers[i], regularContainer, hasStatuses)
	}
	for i := range pod.Spec.InitContainers {
		ct := &pod.Spec.InitContainers[i]
		kind := initContainer
		if ct.RestartPolicy != nil && *ct.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			kind = sidecarContainer
		}
		c.addContainer(ct, kind, hasStatuses)
	}
}

// addContainer resolves the lists of one container. Init containers read
// their status like the others: 1.37 aggregates every container at pod level.
// A list that falls back to another shares its amounts instead of reading
// the map again.
func (c *podCalc) addContainer(ct *corev1.Container, kind int, hasStatuses bool) {
	c.containers = append(c.containers, containerLists{kind: kind})
	l := &c.containers[len(c.containers)-1]
	l.set(specRequests, ct.Resources.Requests, c, true)
	l.set(specLimits, ct.Resources.Limits, c, false)
	var cs *corev1.ContainerStatus
	if hasStatuses {
		cs = findContainerStatus(c.pod, ct.Name)
	}
	if cs == nil {
		if !c.infeasible {
			l.copy(allocatedRequests, specRequests)
			l.copy(actuatedRequests, specRequests)
			l.copy(actuatedLimits, specLimits)
		}
		return
	}
	switch {
	case cs.AllocatedResources != nil:
		l.set(allocatedRequests, cs.AllocatedResources, c, true)
		c.requestsFromSpec = false
	case !c.infeasible:
		l.copy(allocatedRequests, specRequests)
	}
	switch {
	case cs.Resources != nil && cs.Resources.Requests != nil:
		l.set(actuatedRequests, cs.Resources.Requests, c, true)
		c.requestsFromSpec = false
	case cs.AllocatedResources != nil:
		l.copy(actuatedRequests, allocatedRequests)
	case !c.infeasible:
		l.copy(actuatedRequests, specRequests)
	}
	switch {
	case cs.Resources != nil && cs.Resources.Limits != nil:
		l.set(actuatedLimits, cs.Resources.Limits, c, false)
		c.limitsFromSpec = false
	case !c.infeasible:
		l.copy(actuatedLimits, specLimits)
	}
}

// set makes rl list i of l and reads its fixed amounts. For a request list
// it notes whether rl holds other names, which may need the dynamic pass.
func (l *containerLists) set(i int, rl corev1.ResourceList, c *podCalc, requests bool) {
	l.lists[i] = rl
	if len(rl) == 0 {
		return
	}
	found := 0
	for k, name := range fixedNames {
		if q, ok := rl[name]; ok {
			l.fixed[i][k] = amountOf(&q)
			found++
		}
	}
	if requests && len(rl) > found {
		c.mayHaveDynamic = true
	}
}

// copy makes list to the same as list from.
func (l *containerLists) copy(to, from int) {
	l.lists[to] = l.lists[from]
	l.fixed[to] = l.fixed[from]
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

// aggregate applies the container formula to one resource read from one of
// the lists of every container: fixedNames[k], or name when k < 0.
func (c *podCalc) aggregate(k int, name corev1.ResourceName, list int) amount {
	var sum, sidecars, initMax amount
	for i := range c.containers {
		l := &c.containers[i]
		var v amount
		if k >= 0 {
			v = l.fixed[list][k]
		} else if rl := l.lists[list]; len(rl) > 0 {
			if q, ok := rl[name]; ok {
				v = amountOf(&q)
			}
		}
		switch l.kind {
		case regularContainer:
			sum = addAmounts(sum, v)
		case sidecarContainer:
			sum = addAmounts(sum, v)
			sidecars = addAmounts(sidecars, v)
			initMax = maxAmounts(initMax, sidecars)
		default:
			initMax = maxAmounts(initMax, addAmounts(v, sidecars))
		}
	}
	return maxAmounts(sum, initMax)
}

// request returns the pod's request of one resource, fixedNames[k] or name
// when k < 0.
func (c *podCalc) request(k int, name corev1.ResourceName) amount {
	var r amount
	switch {
	case c.requestsFromSpec:
		r = c.aggregate(k, name, specRequests)
	case c.infeasible:
		r = maxAmounts(c.aggregate(k, name, actuatedRequests), c.aggregate(k, name, allocatedRequests))
	default:
		r = maxAmounts(c.aggregate(k, name, specRequests), c.aggregate(k, name, actuatedRequests))
		r = maxAmounts(r, c.aggregate(k, name, allocatedRequests))
	}
	pod := c.pod
	if !c.opts.DisablePodLevelResources && pod.Spec.Resources != nil && isPodLevelResource(name) {
		if q, ok := pod.Spec.Resources.Requests[name]; ok {
			r = amountOf(&q)
		}
	}
	if len(pod.Spec.Overhead) > 0 {
		if q, ok := pod.Spec.Overhead[name]; ok {
			r = addAmounts(r, amountOf(&q))
		}
	}
	return r
}

// limit returns the pod's limit of fixedNames[k].
func (c *podCalc) limit(k int, name corev1.ResourceName) amount {
	var r amount
	switch {
	case c.limitsFromSpec:
		r = c.aggregate(k, name, specLimits)
	case c.infeasible:
		r = c.aggregate(k, name, actuatedLimits)
	default:
		r = maxAmounts(c.aggregate(k, name, specLimits), c.aggregate(k, name, actuatedLimits))
	}
	pod := c.pod
	if !c.opts.DisablePodLevelResources && pod.Spec.Resources != nil && isPodLevelResource(name) {
		if q, ok := pod.Spec.Resources.Limits[name]; ok {
			r = amountOf(&q)
		}
	}
	if r.set && len(pod.Spec.Overhead) > 0 && !r.isZero() {
		if q, ok := pod.Spec.Overhead[name]; ok {
			r = addAmounts(r, amountOf(&q))
		}
	}
	return r
}

// isPodLevelResource reports whether pod-level spec.resources may set name.
func isPodLevelResource(name corev1.ResourceName) bool {
	return name == corev1.ResourceCPU || name == corev1.ResourceMemory ||
		strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

// findDynamic collects into c.dyn the hugepages and extended resource names
// of every request list the formula may read. A name listed here that turns
// out to be in no list the formula uses comes out unset and is not charged,
// so scanning a superset is harmless.
func (c *podCalc) findDynamic() {
	for i := range c.containers {
		l := &c.containers[i]
		c.scanDynamic(l.lists[specRequests])
		if !c.requestsFromSpec {
			c.scanDynamic(l.lists[allocatedRequests])
			c.scanDynamic(l.lists[actuatedRequests])
		}
	}
	if !c.opts.DisablePodLevelResources && c.pod.Spec.Resources != nil {
		c.scanDynamic(c.pod.Spec.Resources.Requests)
	}
	c.scanDynamic(c.pod.Spec.Overhead)
}

func (c *podCalc) scanDynamic(rl corev1.ResourceList) {
	if len(rl) == 0 {
		return
	}
	for name := range rl {
		switch name {
		case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage:
			continue
		}
		var extended bool
		switch {
		case strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix):
		case c.isExtended(name):
			extended = true
		default:
			continue
		}
		if !c.hasDynamic(name) {
			c.dyn = append(c.dyn, dynAmount{name: name, extended: extended})
		}
	}
}

func (c *podCalc) hasDynamic(name corev1.ResourceName) bool {
	for i := range c.dyn {
		if c.dyn[i].name == name {
			return true
		}
	}
	return false
}

func (c *podCalc) isExtended(name corev1.ResourceName) bool {
	if v, ok := c.extended[name]; ok {
		return v
	}
	v := isDRAExtendedResourceName(name)
	if c.extended == nil {
		c.extended = make(map[corev1.ResourceName]bool)
	}
	c.extended[name] = v
	return v
}

// deviceClassPrefix names the implicit extended resource of a DRA device
// class (resource.k8s.io's ResourceDeviceClassPrefix).
const deviceClassPrefix = "deviceclass.resource.kubernetes.io/"

// isDRAExtendedResourceName reports whether a container request of name is
// charged as requests.<name>: an extended resource (a domain-qualified name
// outside *kubernetes.io/ that stays a qualified name with "requests."
// prepended) or a device class's implicit extended resource.
func isDRAExtendedResourceName(name corev1.ResourceName) bool {
	if strings.HasPrefix(string(name), deviceClassPrefix) {
		return true
	}
	if isNativeResource(name) || strings.HasPrefix(string(name), corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix+string(name))) == 0
}

// isNativeResource reports whether name is in the kubernetes.io namespace:
// unqualified, or containing "kubernetes.io/" anywhere (Kubernetes checks
// with Contains, not HasPrefix).
func isNativeResource(name corev1.ResourceName) bool {
	return !strings.Contains(string(name), "/") || strings.Contains(string(name), corev1.ResourceDefaultNamespacePrefix)
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
