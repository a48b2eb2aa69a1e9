package evaluator_test

import (
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/quotakit/quotakit/evaluator"
	"github.com/quotakit/quotakit/generic"
	"github.com/quotakit/quotakit/internal/qcmp"
	"github.com/quotakit/quotakit/quota"
)

// dressed adds to pod what a real pod carries and quota never reads, so
// that a field TrimPod drops by mistake is one the evaluators would miss,
// and one it keeps by mistake shows in TestTrimPodKeepsOnlyWhatIsRead.
func dressed(pod *corev1.Pod) *corev1.Pod {
	pod = pod.DeepCopy()
	pod.Labels = map[string]string{"app": "web", "PriorityClass": "high"}
	pod.Annotations = map[string]string{"note": "x"}
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: "rs-uid"}}
	pod.Finalizers = []string{"example.com/keep"}
	pod.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	pod.Spec.NodeName = "node-1"
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	pod.Spec.Tolerations = []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}}
	pod.Spec.Priority = ptr.To[int32](1000)
	for _, cs := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range cs {
			cs[i].Image = "registry.example/app:1"
			cs[i].Command = []string{"/app"}
			cs[i].Env = []corev1.EnvVar{{Name: "A", Value: "b"}}
		}
	}
	for _, ss := range [][]corev1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses} {
		for i := range ss {
			ss[i].Image = "registry.example/app:1"
			ss[i].Ready = true
			ss[i].State.Running = &corev1.ContainerStateRunning{}
		}
	}
	pod.Status.Conditions = append([]corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}, pod.Status.Conditions...)
	pod.Status.PodIP = "10.0.0.1"
	return pod
}

