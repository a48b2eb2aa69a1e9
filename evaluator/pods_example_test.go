package evaluator_test

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/quotakit/quotakit/evaluator"
	"github.com/quotakit/quotakit/quota"
)

// printUsage prints a ResourceList sorted by name.
func printUsage(rl corev1.ResourceList) {
	names := make([]string, 0, len(rl))
	for name := range rl {
		names = append(names, string(name))
	}
	slices.Sort(names)
	for _, name := range names {
		q := rl[corev1.ResourceName(name)]
		fmt.Printf("%s=%s\n", name, q.String())
	}
}

// One pod's usage: an app container, a sidecar declared before a migration
// init container, and pod overhead. The pod needs 1+0.5 cpu while running
// and 2+0.5 while the migration runs, so it is charged 2.5 cpu plus the
// 100m overhead.
func ExamplePodEvaluator_Usage() {
	always := corev1.ContainerRestartPolicyAlways
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "app",
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")},
				},
			}},
			InitContainers: []corev1.Container{
				{
					Name:          "proxy",
					RestartPolicy: &always,
					Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")},
					},
				},
				{
					Name: "migrate",
					Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
					},
				},
			},
			Overhead: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}

	// No list function is needed to evaluate single objects, as in an
	// admission webhook.
	e := evaluator.NewPodEvaluator(nil, evaluator.PodOptions{})
	usage, err := e.Usage(pod)
	if err != nil {
		fmt.Println(err)
		return
	}
	printUsage(usage)
	// Output:
	// count/pods=1
	// cpu=2600m
	// limits.memory=2Gi
	// memory=1Gi
	// pods=1
	// requests.cpu=2600m
	// requests.memory=1Gi
}

// A quota scoped to the "high" priority class charges only pods of that
// class; NotIn would also charge pods with no class at all.
func ExamplePodEvaluator_Matches() {
	q := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "high-priority", Namespace: "shop"},
		Spec: corev1.ResourceQuotaSpec{
			Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")},
			ScopeSelector: &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{{
				ScopeName: corev1.ResourceQuotaScopePriorityClass,
				Operator:  corev1.ScopeSelectorOpIn,
				Values:    []string{"high"},
			}}},
		},
		// Admission and the controller match status.hard, which the
		// controller copies from spec.hard.
		Status: corev1.ResourceQuotaStatus{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")}},
	}
	e := evaluator.NewPodEvaluator(nil, evaluator.PodOptions{})
	for _, class := range []string{"high", "low", ""} {
		pod := &corev1.Pod{Spec: corev1.PodSpec{PriorityClassName: class}}
		ok, err := e.Matches(q, pod)
		fmt.Printf("class %q: %v %v\n", class, ok, err)
	}
	// Output:
	// class "high": true <nil>
	// class "low": false <nil>
	// class "": false <nil>
}

// UsageStats sums a namespace's pods; the controller calls it through
// quota.CalculateUsage. Here a pod has passed its deletion grace period, so
// it counts in count/pods only.
func ExamplePodEvaluator_UsageStats() {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	pod := func(name, cpu string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name:      "c",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}},
			}}},
		}
	}
	gone := pod("gone", "4")
	deleted, grace := metav1.NewTime(now.Add(-time.Minute)), int64(30)
	gone.DeletionTimestamp, gone.DeletionGracePeriodSeconds = &deleted, &grace
	pods := []runtime.Object{pod("a", "250m"), pod("b", "750m"), gone}

	list := func(namespace string) ([]runtime.Object, error) { return pods, nil }
	e := evaluator.NewPodEvaluator(list, evaluator.PodOptions{Now: func() time.Time { return now }})
	stats, err := e.UsageStats(quota.UsageStatsOptions{
		Namespace: "shop",
		Resources: []corev1.ResourceName{corev1.ResourcePods, corev1.ResourceRequestsCPU, corev1.ResourceLimitsCPU},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	printUsage(stats.Used)
	// Output:
	// count/pods=3
	// cpu=1
	// limits.cpu=0
	// pods=2
	// requests.cpu=1
}

func ExampleQOSClass() {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "c",
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
		},
	}}}}
	fmt.Println(evaluator.QOSClass(pod))
	// Output: Guaranteed
}

func ExampleIsTerminating() {
	deadline := int64(600)
	job := &corev1.Pod{Spec: corev1.PodSpec{ActiveDeadlineSeconds: &deadline}}
	fmt.Println(evaluator.IsTerminating(job), evaluator.IsTerminating(&corev1.Pod{}))
	// Output: true false
}

func ExamplePodUsage() {
	pod := &corev1.Pod{
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name:      "c",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"example.com/gpu": resource.MustParse("1")}},
		}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	usage, err := evaluator.PodUsage(pod, time.Now())
	if err != nil {
		fmt.Println(err)
		return
	}
	printUsage(usage)
	// Output:
	// count/pods=1
	// pods=1
	// requests.example.com/gpu=1
}
