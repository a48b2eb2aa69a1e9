package admission_test

import (
	"fmt"
	"sync"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit/admission"
	"github.com/quotakit/quotakit/quota"
)

// TestEvaluateForgedResources floods an Evaluator with creations of
// distinct resources no evaluator of its registry counts, as reviews
// forged by a caller that can reach a webhook would name them, and checks
// that they leave nothing behind: each is counted by an evaluator made
// for it, and the heap does not grow with the resources named.
func TestEvaluateForgedResources(t *testing.T) {
	const (
		resources = 20_000
		senders   = 4
		// Keeping an evaluator per resource took about 210 bytes each:
		// 4 MiB for these.
		maxGrowth = 1 << 20
	)
	e := newEvaluator(t, newStore(), admission.Options{})
	run(t, e)
	forged := func(i int) quota.Attributes {
		return &quota.AttributesRecord{
			Operation: admissionv1.Create,
			Resource:  schema.GroupVersionResource{Group: "forged.example.com", Version: "v1", Resource: fmt.Sprintf("things%d", i)},
			Namespace: fmt.Sprintf("ns%d", i%senders),
			Name:      "x",
		}
	}
	// One round first, so that what the Evaluator allocates once (its
	// namespaces' queues, the registry's maps) is in the base.
	if err := e.Evaluate(t.Context(), forged(-1)); err != nil {
		t.Fatalf("Evaluate: %v", err)
	}
	base := liveHeap()
	var wg sync.WaitGroup
	for s := range senders {
		wg.Go(func() {
			for i := s; i < resources; i += senders {
				if err := e.Evaluate(t.Context(), forged(i)); err != nil {
					t.Errorf("Evaluate of resource %d: %v", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if grown := liveHeap() - base; grown > maxGrowth {
		t.Errorf("the heap grew by %d KiB after creations of %d distinct resources, want at most %d KiB", grown>>10, resources, maxGrowth>>10)
	}
}