// trimCorpus returns hand-made pods that between them exercise every field
// the evaluators and the update filter read, each dressed.
func trimCorpus() map[string]*corev1.Pod {
	ten := int64(10)
	at := func(ago time.Duration, grace int64) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			ts := metav1.NewTime(testNow.Add(-ago))
			p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &ts, &grace
		}
	}
	crossTerm := corev1.PodAffinityTerm{TopologyKey: "zone", Namespaces: []string{"other"}}
	selectorTerm := corev1.PodAffinityTerm{TopologyKey: "zone", NamespaceSelector: &metav1.LabelSelector{}}
	localTerm := corev1.PodAffinityTerm{TopologyKey: "zone", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}}
	base := func() *corev1.Pod {
		return podOf([]corev1.Container{ctr("a", res("cpu", "500m", "memory", "1Gi"), res("cpu", "1", "memory", "1Gi"))},
			sidecar("s", res("cpu", "250m"), res("memory", "128Mi")),
			ctr("init", res("cpu", "2", "ephemeral-storage", "1Gi"), nil))
	}
	pods := map[string]func(*corev1.Pod){
		"containers, sidecar and init": func(*corev1.Pod) {},
		"best effort": func(p *corev1.Pod) {
			*p = *podOf([]corev1.Container{ctr("a", nil, nil)})
		},
		"guaranteed": func(p *corev1.Pod) {
			*p = *podOf([]corev1.Container{ctr("a", res("cpu", "1", "memory", "1Gi"), res("cpu", "1", "memory", "1Gi"))})
		},
		"qos class in status": func(p *corev1.Pod) { p.Status.QOSClass = corev1.PodQOSBestEffort },
		"hugepages and extended": func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests = res("cpu", "1", "hugepages-2Mi", "4Mi", "example.com/gpu", "2", "deviceclass.resource.kubernetes.io/gpu", "1")
		},
		"overhead": func(p *corev1.Pod) { p.Spec.Overhead = res("cpu", "100m", "memory", "64Mi", "example.com/gpu", "1") },
		"pod-level": func(p *corev1.Pod) {
			p.Spec.Resources = &corev1.ResourceRequirements{Requests: res("cpu", "3", "hugepages-2Mi", "2Mi"), Limits: res("memory", "4Gi")}
		},
		"pod-level no names": func(p *corev1.Pod) {
			p.Spec.Resources = &corev1.ResourceRequirements{Requests: res("ephemeral-storage", "1Gi")}
		},
		"resized": func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "a", AllocatedResources: res("cpu", "2"), Resources: &corev1.ResourceRequirements{Requests: res("cpu", "3", "memory", "2Gi"), Limits: res("cpu", "4")}}}
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "s", AllocatedResources: res("cpu", "1")}}
		},
		"resize infeasible": func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "a", Resources: &corev1.ResourceRequirements{Requests: res("cpu", "100m")}}}
			infeasible(p)
		},
		"resize deferred then infeasible": func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "a", Resources: &corev1.ResourceRequirements{Requests: res("cpu", "100m")}}}
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodResizePending, Reason: corev1.PodReasonDeferred})
			infeasible(p)
		},
		"kubelet statuses equal to spec": func(p *corev1.Pod) {
			// The amounts of the spec, spelled differently in the same
			// formats, as a kubelet reports them; TrimPod keeps the spec's
			// lists for them.
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "a", AllocatedResources: res("cpu", "0.5", "memory", "1024Mi"),
				Resources: &corev1.ResourceRequirements{Requests: res("cpu", "500m", "memory", "1048576Ki"), Limits: res("cpu", "1000m", "memory", "1Gi")}}}
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "s", AllocatedResources: res("cpu", "250m"), Resources: &corev1.ResourceRequirements{Requests: res("cpu", "300m")}}}
		},
		"kubelet statuses equal to spec, resize infeasible": func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "a", AllocatedResources: res("cpu", "500m", "memory", "1Gi"),
				Resources: &corev1.ResourceRequirements{Requests: res("cpu", "500m", "memory", "1Gi"), Limits: res("cpu", "1")}}}
			infeasible(p)
		},
		"empty status lists": func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "a", AllocatedResources: corev1.ResourceList{}, Resources: &corev1.ResourceRequirements{Requests: corev1.ResourceList{}}}}
			infeasible(p)
		},
		"duplicate and ghost statuses": func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "ghost", AllocatedResources: res("cpu", "9")}, {Name: "a"}, {Name: "a", AllocatedResources: res("cpu", "7")}}
		},
		"pod-level status resources": func(p *corev1.Pod) {
			p.Status.Resources = &corev1.ResourceRequirements{Requests: res("cpu", "1")}
		},
		"pod-level allocated resources": func(p *corev1.Pod) { p.Status.AllocatedResources = res("cpu", "1") },
		"succeeded":                     func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded },
		"failed":                        func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed },
		"deleted, in grace":             at(10*time.Second, 30),
		"deleted, past":                 at(time.Minute, 30),
		"terminating":                   func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = &ten },
		"negative deadline":             func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr.To[int64](-1) },
		"priority class":                func(p *corev1.Pod) { p.Spec.PriorityClassName = "high" },
		"other class":                   func(p *corev1.Pod) { p.Spec.PriorityClassName = "low" },
		"node affinity only":            func(p *corev1.Pod) { p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}} },
		"same-namespace terms": func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{localTerm}}}
		},
		"affinity required": func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{localTerm, crossTerm}}}
		},
		"affinity preferred": func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 1, PodAffinityTerm: localTerm}, {Weight: 2, PodAffinityTerm: selectorTerm}}}}
		},
		"anti-affinity required": func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{
				PodAffinity:     &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{localTerm}},
				PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{selectorTerm}},
			}
		},
		"anti-affinity preferred": func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}, PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 1, PodAffinityTerm: crossTerm}}}}
		},
		"unnamed container": func(p *corev1.Pod) { p.Spec.Containers = append(p.Spec.Containers, ctr("", nil, res("cpu", "1"))) },
	}
	out := map[string]*corev1.Pod{}
	for name, f := range pods {
		p := base()
		f(p)
		p.Name, p.Namespace, p.UID, p.ResourceVersion = "p", "ns", types.UID("uid-"+name), "7"
		out[name] = dressed(p)
	}
	return out
}

