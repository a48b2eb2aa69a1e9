package evaluator_test

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit/evaluator"
)

// TestGVRsCoverTheTable: every resource of the table is one of the
// exported values, spelled the same.
func TestGVRsCoverTheTable(t *testing.T) {
	known := map[schema.GroupVersionResource]bool{}
	for _, gvr := range []schema.GroupVersionResource{
		evaluator.Pods, evaluator.Services, evaluator.PersistentVolumeClaims, evaluator.ConfigMaps, evaluator.Secrets,
		evaluator.ReplicationControllers, evaluator.ResourceQuotas, evaluator.Namespaces, evaluator.ResourceClaims, evaluator.DeviceClasses,
	} {
		known[gvr] = true
	}
	for _, row := range evaluator.Resources(evaluator.Options{}) {
		if !known[row.Resource] {
			t.Errorf("the table's %v has no exported value", row.Resource)
		}
	}
}

func ExamplePods() {
	fmt.Println(evaluator.Pods, evaluator.ResourceClaims.GroupResource())
	// Output: /v1, Resource=pods resourceclaims.resource.k8s.io
}
