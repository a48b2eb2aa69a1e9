package quota_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/quotakit/quotakit/internal/qcmp"
	"github.com/quotakit/quotakit/quota"
)

// rl builds a ResourceList from name/quantity pairs.
func rl(kv ...string) corev1.ResourceList {
	if len(kv)%2 != 0 {
		panic("rl: odd number of arguments")
	}
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func names(ns ...string) []corev1.ResourceName {
	out := make([]corev1.ResourceName, 0, len(ns))
	for _, n := range ns {
		out = append(out, corev1.ResourceName(n))
	}
	return out
}

func TestEquals(t *testing.T) {
	tests := []struct {
		name string
		a, b corev1.ResourceList
		want bool
	}{
		{"nil and nil", nil, nil, true},
		{"nil and empty", nil, rl(), true},
		{"1000m equals 1", rl("cpu", "1000m"), rl("cpu", "1"), true},
		{"1Gi equals 1024Mi", rl("memory", "1Gi"), rl("memory", "1024Mi"), true},
		{"different value", rl("cpu", "1"), rl("cpu", "2"), false},
		{"key only in a", rl("cpu", "1", "memory", "1"), rl("cpu", "1"), false},
		{"key only in b", rl("cpu", "1"), rl("cpu", "1", "memory", "1"), false},
		{"same length different keys", rl("cpu", "1"), rl("memory", "1"), false},
		{"zero value versus absent", rl("cpu", "0"), nil, false},
		{"negative values", rl("cpu", "-1"), rl("cpu", "-1000m"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := quota.Equals(tt.a, tt.b); got != tt.want {
				t.Errorf("Equals(%v, %v) = %v, want %v", tt.a, tt.b, got, tt.want)
			}
			if got := quota.Equals(tt.b, tt.a); got != tt.want {
				t.Errorf("Equals(%v, %v) = %v, want %v (symmetry)", tt.b, tt.a, got, tt.want)
			}
		})
	}
}

func TestLessThanOrEqual(t *testing.T) {
	tests := []struct {
		name         string
		a, b         corev1.ResourceList
		want         bool
		wantExceeded []corev1.ResourceName
	}{
		{"nil and nil", nil, nil, true, nil},
		{"empty a is below anything", rl(), rl("cpu", "2"), true, nil},
		{"key only in a is ignored", rl("cpu", "5"), rl("memory", "1"), true, nil},
		{"key only in b is ignored", rl("cpu", "1"), rl("cpu", "1", "pods", "0"), true, nil},
		{"equal is fine", rl("cpu", "1000m"), rl("cpu", "1"), true, nil},
		{"one exceeded", rl("cpu", "2", "memory", "1Gi"), rl("cpu", "1", "memory", "2Gi"), false, names("cpu")},
		{"several exceeded sorted", rl("pods", "3", "cpu", "2", "memory", "3Gi"), rl("pods", "2", "cpu", "1", "memory", "2Gi"), false, names("cpu", "memory", "pods")},
		{"negative below zero", rl("cpu", "-1"), rl("cpu", "0"), true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, exceeded := quota.LessThanOrEqual(tt.a, tt.b)
			if got != tt.want {
				t.Errorf("LessThanOrEqual(%v, %v) = %v, want %v", tt.a, tt.b, got, tt.want)
			}
			if diff := cmp.Diff(tt.wantExceeded, exceeded); diff != "" {
				t.Errorf("LessThanOrEqual(%v, %v) exceeded names (-want +got):\n%s", tt.a, tt.b, diff)
			}
		})
	}
}

// binaryListTests is shared by the functions of two ResourceLists that
// return a ResourceList.
type binaryListTest struct {
	name string
	a, b corev1.ResourceList
	want corev1.ResourceList
}