// trimQuotas are quotas over every scope and selector kind.
func trimQuotas() []*corev1.ResourceQuota {
	hard := res("pods", "10", "count/pods", "10", "cpu", "10", "requests.memory", "10Gi", "limits.cpu", "10",
		"requests.ephemeral-storage", "10Gi", "hugepages-2Mi", "1Gi", "requests.example.com/gpu", "4",
		"requests.deviceclass.resource.kubernetes.io/gpu", "4")
	q := func(scopes []corev1.ResourceQuotaScope, reqs ...corev1.ScopedResourceSelectorRequirement) *corev1.ResourceQuota {
		rq := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "ns"}}
		rq.Spec.Hard, rq.Status.Hard, rq.Spec.Scopes = hard, hard, scopes
		if reqs != nil {
			rq.Spec.ScopeSelector = &corev1.ScopeSelector{MatchExpressions: reqs}
		}
		return rq
	}
	sel := func(scope corev1.ResourceQuotaScope, op corev1.ScopeSelectorOperator, values ...string) corev1.ScopedResourceSelectorRequirement {
		return corev1.ScopedResourceSelectorRequirement{ScopeName: scope, Operator: op, Values: values}
	}
	quotas := []*corev1.ResourceQuota{q(nil)}
	for _, s := range []corev1.ResourceQuotaScope{
		corev1.ResourceQuotaScopeTerminating, corev1.ResourceQuotaScopeNotTerminating,
		corev1.ResourceQuotaScopeBestEffort, corev1.ResourceQuotaScopeNotBestEffort,
		corev1.ResourceQuotaScopePriorityClass, corev1.ResourceQuotaScopeCrossNamespacePodAffinity,
	} {
		quotas = append(quotas, q([]corev1.ResourceQuotaScope{s}), q(nil, sel(s, corev1.ScopeSelectorOpExists)))
	}
	return append(quotas,
		q(nil, sel(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpIn, "high")),
		q(nil, sel(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpNotIn, "high")),
		q(nil, sel(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpDoesNotExist)),
		q([]corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeNotTerminating}, sel(corev1.ResourceQuotaScopeNotBestEffort, corev1.ScopeSelectorOpExists)),
	)
}

var trimPodOptions = []evaluator.PodOptions{
	{},
	{DisablePodLevelResources: true},
	{DisableInPlacePodVerticalScaling: true},
}

