package bench

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	upquota "k8s.io/apiserver/pkg/quota/v1"
	upcore "k8s.io/kubernetes/pkg/quota/v1/evaluator/core"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/quotakit/quotakit/evaluator"
	"github.com/quotakit/quotakit/generic"
	"github.com/quotakit/quotakit/quota"
)

// The trimmed-pod differential: on the randomised corpus of
// pod_diff_test.go, dressed as real pods, every answer quota gives about a
// pod trimmed as the controller's cache trims it (the pods row's Trim: a
// PodTrimmer, which also shares equal resource lists between pods) is the
// answer it gives about the whole pod, and that answer is Kubernetes
// 1.37.1's wherever TestPodEvaluatorDifferential compares them: trimmed ==
// whole == upstream.

// podTrim returns the pods row's Trim of a new table: one PodTrimmer.
func podTrim() func(*corev1.Pod) *corev1.Pod {
	trim := evaluator.Resources(evaluator.Options{})[0].Trim
	return func(p *corev1.Pod) *corev1.Pod { return trim(p).(*corev1.Pod) }
}

// dressPod gives a generated pod the bulk of a real one, all of it fields
// quota never reads, taken from realisticPod(i): labels, annotations, an
// owner, the projected service-account volume, tolerations, node and
// scheduling fields, images, ports, probes and mounts of every container,
// and the state, image and IDs of every container status, with the ready
// conditions before the pod's own. The pod's quota fields (and its QoS
// class) are left as generated.
func dressPod(pod *corev1.Pod, i int) *corev1.Pod {
	r := realisticPod(i)
	pod.GenerateName = r.GenerateName
	pod.UID = r.UID
	pod.CreationTimestamp = r.CreationTimestamp
	pod.Labels, pod.Annotations, pod.OwnerReferences = r.Labels, r.Annotations, r.OwnerReferences
	pod.Spec.Volumes = r.Spec.Volumes
	pod.Spec.RestartPolicy = r.Spec.RestartPolicy
	pod.Spec.TerminationGracePeriodSeconds = r.Spec.TerminationGracePeriodSeconds
	pod.Spec.DNSPolicy = r.Spec.DNSPolicy
	pod.Spec.ServiceAccountName = r.Spec.ServiceAccountName
	pod.Spec.NodeName = r.Spec.NodeName
	pod.Spec.SecurityContext = r.Spec.SecurityContext
	pod.Spec.SchedulerName = r.Spec.SchedulerName
	pod.Spec.Tolerations = r.Spec.Tolerations
	pod.Spec.Priority = r.Spec.Priority
	pod.Spec.EnableServiceLinks = r.Spec.EnableServiceLinks
	pod.Spec.PreemptionPolicy = r.Spec.PreemptionPolicy
	for _, cs := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for j := range cs {
			from := &r.Spec.Containers[j%len(r.Spec.Containers)]
			c := &cs[j]
			c.Image, c.Ports, c.VolumeMounts, c.LivenessProbe = from.Image, from.Ports, from.VolumeMounts, from.LivenessProbe
			c.TerminationMessagePath, c.TerminationMessagePolicy, c.ImagePullPolicy = from.TerminationMessagePath, from.TerminationMessagePolicy, from.ImagePullPolicy
		}
	}
	// Half the pods also get, for each container that has no status, the
	// status a 1.37 kubelet reports for a running container: allocated and
	// actual resources equal to the spec's.
	if i%2 == 1 {
		withKubeletStatuses(pod)
	}
	for _, ss := range [][]corev1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses} {
		for j := range ss {
			from := &r.Status.ContainerStatuses[j%len(r.Status.ContainerStatuses)]
			s := &ss[j]
			s.State, s.Ready, s.Image, s.ImageID, s.ContainerID, s.Started, s.VolumeMounts = from.State, from.Ready, from.Image, from.ImageID, from.ContainerID, from.Started, from.VolumeMounts
		}
	}
	pod.Status.Conditions = append(r.Status.Conditions, pod.Status.Conditions...)
	pod.Status.HostIP, pod.Status.HostIPs, pod.Status.PodIP, pod.Status.PodIPs = r.Status.HostIP, r.Status.HostIPs, r.Status.PodIP, r.Status.PodIPs
	pod.Status.StartTime = r.Status.StartTime
	return pod
}