func runBinaryListTests(t *testing.T, fname string, f func(a, b corev1.ResourceList) corev1.ResourceList, tests []binaryListTest) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			aBefore, bBefore := tt.a.DeepCopy(), tt.b.DeepCopy()
			got := f(tt.a, tt.b)
			if got == nil {
				t.Fatalf("%s(%v, %v) = nil, want a non-nil list", fname, tt.a, tt.b)
			}
			if diff := cmp.Diff(tt.want, got, qcmp.Quantities()); diff != "" {
				t.Errorf("%s(%v, %v) (-want +got):\n%s", fname, tt.a, tt.b, diff)
			}
			if diff := cmp.Diff(aBefore, tt.a); diff != "" {
				t.Errorf("%s mutated a (-before +after):\n%s", fname, diff)
			}
			if diff := cmp.Diff(bBefore, tt.b); diff != "" {
				t.Errorf("%s mutated b (-before +after):\n%s", fname, diff)
			}
		})
	}
}

func TestMax(t *testing.T) {
	runBinaryListTests(t, "Max", quota.Max, []binaryListTest{
		{"nil and nil", nil, nil, rl()},
		{"nil and list", nil, rl("cpu", "1"), rl("cpu", "1")},
		{"larger in a", rl("cpu", "2"), rl("cpu", "1"), rl("cpu", "2")},
		{"larger in b", rl("cpu", "1"), rl("cpu", "1500m"), rl("cpu", "1500m")},
		{"union of keys", rl("cpu", "1"), rl("memory", "1Gi"), rl("cpu", "1", "memory", "1Gi")},
		{"negative values", rl("cpu", "-2"), rl("cpu", "-1"), rl("cpu", "-1")},
	})
}

func TestMaxTieKeepsFormatOfB(t *testing.T) {
	got := quota.Max(rl("cpu", "1"), rl("cpu", "1000m"))
	q := got[corev1.ResourceCPU]
	if s := q.String(); s != "1" && s != "1000m" {
		t.Fatalf("Max tie = %q, want 1 or 1000m", s)
	}
	if q.String() != "1" {
		// Upstream keeps b's value on a tie; 1000m canonicalises to "1".
		t.Errorf("Max(1, 1000m) = %q, want %q", q.String(), "1")
	}
}

func TestAdd(t *testing.T) {
	runBinaryListTests(t, "Add", quota.Add, []binaryListTest{
		{"nil and nil", nil, nil, rl()},
		{"nil and list", nil, rl("cpu", "1"), rl("cpu", "1")},
		{"shared key summed", rl("cpu", "100m"), rl("cpu", "1"), rl("cpu", "1100m")},
		{"key on one side only", rl("cpu", "1"), rl("memory", "1Gi"), rl("cpu", "1", "memory", "1Gi")},
		{"negative values", rl("cpu", "1"), rl("cpu", "-3"), rl("cpu", "-2")},
		{"mixed suffixes", rl("memory", "1Gi"), rl("memory", "512Mi"), rl("memory", "1536Mi")},
	})
}

func TestSubtract(t *testing.T) {
	runBinaryListTests(t, "Subtract", quota.Subtract, []binaryListTest{
		{"nil and nil", nil, nil, rl()},
		{"key only in a", rl("cpu", "1"), nil, rl("cpu", "1")},
		{"key only in b is negated", nil, rl("cpu", "1"), rl("cpu", "-1")},
		{"shared key", rl("cpu", "1"), rl("cpu", "250m"), rl("cpu", "750m")},
		{"result may be negative", rl("pods", "1"), rl("pods", "3"), rl("pods", "-2")},
	})
}

func TestSubtractWithNonNegativeResult(t *testing.T) {
	runBinaryListTests(t, "SubtractWithNonNegativeResult", quota.SubtractWithNonNegativeResult, []binaryListTest{
		{"nil and nil", nil, nil, rl()},
		{"key only in a", rl("cpu", "1"), nil, rl("cpu", "1")},
		{"key only in b is zero", nil, rl("cpu", "1"), rl("cpu", "0")},
		{"shared key positive", rl("cpu", "1"), rl("cpu", "250m"), rl("cpu", "750m")},
		{"shared key clamped", rl("pods", "1"), rl("pods", "3"), rl("pods", "0")},
		{"equal gives zero", rl("memory", "1Gi"), rl("memory", "1024Mi"), rl("memory", "0")},
		{"negative a clamped", rl("cpu", "-1"), nil, rl("cpu", "0")},
	})
}

