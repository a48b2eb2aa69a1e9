package evaluator_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/quotakit/quotakit/evaluator"
	"github.com/quotakit/quotakit/internal/qcmp"
	"github.com/quotakit/quotakit/quota"
)

var _ quota.Evaluator = (*evaluator.PodEvaluator)(nil)

func TestPodGroupResource(t *testing.T) {
	got := evaluator.NewPodEvaluator(nil, evaluator.PodOptions{}).GroupResource()
	if want := (schema.GroupResource{Resource: "pods"}); got != want {
		t.Errorf("GroupResource() = %v, want %v", got, want)
	}
}

func TestPodMatchingResources(t *testing.T) {
	e := evaluator.NewPodEvaluator(nil, evaluator.PodOptions{})
	tests := []struct {
		name  string
		input []corev1.ResourceName
		want  []corev1.ResourceName
	}{
		{
			name:  "fixed names, sorted and deduplicated",
			input: []corev1.ResourceName{"pods", "requests.cpu", "cpu", "count/pods", "cpu", "limits.memory", "limits.ephemeral-storage", "memory", "ephemeral-storage", "requests.memory", "requests.ephemeral-storage", "limits.cpu"},
			want:  []corev1.ResourceName{"count/pods", "cpu", "ephemeral-storage", "limits.cpu", "limits.ephemeral-storage", "limits.memory", "memory", "pods", "requests.cpu", "requests.ephemeral-storage", "requests.memory"},
		},
		{
			name:  "other resources are not matched",
			input: []corev1.ResourceName{"services", "count/services", "requests.storage", "persistentvolumeclaims"},
			want:  []corev1.ResourceName{},
		},
		{
			name:  "hugepages and extended resources follow the fixed names, in input order",
			input: []corev1.ResourceName{"requests.example.com/gpu", "hugepages-2Mi", "pods", "requests.hugepages-1Gi", "requests.deviceclass.resource.kubernetes.io/gpu"},
			want:  []corev1.ResourceName{"pods", "requests.example.com/gpu", "hugepages-2Mi", "requests.hugepages-1Gi", "requests.deviceclass.resource.kubernetes.io/gpu"},
		},
		{
			name:  "never charged: limits of hugepages and extended resources, bare extended names, native requests.*",
			input: []corev1.ResourceName{"limits.hugepages-2Mi", "limits.example.com/gpu", "example.com/gpu", "requests.kubernetes.io/thing", "requests.foo"},
			want:  []corev1.ResourceName{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := e.MatchingResources(tt.input)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("MatchingResources(%v) (-want +got):\n%s", tt.input, diff)
			}
		})
	}
}

func req(scope corev1.ResourceQuotaScope, op corev1.ScopeSelectorOperator, values ...string) corev1.ScopedResourceSelectorRequirement {
	return corev1.ScopedResourceSelectorRequirement{ScopeName: scope, Operator: op, Values: values}
}

// scopePods are pods with one property each, for scope tests.
func scopePods() map[string]*corev1.Pod {
	deadline := func(d int64) *corev1.Pod {
		p := podOf([]corev1.Container{ctr("c", res("cpu", "1"), nil)})
		p.Spec.ActiveDeadlineSeconds = &d
		return p
	}
	class := func(name string) *corev1.Pod {
		p := podOf([]corev1.Container{ctr("c", res("cpu", "1"), nil)})
		p.Spec.PriorityClassName = name
		return p
	}
	affinity := func(a *corev1.Affinity) *corev1.Pod {
		p := podOf([]corev1.Container{ctr("c", nil, nil)})
		p.Spec.Affinity = a
		return p
	}
	return map[string]*corev1.Pod{
		"besteffort":            podOf([]corev1.Container{ctr("c", nil, nil)}),
		"burstable":             podOf([]corev1.Container{ctr("c", res("cpu", "1"), nil)}),
		"deadline=-1":           deadline(-1),
		"deadline=0":            deadline(0),
		"deadline=30":           deadline(30),
		"class=high":            class("high"),
		"class=low":             class("low"),
		"affinity=ns":           affinity(&corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{Namespaces: []string{"other"}}}}}),
		"affinity=same-ns":      affinity(&corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: "zone"}}}}),
		"anti=selector":         affinity(&corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{PodAffinityTerm: corev1.PodAffinityTerm{NamespaceSelector: &metav1.LabelSelector{}}}}}}),
		"anti=required-ns":      affinity(&corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{Namespaces: []string{"x"}}}}}),
		"affinity=preferred-ns": affinity(&corev1.Affinity{PodAffinity: &corev1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{PodAffinityTerm: corev1.PodAffinityTerm{Namespaces: []string{"x"}}}}}}),
	}
}