// TestTrimPodKeepsAnswers checks that every evaluator method, the update
// filter and the grace-period row give the same answer on a trimmed pod as
// on the whole pod, for pods that exercise every field quota reads.
func TestTrimPodKeepsAnswers(t *testing.T) {
	corpus := trimCorpus()
	quotas := trimQuotas()
	var reqs []corev1.ScopedResourceSelectorRequirement
	for _, q := range quotas {
		reqs = append(reqs, generic.ScopeRequirements(q.Spec.Scopes, q.Spec.ScopeSelector)...)
	}
	required := []corev1.ResourceName{"cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"}
	for _, opts := range trimPodOptions {
		opts.Now = func() time.Time { return testNow }
		e := evaluator.NewPodEvaluator(nil, opts)
		// One trimmer for the whole corpus, so that pods share lists.
		var trimmer evaluator.PodTrimmer
		for name, whole := range corpus {
			for how, trimmed := range map[string]*corev1.Pod{"TrimPod": evaluator.TrimPod(whole), "PodTrimmer": trimmer.Trim(whole)} {
				t.Run(fmt.Sprintf("%+v/%s/%s", opts, name, how), func(t *testing.T) {
					want, werr := e.Usage(whole)
					got, gerr := e.Usage(trimmed)
					if werr != nil || gerr != nil {
						t.Fatalf("Usage: %v, %v", werr, gerr)
					}
					if diff := cmp.Diff(want, got, qcmp.Quantities()); diff != "" {
						t.Errorf("Usage (-whole +trimmed):\n%s", diff)
					}
					// The same spelling too: a status write shows it.
					for name, q := range want {
						if g := got[name]; g.String() != q.String() {
							t.Errorf("Usage[%s] = %s on the trimmed pod; %s on the whole pod", name, g.String(), q.String())
						}
					}
					for _, q := range quotas {
						wm, werr := e.Matches(q, whole)
						gm, gerr := e.Matches(q, trimmed)
						if wm != gm || fmt.Sprint(werr) != fmt.Sprint(gerr) {
							t.Errorf("Matches(%v) = %v, %v on the trimmed pod; %v, %v on the whole pod", q.Spec, gm, gerr, wm, werr)
						}
					}
					ws, _ := e.MatchingScopes(whole, reqs)
					gs, _ := e.MatchingScopes(trimmed, reqs)
					if diff := cmp.Diff(ws, gs); diff != "" {
						t.Errorf("MatchingScopes (-whole +trimmed):\n%s", diff)
					}
					for i := range required {
						werr, gerr := e.Constraints(required[i:i+1], whole), e.Constraints(required[i:i+1], trimmed)
						if fmt.Sprint(werr) != fmt.Sprint(gerr) {
							t.Errorf("Constraints(%s) = %v on the trimmed pod; %v on the whole pod", required[i], gerr, werr)
						}
					}
					if w, g := evaluator.QOSClass(whole), evaluator.QOSClass(trimmed); w != g {
						t.Errorf("QOSClass = %s on the trimmed pod; %s on the whole pod", g, w)
					}
					row := evaluator.Resources(evaluator.Options{Pod: opts})[0]
					wt, wok := row.UsageChangesAt(whole)
					gt, gok := row.UsageChangesAt(trimmed)
					if !wt.Equal(gt) || wok != gok {
						t.Errorf("UsageChangesAt = %v, %v on the trimmed pod; %v, %v on the whole pod", gt, gok, wt, wok)
					}
				})
			}
		}
	}
}

// TestTrimPodKeepsUpdateFilter checks the pod row of DefaultUpdateFilter on
// every pair of the corpus, and on pairs that differ in one read field.
func TestTrimPodKeepsUpdateFilter(t *testing.T) {
	corpus := trimCorpus()
	pods := gvrPods
	for _, opts := range trimPodOptions {
		opts.Now = func() time.Time { return testNow }
		filter := evaluator.DefaultUpdateFilter(evaluator.Options{Pod: opts})
		changed := 0
		for oldName, oldPod := range corpus {
			for newName, newPod := range corpus {
				want := filter(pods, oldPod, newPod)
				if want {
					changed++
				}
				if got := filter(pods, evaluator.TrimPod(oldPod), evaluator.TrimPod(newPod)); got != want {
					t.Errorf("%+v: filter(%q → %q) = %v on trimmed pods; %v on whole pods", opts, oldName, newName, got, want)
				}
			}
		}
		// The corpus must exercise both answers, or the test proves nothing.
		if changed == 0 || changed == len(corpus)*len(corpus) {
			t.Errorf("%+v: %d of %d pairs changed", opts, changed, len(corpus)*len(corpus))
		}
	}
}

var gvrPods = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// TestTrimPodUsageStats sums a namespace of trimmed pods and of whole pods
// under every quota.
func TestTrimPodUsageStats(t *testing.T) {
	var whole, trimmed []runtime.Object
	for _, p := range trimCorpus() {
		whole = append(whole, p)
		trimmed = append(trimmed, evaluator.TrimPod(p))
	}
	list := func(objs []runtime.Object) generic.ListFuncByNamespace {
		return func(string) ([]runtime.Object, error) { return objs, nil }
	}
	for _, opts := range trimPodOptions {
		opts.Now = func() time.Time { return testNow }
		we, ge := evaluator.NewPodEvaluator(list(whole), opts), evaluator.NewPodEvaluator(list(trimmed), opts)
		for _, q := range trimQuotas() {
			o := quota.UsageStatsOptions{Namespace: "ns", Scopes: q.Spec.Scopes, ScopeSelector: q.Spec.ScopeSelector, Resources: quota.ResourceNames(q.Status.Hard)}
			want, werr := we.UsageStats(o)
			got, gerr := ge.UsageStats(o)
			if werr != nil || gerr != nil {
				t.Fatalf("UsageStats: %v, %v", werr, gerr)
			}
			if diff := cmp.Diff(want.Used, got.Used, qcmp.Quantities()); diff != "" {
				t.Errorf("%+v: UsageStats(%v) (-whole +trimmed):\n%s", opts, q.Spec, diff)
			}
		}
	}
}

