package quotakit

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit/generic"
	"github.com/quotakit/quotakit/quota"
)

// askCounter is an evaluator that counts the names MatchingResources is
// asked about.
type askCounter struct {
	quota.Evaluator
	asked map[corev1.ResourceName]int
}

func (a *askCounter) MatchingResources(input []corev1.ResourceName) []corev1.ResourceName {
	for _, name := range input {
		a.asked[name]++
	}
	return a.Evaluator.MatchingResources(input)
}

func TestMonitorChargesAny(t *testing.T) {
	gr := schema.GroupResource{Resource: "configmaps"}
	counter := &askCounter{Evaluator: generic.NewObjectCountEvaluator(gr, nil, ""), asked: map[corev1.ResourceName]int{}}
	m := &monitor{evaluator: counter}
	hard := func(names ...string) corev1.ResourceList {
		l := corev1.ResourceList{}
		for _, n := range names {
			l[corev1.ResourceName(n)] = resource.MustParse("1")
		}
		return l
	}
	for range 3 {
		for _, tc := range []struct {
			hard corev1.ResourceList
			want bool
		}{
			{hard("count/configmaps"), true},
			{hard("pods", "count/configmaps"), true},
			{hard("pods", "requests.cpu"), false},
			{hard(), false},
			{nil, false},
		} {
			if got := m.chargesAny(tc.hard); got != tc.want {
				t.Errorf("chargesAny(%v) = %v, want %v", tc.hard, got, tc.want)
			}
		}
	}
	for name, n := range counter.asked {
		if n != 1 {
			t.Errorf("MatchingResources asked about %s %d times, want once", name, n)
		}
	}

	// Past the bound, names are still answered right, without being kept.
	for i := range chargedNamesLimit + 10 {
		name := fmt.Sprintf("example.com/r%d", i)
		if m.chargesAny(hard(name)) {
			t.Fatalf("chargesAny(%s) = true, want false", name)
		}
	}
	if len(m.charged) > chargedNamesLimit {
		t.Errorf("%d names kept, want at most %d", len(m.charged), chargedNamesLimit)
	}
	if !m.chargesAny(hard("example.com/r9999", "count/configmaps")) {
		t.Error("chargesAny past the bound = false, want true")
	}
}