func TestPodScopes(t *testing.T) {
	pods := scopePods()
	e := evaluator.NewPodEvaluator(nil, evaluator.PodOptions{})
	tests := []struct {
		req     corev1.ScopedResourceSelectorRequirement
		match   []string // pods of scopePods that match; every other one does not
		wantErr bool
	}{
		{req: req(corev1.ResourceQuotaScopeTerminating, corev1.ScopeSelectorOpExists), match: []string{"deadline=0", "deadline=30"}},
		{req: req(corev1.ResourceQuotaScopeNotTerminating, corev1.ScopeSelectorOpExists), match: []string{"besteffort", "burstable", "deadline=-1", "class=high", "class=low", "affinity=ns", "affinity=same-ns", "anti=selector", "anti=required-ns", "affinity=preferred-ns"}},
		{req: req(corev1.ResourceQuotaScopeBestEffort, corev1.ScopeSelectorOpExists), match: []string{"besteffort", "affinity=ns", "affinity=same-ns", "anti=selector", "anti=required-ns", "affinity=preferred-ns"}},
		{req: req(corev1.ResourceQuotaScopeNotBestEffort, corev1.ScopeSelectorOpExists), match: []string{"burstable", "deadline=-1", "deadline=0", "deadline=30", "class=high", "class=low"}},
		{req: req(corev1.ResourceQuotaScopeCrossNamespacePodAffinity, corev1.ScopeSelectorOpExists), match: []string{"affinity=ns", "anti=selector", "anti=required-ns", "affinity=preferred-ns"}},
		{req: req(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpExists), match: []string{"class=high", "class=low"}},
		{req: req(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpIn, "high", "medium"), match: []string{"class=high"}},
		{req: req(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpNotIn, "high"), match: []string{"besteffort", "burstable", "deadline=-1", "deadline=0", "deadline=30", "class=low", "affinity=ns", "affinity=same-ns", "anti=selector", "anti=required-ns", "affinity=preferred-ns"}},
		{req: req(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpDoesNotExist), match: []string{"besteffort", "burstable", "deadline=-1", "deadline=0", "deadline=30", "affinity=ns", "affinity=same-ns", "anti=selector", "anti=required-ns", "affinity=preferred-ns"}},
		// Kubernetes ignores the operator of the other scopes.
		{req: req(corev1.ResourceQuotaScopeTerminating, corev1.ScopeSelectorOpDoesNotExist), match: []string{"deadline=0", "deadline=30"}},
		// Scopes that never match a pod.
		{req: req(corev1.ResourceQuotaScopeVolumeAttributesClass, corev1.ScopeSelectorOpExists)},
		{req: req("Unknown", corev1.ScopeSelectorOpExists)},
		// PriorityClass requirements Kubernetes cannot evaluate.
		{req: req(corev1.ResourceQuotaScopePriorityClass, "Bogus", "high"), wantErr: true},
		{req: req(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpIn), wantErr: true},
		{req: req(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpNotIn, "not a label value!"), wantErr: true},
		{req: req(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpDoesNotExist, "high"), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(string(tt.req.ScopeName)+"/"+string(tt.req.Operator)+"/"+strings.Join(tt.req.Values, ","), func(t *testing.T) {
			for name, pod := range pods {
				got, err := e.MatchingScopes(pod, []corev1.ScopedResourceSelectorRequirement{tt.req})
				if tt.wantErr {
					if err == nil {
						t.Errorf("MatchingScopes(%s) returned no error", name)
					}
					if len(got) != 0 {
						t.Errorf("MatchingScopes(%s) = %v with an error, want empty", name, got)
					}
					continue
				}
				if err != nil {
					t.Fatalf("MatchingScopes(%s): %v", name, err)
				}
				want := 0
				for _, m := range tt.match {
					if m == name {
						want = 1
					}
				}
				if len(got) != want {
					t.Errorf("pod %s: matched = %v, want %v", name, len(got) == 1, want == 1)
				}
			}
		})
	}
}

func TestPodMatchingScopesKeepsOrder(t *testing.T) {
	e := evaluator.NewPodEvaluator(nil, evaluator.PodOptions{})
	pod := scopePods()["class=high"]
	scopes := []corev1.ScopedResourceSelectorRequirement{
		req(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpIn, "high"),
		req(corev1.ResourceQuotaScopeTerminating, corev1.ScopeSelectorOpExists),
		req(corev1.ResourceQuotaScopeNotBestEffort, corev1.ScopeSelectorOpExists),
	}
	got, err := e.MatchingScopes(pod, scopes)
	if err != nil {
		t.Fatal(err)
	}
	want := []corev1.ScopedResourceSelectorRequirement{scopes[0], scopes[2]}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("MatchingScopes (-want +got):\n%s", diff)
	}
	got, err = e.MatchingScopes(pod, nil)
	if err != nil || got == nil || len(got) != 0 {
		t.Errorf("MatchingScopes(nil) = %#v, %v; want an empty non-nil slice", got, err)
	}
	if _, err := e.MatchingScopes(&corev1.Service{}, scopes); err == nil {
		t.Error("MatchingScopes(service) returned no error")
	}
}