// TestTrimPodKeepsClaimUsage checks the resource claim evaluator, which
// reads the pod that owns a claim (its name, uid, extended resource claim
// status and usage), on a cache of trimmed pods.
func TestTrimPodKeepsClaimUsage(t *testing.T) {
	pod := gpuPod("p", "cpu", "1", "example.com/gpu", "2")
	named := gpuPod("named", "example.com/gpu", "2")
	named.Status.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "named-claim"}
	claims := []runtime.Object{
		special(rclaim("p-claim", exact("gpu", 2)), pod, t0),
		special(rclaim("named-claim", exact("gpu", 2)), named, t0),
		special(rclaim("named-older", exact("gpu", 2)), named, t0.Add(-time.Hour)),
	}
	class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu", CreationTimestamp: metav1.NewTime(t0)}}
	class.Spec.ExtendedResourceName = ptr.To("example.com/gpu")
	for _, claim := range claims {
		var results [2]corev1.ResourceList
		for i, trim := range []bool{false, true} {
			pods := []*corev1.Pod{dressed(pod), dressed(named)}
			if trim {
				for j := range pods {
					pods[j] = evaluator.TrimPod(pods[j])
				}
			}
			w := newWorld(append([]runtime.Object{class, pods[0], pods[1]}, claims...)...)
			e := newClaimEvaluator(t, w.listers, evaluator.ResourceClaimOptions{})
			u, err := e.Usage(claim)
			if err != nil {
				t.Fatalf("Usage: %v", err)
			}
			results[i] = u
		}
		if diff := cmp.Diff(results[0], results[1], qcmp.Quantities()); diff != "" {
			t.Errorf("claim %s: Usage (-whole pods +trimmed pods):\n%s", claim.(*resourcev1.ResourceClaim).Name, diff)
		}
	}
}

// TestTrimPodIdempotentPure checks that TrimPod does not modify its input
// and that trimming twice gives what trimming once does.
func TestTrimPodIdempotentPure(t *testing.T) {
	if got := evaluator.TrimPod(nil); got != nil {
		t.Errorf("TrimPod(nil) = %v, want nil", got)
	}
	for name, pod := range trimCorpus() {
		before := pod.DeepCopy()
		once := evaluator.TrimPod(pod)
		if diff := cmp.Diff(before, pod); diff != "" {
			t.Errorf("%s: TrimPod modified its input (-before +after):\n%s", name, diff)
		}
		if once == pod {
			t.Errorf("%s: TrimPod returned its input", name)
		}
		if diff := cmp.Diff(once, evaluator.TrimPod(once)); diff != "" {
			t.Errorf("%s: TrimPod(TrimPod(p)) != TrimPod(p) (-once +twice):\n%s", name, diff)
		}
	}
}

