package clusterquota_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/quotakit/quotakit/clusterquota"
	"github.com/quotakit/quotakit/internal/qcmp"
)

// fullQuota returns a ClusterQuota in which every field that this package
// declares is set, so that a deep copy that forgets one is caught.
func fullQuota() *clusterquota.ClusterQuota {
	return &clusterquota.ClusterQuota{
		TypeMeta: metav1.TypeMeta{APIVersion: "quota.quotakit.io/v1alpha1", Kind: "ClusterQuota"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        "team-a",
			Labels:      map[string]string{"owner": "platform"},
			Annotations: map[string]string{"note": "x"},
			Finalizers:  []string{"example.com/keep"},
		},
		Spec: clusterquota.ClusterQuotaSpec{
			Selector: clusterquota.ClusterQuotaSelector{
				LabelSelector: &metav1.LabelSelector{
					MatchLabels: map[string]string{"team": "a"},
					MatchExpressions: []metav1.LabelSelectorRequirement{
						{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"dev", "prod"}},
					},
				},
				AnnotationSelector: map[string]string{"openshift.io/requester": "alice"},
			},
			Quota: corev1.ResourceQuotaSpec{
				Hard:   corev1.ResourceList{corev1.ResourcePods: resource.MustParse("50"), corev1.ResourceRequestsCPU: resource.MustParse("10")},
				Scopes: []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeNotTerminating},
				ScopeSelector: &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
					{ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpIn, Values: []string{"high"}},
				}},
			},
		},
		Status: clusterquota.ClusterQuotaStatus{
			Total: corev1.ResourceQuotaStatus{
				Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("50"), corev1.ResourceRequestsCPU: resource.MustParse("10")},
				Used: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("7"), corev1.ResourceRequestsCPU: resource.MustParse("2500m")},
			},
			Namespaces: []clusterquota.ResourceQuotaStatusByNamespace{
				{Namespace: "a-dev", Status: corev1.ResourceQuotaStatus{
					Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("50")},
					Used: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("3")},
				}},
				{Namespace: "a-prod", Status: corev1.ResourceQuotaStatus{
					Used: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("4"), corev1.ResourceRequestsCPU: resource.MustParse("2500m")},
				}},
			},
			NamespacesOmitted:  2,
			ObservedGeneration: 3,
			Conditions: []metav1.Condition{{
				Type: clusterquota.ConditionValid, Status: metav1.ConditionTrue, ObservedGeneration: 3,
				LastTransitionTime: metav1.Unix(1700000000, 0), Reason: clusterquota.ReasonValid, Message: "the spec is valid",
			}},
		},
	}
}

// ownPackage is the import path of the types whose fields must all be
// set in the fixtures.
var ownPackage = reflect.TypeFor[clusterquota.ClusterQuota]().PkgPath()

// checkAllSet fails for every exported field, reachable from v through
// this package's types, that holds its zero value. Types of other
// packages (ObjectMeta, ResourceQuotaSpec) are checked to be set but not
// walked: their own generated deep copies are trusted.
func checkAllSet(t *testing.T, v reflect.Value, path string) {
	t.Helper()
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			checkAllSet(t, v.Elem(), path)
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			checkAllSet(t, v.Index(i), path+"[]")
		}
	case reflect.Struct:
		if v.Type().PkgPath() != ownPackage {
			return
		}
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			if v.Field(i).IsZero() {
				t.Errorf("fixture leaves %s.%s unset: set it, so that the deep-copy tests cover it", path, f.Name)
				continue
			}
			checkAllSet(t, v.Field(i), path+"."+f.Name)
		}
	}
}

// checkNoSharing fails for every map, slice or pointer of b that points
// to the same memory as the corresponding one of a. Strings are immutable
// and may be shared.
func checkNoSharing(t *testing.T, a, b reflect.Value, path string) {
	t.Helper()
	if a.Type() == reflect.TypeFor[metav1.Time]() {
		return // immutable: a copy shares its *time.Location by design
	}
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			return
		}
		if a.Pointer() == b.Pointer() {
			t.Errorf("%s: the copy shares a pointer with the original", path)
			return
		}
		checkNoSharing(t, a.Elem(), b.Elem(), path)
	case reflect.Map:
		if a.IsNil() || b.IsNil() {
			return
		}
		if a.Pointer() == b.Pointer() {
			t.Errorf("%s: the copy shares a map with the original", path)
			return
		}
		for _, k := range a.MapKeys() {
			if bv := b.MapIndex(k); bv.IsValid() {
				checkNoSharing(t, a.MapIndex(k), bv, path+"["+k.String()+"]")
			}
		}
	case reflect.Slice:
		if a.Len() == 0 || b.Len() == 0 {
			return
		}
		if a.Pointer() == b.Pointer() {
			t.Errorf("%s: the copy shares a slice with the original", path)
			return
		}
		for i := 0; i < min(a.Len(), b.Len()); i++ {
			checkNoSharing(t, a.Index(i), b.Index(i), path+"[]")
		}
	case reflect.Struct:
		for i := 0; i < a.NumField(); i++ {
			checkNoSharing(t, a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name)
		}
	}
}

