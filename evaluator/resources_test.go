package evaluator_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit/evaluator"
	"github.com/quotakit/quotakit/generic"
)

// TestResourcesTable checks every row of the table against what its
// evaluator says of itself: the evaluator evaluates the row's resource and
// reads the row's object type, the listers are asked for the row's
// resource, and a metadata-only row has an object-count evaluator.
func TestResourcesTable(t *testing.T) {
	seen := map[schema.GroupResource]bool{}
	for _, r := range evaluator.Resources(evaluator.Options{}) {
		gr := r.Resource.GroupResource()
		t.Run(gr.String(), func(t *testing.T) {
			if seen[gr] {
				t.Fatalf("%s is in the table twice", gr)
			}
			seen[gr] = true
			if r.Object == nil {
				t.Fatalf("%s has no prototype object", gr)
			}
			if r.NewEvaluator == nil {
				if r.Namespaced {
					t.Errorf("namespaced %s has no evaluator", gr)
				}
				return
			}
			var asked []schema.GroupVersionResource
			e, err := r.NewEvaluator(func(gvr schema.GroupVersionResource) (generic.ListFuncByNamespace, error) {
				asked = append(asked, gvr)
				return func(string) ([]runtime.Object, error) { return []runtime.Object{r.Object.DeepCopyObject()}, nil }, nil
			})
			if err != nil {
				t.Fatalf("NewEvaluator: %v", err)
			}
			if e.GroupResource() != gr {
				t.Errorf("evaluator of %s evaluates %s", gr, e.GroupResource())
			}
			found := false
			for _, gvr := range asked {
				found = found || gvr == r.Resource
			}
			if !found {
				t.Errorf("evaluator of %s never asked for a lister of %s (asked %v)", gr, r.Resource, asked)
			}
			if _, isCount := e.(*generic.ObjectCountEvaluator); isCount != r.MetadataOnly {
				t.Errorf("MetadataOnly = %v, but object-count evaluator = %v", r.MetadataOnly, isCount)
			}
			if _, err := e.Usage(r.Object.DeepCopyObject()); err != nil {
				t.Errorf("Usage of an empty %T: %v", r.Object, err)
			}
		})
	}
	for _, gr := range []schema.GroupResource{{Resource: "pods"}, {Resource: "services"}, {Resource: "persistentvolumeclaims"}, {Resource: "configmaps"}, {Resource: "secrets"}, {Resource: "replicationcontrollers"}, {Resource: "resourcequotas"}, {Group: "resource.k8s.io", Resource: "resourceclaims"}, {Group: "resource.k8s.io", Resource: "deviceclasses"}} {
		if !seen[gr] {
			t.Errorf("core resource %s is missing from the table", gr)
		}
	}
}

// TestResourcesUsageMayChangeWrongTypes checks that no row's update filter
// panics on objects of the wrong type or nil.
func TestResourcesUsageMayChangeWrongTypes(t *testing.T) {
	for _, r := range evaluator.Resources(evaluator.Options{}) {
		if r.UsageMayChange == nil {
			continue
		}
		for _, pair := range [][2]runtime.Object{{nil, nil}, {&corev1.ConfigMap{}, &corev1.ConfigMap{}}, {r.Object, nil}, {nil, r.Object}} {
			if r.UsageMayChange(pair[0], pair[1]) {
				t.Errorf("%s: UsageMayChange(%T, %T) = true, want false", r.Resource, pair[0], pair[1])
			}
		}
	}
}

// TestPodUsageChangesAt checks the pods row's moment against the pod
// evaluator: just before it a deleted pod is charged cpu, just after it
// only its count.
func TestPodUsageChangesAt(t *testing.T) {
	var pods evaluator.Resource
	for _, r := range evaluator.Resources(evaluator.Options{}) {
		if r.Resource.Resource == "pods" {
			pods = r
		}
	}
	deleted := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	grace := int64(30)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", DeletionTimestamp: &deleted, DeletionGracePeriodSeconds: &grace},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
		}}}},
	}
	at, ok := pods.UsageChangesAt(pod)
	if want := deleted.Add(30 * time.Second); !ok || !at.Equal(want) {
		t.Fatalf("UsageChangesAt = %v, %v; want %v, true", at, ok, want)
	}
	for _, tt := range []struct {
		now     time.Time
		charged bool
	}{{at, true}, {at.Add(time.Nanosecond), false}} {
		usage, err := evaluator.PodUsage(pod, tt.now)
		if err != nil {
			t.Fatal(err)
		}
		if _, has := usage[corev1.ResourceRequestsCPU]; has != tt.charged {
			t.Errorf("at %v: charged cpu = %v, want %v", tt.now, has, tt.charged)
		}
	}
	if _, ok := pods.UsageChangesAt(&corev1.Pod{}); ok {
		t.Error("UsageChangesAt of a pod not being deleted = true")
	}
	if _, ok := pods.UsageChangesAt(&corev1.ConfigMap{}); ok {
		t.Error("UsageChangesAt of a configmap = true")
	}
}
