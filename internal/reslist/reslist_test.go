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
