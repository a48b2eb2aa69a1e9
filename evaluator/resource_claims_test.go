package evaluator_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
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

// The device classes of the worked examples: gpu declares example.com/gpu,
// nic and tpu declare nothing.
var (
	t0       = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	gpuClass = deviceClass("gpu", "example.com/gpu", t0)
	nicClass = deviceClass("nic", "", t0)
	tpuClass = deviceClass("tpu", "", t0)
)

func deviceClass(name, ext string, created time.Time) *resourcev1.DeviceClass {
	c := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created)}}
	if ext != "" {
		c.Spec.ExtendedResourceName = ptr.To(ext)
	}
	return c
}

// exact is an exactly request of count devices of class (ExactCount).
func exact(class string, count int64) resourcev1.DeviceRequest {
	return resourcev1.DeviceRequest{Name: "r", Exactly: &resourcev1.ExactDeviceRequest{
		DeviceClassName: class, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: count,
	}}
}

// allOf is an exactly request of all devices of class.
func allOf(class string) resourcev1.DeviceRequest {
	return resourcev1.DeviceRequest{Name: "r", Exactly: &resourcev1.ExactDeviceRequest{
		DeviceClassName: class, AllocationMode: resourcev1.DeviceAllocationModeAll,
	}}
}

// sub is a firstAvailable subrequest; count < 0 means allocation mode All.
func sub(class string, count int64) resourcev1.DeviceSubRequest {
	if count < 0 {
		return resourcev1.DeviceSubRequest{Name: "s", DeviceClassName: class, AllocationMode: resourcev1.DeviceAllocationModeAll}
	}
	return resourcev1.DeviceSubRequest{Name: "s", DeviceClassName: class, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: count}
}

func firstAvailable(subs ...resourcev1.DeviceSubRequest) resourcev1.DeviceRequest {
	return resourcev1.DeviceRequest{Name: "r", FirstAvailable: subs}
}

func rclaim(name string, reqs ...resourcev1.DeviceRequest) *resourcev1.ResourceClaim {
	return &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", CreationTimestamp: metav1.NewTime(t0)},
		Spec:       resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: reqs}},
	}
}

// special makes c the claim the scheduler made for pod: annotated and
// controlled by it, created at created.
func special(c *resourcev1.ResourceClaim, pod *corev1.Pod, created time.Time) *resourcev1.ResourceClaim {
	c = c.DeepCopy()
	c.Annotations = map[string]string{resourcev1.ExtendedResourceClaimAnnotation: "true"}
	c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true)}}
	c.CreationTimestamp = metav1.NewTime(created)
	return c
}

// gpuPod is a running pod whose one container requests requests.
func gpuPod(name string, requests ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name + "-uid")},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: rl(requests...)}}}},
	}
}

// world serves objects per resource to evaluators, and can fail one
// resource's listing.
type world struct {
	objs map[string][]runtime.Object
	fail string
}

func (w *world) listers(gvr schema.GroupVersionResource) (generic.ListFuncByNamespace, error) {
	return func(ns string) ([]runtime.Object, error) {
		if gvr.Resource == w.fail {
			return nil, errors.New("cache down")
		}
		var out []runtime.Object
		for _, o := range w.objs[gvr.Resource] {
			if m, err := meta(o); err == nil && (ns == "" || m == ns) {
				out = append(out, o)
			}
		}
		return out, nil
	}, nil
}

// meta returns the namespace of o.
func meta(o runtime.Object) (string, error) {
	if m, ok := o.(metav1.Object); ok {
		return m.GetNamespace(), nil
	}
	return "", errors.New("no metadata")
}

func newWorld(objs ...runtime.Object) *world {
	w := &world{objs: map[string][]runtime.Object{}}
	for _, o := range objs {
		var r string
		switch o.(type) {
		case *resourcev1.DeviceClass:
			r = "deviceclasses"
		case *resourcev1.ResourceClaim:
			r = "resourceclaims"
		case *corev1.Pod:
			r = "pods"
		}
		w.objs[r] = append(w.objs[r], o)
	}
	return w
}

func newClaimEvaluator(t *testing.T, listers generic.ListerForResourceFunc, opts evaluator.ResourceClaimOptions) *evaluator.ResourceClaimEvaluator {
	t.Helper()
	e, err := evaluator.NewResourceClaimEvaluator(listers, opts)
	if err != nil {
		t.Fatalf("NewResourceClaimEvaluator: %v", err)
	}
	return e
}