// TestTrimPodKeepsOnlyWhatIsRead spells out the trimmed form of one pod
// with every kind of field, so that a field kept or dropped by mistake
// shows as a difference.
func TestTrimPodKeepsOnlyWhatIsRead(t *testing.T) {
	ts := metav1.NewTime(testNow)
	always := corev1.ContainerRestartPolicyAlways
	cross := corev1.PodAffinityTerm{TopologyKey: "zone", Namespaces: []string{"other"}}
	claimStatus := &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "claim"}
	podLevel := &corev1.ResourceRequirements{Requests: res("cpu", "2")}
	statusRes := &corev1.ResourceRequirements{Requests: res("cpu", "1")}
	resize := corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonInfeasible, Message: "no room"}
	pod := dressed(&corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "p", GenerateName: "p-", Namespace: "ns", UID: "u", ResourceVersion: "9", Generation: 2,
			CreationTimestamp: ts, DeletionTimestamp: &ts, DeletionGracePeriodSeconds: ptr.To[int64](30),
		},
		Spec: corev1.PodSpec{
			Containers:            []corev1.Container{ctr("a", res("cpu", "1"), res("memory", "1Gi"))},
			InitContainers:        []corev1.Container{sidecar("s", res("cpu", "1"), nil)},
			EphemeralContainers:   []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug"}}},
			Overhead:              res("cpu", "10m"),
			Resources:             podLevel,
			PriorityClassName:     "high",
			ActiveDeadlineSeconds: ptr.To[int64](60),
			Affinity: &corev1.Affinity{
				NodeAffinity:    &corev1.NodeAffinity{},
				PodAffinity:     &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: "zone"}}},
				PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 5, PodAffinityTerm: cross}}},
			},
			ResourceClaims: []corev1.PodResourceClaim{{Name: "c"}},
		},
		Status: corev1.PodStatus{
			Phase:                       corev1.PodRunning,
			QOSClass:                    corev1.PodQOSBurstable,
			Conditions:                  []corev1.PodCondition{resize, {Type: corev1.PodResizePending, Reason: corev1.PodReasonDeferred}},
			ContainerStatuses:           []corev1.ContainerStatus{{Name: "a", AllocatedResources: res("cpu", "1"), Resources: statusRes, RestartCount: 3}},
			InitContainerStatuses:       []corev1.ContainerStatus{{Name: "s", ContainerID: "containerd://1"}},
			Resources:                   statusRes,
			AllocatedResources:          res("cpu", "1"),
			ExtendedResourceClaimStatus: claimStatus,
			StartTime:                   &ts,
			Message:                     "m",
		},
	})
	want := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "p", Namespace: "ns", UID: "u", ResourceVersion: "9", Generation: 2,
			CreationTimestamp: ts, DeletionTimestamp: &ts, DeletionGracePeriodSeconds: ptr.To[int64](30),
		},
		Spec: corev1.PodSpec{
			Containers:            []corev1.Container{ctr("a", res("cpu", "1"), res("memory", "1Gi"))},
			InitContainers:        []corev1.Container{{Name: "s", Resources: corev1.ResourceRequirements{Requests: res("cpu", "1")}, RestartPolicy: &always}},
			Overhead:              res("cpu", "10m"),
			Resources:             podLevel,
			PriorityClassName:     "high",
			ActiveDeadlineSeconds: ptr.To[int64](60),
			Affinity:              &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 5, PodAffinityTerm: cross}}}},
		},
		Status: corev1.PodStatus{
			Phase:                       corev1.PodRunning,
			QOSClass:                    corev1.PodQOSBurstable,
			Conditions:                  []corev1.PodCondition{resize},
			ContainerStatuses:           []corev1.ContainerStatus{{Name: "a", AllocatedResources: res("cpu", "1"), Resources: statusRes}},
			InitContainerStatuses:       []corev1.ContainerStatus{{Name: "s"}},
			Resources:                   statusRes,
			AllocatedResources:          res("cpu", "1"),
			ExtendedResourceClaimStatus: claimStatus,
		},
	}
	got := evaluator.TrimPod(pod)
	if diff := cmp.Diff(want, got, qcmp.Quantities()); diff != "" {
		t.Errorf("TrimPod (-want +got):\n%s", diff)
	}
	// Maps and pointers are shared, not copied.
	if got.Spec.Resources != pod.Spec.Resources || got.Status.ExtendedResourceClaimStatus != pod.Status.ExtendedResourceClaimStatus {
		t.Errorf("TrimPod copied pointers it could share")
	}
}