func TestMask(t *testing.T) {
	tests := []struct {
		name  string
		in    corev1.ResourceList
		names []corev1.ResourceName
		want  corev1.ResourceList
	}{
		{"nil list", nil, names("cpu"), rl()},
		{"nil names", rl("cpu", "1"), nil, rl()},
		{"keeps listed", rl("cpu", "1", "memory", "1Gi", "pods", "2"), names("cpu", "pods"), rl("cpu", "1", "pods", "2")},
		{"missing names not added", rl("cpu", "1"), names("cpu", "memory"), rl("cpu", "1")},
		{"duplicate names", rl("cpu", "1"), names("cpu", "cpu"), rl("cpu", "1")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := quota.Mask(tt.in, tt.names)
			if diff := cmp.Diff(tt.want, got, qcmp.Quantities()); diff != "" {
				t.Errorf("Mask(%v, %v) (-want +got):\n%s", tt.in, tt.names, diff)
			}
		})
	}
}

func TestResultsDoNotAliasInputs(t *testing.T) {
	a := rl("cpu", "1", "memory", "1Gi")
	b := rl("cpu", "2", "pods", "1")
	results := map[string]corev1.ResourceList{
		"Max":                           quota.Max(a, b),
		"Add":                           quota.Add(a, nil),
		"Subtract":                      quota.Subtract(a, nil),
		"SubtractWithNonNegativeResult": quota.SubtractWithNonNegativeResult(a, nil),
		"Mask":                          quota.Mask(a, names("cpu", "memory")),
		"RemoveZeros":                   quota.RemoveZeros(a),
	}
	for fname, got := range results {
		// Mutating every result in place must leave the inputs untouched.
		for name, q := range got {
			q.Add(resource.MustParse("7"))
			got[name] = q
		}
		if diff := cmp.Diff(rl("cpu", "1", "memory", "1Gi"), a, qcmp.Quantities()); diff != "" {
			t.Errorf("after changing %s's result, a changed (-want +got):\n%s", fname, diff)
		}
		if diff := cmp.Diff(rl("cpu", "2", "pods", "1"), b, qcmp.Quantities()); diff != "" {
			t.Errorf("after changing %s's result, b changed (-want +got):\n%s", fname, diff)
		}
	}
}