func TestResourceClaimUsage(t *testing.T) {
	pod := gpuPod("p", "cpu", "1", "example.com/gpu", "2")
	implicitPod := gpuPod("q", "deviceclass.resource.kubernetes.io/gpu", "1")
	podClaim := special(rclaim("p-extended-resources-x7k2q", exact("gpu", 2)), pod, t0)
	terminal := pod.DeepCopy()
	terminal.Status.Phase = corev1.PodSucceeded
	otherUID := pod.DeepCopy()
	otherUID.UID = "another"
	namesOther := pod.DeepCopy()
	namesOther.Status.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "another-claim"}
	namesIt := pod.DeepCopy()
	namesIt.Status.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: podClaim.Name}
	olderClaim := special(rclaim("p-extended-resources-aaaaa", exact("gpu", 2)), pod, t0.Add(-time.Second))
	sameTimeSmallerName := special(rclaim("p-extended-resources-aaaaa", exact("gpu", 2)), pod, t0)
	sameTimeLargerName := special(rclaim("p-extended-resources-zzzzz", exact("gpu", 2)), pod, t0)
	newerClaim := special(rclaim("p-extended-resources-aaaaa", exact("gpu", 2)), pod, t0.Add(time.Second))
	// pod-init: two init containers and one container each request 1 of
	// both names; the pod charges the maximum, 1 per name.
	initPod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-init", Namespace: "ns", UID: "init-uid"},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{
				{Name: "i1", Resources: corev1.ResourceRequirements{Requests: rl("example.com/gpu", "1", "deviceclass.resource.kubernetes.io/gpu", "1")}},
				{Name: "i2", Resources: corev1.ResourceRequirements{Requests: rl("example.com/gpu", "1", "deviceclass.resource.kubernetes.io/gpu", "1")}},
			},
			Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: rl("example.com/gpu", "1", "deviceclass.resource.kubernetes.io/gpu", "1")}}},
		},
	}
	unknownMode := rclaim("unknown", exact("nic", 3))
	unknownMode.Spec.Devices.Requests[0].Exactly.AllocationMode = "Future"
	admin := allOf("nic")
	admin.Exactly.AdminAccess = ptr.To(true)
	classes := []runtime.Object{gpuClass, nicClass, tpuClass}

	tests := []struct {
		name  string
		claim *resourcev1.ResourceClaim
		world []runtime.Object // besides the three classes
		opts  evaluator.ResourceClaimOptions
		// noClasses builds the evaluator without a deviceclasses lister.
		noClasses bool
		want      corev1.ResourceList
	}{
		{
			name:  "no requests",
			claim: rclaim("empty"),
			want:  rl("count/resourceclaims.resource.k8s.io", "1"),
		},
		{
			name:  "example 1: exact count, class without extended name",
			claim: rclaim("two-nics", exact("nic", 2)),
			want:  rl("count/resourceclaims.resource.k8s.io", "1", "nic.deviceclass.resource.k8s.io/devices", "2", "requests.deviceclass.resource.kubernetes.io/nic", "2"),
		},
		{
			name:  "exact count, class with extended name",
			claim: rclaim("gpus", exact("gpu", 3)),
			want: rl("count/resourceclaims.resource.k8s.io", "1", "gpu.deviceclass.resource.k8s.io/devices", "3",
				"requests.deviceclass.resource.kubernetes.io/gpu", "3", "requests.example.com/gpu", "3"),
		},
		{
			name:  "requests of one class add up",
			claim: rclaim("gpus", exact("gpu", 3), exact("gpu", 1), allOf("gpu")),
			want: rl("count/resourceclaims.resource.k8s.io", "1", "gpu.deviceclass.resource.k8s.io/devices", "36",
				"requests.deviceclass.resource.kubernetes.io/gpu", "36", "requests.example.com/gpu", "36"),
		},
		{
			name: "example 2: All, admin access, firstAvailable with mixed classes",
			claim: rclaim("mixed", admin,
				firstAvailable(sub("gpu", 4), sub("gpu", 1), sub("tpu", -1))),
			want: rl("count/resourceclaims.resource.k8s.io", "1",
				"nic.deviceclass.resource.k8s.io/devices", "32", "gpu.deviceclass.resource.k8s.io/devices", "4", "tpu.deviceclass.resource.k8s.io/devices", "32",
				"requests.deviceclass.resource.kubernetes.io/nic", "32", "requests.deviceclass.resource.kubernetes.io/gpu", "4", "requests.deviceclass.resource.kubernetes.io/tpu", "32",
				"requests.example.com/gpu", "4"),
		},
		{
			name:  "example 3: unknown mode in exactly charges a zero key and no extended name",
			claim: unknownMode,
			want:  rl("count/resourceclaims.resource.k8s.io", "1", "nic.deviceclass.resource.k8s.io/devices", "0"),
		},
		{
			name: "unknown mode in firstAvailable charges no key",
			claim: func() *resourcev1.ResourceClaim {
				c := rclaim("unknown-sub", firstAvailable(sub("nic", 2)))
				c.Spec.Devices.Requests[0].FirstAvailable[0].AllocationMode = "Future"
				return c
			}(),
			want: rl("count/resourceclaims.resource.k8s.io", "1"),
		},
		{
			name:  "a request of neither kind charges nothing",
			claim: rclaim("future", resourcev1.DeviceRequest{Name: "r"}),
			want:  rl("count/resourceclaims.resource.k8s.io", "1"),
		},
		{
			name:  "a request without a class charges the empty class but no extended name",
			claim: rclaim("no-class", exact("", 2)),
			want:  rl("count/resourceclaims.resource.k8s.io", "1", ".deviceclass.resource.k8s.io/devices", "2"),
		},
		{
			name:  "a class that does not exist still charges its devices and implicit name",
			claim: rclaim("ghost", exact("ghost", 1)),
			want:  rl("count/resourceclaims.resource.k8s.io", "1", "ghost.deviceclass.resource.k8s.io/devices", "1", "requests.deviceclass.resource.kubernetes.io/ghost", "1"),
		},
		{
			name:      "without a deviceclasses lister only the implicit name",
			claim:     rclaim("gpus", exact("gpu", 3)),
			noClasses: true,
			want: rl("count/resourceclaims.resource.k8s.io", "1", "gpu.deviceclass.resource.k8s.io/devices", "3",
				"requests.deviceclass.resource.kubernetes.io/gpu", "3"),
		},
		{
			name:  "extended resources disabled",
			claim: rclaim("gpus", exact("gpu", 3)),
			opts:  evaluator.ResourceClaimOptions{DisableExtendedResource: true},
			want:  rl("count/resourceclaims.resource.k8s.io", "1", "gpu.deviceclass.resource.k8s.io/devices", "3"),
		},
		{
			name:  "two classes declaring one name: their devices add up",
			claim: rclaim("migrating", exact("gpu", 2), exact("gpu-v2", 3)),
			world: []runtime.Object{deviceClass("gpu-v2", "example.com/gpu", t0.Add(time.Hour))},
			want: rl("count/resourceclaims.resource.k8s.io", "1", "gpu.deviceclass.resource.k8s.io/devices", "2", "gpu-v2.deviceclass.resource.k8s.io/devices", "3",
				"requests.deviceclass.resource.kubernetes.io/gpu", "2", "requests.deviceclass.resource.kubernetes.io/gpu-v2", "3", "requests.example.com/gpu", "5"),
		},
		{
			name:  "example 4: special claim of a verified pod is charged only what the pod is not",
			claim: podClaim,
			world: []runtime.Object{pod, podClaim},
			want:  rl("count/resourceclaims.resource.k8s.io", "1", "gpu.deviceclass.resource.k8s.io/devices", "2", "requests.deviceclass.resource.kubernetes.io/gpu", "2"),
		},
		{
			name:  "example 4, pod names the claim in its status",
			claim: podClaim,
			world: []runtime.Object{namesIt, olderClaim},
			want:  rl("count/resourceclaims.resource.k8s.io", "1", "gpu.deviceclass.resource.k8s.io/devices", "2", "requests.deviceclass.resource.kubernetes.io/gpu", "2"),
		},
		{
			name:  "example 4, pod not found: charged in full",
			claim: podClaim,
			want: rl("count/resourceclaims.resource.k8s.io", "1", "gpu.deviceclass.resource.k8s.io/devices", "2",
				"requests.deviceclass.resource.kubernetes.io/gpu", "2", "requests.example.com/gpu", "2"),
		},
		{
			name:  "example 4, pod UID differs: charged in full",
			claim: podClaim,
			world: []runtime.Object{otherUID},
			want: rl("count/resourceclaims.resource.k8s.io", "1", "gpu.deviceclass.resource.k8s.io/devices", "2",
				"requests.deviceclass.resource.kubernetes.io/gpu", "2", "requests.example.com/gpu", "2"),
		},
		{
			name:  "example 4, pod names another claim: charged in full",
			claim: podClaim,
			world: []runtime.Object{namesOther},
			want: rl("count/resourceclaims.resource.k8s.io", "1", "gpu.deviceclass.resource.k8s.io/devices", "2",
				"requests.deviceclass.resource.kubernetes.io/gpu", "2", "requests.example.com/gpu", "2"),
		},
		{
			name:  "example 4, an older special claim of the pod exists: charged in full",
			claim: podClaim,
			world: []runtime.Object{pod, olderClaim},
			want: rl("count/resourceclaims.resource.k8s.io", "1", "gpu.deviceclass.resource.k8s.io/devices", "2",
				"requests.deviceclass.resource.kubernetes.io/gpu", "2", "requests.example.com/gpu", "2"),
		},
		{
			name:  "example 4, a special claim as old with a smaller name exists: charged in full",
			claim: podClaim,
			world: []runtime.Object{pod, sameTimeSmallerName},
			want: rl("count/resourceclaims.resource.k8s.io", "1", "gpu.deviceclass.resource.k8s.io/devices", "2",
				"requests.deviceclass.resource.kubernetes.io/gpu", "2", "requests.example.com/gpu", "2"),
		},
		{
			name:  "example 4, only newer or larger-named special claims exist: verified",
			claim: podClaim,
			world: []runtime.Object{pod, sameTimeLargerName, newerClaim},
			want:  rl("count/resourceclaims.resource.k8s.io", "1", "gpu.deviceclass.resource.k8s.io/devices", "2", "requests.deviceclass.resource.kubernetes.io/gpu", "2"),
		},
		{
			name:  "example 4, an older claim that is not the pod's special claim does not count",
			claim: podClaim,
			world: []runtime.Object{pod, func() *resourcev1.ResourceClaim {
				c := olderClaim.DeepCopy()
				c.Annotations = nil
				return c
			}()},
			want: rl("count/resourceclaims.resource.k8s.io", "1", "gpu.deviceclass.resource.k8s.io/devices", "2", "requests.deviceclass.resource.kubernetes.io/gpu", "2"),
		},
		{
			name:  "example 4, terminal pod charges nothing to subtract",
			claim: podClaim,
			world: []runtime.Object{terminal},
			want: rl("count/resourceclaims.resource.k8s.io", "1", "gpu.deviceclass.resource.k8s.io/devices", "2",
				"requests.deviceclass.resource.kubernetes.io/gpu", "2", "requests.example.com/gpu", "2"),
		},
		{
			name: "example 4, annotation not \"true\": not special, charged in full",
			claim: func() *resourcev1.ResourceClaim {
				c := podClaim.DeepCopy()
				c.Annotations[resourcev1.ExtendedResourceClaimAnnotation] = "yes"
				return c
			}(),
			world: []runtime.Object{pod},
			want: rl("count/resourceclaims.resource.k8s.io", "1", "gpu.deviceclass.resource.k8s.io/devices", "2",
				"requests.deviceclass.resource.kubernetes.io/gpu", "2", "requests.example.com/gpu", "2"),
		},
		{
			name: "example 4, owner is not a v1 Pod: charged in full",
			claim: func() *resourcev1.ResourceClaim {
				c := podClaim.DeepCopy()
				c.OwnerReferences[0].APIVersion = "apps/v1"
				return c
			}(),
			world: []runtime.Object{pod},
			want: rl("count/resourceclaims.resource.k8s.io", "1", "gpu.deviceclass.resource.k8s.io/devices", "2",
				"requests.deviceclass.resource.kubernetes.io/gpu", "2", "requests.example.com/gpu", "2"),
		},
		{
			name: "example 4, pod is owner but not controller: charged in full",
			claim: func() *resourcev1.ResourceClaim {
				c := podClaim.DeepCopy()
				c.OwnerReferences[0].Controller = nil
				return c
			}(),
			world: []runtime.Object{pod},
			want: rl("count/resourceclaims.resource.k8s.io", "1", "gpu.deviceclass.resource.k8s.io/devices", "2",
				"requests.deviceclass.resource.kubernetes.io/gpu", "2", "requests.example.com/gpu", "2"),
		},
		{
			name:  "example 5: pod uses the implicit name, the claim tops up the explicit one",
			claim: special(rclaim("q-extended-resources-1", exact("gpu", 1)), implicitPod, t0),
			world: []runtime.Object{implicitPod},
			want:  rl("count/resourceclaims.resource.k8s.io", "1", "gpu.deviceclass.resource.k8s.io/devices", "1", "requests.example.com/gpu", "1"),
		},
		{
			name:  "pod-init: the pod charges 1 per name, the claim of 2 devices adds 1 to each",
			claim: special(rclaim("pod-init-extended-resources-1", exact("gpu", 2)), initPod, t0),
			world: []runtime.Object{initPod},
			want: rl("count/resourceclaims.resource.k8s.io", "1", "gpu.deviceclass.resource.k8s.io/devices", "2",
				"requests.deviceclass.resource.kubernetes.io/gpu", "1", "requests.example.com/gpu", "1"),
		},
		{
			name:  "extended resources disabled: special claims are not looked at",
			claim: podClaim,
			world: []runtime.Object{pod},
			opts:  evaluator.ResourceClaimOptions{DisableExtendedResource: true},
			want:  rl("count/resourceclaims.resource.k8s.io", "1", "gpu.deviceclass.resource.k8s.io/devices", "2"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(append(append([]runtime.Object{}, classes...), tt.world...)...)
			listers := w.listers
			if tt.noClasses {
				listers = func(gvr schema.GroupVersionResource) (generic.ListFuncByNamespace, error) {
					if gvr.Resource == "deviceclasses" {
						return nil, nil
					}
					return w.listers(gvr)
				}
			}
			e := newClaimEvaluator(t, listers, tt.opts)
			before := tt.claim.DeepCopy()
			got, err := e.Usage(tt.claim)
			if err != nil {
				t.Fatalf("Usage: %v", err)
			}
			if diff := cmp.Diff(tt.want, got, qcmp.Quantities()); diff != "" {
				t.Errorf("Usage() mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tt.claim); diff != "" {
				t.Errorf("Usage modified the claim (-before +after):\n%s", diff)
			}
			// UsageStats of a namespace holding only this claim charges
			// the same; the cases with other claims are left out, as
			// they charge those claims too.
			if len(w.objs["resourceclaims"]) > 0 {
				return
			}
			w.objs["resourceclaims"] = []runtime.Object{tt.claim}
			stats, err := e.UsageStats(quota.UsageStatsOptions{Namespace: "ns", Resources: []corev1.ResourceName{"count/resourceclaims.resource.k8s.io"}})
			if err != nil {
				t.Fatalf("UsageStats: %v", err)
			}
			if diff := cmp.Diff(tt.want, stats.Used, qcmp.Quantities()); diff != "" {
				t.Errorf("UsageStats() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResourceClaimMatchingResources(t *testing.T) {
	classes := []runtime.Object{gpuClass, nicClass, tpuClass}
	// Names no claim is charged under, from the upstream tests and more.
	never := []corev1.ResourceName{"resourceclaims", "storage", "ephemeral-storage", "bronze.deviceclass.resource.k8s.io/storage",
		"gpu.storage.k8s.io/requests.storage", "requests.cpu", "example.com/gpu", "limits.example.com/gpu", "deviceclass.resource.kubernetes.io/gpu"}
	tests := []struct {
		name      string
		input     []corev1.ResourceName
		opts      evaluator.ResourceClaimOptions
		noClasses bool
		fail      bool
		want      []corev1.ResourceName
	}{
		{
			name:  "count and devices of any class, in input order",
			input: append([]corev1.ResourceName{"ghost.deviceclass.resource.k8s.io/devices", "count/resourceclaims.resource.k8s.io"}, never...),
			want:  []corev1.ResourceName{"ghost.deviceclass.resource.k8s.io/devices", "count/resourceclaims.resource.k8s.io"},
		},
		{
			name: "implicit names of existing classes, explicit names some class declares",
			input: []corev1.ResourceName{"requests.deviceclass.resource.kubernetes.io/nic", "requests.deviceclass.resource.kubernetes.io/gpu",
				"requests.deviceclass.resource.kubernetes.io/ghost", "requests.example.com/gpu", "requests.example.com/tpu", "requests.example.com/gpu"},
			want: []corev1.ResourceName{"requests.deviceclass.resource.kubernetes.io/nic", "requests.deviceclass.resource.kubernetes.io/gpu",
				"requests.example.com/gpu", "requests.example.com/gpu"},
		},
		{
			name:      "without a deviceclasses lister no extended name",
			input:     []corev1.ResourceName{"requests.deviceclass.resource.kubernetes.io/gpu", "requests.example.com/gpu", "gpu.deviceclass.resource.k8s.io/devices"},
			noClasses: true,
			want:      []corev1.ResourceName{"gpu.deviceclass.resource.k8s.io/devices"},
		},
		{
			name:  "extended resources disabled",
			input: []corev1.ResourceName{"requests.deviceclass.resource.kubernetes.io/gpu", "requests.example.com/gpu", "count/resourceclaims.resource.k8s.io"},
			opts:  evaluator.ResourceClaimOptions{DisableExtendedResource: true},
			want:  []corev1.ResourceName{"count/resourceclaims.resource.k8s.io"},
		},
		{
			name:  "device classes failing to list: every extended shape, so that the error is seen",
			input: []corev1.ResourceName{"requests.deviceclass.resource.kubernetes.io/ghost", "requests.example.com/tpu", "requests.cpu", "pods"},
			fail:  true,
			want:  []corev1.ResourceName{"requests.deviceclass.resource.kubernetes.io/ghost", "requests.example.com/tpu"},
		},
		{
			name:  "empty input",
			input: nil,
			want:  []corev1.ResourceName{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(classes...)
			if tt.fail {
				w.fail = "deviceclasses"
			}
			listers := w.listers
			if tt.noClasses {
				listers = nil
			}
			e := newClaimEvaluator(t, listers, tt.opts)
			if diff := cmp.Diff(tt.want, e.MatchingResources(tt.input)); diff != "" {
				t.Errorf("MatchingResources(%v) mismatch (-want +got):\n%s", tt.input, diff)
			}
		})
	}
}

func TestResourceClaimMatches(t *testing.T) {
	w := newWorld(gpuClass)
	e := newClaimEvaluator(t, w.listers, evaluator.ResourceClaimOptions{})
	c := rclaim("c", exact("gpu", 1))
	hard := func(names ...string) *corev1.ResourceQuota {
		q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "ns"}}
		q.Status.Hard = corev1.ResourceList{}
		for _, n := range names {
			q.Status.Hard[corev1.ResourceName(n)] = resource.MustParse("10")
		}
		return q
	}
	scoped := hard("count/resourceclaims.resource.k8s.io")
	scoped.Spec.ScopeSelector = &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{{ScopeName: "PriorityClass", Operator: "Exists"}}}
	tests := []struct {
		name string
		q    *corev1.ResourceQuota
		want bool
	}{
		{"count", hard("count/resourceclaims.resource.k8s.io"), true},
		{"devices", hard("pods", "nic.deviceclass.resource.k8s.io/devices"), true},
		{"explicit extended name", hard("requests.example.com/gpu"), true},
		{"unknown extended name", hard("requests.example.com/tpu", "requests.cpu"), false},
		{"no claim names", hard("pods", "resourceclaims"), false},
		{"scoped quotas never match claims", scoped, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := e.Matches(tt.q, c)
			if err != nil || got != tt.want {
				t.Errorf("Matches(%v) = %v, %v; want %v, nil", quota.ResourceNames(tt.q.Status.Hard), got, err, tt.want)
			}
		})
	}

	if _, err := e.Matches(hard("count/resourceclaims.resource.k8s.io"), &corev1.Pod{}); err == nil {
		t.Error("Matches(pod) error = nil, want an error")
	}
	if _, err := e.Matches(nil, c); err == nil {
		t.Error("Matches(nil quota) error = nil, want an error")
	}
	w.fail = "deviceclasses"
	if _, err := e.Matches(hard("requests.example.com/gpu"), c); err == nil || !strings.Contains(err.Error(), "cache down") {
		t.Errorf("Matches with failing device classes: error = %v, want the listing error", err)
	}
	// Names that do not depend on device classes do not list them.
	if ok, err := e.Matches(hard("count/resourceclaims.resource.k8s.io"), c); !ok || err != nil {
		t.Errorf("Matches(count) with failing device classes = %v, %v; want true, nil", ok, err)
	}
}

func TestResourceClaimHandles(t *testing.T) {
	e := newClaimEvaluator(t, nil, evaluator.ResourceClaimOptions{})
	tests := []struct {
		op   admissionv1.Operation
		sub  string
		want bool
	}{
		{admissionv1.Create, "", true},
		{admissionv1.Update, "", true},
		{admissionv1.Delete, "", false},
		{admissionv1.Connect, "", false},
		{admissionv1.Create, "status", false},
		{admissionv1.Update, "status", false},
	}
	for _, tt := range tests {
		a := &quota.AttributesRecord{Operation: tt.op, Subresource: tt.sub, Object: rclaim("c"), OldObject: rclaim("c")}
		if got := e.Handles(a); got != tt.want {
			t.Errorf("Handles(%s %q) = %v, want %v", tt.op, tt.sub, got, tt.want)
		}
	}
	if e.Handles(nil) {
		t.Error("Handles(nil) = true")
	}
}

func TestResourceClaimBadInput(t *testing.T) {
	e := newClaimEvaluator(t, nil, evaluator.ResourceClaimOptions{})
	for _, obj := range []runtime.Object{nil, &corev1.Pod{}, (*resourcev1.ResourceClaim)(nil), &resourcev1.DeviceClass{}} {
		if _, err := e.Usage(obj); err == nil {
			t.Errorf("Usage(%T) error = nil", obj)
		}
	}
	if got, err := e.Usage(&resourcev1.ResourceClaim{}); err != nil || len(got) != 1 {
		t.Errorf("Usage(empty claim) = %v, %v; want only the count", got, err)
	}
	if _, err := e.UsageStats(quota.UsageStatsOptions{Namespace: "ns"}); !errors.Is(err, generic.ErrNoListFunc) {
		t.Errorf("UsageStats without listers: error = %v, want ErrNoListFunc", err)
	}
	if err := e.Constraints([]corev1.ResourceName{"requests.cpu"}, &corev1.Pod{}); err != nil {
		t.Errorf("Constraints = %v, want nil", err)
	}
	if s, err := e.MatchingScopes(rclaim("c"), []corev1.ScopedResourceSelectorRequirement{{ScopeName: "BestEffort", Operator: "Exists"}}); len(s) != 0 || err != nil {
		t.Errorf("MatchingScopes = %v, %v; want empty", s, err)
	}
	if s, err := e.UncoveredQuotaScopes([]corev1.ScopedResourceSelectorRequirement{{ScopeName: "BestEffort", Operator: "Exists"}}, nil); len(s) != 0 || err != nil {
		t.Errorf("UncoveredQuotaScopes = %v, %v; want empty", s, err)
	}
	if gr := e.GroupResource(); gr != (schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceclaims"}) {
		t.Errorf("GroupResource = %v", gr)
	}

	pod := gpuPod("p", "example.com/gpu", "2")
	c := special(rclaim("c", exact("gpu", 2)), pod, t0)
	tests := []struct {
		name string
		w    *world
	}{
		{"device classes fail to list", &world{objs: map[string][]runtime.Object{"pods": {pod}}, fail: "deviceclasses"}},
		{"pods fail to list", &world{objs: map[string][]runtime.Object{"deviceclasses": {gpuClass}}, fail: "pods"}},
		{"claims fail to list", &world{objs: map[string][]runtime.Object{"deviceclasses": {gpuClass}, "pods": {pod}}, fail: "resourceclaims"}},
		{"a device class of the wrong type", newWorld(gpuClass, &resourcev1.ResourceClaim{}).with("deviceclasses", &corev1.Pod{})},
		{"a pod of the wrong type", newWorld(gpuClass).with("pods", &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Namespace: "ns"}})},
		{"a claim of the wrong type", newWorld(gpuClass, pod).with("resourceclaims", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns"}})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newClaimEvaluator(t, tt.w.listers, evaluator.ResourceClaimOptions{})
			if got, err := e.Usage(c); err == nil {
				t.Errorf("Usage = %v, want an error", got)
			}
			tt.w.objs["resourceclaims"] = append(tt.w.objs["resourceclaims"], c)
			if got, err := e.UsageStats(quota.UsageStatsOptions{Namespace: "ns"}); err == nil {
				t.Errorf("UsageStats = %v, want an error", got.Used)
			}
		})
	}
}