func TestPodUncoveredQuotaScopes(t *testing.T) {
	e := evaluator.NewPodEvaluator(nil, evaluator.PodOptions{})
	limited := []corev1.ScopedResourceSelectorRequirement{
		req(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpIn, "high"),
		req(corev1.ResourceQuotaScopeCrossNamespacePodAffinity, corev1.ScopeSelectorOpExists),
	}
	tests := []struct {
		name    string
		matched []corev1.ScopedResourceSelectorRequirement
		want    []corev1.ScopedResourceSelectorRequirement
	}{
		{"nothing matched", nil, limited},
		{"same scope name with another operator covers", []corev1.ScopedResourceSelectorRequirement{req(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpNotIn, "low")}, limited[1:]},
		{"all covered", []corev1.ScopedResourceSelectorRequirement{limited[1], req(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpExists)}, []corev1.ScopedResourceSelectorRequirement{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := e.UncoveredQuotaScopes(limited, tt.matched)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("UncoveredQuotaScopes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPodMatches(t *testing.T) {
	pods := scopePods()
	e := evaluator.NewPodEvaluator(nil, evaluator.PodOptions{})
	quotaWith := func(hard corev1.ResourceList, scopes []corev1.ResourceQuotaScope, exprs ...corev1.ScopedResourceSelectorRequirement) *corev1.ResourceQuota {
		q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "ns"}}
		q.Spec.Hard = hard
		q.Status.Hard = hard
		q.Spec.Scopes = scopes
		if exprs != nil {
			q.Spec.ScopeSelector = &corev1.ScopeSelector{MatchExpressions: exprs}
		}
		return q
	}
	specOnly := quotaWith(nil, nil)
	specOnly.Spec.Hard = res("pods", "10")
	tests := []struct {
		name    string
		quota   *corev1.ResourceQuota
		pod     string
		want    bool
		wantErr bool
	}{
		{"unscoped quota over pods", quotaWith(res("pods", "10"), nil), "burstable", true, false},
		{"quota over other resources", quotaWith(res("services", "10"), nil), "burstable", false, false},
		{"only status.hard counts", specOnly, "burstable", false, false},
		{"hugepages quota", quotaWith(res("requests.hugepages-2Mi", "1Gi"), nil), "burstable", true, false},
		{"BestEffort scope, best-effort pod", quotaWith(res("pods", "10"), []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort}), "besteffort", true, false},
		{"BestEffort scope, burstable pod", quotaWith(res("pods", "10"), []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort}), "burstable", false, false},
		{"scopes and selector must all match", quotaWith(res("pods", "10"), []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeNotTerminating}, req(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpIn, "high")), "class=high", true, false},
		{"scopes and selector, one fails", quotaWith(res("pods", "10"), []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeTerminating}, req(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpIn, "high")), "class=high", false, false},
		{"invalid requirement after a non-matching one is still an error", quotaWith(res("pods", "10"), []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeTerminating}, req(corev1.ResourceQuotaScopePriorityClass, "Bogus")), "class=high", false, true},
		{"nil quota", nil, "burstable", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := e.Matches(tt.quota, pods[tt.pod])
			if (err != nil) != tt.wantErr {
				t.Fatalf("Matches() error = %v, wantErr %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("Matches() = %v, want %v", got, tt.want)
			}
		})
	}
	// Kubernetes notices a non-pod only when it evaluates a scope; we
	// always do.
	if _, err := e.Matches(quotaWith(res("pods", "1"), nil), &corev1.Service{}); err == nil {
		t.Error("Matches(service) returned no error")
	}
}

