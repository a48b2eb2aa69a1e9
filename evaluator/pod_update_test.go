package evaluator_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quotakit/quotakit/evaluator"
)

// TestPodUpdateFilter covers every pod row of the update filter, including
// the ones Kubernetes' DefaultUpdateFilter lacks (pod-level resize,
// allocated resources, infeasible resizes: the release delay of
// kubernetes#127132, which upstream fixed for container status resources
// only).
func TestPodUpdateFilter(t *testing.T) {
	base := withStatus(podOf([]corev1.Container{ctr("a", res("cpu", "1"), nil)}, sidecar("s", res("cpu", "1"), nil)),
		corev1.ContainerStatus{Name: "a", AllocatedResources: res("cpu", "1"), Resources: &corev1.ResourceRequirements{Requests: res("cpu", "1")}})
	base.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "s", Resources: &corev1.ResourceRequirements{Requests: res("cpu", "1")}}}
	with := func(f func(*corev1.Pod)) *corev1.Pod {
		p := base.DeepCopy()
		f(p)
		return p
	}
	deletedAt := func(ago time.Duration, grace int64) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			ts := metav1.NewTime(testNow.Add(-ago))
			p.DeletionTimestamp = &ts
			p.DeletionGracePeriodSeconds = &grace
		}
	}
	deadline := int64(30)
	tests := []struct {
		name     string
		old, new *corev1.Pod
		opts     evaluator.PodOptions
		want     bool
	}{
		{name: "nothing changed", old: base, new: base.DeepCopy()},
		{name: "labels and unrelated status changed", old: base, new: with(func(p *corev1.Pod) {
			p.Labels = map[string]string{"a": "b"}
			p.Status.PodIP = "10.0.0.1"
			p.Status.ContainerStatuses[0].Ready = true
		})},
		{name: "became Succeeded", old: base, new: with(func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), want: true},
		{name: "became Failed", old: base, new: with(func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }), want: true},
		{name: "terminal to terminal", old: with(func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }), new: with(func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded })},
		{name: "deleted, grace period over", old: base, new: with(deletedAt(time.Minute, 30)), want: true},
		{name: "deleted, grace period not over", old: base, new: with(deletedAt(10*time.Second, 30))},
		{name: "update after the grace period of an already expired pod", old: with(deletedAt(time.Minute, 30)), new: with(deletedAt(time.Minute, 30))},
		{name: "Terminating scope entered", old: base, new: with(func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = &deadline }), want: true},
		{name: "Terminating scope left", old: with(func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = &deadline }), new: base, want: true},
		{name: "container status resources changed", old: base, new: with(func(p *corev1.Pod) {
			p.Status.ContainerStatuses[0].Resources.Requests = res("cpu", "500m")
		}), want: true},
		{name: "container status resources equal in another format", old: base, new: with(func(p *corev1.Pod) {
			p.Status.ContainerStatuses[0].Resources.Requests = res("cpu", "1000m")
		})},
		{name: "init container status resources changed", old: base, new: with(func(p *corev1.Pod) {
			p.Status.InitContainerStatuses[0].Resources.Requests = res("cpu", "2")
		}), want: true},
		{name: "container status added (follows an admitted spec change)", old: with(func(p *corev1.Pod) { p.Status.ContainerStatuses = nil }), new: base},
		{name: "container allocated resources changed (not in upstream)", old: base, new: with(func(p *corev1.Pod) {
			p.Status.ContainerStatuses[0].AllocatedResources = res("cpu", "2")
		}), want: true},
		{name: "pod-level status resources changed (not in upstream)", old: base, new: with(func(p *corev1.Pod) {
			p.Status.Resources = &corev1.ResourceRequirements{Requests: res("cpu", "2")}
		}), want: true},
		{name: "pod-level allocated resources changed (not in upstream)", old: base, new: with(func(p *corev1.Pod) {
			p.Status.AllocatedResources = res("cpu", "2")
		}), want: true},
		{name: "pod-level spec.resources resized (not in upstream)", old: base, new: with(func(p *corev1.Pod) {
			p.Spec.Resources = &corev1.ResourceRequirements{Requests: res("cpu", "2")}
		}), want: true},
		{name: "pod-level spec.resources ignored with DisablePodLevelResources", old: base, new: with(func(p *corev1.Pod) {
			p.Spec.Resources = &corev1.ResourceRequirements{Requests: res("cpu", "2")}
		}), opts: evaluator.PodOptions{DisablePodLevelResources: true}},
		{name: "resize became infeasible (not in upstream)", old: base, new: infeasible(base.DeepCopy()), want: true},
		{name: "resize no longer infeasible (not in upstream)", old: infeasible(base.DeepCopy()), new: base, want: true},
		{name: "resize deferred: no change to usage", old: base, new: with(func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodResizePending, Reason: corev1.PodReasonDeferred}}
		})},
		{name: "status resources ignored with DisableInPlacePodVerticalScaling", old: base, new: with(func(p *corev1.Pod) {
			p.Status.ContainerStatuses[0].Resources.Requests = res("cpu", "500m")
		}), opts: evaluator.PodOptions{DisableInPlacePodVerticalScaling: true}},
	}
	pods := corev1.SchemeGroupVersion.WithResource("pods")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := tt.opts
			opts.Now = func() time.Time { return testNow }
			filter := evaluator.DefaultUpdateFilter(evaluator.Options{Pod: opts})
			if got := filter(pods, tt.old, tt.new); got != tt.want {
				t.Errorf("filter(old, new) = %v, want %v", got, tt.want)
			}
		})
	}
}