func TestResourceNames(t *testing.T) {
	tests := []struct {
		name string
		in   corev1.ResourceList
		want []corev1.ResourceName
	}{
		{"nil", nil, names()},
		{"sorted", rl("pods", "1", "cpu", "1", "memory", "1"), names("cpu", "memory", "pods")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, quota.ResourceNames(tt.in)); diff != "" {
				t.Errorf("ResourceNames(%v) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestContains(t *testing.T) {
	tests := []struct {
		items []corev1.ResourceName
		item  corev1.ResourceName
		want  bool
	}{
		{nil, "cpu", false},
		{names("cpu", "memory"), "memory", true},
		{names("requests.cpu"), "cpu", false},
	}
	for _, tt := range tests {
		if got := quota.Contains(tt.items, tt.item); got != tt.want {
			t.Errorf("Contains(%v, %q) = %v, want %v", tt.items, tt.item, got, tt.want)
		}
	}
}

func TestContainsPrefix(t *testing.T) {
	tests := []struct {
		prefixes []string
		item     corev1.ResourceName
		want     bool
	}{
		{nil, "cpu", false},
		{[]string{"requests."}, "requests.cpu", true},
		{[]string{"limits.", "requests."}, "requests.hugepages-2Mi", true},
		{[]string{"requests."}, "cpu", false},
		{[]string{""}, "anything", true},
	}
	for _, tt := range tests {
		if got := quota.ContainsPrefix(tt.prefixes, tt.item); got != tt.want {
			t.Errorf("ContainsPrefix(%v, %q) = %v, want %v", tt.prefixes, tt.item, got, tt.want)
		}
	}
}

func TestIntersection(t *testing.T) {
	long := names("a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q", "r", "cpu")
	tests := []struct {
		name string
		a, b []corev1.ResourceName
		want []corev1.ResourceName
	}{
		{"nil and nil", nil, nil, names()},
		{"nil b", names("cpu"), nil, names()},
		{"sorted and deduplicated", names("pods", "cpu", "pods", "memory"), names("memory", "pods", "cpu"), names("cpu", "memory", "pods")},
		{"only shared", names("cpu", "memory"), names("memory", "pods"), names("memory")},
		{"long b uses a set", names("cpu", "zzz", "cpu", "a"), long, names("a", "cpu")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, quota.Intersection(tt.a, tt.b)); diff != "" {
				t.Errorf("Intersection(%v, %v) (-want +got):\n%s", tt.a, tt.b, diff)
			}
		})
	}
}

func TestDifference(t *testing.T) {
	long := names("a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q", "r", "cpu")
	tests := []struct {
		name string
		a, b []corev1.ResourceName
		want []corev1.ResourceName
	}{
		{"nil and nil", nil, nil, names()},
		{"nil b keeps a", names("pods", "cpu", "pods"), nil, names("cpu", "pods")},
		{"removes shared", names("cpu", "memory", "pods"), names("memory"), names("cpu", "pods")},
		{"long b uses a set", names("cpu", "zzz", "zzz", "a"), long, names("zzz")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, quota.Difference(tt.a, tt.b)); diff != "" {
				t.Errorf("Difference(%v, %v) (-want +got):\n%s", tt.a, tt.b, diff)
			}
		})
	}
}

func TestIsZero(t *testing.T) {
	tests := []struct {
		in   corev1.ResourceList
		want bool
	}{
		{nil, true},
		{rl(), true},
		{rl("cpu", "0", "memory", "0Gi"), true},
		{rl("cpu", "0", "memory", "1"), false},
		{rl("cpu", "-1m"), false},
	}
	for _, tt := range tests {
		if got := quota.IsZero(tt.in); got != tt.want {
			t.Errorf("IsZero(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestIsNegative(t *testing.T) {
	tests := []struct {
		in   corev1.ResourceList
		want []corev1.ResourceName
	}{
		{nil, nil},
		{rl("cpu", "0", "memory", "1"), nil},
		{rl("pods", "-1", "cpu", "-1m", "memory", "1"), names("cpu", "pods")},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, quota.IsNegative(tt.in)); diff != "" {
			t.Errorf("IsNegative(%v) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestRemoveZeros(t *testing.T) {
	tests := []struct {
		in   corev1.ResourceList
		want corev1.ResourceList
	}{
		{nil, rl()},
		{rl("cpu", "0", "memory", "1Gi", "pods", "-1"), rl("memory", "1Gi", "pods", "-1")},
		{rl("cpu", "0m"), rl()},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, quota.RemoveZeros(tt.in), qcmp.Quantities()); diff != "" {
			t.Errorf("RemoveZeros(%v) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestToSet(t *testing.T) {
	got := quota.ToSet(names("cpu", "pods", "cpu"))
	want := sets.New[corev1.ResourceName]("cpu", "pods")
	if !got.Equal(want) {
		t.Errorf("ToSet = %v, want %v", sets.List(got), sets.List(want))
	}
	if n := quota.ToSet(nil).Len(); n != 0 {
		t.Errorf("ToSet(nil).Len() = %d, want 0", n)
	}
}
