package evaluator_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quotakit/quotakit/evaluator"
	"github.com/quotakit/quotakit/internal/qcmp"
)

// res builds a ResourceList from name/quantity pairs.
func res(kv ...string) corev1.ResourceList {
	rl := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		rl[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return rl
}

// ctr is a container with requests and limits (either may be nil).
func ctr(name string, requests, limits corev1.ResourceList) corev1.Container {
	return corev1.Container{Name: name, Resources: corev1.ResourceRequirements{Requests: requests, Limits: limits}}
}

// sidecar is a restartable init container.
func sidecar(name string, requests, limits corev1.ResourceList) corev1.Container {
	c := ctr(name, requests, limits)
	always := corev1.ContainerRestartPolicyAlways
	c.RestartPolicy = &always
	return c
}

// podOf is a running pod with the given containers and init containers.
func podOf(containers []corev1.Container, initContainers ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
		Spec:       corev1.PodSpec{Containers: containers, InitContainers: initContainers},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

// charged is the usage of an eligible pod: count/pods and pods plus kv.
func charged(kv ...string) corev1.ResourceList {
	return res(append([]string{"count/pods", "1", "pods", "1"}, kv...)...)
}

// compute is the usage of a pod requesting cpu and memory (and limits).
func compute(cpu, memory string) []string {
	return []string{"cpu", cpu, "requests.cpu", cpu, "memory", memory, "requests.memory", memory}
}

var testNow = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

func withStatus(pod *corev1.Pod, statuses ...corev1.ContainerStatus) *corev1.Pod {
	pod.Status.ContainerStatuses = statuses
	return pod
}

func infeasible(pod *corev1.Pod) *corev1.Pod {
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonInfeasible})
	return pod
}