// withKubeletStatuses adds, for every container and init container of pod
// without a status, one whose allocated and actual resources are copies of
// its spec's, as a kubelet reports them.
func withKubeletStatuses(pod *corev1.Pod) {
	has := map[string]bool{}
	for _, ss := range [][]corev1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses} {
		for _, s := range ss {
			has[s.Name] = true
		}
	}
	for j, cs := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for _, c := range cs {
			if has[c.Name] {
				continue
			}
			st := corev1.ContainerStatus{Name: c.Name, AllocatedResources: c.Resources.Requests.DeepCopy()}
			if c.Resources.Requests != nil || c.Resources.Limits != nil {
				st.Resources = &corev1.ResourceRequirements{Requests: c.Resources.Requests.DeepCopy(), Limits: c.Resources.Limits.DeepCopy()}
			}
			if j == 0 {
				pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, st)
			} else {
				pod.Status.InitContainerStatuses = append(pod.Status.InitContainerStatuses, st)
			}
		}
	}
}

// trimScopeQuotas are quotas over every scope and scope selector kind,
// valid ones only: the random quotas of podGen add invalid ones.
func trimScopeQuotas() []*corev1.ResourceQuota {
	hard := corev1.ResourceList{}
	for _, n := range []corev1.ResourceName{"pods", "count/pods", "cpu", "memory", "limits.cpu", "limits.memory", "requests.ephemeral-storage", "hugepages-2Mi", "requests.example.com/gpu", "requests.deviceclass.resource.kubernetes.io/gpu-class"} {
		hard[n] = resource.MustParse("100")
	}
	q := func(scopes []corev1.ResourceQuotaScope, reqs ...corev1.ScopedResourceSelectorRequirement) *corev1.ResourceQuota {
		rq := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "ns"}}
		rq.Spec.Hard, rq.Status.Hard, rq.Spec.Scopes = hard, hard, scopes
		if reqs != nil {
			rq.Spec.ScopeSelector = &corev1.ScopeSelector{MatchExpressions: reqs}
		}
		return rq
	}
	exists := func(s corev1.ResourceQuotaScope) corev1.ScopedResourceSelectorRequirement {
		return corev1.ScopedResourceSelectorRequirement{ScopeName: s, Operator: corev1.ScopeSelectorOpExists}
	}
	quotas := []*corev1.ResourceQuota{q(nil)}
	for _, s := range diffScopeNames[:6] {
		quotas = append(quotas, q([]corev1.ResourceQuotaScope{s}), q(nil, exists(s)))
	}
	pc := corev1.ResourceQuotaScopePriorityClass
	return append(quotas,
		q(nil, corev1.ScopedResourceSelectorRequirement{ScopeName: pc, Operator: corev1.ScopeSelectorOpIn, Values: []string{"high"}}),
		q(nil, corev1.ScopedResourceSelectorRequirement{ScopeName: pc, Operator: corev1.ScopeSelectorOpNotIn, Values: []string{"high", "low"}}),
		q(nil, corev1.ScopedResourceSelectorRequirement{ScopeName: pc, Operator: corev1.ScopeSelectorOpDoesNotExist}),
		q([]corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeNotTerminating}, exists(corev1.ResourceQuotaScopeBestEffort)),
	)
}

// TestTrimPodDifferential runs 12,000 dressed random pods, from four seeds,
// through our evaluator whole and trimmed and through Kubernetes 1.37.1's
// evaluator whole.
func TestTrimPodDifferential(t *testing.T) {
	for seed := uint64(11); seed <= 14; seed++ {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) { diffTrimmed(t, seed, 3000) })
	}
}