// An informer transform that caches pods trimmed to what quota reads: the
// image, labels and node name are gone, the usage is the same.
func ExampleTrimPod() {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "shop", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{
			NodeName: "node-7",
			Containers: []corev1.Container{{
				Name:      "app",
				Image:     "registry.example/shop/web:1.4",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}},
			}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.7"},
	}
	transform := func(obj any) (any, error) {
		if pod, ok := obj.(*corev1.Pod); ok {
			return evaluator.TrimPod(pod), nil
		}
		return obj, nil
	}
	cached, _ := transform(pod)
	trimmed := cached.(*corev1.Pod)
	fmt.Printf("%s/%s labels=%d image=%q node=%q ip=%q\n", trimmed.Namespace, trimmed.Name,
		len(trimmed.Labels), trimmed.Spec.Containers[0].Image, trimmed.Spec.NodeName, trimmed.Status.PodIP)

	e := evaluator.NewPodEvaluator(nil, evaluator.PodOptions{})
	whole, _ := e.Usage(pod)
	lean, _ := e.Usage(trimmed)
	fmt.Println(quota.Equals(whole, lean))
	printUsage(lean)
	// Output:
	// shop/web-1 labels=0 image="" node="" ip=""
	// true
	// count/pods=1
	// cpu=250m
	// pods=1
	// requests.cpu=250m
}

// TestTrimPodSharesKubeletStatusLists checks that a status list holding
// the amounts of its container's spec list is kept as that spec list, and
// that a differing one is kept as it is.
func TestTrimPodSharesKubeletStatusLists(t *testing.T) {
	same := func(a, b corev1.ResourceList) bool {
		return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
	}
	pod := trimCorpus()["kubelet statuses equal to spec"]
	got := evaluator.TrimPod(pod)
	spec, init := &got.Spec.Containers[0].Resources, &got.Spec.InitContainers[0].Resources
	st, ist := got.Status.ContainerStatuses[0], got.Status.InitContainerStatuses[0]
	for _, c := range []struct {
		name       string
		got, want  corev1.ResourceList
		wantShared bool
	}{
		{"allocated", st.AllocatedResources, spec.Requests, true},
		{"actual requests", st.Resources.Requests, spec.Requests, true},
		{"actual limits", st.Resources.Limits, spec.Limits, true},
		{"init allocated", ist.AllocatedResources, init.Requests, true},
		{"init actual requests (300m, not 250m)", ist.Resources.Requests, pod.Status.InitContainerStatuses[0].Resources.Requests, true},
	} {
		if same(c.got, c.want) != c.wantShared {
			t.Errorf("%s: shared with %v = %v, want %v", c.name, c.want, !c.wantShared, c.wantShared)
		}
	}
	if same(ist.Resources.Requests, init.Requests) {
		t.Errorf("init actual requests of 300m were replaced by the spec's 250m")
	}

	// The same amount in another format prints otherwise: not shared.
	other := pod.DeepCopy()
	other.Status.ContainerStatuses[0].Resources.Requests = res("cpu", "500m", "memory", "1073741824")
	got = evaluator.TrimPod(other)
	if same(got.Status.ContainerStatuses[0].Resources.Requests, got.Spec.Containers[0].Resources.Requests) {
		t.Errorf("actual requests with memory 1073741824 (DecimalSI) were replaced by the spec's 1Gi (BinarySI)")
	}
}