// with adds objs to w under resource r.
func (w *world) with(r string, objs ...runtime.Object) *world {
	w.objs[r] = append(w.objs[r], objs...)
	return w
}

func TestResourceClaimListerErrors(t *testing.T) {
	boom := errors.New("no such informer")
	_, err := evaluator.NewResourceClaimEvaluator(func(gvr schema.GroupVersionResource) (generic.ListFuncByNamespace, error) {
		if gvr.Resource == "deviceclasses" || gvr.Resource == "pods" {
			return nil, boom
		}
		return nil, nil
	}, evaluator.ResourceClaimOptions{})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "deviceclasses") || !strings.Contains(err.Error(), "pods") {
		t.Errorf("NewResourceClaimEvaluator error = %v, want both lister errors", err)
	}
	var asked []string
	_, err = evaluator.NewResourceClaimEvaluator(func(gvr schema.GroupVersionResource) (generic.ListFuncByNamespace, error) {
		asked = append(asked, gvr.String())
		return nil, nil
	}, evaluator.ResourceClaimOptions{DisableExtendedResource: true})
	if err != nil || !cmp.Equal(asked, []string{"resource.k8s.io/v1, Resource=resourceclaims"}) {
		t.Errorf("without extended resources the evaluator asked for %v (error %v), want resourceclaims only", asked, err)
	}
}