func TestPodConstraints(t *testing.T) {
	all := []corev1.ResourceName{"cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory", "requests.ephemeral-storage", "pods"}
	tests := []struct {
		name     string
		required []corev1.ResourceName
		pod      *corev1.Pod
		opts     evaluator.PodOptions
		want     string // "" for no error
	}{
		{
			name:     "everything set",
			required: all,
			pod:      podOf([]corev1.Container{ctr("a", res("cpu", "1", "memory", "1Gi"), res("cpu", "1", "memory", "1Gi"))}),
		},
		{
			name:     "nothing required",
			required: []corev1.ResourceName{"pods", "requests.ephemeral-storage", "requests.example.com/gpu"},
			pod:      podOf([]corev1.Container{ctr("a", nil, nil)}),
		},
		{
			name:     "missing names listed sorted, containers sorted and deduplicated",
			required: []corev1.ResourceName{"requests.memory", "limits.cpu"},
			pod: podOf([]corev1.Container{
				ctr("c2", res("memory", "1Gi"), nil),
				ctr("c1", res("memory", "1Gi"), nil),
				ctr("c2", res("memory", "1Gi"), nil),
			}, ctr("c3", nil, res("cpu", "1"))),
			want: "must specify limits.cpu for: c1,c2; requests.memory for: c3",
		},
		{
			name:     "cpu and requests.cpu both want the request; a zero counts as set",
			required: []corev1.ResourceName{"cpu", "requests.cpu"},
			pod:      podOf([]corev1.Container{ctr("a", res("cpu", "0"), nil), ctr("b", nil, res("cpu", "1"))}),
			want:     "must specify cpu for: b; requests.cpu for: b",
		},
		{
			name:     "init containers are checked too",
			required: []corev1.ResourceName{"memory"},
			pod:      podOf([]corev1.Container{ctr("a", res("memory", "1Gi"), nil)}, sidecar("s", nil, nil)),
			want:     "must specify memory for: s",
		},
		{
			name:     "pod-level resources waive the check",
			required: all,
			pod: func() *corev1.Pod {
				p := podOf([]corev1.Container{ctr("a", nil, nil)})
				p.Spec.Resources = &corev1.ResourceRequirements{Requests: res("cpu", "1")}
				return p
			}(),
		},
		{
			name:     "pod-level ephemeral-storage alone does not",
			required: []corev1.ResourceName{"cpu"},
			pod: func() *corev1.Pod {
				p := podOf([]corev1.Container{ctr("a", nil, nil)})
				p.Spec.Resources = &corev1.ResourceRequirements{Requests: res("ephemeral-storage", "1Gi")}
				return p
			}(),
			want: "must specify cpu for: a",
		},
		{
			name:     "DisablePodLevelResources checks containers",
			required: []corev1.ResourceName{"limits.memory"},
			pod: func() *corev1.Pod {
				p := podOf([]corev1.Container{ctr("a", nil, nil)})
				p.Spec.Resources = &corev1.ResourceRequirements{Limits: res("memory", "1Gi")}
				return p
			}(),
			opts: evaluator.PodOptions{DisablePodLevelResources: true},
			want: "must specify limits.memory for: a",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := evaluator.NewPodEvaluator(nil, tt.opts).Constraints(tt.required, tt.pod)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("Constraints(%v) = %q, want %q", tt.required, got, tt.want)
			}
		})
	}
	if err := evaluator.NewPodEvaluator(nil, evaluator.PodOptions{}).Constraints(all, &corev1.Service{}); err == nil {
		t.Error("Constraints(service) returned no error")
	}
}

