package evaluator

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

func class(name, ext string, created time.Time) *resourcev1.DeviceClass {
	c := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created)}}
	if ext != "" {
		c.Spec.ExtendedResourceName = ptr.To(ext)
	}
	return c
}

// TestDeviceClassMapClash checks the clash rule for two classes declaring
// one extended resource name, in every order the classes can be listed:
// the newer class wins, then the smaller name.
func TestDeviceClassMapClash(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		classes []*resourcev1.DeviceClass
		winner  string
	}{
		{"newer wins", []*resourcev1.DeviceClass{class("a", "example.com/gpu", t0), class("b", "example.com/gpu", t0.Add(time.Second))}, "b"},
		{"newer wins over a smaller name", []*resourcev1.DeviceClass{class("z", "example.com/gpu", t0.Add(time.Hour)), class("a", "example.com/gpu", t0)}, "z"},
		{"same age: smaller name wins", []*resourcev1.DeviceClass{class("b", "example.com/gpu", t0), class("a", "example.com/gpu", t0), class("c", "example.com/gpu", t0)}, "a"},
		{"three ages", []*resourcev1.DeviceClass{class("a", "example.com/gpu", t0), class("b", "example.com/gpu", t0.Add(2*time.Second)), class("c", "example.com/gpu", t0.Add(time.Second))}, "b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, order := range permutations(len(tt.classes)) {
				objs := make([]runtime.Object, len(order))
				for i, j := range order {
					objs[i] = tt.classes[j]
				}
				m, err := newDeviceClassMap(objs)
				if err != nil {
					t.Fatal(err)
				}
				if got := m.classFor("example.com/gpu"); got == nil || got.Name != tt.winner {
					t.Errorf("order %v: classFor(example.com/gpu) = %v, want %s", order, got, tt.winner)
				}
				// Every class keeps its implicit name and declares its
				// explicit one, winner or not.
				for _, c := range tt.classes {
					if got := m.classFor(corev1.ResourceName("deviceclass.resource.kubernetes.io/" + c.Name)); got != c {
						t.Errorf("order %v: implicit name of %s maps to %v", order, c.Name, got)
					}
					if got := m.extendedName(c.Name); got != "example.com/gpu" {
						t.Errorf("order %v: extendedName(%s) = %q", order, c.Name, got)
					}
				}
			}
		})
	}
}

// permutations returns every order of 0..n-1.
func permutations(n int) [][]int {
	if n == 0 {
		return [][]int{{}}
	}
	var out [][]int
	for _, p := range permutations(n - 1) {
		for i := 0; i <= len(p); i++ {
			q := append(append(append([]int{}, p[:i]...), n-1), p[i:]...)
			out = append(out, q)
		}
	}
	return out
}

func TestDeviceClassMapInput(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	empty := class("empty", "", t0)
	empty.Spec.ExtendedResourceName = ptr.To("")
	m, err := newDeviceClassMap([]runtime.Object{empty, class("plain", "", t0)})
	if err != nil {
		t.Fatal(err)
	}
	if m.extendedName("empty") != "" || m.classFor("") != nil {
		t.Error("an empty extendedResourceName is recorded")
	}
	if m.classFor("deviceclass.resource.kubernetes.io/plain") == nil {
		t.Error("the implicit name of a class without an explicit one is missing")
	}
	for _, objs := range [][]runtime.Object{{&corev1.Pod{}}, {(*resourcev1.DeviceClass)(nil)}, {nil}} {
		if _, err := newDeviceClassMap(objs); err == nil {
			t.Errorf("newDeviceClassMap(%T) error = nil", objs[0])
		}
	}
	var none *deviceClassMap
	if none.classFor("deviceclass.resource.kubernetes.io/plain") != nil || none.extendedName("gpu") != "" {
		t.Error("a nil map knows a class")
	}
}