func TestPodUsage(t *testing.T) {
	deleted := func(ago time.Duration, grace int64) *corev1.Pod {
		p := podOf([]corev1.Container{ctr("c", res("cpu", "1"), nil)})
		ts := metav1.NewTime(testNow.Add(-ago))
		p.DeletionTimestamp = &ts
		p.DeletionGracePeriodSeconds = &grace
		return p
	}
	phase := func(ph corev1.PodPhase) *corev1.Pod {
		p := podOf([]corev1.Container{ctr("c", res("cpu", "1"), nil)})
		p.Status.Phase = ph
		return p
	}
	withOverhead := func(p *corev1.Pod, overhead corev1.ResourceList) *corev1.Pod {
		p.Spec.Overhead = overhead
		return p
	}
	withPodLevel := func(p *corev1.Pod, requests, limits corev1.ResourceList) *corev1.Pod {
		p.Spec.Resources = &corev1.ResourceRequirements{Requests: requests, Limits: limits}
		return p
	}
	tests := []struct {
		name string
		pod  *corev1.Pod
		opts evaluator.PodOptions
		want corev1.ResourceList
	}{
		{
			name: "no resources: only the counts",
			pod:  podOf([]corev1.Container{ctr("c", nil, nil)}),
			want: charged(),
		},
		{
			name: "containers are summed",
			pod: podOf([]corev1.Container{
				ctr("a", res("cpu", "1", "memory", "1Gi"), res("cpu", "2", "memory", "2Gi")),
				ctr("b", res("cpu", "500m", "memory", "512Mi"), res("cpu", "1", "memory", "1Gi")),
			}),
			want: charged(append(compute("1500m", "1536Mi"), "limits.cpu", "3", "limits.memory", "3Gi")...),
		},
		{
			name: "absent resources have no key; an explicit zero does",
			pod:  podOf([]corev1.Container{ctr("a", res("cpu", "0"), nil)}),
			want: charged("cpu", "0", "requests.cpu", "0"),
		},
		{
			name: "a limit on one container only is the sum of the limits present",
			pod: podOf([]corev1.Container{
				ctr("a", res("cpu", "1"), res("cpu", "2")),
				ctr("b", res("cpu", "1"), nil),
			}),
			want: charged("cpu", "2", "requests.cpu", "2", "limits.cpu", "2"),
		},
		{
			name: "sidecar declared before the init container: max(1+0.5, 2+0.5)",
			pod: podOf([]corev1.Container{ctr("app", res("cpu", "1"), nil)},
				sidecar("side", res("cpu", "500m"), nil),
				ctr("init", res("cpu", "2"), nil)),
			want: charged("cpu", "2500m", "requests.cpu", "2500m"),
		},
		{
			name: "sidecar declared after the init container: max(1+0.5, 2)",
			pod: podOf([]corev1.Container{ctr("app", res("cpu", "1"), nil)},
				ctr("init", res("cpu", "2"), nil),
				sidecar("side", res("cpu", "500m"), nil)),
			want: charged("cpu", "2", "requests.cpu", "2"),
		},
		{
			name: "sidecars accumulate: the second init container sees both",
			pod: podOf([]corev1.Container{ctr("app", res("memory", "100Mi"), nil)},
				sidecar("s1", res("memory", "100Mi"), nil),
				ctr("i1", res("memory", "300Mi"), nil),
				sidecar("s2", res("memory", "100Mi"), nil),
				ctr("i2", res("memory", "300Mi"), nil)),
			// max(100+100+100, 300+100, 300+200)
			want: charged("memory", "500Mi", "requests.memory", "500Mi"),
		},
		{
			name: "init containers only: the largest one",
			pod: podOf([]corev1.Container{ctr("app", nil, nil)},
				ctr("i1", res("cpu", "3"), res("cpu", "4")),
				ctr("i2", res("cpu", "1"), res("cpu", "5"))),
			want: charged("cpu", "3", "requests.cpu", "3", "limits.cpu", "5"),
		},
		{
			name: "overhead is added to every request, even one no container has",
			pod: withOverhead(podOf([]corev1.Container{ctr("a", res("cpu", "1"), nil)}),
				res("cpu", "100m", "memory", "64Mi")),
			want: charged(compute("1100m", "64Mi")...),
		},
		{
			name: "overhead is added only to limits that are set and non-zero",
			pod: withOverhead(podOf([]corev1.Container{ctr("a", res("cpu", "1"), res("cpu", "2", "memory", "0"))}),
				res("cpu", "100m", "memory", "64Mi", "ephemeral-storage", "1Gi")),
			want: charged("cpu", "1100m", "requests.cpu", "1100m", "memory", "64Mi", "requests.memory", "64Mi",
				"ephemeral-storage", "1Gi", "requests.ephemeral-storage", "1Gi",
				"limits.cpu", "2100m", "limits.memory", "0"),
		},
		{
			name: "pod-level resources replace cpu and memory, not ephemeral-storage; overhead on top",
			pod: withOverhead(withPodLevel(podOf([]corev1.Container{
				ctr("a", res("cpu", "1", "memory", "1Gi", "ephemeral-storage", "1Gi"), res("cpu", "1")),
				ctr("b", res("cpu", "1"), nil),
			}), res("cpu", "4", "memory", "4Gi", "ephemeral-storage", "10Gi"), res("cpu", "8")),
				res("cpu", "1")),
			want: charged(append(compute("5", "4Gi"), "ephemeral-storage", "1Gi", "requests.ephemeral-storage", "1Gi", "limits.cpu", "9")...),
		},
		{
			name: "pod-level limits alone leave requests to the containers",
			pod:  withPodLevel(podOf([]corev1.Container{ctr("a", res("cpu", "1"), nil)}), nil, res("cpu", "2", "memory", "1Gi")),
			want: charged("cpu", "1", "requests.cpu", "1", "limits.cpu", "2", "limits.memory", "1Gi"),
		},
		{
			name: "pod-level hugepages replace the container hugepages",
			pod:  withPodLevel(podOf([]corev1.Container{ctr("a", res("hugepages-2Mi", "4Mi"), nil)}), res("hugepages-2Mi", "10Mi"), nil),
			want: charged("hugepages-2Mi", "10Mi", "requests.hugepages-2Mi", "10Mi"),
		},
		{
			name: "DisablePodLevelResources keeps the container aggregate",
			pod:  withPodLevel(podOf([]corev1.Container{ctr("a", res("cpu", "1"), nil)}), res("cpu", "4"), nil),
			opts: evaluator.PodOptions{DisablePodLevelResources: true},
			want: charged("cpu", "1", "requests.cpu", "1"),
		},
		{
			name: "hugepages are charged from requests under both names; their limits are not",
			pod:  podOf([]corev1.Container{ctr("a", res("hugepages-2Mi", "4Mi"), res("hugepages-2Mi", "4Mi"))}),
			want: charged("hugepages-2Mi", "4Mi", "requests.hugepages-2Mi", "4Mi"),
		},
		{
			name: "extended resources are charged only as requests.<name>",
			pod: podOf([]corev1.Container{
				ctr("a", res("example.com/gpu", "1", "deviceclass.resource.kubernetes.io/gpu", "2"), res("example.com/gpu", "1")),
				ctr("b", res("example.com/gpu", "2"), nil),
			}),
			want: charged("requests.example.com/gpu", "3", "requests.deviceclass.resource.kubernetes.io/gpu", "2"),
		},
		{
			name: "native, requests.-prefixed and invalid names are not charged",
			pod: podOf([]corev1.Container{
				ctr("a", res("kubernetes.io/thing", "1", "requests.example.com/x", "1", "bad_name!/x", "1", "pods", "3"), nil),
			}),
			want: charged(),
		},
		{
			name: "extended resources follow the init-container formula and overhead",
			pod: withOverhead(podOf([]corev1.Container{ctr("a", res("example.com/gpu", "1"), nil)},
				ctr("init", res("example.com/gpu", "4"), nil)), res("example.com/gpu", "1")),
			want: charged("requests.example.com/gpu", "5"),
		},
		{
			name: "phase Succeeded charges count/pods only",
			pod:  phase(corev1.PodSucceeded),
			want: res("count/pods", "1"),
		},
		{
			name: "phase Failed charges count/pods only",
			pod:  phase(corev1.PodFailed),
			want: res("count/pods", "1"),
		},
		{
			name: "phase Pending is charged",
			pod:  phase(corev1.PodPending),
			want: charged("cpu", "1", "requests.cpu", "1"),
		},
		{
			name: "deleted, within the grace period: charged",
			pod:  deleted(10*time.Second, 30),
			want: charged("cpu", "1", "requests.cpu", "1"),
		},
		{
			name: "deleted, exactly at the end of the grace period: still charged",
			pod:  deleted(30*time.Second, 30),
			want: charged("cpu", "1", "requests.cpu", "1"),
		},
		{
			name: "deleted, past the grace period: count/pods only",
			pod:  deleted(31*time.Second, 30),
			want: res("count/pods", "1"),
		},
		{
			name: "resize: actuated above spec wins",
			pod: withStatus(podOf([]corev1.Container{ctr("a", res("cpu", "1"), res("cpu", "1"))}),
				corev1.ContainerStatus{Name: "a", Resources: &corev1.ResourceRequirements{Requests: res("cpu", "2"), Limits: res("cpu", "3")}}),
			want: charged("cpu", "2", "requests.cpu", "2", "limits.cpu", "3"),
		},
		{
			name: "resize: allocated above spec and actuated wins",
			pod: withStatus(podOf([]corev1.Container{ctr("a", res("cpu", "1"), nil)}),
				corev1.ContainerStatus{Name: "a", AllocatedResources: res("cpu", "3"), Resources: &corev1.ResourceRequirements{Requests: res("cpu", "2")}}),
			want: charged("cpu", "3", "requests.cpu", "3"),
		},
		{
			name: "resize: spec above status wins (a pending increase)",
			pod: withStatus(podOf([]corev1.Container{ctr("a", res("cpu", "4"), nil)}),
				corev1.ContainerStatus{Name: "a", AllocatedResources: res("cpu", "1"), Resources: &corev1.ResourceRequirements{Requests: res("cpu", "1")}}),
			want: charged("cpu", "4", "requests.cpu", "4"),
		},
		{
			// 1.36 took the maximum per container (2+2 = 4); 1.37 takes
			// the maximum of the pod sums: max(1+2, 2+1) = 3.
			name: "resize: 1.37 takes the maximum of pod-level sums, not per container",
			pod: withStatus(podOf([]corev1.Container{ctr("a", res("cpu", "1"), nil), ctr("b", res("cpu", "2"), nil)}),
				corev1.ContainerStatus{Name: "a", AllocatedResources: res("cpu", "2"), Resources: &corev1.ResourceRequirements{Requests: res("cpu", "2")}},
				corev1.ContainerStatus{Name: "b", AllocatedResources: res("cpu", "1"), Resources: &corev1.ResourceRequirements{Requests: res("cpu", "1")}}),
			want: charged("cpu", "3", "requests.cpu", "3"),
		},
		{
			name: "resize infeasible: the spec is ignored",
			pod: infeasible(withStatus(podOf([]corev1.Container{ctr("a", res("cpu", "8"), res("cpu", "8"))}),
				corev1.ContainerStatus{Name: "a", AllocatedResources: res("cpu", "1"), Resources: &corev1.ResourceRequirements{Requests: res("cpu", "1"), Limits: res("cpu", "2")}})),
			want: charged("cpu", "1", "requests.cpu", "1", "limits.cpu", "2"),
		},
		{
			name: "resize infeasible and no container status: the containers charge nothing",
			pod:  infeasible(podOf([]corev1.Container{ctr("a", res("cpu", "8"), res("cpu", "8"))})),
			want: charged(),
		},
		{
			name: "resize deferred: the spec still counts",
			pod: func() *corev1.Pod {
				p := withStatus(podOf([]corev1.Container{ctr("a", res("cpu", "8"), nil)}),
					corev1.ContainerStatus{Name: "a", AllocatedResources: res("cpu", "1")})
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodResizePending, Reason: corev1.PodReasonDeferred}}
				return p
			}(),
			want: charged("cpu", "8", "requests.cpu", "8"),
		},
		{
			name: "resize: init container statuses are read too",
			pod: func() *corev1.Pod {
				p := podOf([]corev1.Container{ctr("a", res("cpu", "1"), nil)}, sidecar("s", res("cpu", "1"), nil))
				p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "s", Resources: &corev1.ResourceRequirements{Requests: res("cpu", "3")}}}
				return p
			}(),
			want: charged("cpu", "4", "requests.cpu", "4"),
		},
		{
			name: "DisableInPlacePodVerticalScaling charges the spec only",
			pod: infeasible(withStatus(podOf([]corev1.Container{ctr("a", res("cpu", "1"), nil)}),
				corev1.ContainerStatus{Name: "a", AllocatedResources: res("cpu", "3")})),
			opts: evaluator.PodOptions{DisableInPlacePodVerticalScaling: true},
			want: charged("cpu", "1", "requests.cpu", "1"),
		},
		{
			name: "amounts beyond int64 milli-units and below a milli-unit stay exact",
			pod: podOf([]corev1.Container{
				ctr("a", res("memory", "3Ei", "cpu", "1n"), nil),
				ctr("b", res("memory", "3Ei", "cpu", "1n"), nil),
			}),
			want: charged(compute("2n", "6Ei")...),
		},
		{
			name: "a sum that overflows int64 milli-units stays exact",
			pod: podOf([]corev1.Container{
				ctr("a", res("cpu", "9000000000000000"), nil),
				ctr("b", res("cpu", "9000000000000000"), nil),
			}),
			want: charged("cpu", "18000000000000000", "requests.cpu", "18000000000000000"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := tt.opts
			opts.Now = func() time.Time { return testNow }
			e := evaluator.NewPodEvaluator(nil, opts)
			got, err := e.Usage(tt.pod)
			if err != nil {
				t.Fatalf("Usage: %v", err)
			}
			if diff := cmp.Diff(tt.want, got, qcmp.Quantities()); diff != "" {
				t.Errorf("Usage (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPodUsageSpelling checks how amounts print, which the "exceeded
// quota" message and status.used show: as Kubernetes prints them, a sum in
// the format of its first non-zero term (resource.Quantity's Add), a
// maximum in the format of the value that won, and requests and limits
// each on their own.
func TestPodUsageSpelling(t *testing.T) {
	// sum is a+b as Kubernetes adds them.
	sum := func(a, b string) string {
		q := resource.MustParse(a)
		q.Add(resource.MustParse(b))
		return q.String()
	}
	withActuated := func(p *corev1.Pod, requests corev1.ResourceList) *corev1.Pod {
		return withStatus(p, corev1.ContainerStatus{Name: "a", Resources: &corev1.ResourceRequirements{Requests: requests}})
	}
	tests := []struct {
		name string
		pod  *corev1.Pod
		want map[corev1.ResourceName]string
	}{
		{
			name: "a limit in another format than the request",
			pod:  podOf([]corev1.Container{ctr("a", res("memory", "1Gi"), res("memory", "2G"))}),
			want: map[corev1.ResourceName]string{"requests.memory": "1Gi", "limits.memory": "2G"},
		},
		{
			name: "an init container's maximum wins with its own format",
			pod:  podOf([]corev1.Container{ctr("a", res("memory", "1Gi"), nil)}, ctr("init", res("memory", "3G"), nil)),
			want: map[corev1.ResourceName]string{"requests.memory": "3G"},
		},
		{
			name: "a sum keeps the format of its first term",
			pod:  podOf([]corev1.Container{ctr("a", res("memory", "1Gi"), nil), ctr("b", res("memory", "1G"), nil)}),
			want: map[corev1.ResourceName]string{"requests.memory": sum("1Gi", "1G")},
		},
		{
			name: "a sum whose first term is zero takes the format of the next",
			pod:  podOf([]corev1.Container{ctr("a", res("memory", "0"), nil), ctr("b", res("memory", "1Gi"), nil)}),
			want: map[corev1.ResourceName]string{"requests.memory": "1Gi"},
		},
		{
			name: "an actuated resize larger than the spec wins with its format",
			pod:  withActuated(podOf([]corev1.Container{ctr("a", res("memory", "1Gi"), nil)}), res("memory", "2G")),
			want: map[corev1.ResourceName]string{"requests.memory": "2G"},
		},
		{
			name: "an init container plus the sidecars before it",
			pod: podOf([]corev1.Container{ctr("a", res("cpu", "100m"), nil)},
				sidecar("s", res("memory", "1G"), nil), ctr("init", res("memory", "0"), nil), ctr("big", res("memory", "3Gi"), nil)),
			want: map[corev1.ResourceName]string{"requests.memory": sum("1G", "3Gi")},
		},
		{
			name: "overhead on a zero request takes the overhead's format",
			pod: func() *corev1.Pod {
				p := podOf([]corev1.Container{ctr("a", res("memory", "0"), nil)})
				p.Spec.Overhead = res("memory", "64Mi")
				return p
			}(),
			want: map[corev1.ResourceName]string{"requests.memory": "64Mi"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := evaluator.NewPodEvaluator(nil, evaluator.PodOptions{Now: func() time.Time { return testNow }})
			got, err := e.Usage(tt.pod)
			if err != nil {
				t.Fatalf("Usage: %v", err)
			}
			for name, want := range tt.want {
				q, ok := got[name]
				if !ok {
					t.Errorf("%s missing from %v", name, got)
					continue
				}
				if q.String() != want {
					t.Errorf("%s = %s, want %s", name, q.String(), want)
				}
			}
		})
	}
}

// Upstream modifies the pod it evaluates (found by the differential test in
// bench/pod_diff_test.go).
func TestPodUsageDoesNotModifyThePod(t *testing.T) {
	pod := podOf([]corev1.Container{ctr("a", res("memory", "1.5Gi"), nil)})
	pod.Spec.Resources = &corev1.ResourceRequirements{Requests: res("memory", "1.5Gi")}
	pod.Spec.Overhead = res("memory", "1.5Gi")
	before := pod.DeepCopy()
	e := evaluator.NewPodEvaluator(nil, evaluator.PodOptions{})
	for range 2 {
		got, err := e.Usage(pod)
		if err != nil {
			t.Fatal(err)
		}
		if want := charged("memory", "3Gi", "requests.memory", "3Gi"); !cmp.Equal(want, got, qcmp.Quantities()) {
			t.Errorf("Usage = %v, want %v", got, want)
		}
	}
	// Kubernetes' PodRequests adds the overhead into the pod's own
	// inf.Dec-backed pod-level quantity here, so the usage of a cached pod
	// grows by the overhead on every evaluation; we
	// must not.
	if diff := cmp.Diff(before, pod, qcmp.Quantities()); diff != "" {
		t.Errorf("pod modified (-before +after):\n%s", diff)
	}
}

func TestPodUsageErrors(t *testing.T) {
	e := evaluator.NewPodEvaluator(nil, evaluator.PodOptions{})
	for _, tt := range []struct {
		name string
		item any
	}{
		{"service", &corev1.Service{}},
		{"nil pod", (*corev1.Pod)(nil)},
		{"nil", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			switch item := tt.item.(type) {
			case *corev1.Service:
				_, err = e.Usage(item)
			case *corev1.Pod:
				_, err = e.Usage(item)
			default:
				_, err = e.Usage(nil)
			}
			if err == nil {
				t.Errorf("Usage(%v) returned no error", tt.item)
			}
		})
	}
}

func TestPodUsageHelper(t *testing.T) {
	pod := podOf([]corev1.Container{ctr("a", res("cpu", "1"), nil)})
	ts := metav1.NewTime(testNow)
	grace := int64(30)
	pod.DeletionTimestamp, pod.DeletionGracePeriodSeconds = &ts, &grace
	for _, tt := range []struct {
		now  time.Time
		want corev1.ResourceList
	}{
		{testNow.Add(30 * time.Second), charged("cpu", "1", "requests.cpu", "1")},
		{testNow.Add(31 * time.Second), res("count/pods", "1")},
	} {
		got, err := evaluator.PodUsage(pod, tt.now)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.want, got, qcmp.Quantities()); diff != "" {
			t.Errorf("PodUsage(pod, %v) (-want +got):\n%s", tt.now, diff)
		}
	}
	if _, err := evaluator.PodUsage(nil, testNow); err == nil {
		t.Error("PodUsage(nil) returned no error")
	}
}
