package evaluator

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit/generic"
	"github.com/quotakit/quotakit/quota"
)

// PodOptions configures a [PodEvaluator]. The zero value is Kubernetes 1.37
// with its default feature gates. The Disable fields exist for matching a
// cluster that turned a gate off; they are not needed otherwise.
type PodOptions struct {
	// DisablePodLevelResources ignores pod-level spec.resources everywhere:
	// usage, the BestEffort/NotBestEffort scopes and Constraints, as
	// Kubernetes does with the PodLevelResources feature gate off.
	// Defaults to false: the gate is beta and on by default since 1.34.
	DisablePodLevelResources bool
	// DisableInPlacePodVerticalScaling charges pods from their spec alone,
	// ignoring container status resources, allocated resources and
	// infeasible resizes, as Kubernetes does with the
	// InPlacePodVerticalScaling feature gate off; the update filter then
	// ignores resize status too. Defaults to false: the gate is GA and
	// locked on since 1.35.
	DisableInPlacePodVerticalScaling bool
	// Now returns the current time, against which deletion grace periods
	// are checked. Defaults to time.Now.
	Now func() time.Time
}

func (o PodOptions) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

// PodEvaluator is the [quota.Evaluator] of pods. It charges exactly what
// Kubernetes 1.37 charges (see [PodEvaluator.Usage]) and sums a namespace's
// pods without building a ResourceList per pod.
//
// A PodEvaluator is safe for concurrent use. It does not modify the pods it
// is given.
type PodEvaluator struct {
	list generic.ListFuncByNamespace
	opts PodOptions
	// calcs holds *podCalc scratch space for reuse across calls, so that
	// computing a pod's usage allocates only its result.
	calcs sync.Pool
}

var _ quota.Evaluator = (*PodEvaluator)(nil)

// NewPodEvaluator returns the evaluator of pods, listing a namespace's pods
// with listFunc. listFunc may be nil when only admission methods are used
// (Usage, Matches, Constraints, Handles): UsageStats then returns an error.
func NewPodEvaluator(listFunc generic.ListFuncByNamespace, opts PodOptions) *PodEvaluator {
	return &PodEvaluator{list: listFunc, opts: opts}
}

// podGroupResource is the GroupResource of pods.
var podGroupResource = schema.GroupResource{Resource: "pods"}

// ErrNilPod is returned for a nil *corev1.Pod.
var ErrNilPod = errors.New("evaluator: nil pod")

// toPod returns item as a pod, or an error for any other type or a nil pod.
func toPod(item runtime.Object) (*corev1.Pod, error) {
	pod, ok := item.(*corev1.Pod)
	if !ok {
		return nil, fmt.Errorf("evaluator: expected *v1.Pod, got %T", item)
	}
	if pod == nil {
		return nil, ErrNilPod
	}
	return pod, nil
}

// GroupResource returns pods.
func (p *PodEvaluator) GroupResource() schema.GroupResource { return podGroupResource }

// Handles reports whether a request can change what a pod charges: a create;
// an update of the pod itself only when it moves the pod between the
// Terminating and NotTerminating scopes (spec.activeDeadlineSeconds); and
// any update of the resize subresource. Other subresources (status,
// binding, eviction, ephemeralcontainers, …) and deletes never do. An update
// whose objects are not pods is not handled.
func (p *PodEvaluator) Handles(a quota.Attributes) bool {
	if a == nil {
		return false
	}
	op := a.GetOperation()
	switch a.GetSubresource() {
	case "":
		switch op {
		case admissionv1.Create:
			return true
		case admissionv1.Update:
			pod, err1 := toPod(a.GetObject())
			old, err2 := toPod(a.GetOldObject())
			return err1 == nil && err2 == nil && IsTerminating(old) != IsTerminating(pod)
		}
		return false
	case "resize":
		return op == admissionv1.Update
	}
	return false
}