// TestResourceClaimUsageStatsSpecialClaims sums a namespace with a pod, its
// two scheduler-made claims and an ordinary claim: the oldest special claim
// is charged net of the pod, the other in full.
func TestResourceClaimUsageStatsSpecialClaims(t *testing.T) {
	pod := gpuPod("p", "example.com/gpu", "2")
	first := special(rclaim("p-extended-resources-b", exact("gpu", 2)), pod, t0)
	second := special(rclaim("p-extended-resources-a", exact("gpu", 2)), pod, t0.Add(time.Second))
	plain := rclaim("plain", exact("nic", 1))
	elsewhere := rclaim("elsewhere", exact("gpu", 5))
	elsewhere.Namespace = "other"
	w := newWorld(gpuClass, nicClass, pod, first, second, plain, elsewhere)
	e := newClaimEvaluator(t, w.listers, evaluator.ResourceClaimOptions{})
	names := []corev1.ResourceName{"requests.example.com/gpu", "requests.example.com/tpu", "count/resourceclaims.resource.k8s.io"}
	got, err := e.UsageStats(quota.UsageStatsOptions{Namespace: "ns", Resources: names})
	if err != nil {
		t.Fatal(err)
	}
	want := rl("count/resourceclaims.resource.k8s.io", "3",
		"gpu.deviceclass.resource.k8s.io/devices", "4", "nic.deviceclass.resource.k8s.io/devices", "1",
		"requests.deviceclass.resource.kubernetes.io/gpu", "4", "requests.deviceclass.resource.kubernetes.io/nic", "1",
		"requests.example.com/gpu", "2", "requests.example.com/tpu", "0")
	if diff := cmp.Diff(want, got.Used, qcmp.Quantities()); diff != "" {
		t.Errorf("UsageStats() mismatch (-want +got):\n%s", diff)
	}
	scoped, err := e.UsageStats(quota.UsageStatsOptions{Namespace: "ns", Resources: names, Scopes: []corev1.ResourceQuotaScope{"BestEffort"}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(rl("requests.example.com/gpu", "0", "requests.example.com/tpu", "0", "count/resourceclaims.resource.k8s.io", "0"), scoped.Used, qcmp.Quantities()); diff != "" {
		t.Errorf("scoped UsageStats() mismatch (-want +got):\n%s", diff)
	}
}

// TestResourceClaimListsDeviceClassesOnlyWhenNeeded checks that quotas on
// names that cannot depend on DeviceClasses never make the evaluator list
// them, and that a claim's usage lists them once.
func TestResourceClaimListsDeviceClassesOnlyWhenNeeded(t *testing.T) {
	w := newWorld(gpuClass, nicClass)
	var lists int
	e := newClaimEvaluator(t, func(gvr schema.GroupVersionResource) (generic.ListFuncByNamespace, error) {
		list, err := w.listers(gvr)
		if gvr.Resource != "deviceclasses" {
			return list, err
		}
		return func(ns string) ([]runtime.Object, error) {
			lists++
			return list(ns)
		}, err
	}, evaluator.ResourceClaimOptions{})
	e.MatchingResources([]corev1.ResourceName{"requests.cpu", "requests.storage", "count/resourceclaims.resource.k8s.io", "gpu.deviceclass.resource.k8s.io/devices", "pods"})
	if lists != 0 {
		t.Errorf("MatchingResources of names no class backs listed device classes %d times", lists)
	}
	e.MatchingResources([]corev1.ResourceName{"requests.example.com/gpu", "requests.deviceclass.resource.kubernetes.io/nic"})
	if lists != 1 {
		t.Errorf("MatchingResources of two extended names listed device classes %d times, want 1", lists)
	}
	lists = 0
	if _, err := e.Usage(rclaim("c", exact("gpu", 1), exact("nic", 1), firstAvailable(sub("gpu", 2), sub("nic", 1)))); err != nil {
		t.Fatal(err)
	}
	if lists != 1 {
		t.Errorf("Usage listed device classes %d times, want 1", lists)
	}
}