func diffTrimmed(t *testing.T, seed uint64, n int) {
	g := &podGen{r: rand.New(rand.NewPCG(seed, 41))}
	theirs := upcore.NewPodEvaluator(nil, testingclock.NewFakeClock(diffNow))
	opts := evaluator.PodOptions{Now: func() time.Time { return diffNow }}
	ours := evaluator.NewPodEvaluator(nil, opts)
	filter := evaluator.DefaultUpdateFilter(evaluator.Options{Pod: opts})
	trim := podTrim()
	fixed := trimScopeQuotas()
	required := []corev1.ResourceName{"cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"}
	var prev *corev1.Pod
	filterTrue := 0
	for i := range n {
		whole := dressPod(g.pod(), i)
		before := whole.DeepCopy()
		trimmed := trim(whole)
		name := fmt.Sprintf("seed %d pod %d", seed, i)
		if !apiequality.Semantic.DeepEqual(before, whole) {
			t.Fatalf("%s: TrimPod modified its input", name)
		}
		if diff := cmp.Diff(trimmed, trim(trimmed), quantityCmp); diff != "" {
			t.Errorf("%s: TrimPod(TrimPod(p)) != TrimPod(p) (-once +twice):\n%s", name, diff)
		}

		want, err := theirs.Usage(whole.DeepCopy())
		if err != nil {
			t.Fatalf("%s: upstream Usage: %v", name, err)
		}
		got, err := ours.Usage(whole)
		if err != nil {
			t.Fatalf("%s: Usage: %v", name, err)
		}
		gotTrimmed, err := ours.Usage(trimmed)
		if err != nil {
			t.Fatalf("%s: Usage of the trimmed pod: %v", name, err)
		}
		if diff := cmp.Diff(want, got, quantityCmp); diff != "" {
			t.Errorf("%s: Usage (-upstream +ours):\n%s", name, diff)
		}
		if diff := cmp.Diff(got, gotTrimmed, quantityCmp); diff != "" {
			t.Errorf("%s: Usage (-whole +trimmed):\n%s", name, diff)
		}
		for n, q := range got {
			if tq := gotTrimmed[n]; tq.String() != q.String() {
				t.Errorf("%s: Usage[%s] = %s on the trimmed pod; %s on the whole pod", name, n, tq.String(), q.String())
			}
		}

		for _, q := range append([]*corev1.ResourceQuota{g.quota()}, fixed...) {
			wm, werr := theirs.Matches(q, whole)
			gm, gerr := ours.Matches(q, whole)
			tm, terr := ours.Matches(q, trimmed)
			if wm != gm || (werr != nil) != (gerr != nil) {
				t.Errorf("%s: Matches(%v) = %v, %v; upstream %v, %v", name, q.Spec, gm, gerr, wm, werr)
			}
			if tm != gm || fmt.Sprint(terr) != fmt.Sprint(gerr) {
				t.Errorf("%s: Matches(%v) = %v, %v on the trimmed pod; %v, %v on the whole pod", name, q.Spec, tm, terr, gm, gerr)
			}
		}

		var reqs []corev1.ScopedResourceSelectorRequirement
		for range g.r.IntN(4) {
			reqs = append(reqs, g.requirement())
		}
		for _, q := range fixed {
			reqs = append(reqs, generic.ScopeRequirements(q.Spec.Scopes, q.Spec.ScopeSelector)...)
		}
		ws, werr := theirs.MatchingScopes(whole, reqs)
		gs, gerr := ours.MatchingScopes(whole, reqs)
		ts, terr := ours.MatchingScopes(trimmed, reqs)
		if (werr != nil) != (gerr != nil) {
			t.Errorf("%s: MatchingScopes error %v; upstream %v", name, gerr, werr)
		} else if diff := cmp.Diff(ws, gs); diff != "" {
			t.Errorf("%s: MatchingScopes (-upstream +ours):\n%s", name, diff)
		}
		if fmt.Sprint(gerr) != fmt.Sprint(terr) {
			t.Errorf("%s: MatchingScopes error %v on the trimmed pod; %v on the whole pod", name, terr, gerr)
		} else if diff := cmp.Diff(gs, ts); diff != "" {
			t.Errorf("%s: MatchingScopes (-whole +trimmed):\n%s", name, diff)
		}

		// What admission asks with the scopes a pod matched: the same on
		// both pods since MatchingScopes is.
		var limited []corev1.ScopedResourceSelectorRequirement
		for range 1 + g.r.IntN(3) {
			limited = append(limited, g.requirement())
		}
		wu, _ := theirs.UncoveredQuotaScopes(limited, ws)
		gu, _ := ours.UncoveredQuotaScopes(limited, gs)
		tu, _ := ours.UncoveredQuotaScopes(limited, ts)
		if diff := cmp.Diff(wu, gu); diff != "" {
			t.Errorf("%s: UncoveredQuotaScopes (-upstream +ours):\n%s", name, diff)
		}
		if diff := cmp.Diff(gu, tu); diff != "" {
			t.Errorf("%s: UncoveredQuotaScopes (-whole +trimmed):\n%s", name, diff)
		}

		for j := range required {
			r := required[j : j+1+g.r.IntN(len(required)-j)]
			werr, gerr, terr := theirs.Constraints(r, whole), ours.Constraints(r, whole), ours.Constraints(r, trimmed)
			if fmt.Sprint(werr) != fmt.Sprint(gerr) {
				t.Errorf("%s: Constraints(%v) = %v; upstream %v", name, r, gerr, werr)
			}
			if fmt.Sprint(terr) != fmt.Sprint(gerr) {
				t.Errorf("%s: Constraints(%v) = %v on the trimmed pod; %v on the whole pod", name, r, terr, gerr)
			}
		}

		// The update filter, on a random pair and on an update that
		// changes one thing quota may read.
		if prev != nil {
			for _, pair := range [][2]*corev1.Pod{{prev, whole}, {whole, prev}, {whole, mutatePod(g, whole)}} {
				w := filter(podsGVR, pair[0], pair[1])
				if w {
					filterTrue++
				}
				if got := filter(podsGVR, trim(pair[0]), trim(pair[1])); got != w {
					t.Errorf("%s: update filter = %v on trimmed pods, %v on whole pods\nold: %s\nnew: %s", name, got, w, describePod(pair[0]), describePod(pair[1]))
				}
			}
		}
		prev = whole
	}
	// Both answers must be common, or the filter comparison proves little.
	if pairs := 3 * (n - 1); filterTrue < pairs/10 || filterTrue > pairs*9/10 {
		t.Errorf("the update filter said true for %d of %d pairs", filterTrue, pairs)
	}
}