func TestPodHandles(t *testing.T) {
	deadline := int64(60)
	plain := podOf([]corev1.Container{ctr("c", nil, nil)})
	terminating := plain.DeepCopy()
	terminating.Spec.ActiveDeadlineSeconds = &deadline
	relabelled := plain.DeepCopy()
	relabelled.Labels = map[string]string{"a": "b"}
	tests := []struct {
		name        string
		op          admissionv1.Operation
		subresource string
		obj, old    runtime.Object
		want        bool
	}{
		{"create", admissionv1.Create, "", plain, nil, true},
		{"update that sets activeDeadlineSeconds", admissionv1.Update, "", terminating, plain, true},
		{"update that clears activeDeadlineSeconds", admissionv1.Update, "", plain, terminating, true},
		{"update that keeps the scope", admissionv1.Update, "", relabelled, plain, false},
		{"update with a non-pod object", admissionv1.Update, "", &corev1.Service{}, plain, false},
		{"update without an old object", admissionv1.Update, "", terminating, nil, false},
		{"delete", admissionv1.Delete, "", nil, plain, false},
		{"connect", admissionv1.Connect, "", plain, nil, false},
		{"resize update", admissionv1.Update, "resize", plain, plain, true},
		{"resize create", admissionv1.Create, "resize", plain, nil, false},
		{"status update", admissionv1.Update, "status", terminating, plain, false},
		{"binding create", admissionv1.Create, "binding", plain, nil, false},
		{"ephemeralcontainers update", admissionv1.Update, "ephemeralcontainers", plain, plain, false},
		{"eviction create", admissionv1.Create, "eviction", plain, nil, false},
	}
	e := evaluator.NewPodEvaluator(nil, evaluator.PodOptions{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := &quota.AttributesRecord{Operation: tt.op, Subresource: tt.subresource, Object: tt.obj, OldObject: tt.old}
			if got := e.Handles(a); got != tt.want {
				t.Errorf("Handles(%s %q) = %v, want %v", tt.op, tt.subresource, got, tt.want)
			}
		})
	}
	if e.Handles(nil) {
		t.Error("Handles(nil) = true")
	}
}

// podLister lists objs for namespace ns and fails for any other.
func podLister(objs ...runtime.Object) func(string) ([]runtime.Object, error) {
	return func(ns string) ([]runtime.Object, error) {
		if ns != "ns" {
			return nil, errors.New("no such namespace")
		}
		return objs, nil
	}
}