// Matches reports whether item is charged to resourceQuota: status.hard
// names a resource pods are charged for (see [PodEvaluator.MatchingResources])
// and the pod matches every scope and scope selector requirement.
//
// Unlike Kubernetes, an item that is not a pod is an error even for a quota
// without scopes (Kubernetes only notices when it evaluates a scope).
func (p *PodEvaluator) Matches(resourceQuota *corev1.ResourceQuota, item runtime.Object) (bool, error) {
	if _, err := toPod(item); err != nil {
		return false, err
	}
	return generic.Matches(resourceQuota, item, p.MatchingResources, p.matchesScope)
}

// matchesScope is the generic.MatchesScopeFunc of pods.
func (p *PodEvaluator) matchesScope(req corev1.ScopedResourceSelectorRequirement, item runtime.Object) (bool, error) {
	pod, err := toPod(item)
	if err != nil {
		return false, err
	}
	s := compilePodScope(req)
	return s.matches(pod, p.opts)
}

// podResourceNames are the fixed names pods are charged under.
var podResourceNames = []corev1.ResourceName{
	podCountName,
	corev1.ResourceCPU,
	corev1.ResourceMemory,
	corev1.ResourceEphemeralStorage,
	corev1.ResourceRequestsCPU,
	corev1.ResourceRequestsMemory,
	corev1.ResourceRequestsEphemeralStorage,
	corev1.ResourceLimitsCPU,
	corev1.ResourceLimitsMemory,
	corev1.ResourceLimitsEphemeralStorage,
	corev1.ResourcePods,
}

// requestsDeviceClassPrefix prefixes the quota name of a device class's
// implicit extended resource.
const requestsDeviceClassPrefix = corev1.DefaultResourceRequestsPrefix + deviceClassPrefix

// MatchingResources returns the names of input that pods are charged under:
// count/pods, pods, cpu, memory, ephemeral-storage, their requests.* and
// limits.* forms, hugepages-<size> and requests.hugepages-<size>, and the
// requests.<name> form of extended resources (a domain-qualified name outside
// kubernetes.io, and requests.deviceclass.resource.kubernetes.io/<class>).
//
// As in Kubernetes, the fixed names come first, sorted and deduplicated,
// followed by the matching prefixed names in input order. limits.hugepages-*,
// limits.<extended> and a bare <domain>/<name> are never matched: nothing
// charges them.
func (p *PodEvaluator) MatchingResources(input []corev1.ResourceName) []corev1.ResourceName {
	result := quota.Intersection(input, podResourceNames)
	for _, name := range input {
		s := string(name)
		if strings.HasPrefix(s, corev1.ResourceHugePagesPrefix) || strings.HasPrefix(s, corev1.ResourceRequestsHugePagesPrefix) {
			result = append(result, name)
		}
		if isExtendedResourceNameForQuota(name) {
			result = append(result, name)
		}
	}
	return result
}