var podsGVR = corev1.SchemeGroupVersion.WithResource("pods")

// mutatePod returns a copy of pod with one change an update may bring,
// read by quota or not.
func mutatePod(g *podGen, pod *corev1.Pod) *corev1.Pod {
	p := pod.DeepCopy()
	p.ResourceVersion = "2"
	switch g.r.IntN(9) {
	case 0:
		p.Status.Phase = corev1.PodPhase(g.pick("Succeeded", "Failed", "Running"))
	case 1:
		ts := metav1.NewTime(diffNow.Add(-time.Duration(g.r.IntN(120)) * time.Second))
		grace := int64(g.r.IntN(90))
		p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &ts, &grace
	case 2:
		if len(p.Status.ContainerStatuses) > 0 {
			p.Status.ContainerStatuses[0].Resources = &corev1.ResourceRequirements{Requests: g.list(0.5, corev1.ResourceCPU, corev1.ResourceMemory)}
		}
	case 3:
		if len(p.Status.ContainerStatuses) > 0 {
			p.Status.ContainerStatuses[0].AllocatedResources = g.list(0.5, corev1.ResourceCPU)
		}
	case 4:
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodResizePending, Reason: g.pick(corev1.PodReasonInfeasible, corev1.PodReasonDeferred)})
	case 5:
		d := int64(g.r.IntN(3) - 1)
		p.Spec.ActiveDeadlineSeconds = &d
	case 6:
		p.Spec.Resources = &corev1.ResourceRequirements{Requests: g.list(0.5, corev1.ResourceCPU, corev1.ResourceMemory)}
	case 7:
		p.Status.Resources = &corev1.ResourceRequirements{Requests: g.list(0.5, corev1.ResourceCPU)}
		p.Status.AllocatedResources = g.list(0.5, corev1.ResourceMemory)
	default:
		p.Labels = map[string]string{"rev": "2"}
		p.Status.PodIP = "10.9.9.9"
		for j := range p.Status.ContainerStatuses {
			p.Status.ContainerStatuses[j].RestartCount++
		}
	}
	return p
}