// TestPodTrimmerSharesLists checks that pods trimmed by one PodTrimmer
// share lists with the same names, amounts and formats, and only those.
func TestPodTrimmerSharesLists(t *testing.T) {
	same := func(a, b corev1.ResourceList) bool {
		return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
	}
	pod := func(mem string) *corev1.Pod {
		p := dressed(podOf([]corev1.Container{ctr("a", res("cpu", "250m", "memory", mem), res("memory", mem))}))
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "a", Resources: &corev1.ResourceRequirements{Limits: res("memory", mem)}}}
		return p
	}
	var trimmer evaluator.PodTrimmer
	a, b := trimmer.Trim(pod("1Gi")), trimmer.Trim(pod("1024Mi"))
	c := trimmer.Trim(pod("1073741824")) // the same amount, another format
	d := trimmer.Trim(pod("2Gi"))
	ra, rb, rc, rd := a.Spec.Containers[0].Resources, b.Spec.Containers[0].Resources, c.Spec.Containers[0].Resources, d.Spec.Containers[0].Resources
	if !same(ra.Requests, rb.Requests) || !same(ra.Limits, rb.Limits) {
		t.Errorf("1Gi and 1024Mi lists are not shared")
	}
	if !same(ra.Limits, b.Status.ContainerStatuses[0].Resources.Limits) {
		t.Errorf("a status list with the amounts of a kept list is not shared")
	}
	if same(ra.Requests, rc.Requests) || same(ra.Limits, rc.Limits) {
		t.Errorf("a DecimalSI list shares a BinarySI one")
	}
	if same(ra.Requests, rd.Requests) {
		t.Errorf("1Gi and 2Gi lists are shared")
	}
	e := evaluator.NewPodEvaluator(nil, evaluator.PodOptions{})
	for _, p := range []string{"1Gi", "1024Mi", "1073741824", "2Gi"} {
		whole := pod(p)
		want, _ := e.Usage(whole)
		got, _ := e.Usage(trimmer.Trim(whole))
		for name, q := range want {
			if g := got[name]; g.String() != q.String() {
				t.Errorf("memory %s: Usage[%s] = %s on the trimmed pod; %s on the whole pod", p, name, g.String(), q.String())
			}
		}
	}
	if diff := cmp.Diff(a, trimmer.Trim(a)); diff != "" {
		t.Errorf("Trim(Trim(p)) != Trim(p) (-once +twice):\n%s", diff)
	}

	// Containers and statuses equal in all a trimmed pod keeps are one
	// slice; any difference, even a nil list against an empty one, keeps
	// them apart.
	sameSlice := func(a, b any) bool { return reflect.ValueOf(a).Pointer() == reflect.ValueOf(b).Pointer() }
	a2 := trimmer.Trim(pod("1Gi"))
	if !sameSlice(a.Spec.Containers, a2.Spec.Containers) || !sameSlice(a.Status.ContainerStatuses, a2.Status.ContainerStatuses) {
		t.Errorf("two pods of one template do not share their containers and statuses")
	}
	if sameSlice(a.Spec.Containers, d.Spec.Containers) || sameSlice(a.Status.ContainerStatuses, d.Status.ContainerStatuses) {
		t.Errorf("pods with other amounts share containers or statuses")
	}
	renamed := pod("1Gi")
	renamed.Spec.Containers[0].Name = "b"
	if sameSlice(a.Spec.Containers, trimmer.Trim(renamed).Spec.Containers) {
		t.Errorf("containers of another name are shared")
	}
	always := corev1.ContainerRestartPolicyAlways
	sidecar := pod("1Gi")
	sidecar.Spec.Containers[0].RestartPolicy = &always
	if sameSlice(a.Spec.Containers, trimmer.Trim(sidecar).Spec.Containers) {
		t.Errorf("containers with another restart policy are shared")
	}
	emptyLimits := pod("1Gi")
	emptyLimits.Status.ContainerStatuses[0].Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{}}
	nilLimits := pod("1Gi")
	nilLimits.Status.ContainerStatuses[0].Resources = &corev1.ResourceRequirements{}
	if e, n := trimmer.Trim(emptyLimits), trimmer.Trim(nilLimits); sameSlice(e.Status.ContainerStatuses, n.Status.ContainerStatuses) {
		t.Errorf("statuses with a nil and an empty list are shared")
	}
	if trimmer.Trim(nil) != nil {
		t.Errorf("Trim(nil) != nil")
	}
}

// TestPodTrimmerConcurrent trims from several goroutines at once (run
// with -race).
func TestPodTrimmerConcurrent(t *testing.T) {
	var trimmer evaluator.PodTrimmer
	corpus := trimCorpus()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for _, p := range corpus {
				trimmer.Trim(p)
			}
		})
	}
	wg.Wait()
}