// isExtendedResourceNameForQuota reports whether a quota name charges an
// extended resource: requests.<name> where the name is not native or is a
// device class's implicit extended resource.
func isExtendedResourceNameForQuota(name corev1.ResourceName) bool {
	s := string(name)
	if !strings.HasPrefix(s, corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return !isNativeResource(name) || strings.HasPrefix(s, requestsDeviceClassPrefix)
}

// MatchingScopes returns the requirements of scopes that item matches, in
// order; an empty, non-nil slice when there are none. A requirement that
// cannot be evaluated is an error, with an empty result.
func (p *PodEvaluator) MatchingScopes(item runtime.Object, scopes []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	matched := []corev1.ScopedResourceSelectorRequirement{}
	pod, err := toPod(item)
	if err != nil {
		return matched, err
	}
	for _, req := range scopes {
		s := compilePodScope(req)
		ok, err := s.matches(pod, p.opts)
		if err != nil {
			return []corev1.ScopedResourceSelectorRequirement{}, fmt.Errorf("evaluator: matching scope %v: %w", req, err)
		}
		if ok {
			matched = append(matched, req)
		}
	}
	return matched, nil
}

// UncoveredQuotaScopes returns the requirements of limitedScopes whose scope
// name appears in no requirement of matchedQuotaScopes (operators and values
// are not compared, as in Kubernetes); an empty, non-nil slice when every one
// is covered. It never fails.
func (p *PodEvaluator) UncoveredQuotaScopes(limitedScopes, matchedQuotaScopes []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	uncovered := []corev1.ScopedResourceSelectorRequirement{}
	for _, limited := range limitedScopes {
		covered := slices.ContainsFunc(matchedQuotaScopes, func(m corev1.ScopedResourceSelectorRequirement) bool {
			return m.ScopeName == limited.ScopeName
		})
		if !covered {
			uncovered = append(uncovered, limited)
		}
	}
	return uncovered, nil
}

// validationNames are the names for which Constraints demands that every
// container state its own request or limit. Kubernetes calls this a mistake
// it keeps for compatibility; it applies to cpu and memory only.
var validationNames = [...]corev1.ResourceName{
	corev1.ResourceCPU,
	corev1.ResourceMemory,
	corev1.ResourceRequestsCPU,
	corev1.ResourceRequestsMemory,
	corev1.ResourceLimitsCPU,
	corev1.ResourceLimitsMemory,
}

// Constraints returns an error when a quota over required resources cannot
// charge item: for each of cpu, memory, requests.cpu, requests.memory,
// limits.cpu and limits.memory in required, every container and init
// container must set the corresponding request (cpu, memory and requests.*)
// or limit (limits.*). The error lists the missing names with the
// containers lacking them, both sorted, as Kubernetes words it:
//
//	must specify limits.cpu for: c1,c2; requests.memory for: c3
//
// The error carries no package prefix because admission shows it to users
// as Kubernetes does ("failed quota: <name>: must specify …").
//
// Pods with pod-level cpu, memory or hugepages in spec.resources are not
// checked: their containers need not state resources.
func (p *PodEvaluator) Constraints(required []corev1.ResourceName, item runtime.Object) error {
	pod, err := toPod(item)
	if err != nil {
		return err
	}
	if !p.opts.DisablePodLevelResources && isPodLevelResourcesSet(pod) {
		return nil
	}
	var missing map[corev1.ResourceName][]string
	for _, name := range validationNames {
		if !slices.Contains(required, name) {
			continue
		}
		for _, cs := range [2][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
			for i := range cs {
				if containerStates(&cs[i], name) {
					continue
				}
				if missing == nil {
					missing = make(map[corev1.ResourceName][]string)
				}
				if !slices.Contains(missing[name], cs[i].Name) {
					missing[name] = append(missing[name], cs[i].Name)
				}
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	names := make([]corev1.ResourceName, 0, len(missing))
	for name := range missing {
		names = append(names, name)
	}
	slices.Sort(names)
	parts := make([]string, len(names))
	for i, name := range names {
		containers := missing[name]
		slices.Sort(containers)
		parts[i] = string(name) + " for: " + strings.Join(containers, ",")
	}
	return errors.New("must specify " + strings.Join(parts, "; "))
}

// containerStates reports whether c sets what a quota over name needs.
func containerStates(c *corev1.Container, name corev1.ResourceName) bool {
	var ok bool
	switch name {
	case corev1.ResourceCPU, corev1.ResourceRequestsCPU:
		_, ok = c.Resources.Requests[corev1.ResourceCPU]
	case corev1.ResourceMemory, corev1.ResourceRequestsMemory:
		_, ok = c.Resources.Requests[corev1.ResourceMemory]
	case corev1.ResourceLimitsCPU:
		_, ok = c.Resources.Limits[corev1.ResourceCPU]
	case corev1.ResourceLimitsMemory:
		_, ok = c.Resources.Limits[corev1.ResourceMemory]
	}
	return ok
}

// Usage returns what item, a *corev1.Pod, charges:
//
//   - count/pods: 1, always, even for a pod that has ended.
//   - Nothing else for a pod in phase Succeeded or Failed, or past its
//     deletionTimestamp plus deletionGracePeriodSeconds (by
//     [PodOptions.Now]).
//   - Otherwise pods: 1; cpu, memory and ephemeral-storage under their bare
//     and requests.* names from the pod's requests, and under limits.* from
//     its limits; hugepages-<size> and requests.hugepages-<size> from
//     requests; requests.<name> for extended resources. Requests and
//     limits are aggregated as Kubernetes 1.37 does: containers plus
//     sidecars, the init-container maximum, in-place resize status,
//     pod-level spec.resources, and overhead (see the package
//     documentation).
//
// A resource the pod does not request or limit has no key: a pod without
// limits charges no limits.cpu, not a zero.
//
// Usage never modifies the pod. Kubernetes 1.37 adds the overhead into a
// pod-level request written with a fraction of a binary unit ("1.5Gi"), in
// the pod object itself, so that pod's usage grows on every evaluation of a
// cached pod (found by our differential test; no upstream issue is filed
// yet); the result here is the one Kubernetes
// computes the first time.
func (p *PodEvaluator) Usage(item runtime.Object) (corev1.ResourceList, error) {
	pod, err := toPod(item)
	if err != nil {
		return nil, err
	}
	c := p.calc()
	defer p.release(c)
	var u podUsage
	c.usage(pod, p.opts.now(), &u)
	return u.resourceList(), nil
}

// release returns c to the pool, dropping its references to the last pod
// so that the pool does not keep a deleted pod alive.
func (p *PodEvaluator) release(c *podCalc) {
	c.pod = nil
	clear(c.dyn)
	p.calcs.Put(c)
}

// calc returns scratch space for one call.
func (p *PodEvaluator) calc() *podCalc {
	if c, ok := p.calcs.Get().(*podCalc); ok {
		return c
	}
	return &podCalc{opts: p.opts}
}

// PodUsage returns what pod charges at time now under the Kubernetes 1.37
// defaults: [PodEvaluator.Usage] of an evaluator with zero [PodOptions] and
// a clock stopped at now. A nil pod is an error.
func PodUsage(pod *corev1.Pod, now time.Time) (corev1.ResourceList, error) {
	return NewPodEvaluator(nil, PodOptions{Now: func() time.Time { return now }}).Usage(pod)
}

// UsageStats sums the usage of the pods of options.Namespace that match
// every scope of options.Scopes and every requirement of
// options.ScopeSelector. The result has every name of options.Resources
// (zero when nothing uses it) and every name any matching pod charges, as in
// Kubernetes; callers mask it to what they need.
//
// Unlike Kubernetes, a scope requirement that cannot be evaluated (for
// example PriorityClass with an unknown operator) is an error: Kubernetes
// returns the partial sum with no error, and the quota silently shows the
// wrong usage (kubernetes#117676). A list item that is not a pod is an error
// too.
//
// Pods are summed directly into per-resource totals, with no ResourceList per
// pod, and time is read once per call.
func (p *PodEvaluator) UsageStats(options quota.UsageStatsOptions) (quota.UsageStats, error) {
	if p.list == nil {
		return quota.UsageStats{}, fmt.Errorf("evaluator: usage stats of %s: %w", podGroupResource, generic.ErrNoListFunc)
	}
	items, err := p.list(options.Namespace)
	if err != nil {
		return quota.UsageStats{}, fmt.Errorf("evaluator: pods: failed to list content: %w", err)
	}
	scopes := compilePodScopes(generic.ScopeRequirements(options.Scopes, options.ScopeSelector))
	now := p.opts.now()
	pods := make([]*corev1.Pod, len(items))
	for i, item := range items {
		pod, err := toPod(item)
		if err != nil {
			return quota.UsageStats{}, err
		}
		pods[i] = pod
	}
	total, err := p.sum(pods, scopes, now)
	if err != nil {
		return quota.UsageStats{}, fmt.Errorf("evaluator: pods in namespace %q: %w", options.Namespace, err)
	}
	return quota.UsageStats{Used: total.resourceList(options.Resources)}, nil
}

// sum totals the pods that match scopes, on the caller's goroutine. A
// controller runs several workers, and with its ledger sums a namespace
// only at a full resync: a sum of its own goroutines would compete with
// them for no gain.
func (p *PodEvaluator) sum(pods []*corev1.Pod, scopes podScopes, now time.Time) (podTotals, error) {
	c := p.calc()
	defer p.release(c)
	var (
		u     podUsage
		total podTotals
	)
	for _, pod := range pods {
		ok, err := scopes.matches(pod, p.opts)
		if err != nil {
			return podTotals{}, err
		}
		if !ok {
			continue
		}
		c.usage(pod, now, &u)
		total.add(&u)
	}
	return total, nil
}