// TestTrimPodUsageStatsDifferential sums random namespaces of dressed pods
// whole and trimmed with our evaluator, and whole with Kubernetes', under
// random quotas and quotas of every scope kind.
func TestTrimPodUsageStatsDifferential(t *testing.T) {
	g := &podGen{r: rand.New(rand.NewPCG(15, 41))}
	clock := testingclock.NewFakeClock(diffNow)
	opts := evaluator.PodOptions{Now: func() time.Time { return diffNow }}
	fixed := trimScopeQuotas()
	trim := podTrim()
	for round := range 30 {
		var whole, trimmed []*corev1.Pod
		for i := range 80 + g.r.IntN(120) {
			p := dressPod(g.pod(), round*1000+i)
			whole = append(whole, p)
			trimmed = append(trimmed, trim(p))
		}
		oursWhole := evaluator.NewPodEvaluator(oursListFunc(indexPods(t, whole)), opts)
		oursTrimmed := evaluator.NewPodEvaluator(oursListFunc(indexPods(t, trimmed)), opts)
		for i, q := range append(fixed, g.quota(), g.quota(), g.quota()) {
			o := quota.UsageStatsOptions{Namespace: "ns", Scopes: q.Spec.Scopes, ScopeSelector: q.Spec.ScopeSelector, Resources: quota.ResourceNames(q.Status.Hard)}
			name := fmt.Sprintf("round %d quota %d %v", round, i, q.Spec)
			got, gerr := oursWhole.UsageStats(o)
			gotTrimmed, terr := oursTrimmed.UsageStats(o)
			if fmt.Sprint(gerr) != fmt.Sprint(terr) {
				t.Errorf("%s: UsageStats error %v on trimmed pods; %v on whole pods", name, terr, gerr)
				continue
			}
			// Sums, over pods listed in map order: compared by value (see sumCmp).
			if diff := cmp.Diff(got.Used, gotTrimmed.Used, sumCmp); diff != "" {
				t.Errorf("%s: UsageStats (-whole +trimmed):\n%s", name, diff)
			}
			if gerr != nil {
				if !invalidScopes(q) {
					t.Errorf("%s: UsageStats: %v", name, gerr)
				}
				continue // kubernetes#117676: upstream swallows scope errors.
			}
			// Upstream may modify the pods it sums: fresh copies.
			theirs := upcore.NewPodEvaluator(upstreamListerFunc(indexPods(t, whole)), clock)
			want, werr := theirs.UsageStats(upquota.UsageStatsOptions(o))
			if werr != nil {
				t.Fatalf("%s: upstream: %v", name, werr)
			}
			if diff := cmp.Diff(want.Used, got.Used, sumCmp); diff != "" {
				t.Errorf("%s: UsageStats (-upstream +ours):\n%s", name, diff)
			}
		}
	}
}