func TestPodUsageStats(t *testing.T) {
	pods := []runtime.Object{
		podOf([]corev1.Container{ctr("a", res("cpu", "1", "memory", "1Gi"), res("cpu", "2"))}),
		podOf([]corev1.Container{ctr("a", res("cpu", "500m", "hugepages-2Mi", "4Mi", "example.com/gpu", "1"), nil)}),
		func() *corev1.Pod {
			p := podOf([]corev1.Container{ctr("a", res("cpu", "4", "example.com/gpu", "2"), nil)})
			p.Spec.PriorityClassName = "high"
			return p
		}(),
		func() *corev1.Pod {
			p := podOf([]corev1.Container{ctr("a", res("cpu", "8"), nil)})
			p.Status.Phase = corev1.PodSucceeded
			return p
		}(),
		podOf([]corev1.Container{ctr("a", nil, nil)}),
	}
	tests := []struct {
		name    string
		opts    quota.UsageStatsOptions
		objs    []runtime.Object
		want    corev1.ResourceList
		wantErr bool
	}{
		{
			name: "all pods; requested names present even when zero; every charged name reported",
			opts: quota.UsageStatsOptions{Namespace: "ns", Resources: []corev1.ResourceName{"pods", "limits.memory"}},
			objs: pods,
			want: res("count/pods", "5", "pods", "4", "cpu", "5500m", "requests.cpu", "5500m", "memory", "1Gi", "requests.memory", "1Gi",
				"limits.cpu", "2", "limits.memory", "0", "hugepages-2Mi", "4Mi", "requests.hugepages-2Mi", "4Mi", "requests.example.com/gpu", "3"),
		},
		{
			name: "PriorityClass In",
			opts: quota.UsageStatsOptions{Namespace: "ns", Resources: []corev1.ResourceName{"pods"}, ScopeSelector: &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{req(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpIn, "high")}}},
			objs: pods,
			want: res("count/pods", "1", "pods", "1", "cpu", "4", "requests.cpu", "4", "requests.example.com/gpu", "2"),
		},
		{
			name: "BestEffort scope",
			opts: quota.UsageStatsOptions{Namespace: "ns", Resources: []corev1.ResourceName{"pods", "count/pods"}, Scopes: []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort}},
			objs: pods,
			want: res("count/pods", "1", "pods", "1"),
		},
		{
			name: "no pods",
			opts: quota.UsageStatsOptions{Namespace: "ns", Resources: []corev1.ResourceName{"pods", "requests.cpu"}},
			want: res("pods", "0", "requests.cpu", "0"),
		},
		{
			name: "an invalid requirement with no pods is not evaluated",
			opts: quota.UsageStatsOptions{Namespace: "ns", Resources: []corev1.ResourceName{"pods"}, ScopeSelector: &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{req(corev1.ResourceQuotaScopePriorityClass, "Bogus")}}},
			want: res("pods", "0"),
		},
		{
			// kubernetes#117676: Kubernetes returns the partial sum and no error.
			name:    "an invalid requirement is an error (kubernetes#117676)",
			opts:    quota.UsageStatsOptions{Namespace: "ns", Resources: []corev1.ResourceName{"pods"}, ScopeSelector: &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{req(corev1.ResourceQuotaScopePriorityClass, "Bogus")}}},
			objs:    pods,
			wantErr: true,
		},
		{
			name:    "a non-pod item is an error",
			opts:    quota.UsageStatsOptions{Namespace: "ns"},
			objs:    []runtime.Object{pods[0], &corev1.Service{}},
			wantErr: true,
		},
		{
			name:    "a nil pod is an error",
			opts:    quota.UsageStatsOptions{Namespace: "ns"},
			objs:    []runtime.Object{(*corev1.Pod)(nil)},
			wantErr: true,
		},
		{
			name:    "a list error is returned",
			opts:    quota.UsageStatsOptions{Namespace: "other"},
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := evaluator.NewPodEvaluator(podLister(tt.objs...), evaluator.PodOptions{Now: func() time.Time { return testNow }})
			got, err := e.UsageStats(tt.opts)
			if (err != nil) != tt.wantErr {
				t.Fatalf("UsageStats() error = %v, wantErr %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if diff := cmp.Diff(tt.want, got.Used, qcmp.Quantities()); diff != "" {
				t.Errorf("UsageStats (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := evaluator.NewPodEvaluator(nil, evaluator.PodOptions{}).UsageStats(quota.UsageStatsOptions{Namespace: "ns"}); err == nil {
		t.Error("UsageStats without a list function returned no error")
	}
}

// TestPodUsageStatsMatchesUsage checks that the per-resource accumulation
// of UsageStats agrees with the sum of Usage, pod by pod.
func TestPodUsageStatsMatchesUsage(t *testing.T) {
	var objs []runtime.Object
	for i := range 50 {
		p := podOf([]corev1.Container{
			ctr("a", res("cpu", []string{"100m", "1", "1.5"}[i%3], "memory", []string{"1Gi", "1.5Gi", "100M"}[i%3]), res("cpu", "2")),
		}, sidecar("s", res("cpu", "50m", "hugepages-2Mi", "2Mi"), nil))
		if i%7 == 0 {
			p.Status.Phase = corev1.PodFailed
		}
		if i%5 == 0 {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "a", AllocatedResources: res("cpu", "3")}}
		}
		objs = append(objs, p)
	}
	e := evaluator.NewPodEvaluator(podLister(objs...), evaluator.PodOptions{})
	want := corev1.ResourceList{}
	for _, o := range objs {
		u, err := e.Usage(o)
		if err != nil {
			t.Fatal(err)
		}
		want = quota.Add(want, u)
	}
	got, err := e.UsageStats(quota.UsageStatsOptions{Namespace: "ns"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got.Used, qcmp.Quantities()); diff != "" {
		t.Errorf("UsageStats differs from the sum of Usage (-sum +stats):\n%s", diff)
	}
}

func TestQOSClass(t *testing.T) {
	withQOS := func(p *corev1.Pod, c corev1.PodQOSClass) *corev1.Pod { p.Status.QOSClass = c; return p }
	withPodLevel := func(p *corev1.Pod, r corev1.ResourceRequirements) *corev1.Pod { p.Spec.Resources = &r; return p }
	tests := []struct {
		name string
		pod  *corev1.Pod
		want corev1.PodQOSClass
	}{
		{"no resources", podOf([]corev1.Container{ctr("a", nil, nil)}), corev1.PodQOSBestEffort},
		{"no containers", podOf(nil), corev1.PodQOSBestEffort},
		{"only other resources", podOf([]corev1.Container{ctr("a", res("ephemeral-storage", "1Gi"), nil)}), corev1.PodQOSBestEffort},
		{"zero requests", podOf([]corev1.Container{ctr("a", res("cpu", "0", "memory", "0"), nil)}), corev1.PodQOSBestEffort},
		{"a cpu request", podOf([]corev1.Container{ctr("a", res("cpu", "1"), nil)}), corev1.PodQOSBurstable},
		{"equal requests and limits", podOf([]corev1.Container{ctr("a", res("cpu", "1", "memory", "1Gi"), res("cpu", "1000m", "memory", "1Gi"))}), corev1.PodQOSGuaranteed},
		{"cpu only, equal", podOf([]corev1.Container{ctr("a", res("cpu", "1"), res("cpu", "1"))}), corev1.PodQOSBurstable},
		{"guaranteed and best-effort containers", podOf([]corev1.Container{ctr("a", res("cpu", "1", "memory", "1Gi"), res("cpu", "1", "memory", "1Gi")), ctr("b", nil, nil)}), corev1.PodQOSBurstable},
		{"best-effort init container counts", podOf([]corev1.Container{ctr("a", res("cpu", "1", "memory", "1Gi"), res("cpu", "1", "memory", "1Gi"))}, ctr("i", nil, nil)), corev1.PodQOSBurstable},
		{"status.qosClass wins", withQOS(podOf([]corev1.Container{ctr("a", res("cpu", "1"), nil)}), corev1.PodQOSBestEffort), corev1.PodQOSBestEffort},
		{"pod-level resources decide", withPodLevel(podOf([]corev1.Container{ctr("a", nil, nil)}), corev1.ResourceRequirements{Requests: res("cpu", "1")}), corev1.PodQOSBurstable},
		{"pod-level guaranteed", withPodLevel(podOf([]corev1.Container{ctr("a", res("cpu", "1"), nil)}), corev1.ResourceRequirements{Requests: res("cpu", "1", "memory", "1Gi"), Limits: res("cpu", "1", "memory", "1Gi")}), corev1.PodQOSGuaranteed},
		{"pod-level without cpu, memory or hugepages is ignored", withPodLevel(podOf([]corev1.Container{ctr("a", res("cpu", "1"), nil)}), corev1.ResourceRequirements{Requests: res("ephemeral-storage", "1Gi")}), corev1.PodQOSBurstable},
		{"nil pod", nil, corev1.PodQOSBestEffort},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := evaluator.QOSClass(tt.pod); got != tt.want {
				t.Errorf("QOSClass() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestIsTerminating(t *testing.T) {
	for _, tt := range []struct {
		deadline *int64
		want     bool
	}{
		{nil, false},
		{ptr.To(int64(-1)), false},
		{ptr.To(int64(0)), true},
		{ptr.To(int64(3600)), true},
	} {
		pod := podOf(nil)
		pod.Spec.ActiveDeadlineSeconds = tt.deadline
		if got := evaluator.IsTerminating(pod); got != tt.want {
			t.Errorf("IsTerminating(activeDeadlineSeconds=%v) = %v, want %v", tt.deadline, got, tt.want)
		}
	}
	if evaluator.IsTerminating(nil) {
		t.Error("IsTerminating(nil) = true")
	}
}
