package evaluator_test

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/quotakit/quotakit/evaluator"
	"github.com/quotakit/quotakit/generic"
	"github.com/quotakit/quotakit/quota"
)

// A claim for two GPUs, one of which may instead be any number of TPUs,
// charged against a quota on GPU devices and on the extended resource the
// gpu DeviceClass declares. A controller passes listers built from its
// informers; here they serve fixed objects.
func ExampleNewResourceClaimEvaluator() {
	gpu := &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
		Spec:       resourcev1.DeviceClassSpec{ExtendedResourceName: ptr.To("example.com/gpu")},
	}
	claim := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "team-a"},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{
			{Name: "gpus", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1}},
			{Name: "accel", FirstAvailable: []resourcev1.DeviceSubRequest{
				{Name: "gpu", DeviceClassName: "gpu", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1},
				{Name: "tpus", DeviceClassName: "tpu", AllocationMode: resourcev1.DeviceAllocationModeAll},
			}},
		}}},
	}
	objects := map[string][]runtime.Object{
		"deviceclasses":  {gpu},
		"resourceclaims": {claim},
	}
	listers := func(gvr schema.GroupVersionResource) (generic.ListFuncByNamespace, error) {
		return func(namespace string) ([]runtime.Object, error) { return objects[gvr.Resource], nil }, nil
	}
	e, err := evaluator.NewResourceClaimEvaluator(listers, evaluator.ResourceClaimOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}

	usage, err := e.Usage(claim)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("the claim charges:")
	for _, name := range quota.ResourceNames(usage) {
		q := usage[name]
		fmt.Printf("  %s=%s\n", name, q.String())
	}

	hard := corev1.ResourceList{
		evaluator.ResourceByDeviceClass("gpu"): resource.MustParse("8"),
		"requests.example.com/gpu":             resource.MustParse("8"),
		"requests.example.com/tpu":             resource.MustParse("8"),
	}
	fmt.Println("quota names charged to claims:", e.MatchingResources(quota.ResourceNames(hard)))
	// Output:
	// the claim charges:
	//   count/resourceclaims.resource.k8s.io=1
	//   gpu.deviceclass.resource.k8s.io/devices=2
	//   requests.deviceclass.resource.kubernetes.io/gpu=2
	//   requests.deviceclass.resource.kubernetes.io/tpu=32
	//   requests.example.com/gpu=2
	//   tpu.deviceclass.resource.k8s.io/devices=32
	// quota names charged to claims: [gpu.deviceclass.resource.k8s.io/devices requests.example.com/gpu]
}
