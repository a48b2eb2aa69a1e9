package generic_test

import (
	"fmt"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit/generic"
	"github.com/quotakit/quotakit/quota"
)

func grs(evals []quota.Evaluator) []string {
	out := make([]string, 0, len(evals))
	for _, e := range evals {
		out = append(out, e.GroupResource().String())
	}
	return out
}

func TestRegistry(t *testing.T) {
	pods := generic.NewObjectCountEvaluator(schema.GroupResource{Resource: "pods"}, nil, "")
	deployments := generic.NewObjectCountEvaluator(schema.GroupResource{Group: "apps", Resource: "deployments"}, nil, "")
	cms := generic.NewObjectCountEvaluator(configMapsGR, nil, "")
	cms2 := generic.NewObjectCountEvaluator(configMapsGR, nil, "configmaps")
	jobs := generic.NewObjectCountEvaluator(schema.GroupResource{Group: "batch", Resource: "jobs"}, nil, "")

	r := generic.NewRegistry(jobs, pods, nil, deployments, cms)
	want := []string{"configmaps", "pods", "deployments.apps", "jobs.batch"}
	if diff := cmp.Diff(want, grs(r.List())); diff != "" {
		t.Errorf("List() order mismatch (-want +got):\n%s", diff)
	}
	if got := r.Get(configMapsGR); got != quota.Evaluator(cms) {
		t.Errorf("Get(configmaps) = %v, want the registered evaluator", got)
	}
	if got := r.Get(schema.GroupResource{Resource: "secrets"}); got != nil {
		t.Errorf("Get(secrets) = %v, want nil", got)
	}

	r.Add(cms2) // replaces
	if got := r.Get(configMapsGR); got != quota.Evaluator(cms2) {
		t.Errorf("after Add, Get(configmaps) = %v, want the replacement", got)
	}
	if n := len(r.List()); n != 4 {
		t.Errorf("after replacing Add, len(List()) = %d, want 4", n)
	}

	r.Remove(cms) // removes whatever is registered for configmaps
	r.Remove(nil)
	r.Add(nil)
	want = []string{"pods", "deployments.apps", "jobs.batch"}
	if diff := cmp.Diff(want, grs(r.List())); diff != "" {
		t.Errorf("after Remove, List() mismatch (-want +got):\n%s", diff)
	}
	if got := r.Get(configMapsGR); got != nil {
		t.Errorf("after Remove, Get(configmaps) = %v, want nil", got)
	}

	// The listed slice belongs to the caller.
	l := r.List()
	l[0] = nil
	if r.List()[0] == nil {
		t.Error("modifying List()'s result changed the registry")
	}
}

func TestRegistryEmpty(t *testing.T) {
	r := generic.NewRegistry()
	if got := r.List(); len(got) != 0 {
		t.Errorf("List() = %v, want empty", got)
	}
	r.Remove(generic.NewObjectCountEvaluator(configMapsGR, nil, ""))

	// Evaluators that hold a nil pointer are ignored as nil ones are.
	r = generic.NewRegistry(nil, (*generic.ObjectCountEvaluator)(nil))
	if got := r.List(); len(got) != 0 {
		t.Errorf("List() of a registry of nil evaluators = %v, want empty", got)
	}
}

func TestRegistryConcurrentUse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := generic.NewRegistry()
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				for j := range 50 {
					e := generic.NewObjectCountEvaluator(schema.GroupResource{Group: fmt.Sprint("g", i), Resource: fmt.Sprint("r", j%5)}, nil, "")
					r.Add(e)
					_ = r.Get(e.GroupResource())
					for _, listed := range r.List() {
						_ = listed.GroupResource()
					}
					if j%3 == 0 {
						r.Remove(e)
					}
				}
			})
		}
		wg.Wait()
		// Each goroutine's last write for r<k> decides whether it stays:
		// j=45..49 are the last rounds; j%3==0 removes for j=45 (r0) and
		// j=48 (r3).
		if got := len(r.List()); got != 8*3 {
			t.Errorf("len(List()) = %d, want %d", got, 8*3)
		}
	})
}

func TestConfiguration(t *testing.T) {
	cms := generic.NewObjectCountEvaluator(configMapsGR, nil, "")
	evals := []quota.Evaluator{cms}
	ignored := map[schema.GroupResource]struct{}{{Resource: "events"}: {}}
	c := generic.NewConfiguration(evals, ignored)

	// Later changes to the inputs or outputs do not reach the configuration.
	evals[0] = nil
	ignored[schema.GroupResource{Resource: "bindings"}] = struct{}{}
	c.Evaluators()[0] = nil
	delete(c.IgnoredResources(), schema.GroupResource{Resource: "events"})

	if got := c.Evaluators(); len(got) != 1 || got[0] != quota.Evaluator(cms) {
		t.Errorf("Evaluators() = %v, want [configmaps]", got)
	}
	want := map[schema.GroupResource]struct{}{{Resource: "events"}: {}}
	if diff := cmp.Diff(want, c.IgnoredResources()); diff != "" {
		t.Errorf("IgnoredResources() mismatch (-want +got):\n%s", diff)
	}
}
