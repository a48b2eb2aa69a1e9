package evaluator_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/quotakit/quotakit/evaluator"
	"github.com/quotakit/quotakit/internal/qcmp"
)

// draRows returns the rows of resources.k8s.io in the table for opts.
func draRows(opts evaluator.Options) map[string]evaluator.Resource {
	rows := map[string]evaluator.Resource{}
	for _, r := range evaluator.Resources(opts) {
		if r.Resource.Group == "resource.k8s.io" {
			rows[r.Resource.Resource] = r
		}
	}
	return rows
}

func TestResourcesDRARows(t *testing.T) {
	rows := draRows(evaluator.Options{})
	claims, ok := rows["resourceclaims"]
	if !ok || claims.Resource.Version != "v1" || !claims.Namespaced || claims.NewEvaluator == nil || claims.MetadataOnly {
		t.Fatalf("resourceclaims row = %+v, want a namespaced v1 row with an evaluator", claims)
	}
	if _, ok := claims.Object.(*resourcev1.ResourceClaim); !ok {
		t.Errorf("resourceclaims Object = %T", claims.Object)
	}
	classes, ok := rows["deviceclasses"]
	if !ok || classes.Namespaced || classes.NewEvaluator != nil || classes.Resource.Version != "v1" {
		t.Fatalf("deviceclasses row = %+v, want a cluster-scoped v1 row without an evaluator", classes)
	}
	if _, ok := classes.Object.(*resourcev1.DeviceClass); !ok {
		t.Errorf("deviceclasses Object = %T", classes.Object)
	}

	rows = draRows(evaluator.Options{DisableDRAExtendedResource: true})
	if _, ok := rows["deviceclasses"]; ok || len(rows) != 1 {
		t.Errorf("with DRAExtendedResource off the rows are %v, want resourceclaims only", rows)
	}
	e, err := rows["resourceclaims"].NewEvaluator(newWorld(gpuClass).listers)
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.Usage(rclaim("c", exact("gpu", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(rl("count/resourceclaims.resource.k8s.io", "1", "gpu.deviceclass.resource.k8s.io/devices", "1"), got, qcmp.Quantities()); diff != "" {
		t.Errorf("Usage with DRAExtendedResource off (-want +got):\n%s", diff)
	}

	if rows := draRows(evaluator.Options{DisableDynamicResourceAllocation: true}); len(rows) != 0 {
		t.Errorf("with DynamicResourceAllocation off the rows are %v, want none", rows)
	}
	evals, err := evaluator.NewEvaluators(nil, evaluator.Options{DisableDynamicResourceAllocation: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evals {
		if e.GroupResource().Group == "resource.k8s.io" {
			t.Errorf("with DynamicResourceAllocation off NewEvaluators returned %s", e.GroupResource())
		}
	}
}

// TestResourceClaimUpdateFilter checks that claim updates recalculate
// exactly when the claim's charge may change. Upstream never does.
func TestResourceClaimUpdateFilter(t *testing.T) {
	pod := gpuPod("p", "example.com/gpu", "2")
	base := special(rclaim("c", exact("gpu", 2)), pod, t0)
	edit := func(f func(c *resourcev1.ResourceClaim)) *resourcev1.ResourceClaim {
		c := base.DeepCopy()
		f(c)
		return c
	}
	plain := rclaim("plain", exact("gpu", 2))
	plainEdit := func(f func(c *resourcev1.ResourceClaim)) *resourcev1.ResourceClaim {
		c := plain.DeepCopy()
		f(c)
		return c
	}
	gvr := resourcev1.SchemeGroupVersion.WithResource("resourceclaims")
	tests := []struct {
		name     string
		old, new runtime.Object
		opts     evaluator.Options
		want     bool
	}{
		{"no change", base, base.DeepCopy(), evaluator.Options{}, false},
		{"allocation recorded", base, edit(func(c *resourcev1.ResourceClaim) {
			c.Status.Allocation = &resourcev1.AllocationResult{}
			c.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: pod.UID}}
		}), evaluator.Options{}, false},
		{"labels", base, edit(func(c *resourcev1.ResourceClaim) { c.Labels = map[string]string{"a": "b"} }), evaluator.Options{}, false},
		{"requests", base, edit(func(c *resourcev1.ResourceClaim) { c.Spec.Devices.Requests[0].Exactly.Count = 3 }), evaluator.Options{}, true},
		{"annotation removed", base, edit(func(c *resourcev1.ResourceClaim) { c.Annotations = nil }), evaluator.Options{}, true},
		{"annotation removed, extended resources off", base, edit(func(c *resourcev1.ResourceClaim) { c.Annotations = nil }), evaluator.Options{DisableDRAExtendedResource: true}, false},
		{"owner UID", base, edit(func(c *resourcev1.ResourceClaim) { c.OwnerReferences[0].UID = "x" }), evaluator.Options{}, true},
		{"owner name", base, edit(func(c *resourcev1.ResourceClaim) { c.OwnerReferences[0].Name = "x" }), evaluator.Options{}, true},
		{"owner no longer controller", base, edit(func(c *resourcev1.ResourceClaim) { c.OwnerReferences[0].Controller = nil }), evaluator.Options{}, true},
		{"owner of a plain claim", plain, plainEdit(func(c *resourcev1.ResourceClaim) {
			c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: "u", Controller: ptr.To(true)}}
		}), evaluator.Options{}, false},
		{"plain claim annotated", plain, plainEdit(func(c *resourcev1.ResourceClaim) {
			c.Annotations = map[string]string{resourcev1.ExtendedResourceClaimAnnotation: "true"}
		}), evaluator.Options{}, true},
		{"wrong types", &corev1.Pod{}, &corev1.Pod{}, evaluator.Options{}, false},
		{"nil", nil, base, evaluator.Options{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := evaluator.DefaultUpdateFilter(tt.opts)(gvr, tt.old, tt.new); got != tt.want {
				t.Errorf("DefaultUpdateFilter(resourceclaims) = %v, want %v", got, tt.want)
			}
		})
	}
	if evaluator.DefaultUpdateFilter(evaluator.Options{DisableDynamicResourceAllocation: true})(gvr, base, edit(func(c *resourcev1.ResourceClaim) { c.Annotations = nil })) {
		t.Error("with DynamicResourceAllocation off the filter fires for claims")
	}
}
