package evaluator_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/quotakit/quotakit/evaluator"
	"github.com/quotakit/quotakit/internal/qcmp"
	"github.com/quotakit/quotakit/quota"
)

// TestDRAExtendedResourceNamespaceTotals sums pods and claims together, as
// the controller does, for the worked example of a pod whose extended
// resource the scheduler backs with a DeviceClass: the pod charges the name
// it requests, its claim tops up the class's other name, and each name
// counts each device once. A claim whose pod cannot be verified charges in
// full, and the pod's name counts the devices twice, as in Kubernetes.
func TestDRAExtendedResourceNamespaceTotals(t *testing.T) {
	pod := gpuPod("p", "cpu", "1", "example.com/gpu", "2")
	podClaim := special(rclaim("p-extended-resources-x7k2q", exact("gpu", 2)), pod, t0)
	implicitPod := gpuPod("q", "deviceclass.resource.kubernetes.io/gpu", "1")
	implicitClaim := special(rclaim("q-extended-resources-1", exact("gpu", 1)), implicitPod, t0)
	ended := pod.DeepCopy()
	ended.Status.Phase = corev1.PodFailed
	// A device-plugin pod: the node had the resource, no claim was made.
	pluginPod := gpuPod("plugin", "example.com/gpu", "3")
	hard := rl("count/resourceclaims.resource.k8s.io", "10", "gpu.deviceclass.resource.k8s.io/devices", "8",
		"requests.example.com/gpu", "8", "requests.deviceclass.resource.kubernetes.io/gpu", "8", "count/pods", "10")
	tests := []struct {
		name    string
		objects []runtime.Object
		opts    evaluator.Options
		want    corev1.ResourceList
	}{
		{
			name:    "example 4: pod verified",
			objects: []runtime.Object{pod, podClaim},
			want: rl("count/resourceclaims.resource.k8s.io", "1", "gpu.deviceclass.resource.k8s.io/devices", "2",
				"requests.example.com/gpu", "2", "requests.deviceclass.resource.kubernetes.io/gpu", "2", "count/pods", "1"),
		},
		{
			name:    "example 4: pod not in the cache yet, the claim charges in full",
			objects: []runtime.Object{podClaim},
			want: rl("count/resourceclaims.resource.k8s.io", "1", "gpu.deviceclass.resource.k8s.io/devices", "2",
				"requests.example.com/gpu", "2", "requests.deviceclass.resource.kubernetes.io/gpu", "2", "count/pods", "0"),
		},
		{
			name:    "example 4: pod ended, the claim is charged in full until deleted",
			objects: []runtime.Object{ended, podClaim},
			want: rl("count/resourceclaims.resource.k8s.io", "1", "gpu.deviceclass.resource.k8s.io/devices", "2",
				"requests.example.com/gpu", "2", "requests.deviceclass.resource.kubernetes.io/gpu", "2", "count/pods", "1"),
		},
		{
			name:    "example 5 and a device-plugin pod",
			objects: []runtime.Object{implicitPod, implicitClaim, pluginPod},
			want: rl("count/resourceclaims.resource.k8s.io", "1", "gpu.deviceclass.resource.k8s.io/devices", "1",
				"requests.example.com/gpu", "4", "requests.deviceclass.resource.kubernetes.io/gpu", "1", "count/pods", "2"),
		},
		{
			name:    "DRA quota off: pods still charge their extended resources",
			objects: []runtime.Object{pod, podClaim},
			opts:    evaluator.Options{DisableDynamicResourceAllocation: true},
			want:    rl("requests.example.com/gpu", "2", "requests.deviceclass.resource.kubernetes.io/gpu", "0", "count/pods", "1"),
		},
		{
			name:    "extended resources off: claims charge devices only, pods their requests",
			objects: []runtime.Object{pod, podClaim},
			opts:    evaluator.Options{DisableDRAExtendedResource: true},
			want: rl("count/resourceclaims.resource.k8s.io", "1", "gpu.deviceclass.resource.k8s.io/devices", "2",
				"requests.example.com/gpu", "2", "requests.deviceclass.resource.kubernetes.io/gpu", "0", "count/pods", "1"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(append([]runtime.Object{gpuClass}, tt.objects...)...)
			tt.opts.Pod.Now = func() time.Time { return t0 }
			r, err := evaluator.NewRegistry(w.listers, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			got, err := quota.CalculateUsage("ns", nil, hard, r, nil)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, qcmp.Quantities()); diff != "" {
				t.Errorf("CalculateUsage() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPodChargesDRAExtendedResourcesWithoutClasses checks §9.7: the pod
// evaluator matches and charges both shapes of extended resource name with
// no DeviceClass lookup, and never a limit or a bare name.
func TestPodChargesDRAExtendedResourcesWithoutClasses(t *testing.T) {
	pod := gpuPod("p", "example.com/gpu", "2", "deviceclass.resource.kubernetes.io/nic", "1")
	pod.Spec.Containers[0].Resources.Limits = rl("example.com/gpu", "2")
	got, err := evaluator.PodUsage(pod, t0)
	if err != nil {
		t.Fatal(err)
	}
	want := rl("count/pods", "1", "pods", "1", "requests.example.com/gpu", "2", "requests.deviceclass.resource.kubernetes.io/nic", "1")
	if diff := cmp.Diff(want, got, qcmp.Quantities()); diff != "" {
		t.Errorf("PodUsage() mismatch (-want +got):\n%s", diff)
	}
	e := evaluator.NewPodEvaluator(nil, evaluator.PodOptions{})
	input := []corev1.ResourceName{"requests.deviceclass.resource.kubernetes.io/anything", "requests.example.com/gpu", "limits.example.com/gpu", "example.com/gpu", "deviceclass.resource.kubernetes.io/nic"}
	if diff := cmp.Diff(input[:2], e.MatchingResources(input)); diff != "" {
		t.Errorf("MatchingResources() mismatch (-want +got):\n%s", diff)
	}
}