func TestFixturesSetEveryField(t *testing.T) {
	checkAllSet(t, reflect.ValueOf(fullQuota()), "ClusterQuota")
	list := &clusterquota.ClusterQuotaList{
		TypeMeta: metav1.TypeMeta{Kind: "ClusterQuotaList"},
		ListMeta: metav1.ListMeta{ResourceVersion: "7"},
		Items:    []clusterquota.ClusterQuota{*fullQuota()},
	}
	checkAllSet(t, reflect.ValueOf(list), "ClusterQuotaList")
}

func TestDeepCopy(t *testing.T) {
	emptyNotNil := fullQuota()
	emptyNotNil.Spec.Selector.AnnotationSelector = map[string]string{}
	emptyNotNil.Status.Namespaces = []clusterquota.ResourceQuotaStatusByNamespace{}
	zero := &clusterquota.ClusterQuota{}

	tests := []struct {
		name string
		in   runtime.Object
	}{
		{"full", fullQuota()},
		{"empty maps and slices stay empty, not nil", emptyNotNil},
		{"zero", zero},
		{"list", &clusterquota.ClusterQuotaList{ListMeta: metav1.ListMeta{ResourceVersion: "7"}, Items: []clusterquota.ClusterQuota{*fullQuota(), *zero}}},
		{"empty list", &clusterquota.ClusterQuotaList{Items: []clusterquota.ClusterQuota{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, err := json.Marshal(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			got := tt.in.DeepCopyObject()
			if diff := cmp.Diff(tt.in, got, qcmp.Quantities()); diff != "" {
				t.Errorf("DeepCopyObject() differs from its original (-want +got):\n%s", diff)
			}
			checkNoSharing(t, reflect.ValueOf(tt.in), reflect.ValueOf(got), "")

			// Writing through every map of the copy leaves the original
			// as it was.
			scribble(reflect.ValueOf(got))
			after, err := json.Marshal(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if string(before) != string(after) {
				t.Errorf("changing the copy changed the original:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// scribble writes a new entry into every non-nil map reachable from v.
func scribble(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			scribble(v.Elem())
		}
	case reflect.Map:
		if v.IsNil() || v.Type().Key().Kind() != reflect.String {
			return
		}
		for _, k := range v.MapKeys() {
			scribble(v.MapIndex(k))
		}
		v.SetMapIndex(reflect.ValueOf("scribbled").Convert(v.Type().Key()), reflect.Zero(v.Type().Elem()))
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			scribble(v.Index(i))
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				scribble(v.Field(i))
			}
		}
	}
}

func TestDeepCopyNil(t *testing.T) {
	if got := (*clusterquota.ClusterQuota)(nil).DeepCopy(); got != nil {
		t.Errorf("(*ClusterQuota)(nil).DeepCopy() = %v, want nil", got)
	}
	if got := (*clusterquota.ClusterQuota)(nil).DeepCopyObject(); got != nil {
		t.Errorf("(*ClusterQuota)(nil).DeepCopyObject() = %#v, want a nil interface", got)
	}
	if got := (*clusterquota.ClusterQuotaList)(nil).DeepCopyObject(); got != nil {
		t.Errorf("(*ClusterQuotaList)(nil).DeepCopyObject() = %#v, want a nil interface", got)
	}
	if (*clusterquota.ClusterQuotaSpec)(nil).DeepCopy() != nil ||
		(*clusterquota.ClusterQuotaSelector)(nil).DeepCopy() != nil ||
		(*clusterquota.ClusterQuotaStatus)(nil).DeepCopy() != nil ||
		(*clusterquota.ResourceQuotaStatusByNamespace)(nil).DeepCopy() != nil ||
		(*clusterquota.ClusterQuotaList)(nil).DeepCopy() != nil {
		t.Error("DeepCopy of a nil pointer is not nil")
	}
}

func TestDeepCopyParts(t *testing.T) {
	q := fullQuota()
	if diff := cmp.Diff(&q.Spec, q.Spec.DeepCopy(), qcmp.Quantities()); diff != "" {
		t.Errorf("ClusterQuotaSpec.DeepCopy() (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&q.Spec.Selector, q.Spec.Selector.DeepCopy()); diff != "" {
		t.Errorf("ClusterQuotaSelector.DeepCopy() (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&q.Status, q.Status.DeepCopy(), qcmp.Quantities()); diff != "" {
		t.Errorf("ClusterQuotaStatus.DeepCopy() (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&q.Status.Namespaces[0], q.Status.Namespaces[0].DeepCopy(), qcmp.Quantities()); diff != "" {
		t.Errorf("ResourceQuotaStatusByNamespace.DeepCopy() (-want +got):\n%s", diff)
	}
}
