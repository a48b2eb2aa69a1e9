package reslist

import (
	"hash/maphash"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func list(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func TestHashAndSame(t *testing.T) {
	seed := maphash.MakeSeed()
	a := list("cpu", "500m", "memory", "1Gi", "pods", "1")
	b := list("pods", "1", "memory", "1Gi", "cpu", "500m")
	if !Same(a, b) || Hash(seed, a) != Hash(seed, b) {
		t.Errorf("equal lists: Same %v, hashes %x and %x", Same(a, b), Hash(seed, a), Hash(seed, b))
	}
	for _, tc := range []struct {
		name string
		b    corev1.ResourceList
	}{
		{"another amount", list("cpu", "600m", "memory", "1Gi", "pods", "1")},
		{"another format", list("cpu", "500m", "memory", "1073741824", "pods", "1")},
		{"another name", list("cpu", "500m", "memory", "1Gi", "services", "1")},
		{"one name fewer", list("cpu", "500m", "memory", "1Gi")},
		{"empty", corev1.ResourceList{}},
	} {
		if Same(a, tc.b) || Same(tc.b, a) {
			t.Errorf("%s: Same says equal", tc.name)
		}
		if Hash(seed, a) == Hash(seed, tc.b) {
			t.Errorf("%s: hashes alike", tc.name)
		}
	}
	if !Same(nil, corev1.ResourceList{}) {
		t.Error("nil and empty lists differ")
	}
}

func TestHashDoesNotAllocate(t *testing.T) {
	seed := maphash.MakeSeed()
	a := list("cpu", "500m", "memory", "1Gi", "pods", "1")
	if n := testing.AllocsPerRun(100, func() { Hash(seed, a) }); n != 0 {
		t.Errorf("Hash allocates %v times", n)
	}
}

func TestAccumulate(t *testing.T) {
	src := list("cpu", "250m", "memory", "1Gi", "pods", "1")
	dst := list("cpu", "1", "pods", "2")
	Accumulate(dst, src, false, nil)
	if want := list("cpu", "1250m", "memory", "1Gi", "pods", "3"); !equalAmounts(dst, want) {
		t.Errorf("add: %v, want %v", dst, want)
	}
	Accumulate(dst, src, true, list("cpu", "0", "memory", "0"))
	if want := list("cpu", "1", "memory", "0", "pods", "3"); !equalAmounts(dst, want) {
		t.Errorf("subtract cpu and memory only: %v, want %v", dst, want)
	}
	neg := corev1.ResourceList{}
	Accumulate(neg, src, true, list("pods", "0"))
	if want := list("pods", "-1"); !equalAmounts(neg, want) {
		t.Errorf("subtract from nothing: %v, want %v", neg, want)
	}
	// A filter longer than src is walked through src; a filtered name src
	// lacks is left as it is.
	wide := list("cpu", "1", "storage", "5Gi")
	Accumulate(wide, list("cpu", "500m", "pods", "1"), false, list("cpu", "0", "memory", "0", "storage", "0"))
	if want := list("cpu", "1500m", "storage", "5Gi"); !equalAmounts(wide, want) {
		t.Errorf("add through a wide filter: %v, want %v", wide, want)
	}
	// A decimal amount taken from src is a copy: changing dst leaves src.
	tenth := resource.MustParse("0.1")
	dec := corev1.ResourceList{"cpu": *resource.NewDecimalQuantity(*tenth.AsDec(), resource.DecimalSI)}
	into := corev1.ResourceList{}
	Accumulate(into, dec, false, nil)
	Accumulate(into, dec, false, nil)
	if got := dec["cpu"]; got.Cmp(resource.MustParse("100m")) != 0 {
		t.Errorf("src changed to %s", got.String())
	}
}

func equalAmounts(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for name, q := range a {
		if p, ok := b[name]; !ok || p.Cmp(q) != 0 {
			return false
		}
	}
	return true
}
