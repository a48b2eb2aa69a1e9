package clusterquota_test

import (
	"encoding/json"
	"fmt"
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

// fullApplied returns an AppliedClusterQuota in which every field is set.
func fullApplied(t *testing.T) *clusterquota.AppliedClusterQuota {
	t.Helper()
	cq := fullQuota()
	cq.UID = "u-1"
	a, err := clusterquota.Applied(cq, "a-prod")
	if err != nil {
		t.Fatal(err)
	}
	a.Status.NamespacesOmitted = 1 // as for a namespace the bound left out
	return a
}

func TestApplied(t *testing.T) {
	used := func(pods string) corev1.ResourceQuotaStatus {
		return corev1.ResourceQuotaStatus{Used: corev1.ResourceList{corev1.ResourcePods: resource.MustParse(pods)}}
	}
	entries := []clusterquota.ResourceQuotaStatusByNamespace{{Namespace: "a-1", Status: used("1")}, {Namespace: "a-3", Status: used("3")}}
	tests := []struct {
		name      string
		namespace string
		omitted   int32
		// wantEntry is the namespace whose entry the copy lists, if any.
		wantEntry   string
		wantOmitted int32
	}{
		{"listed", "a-3", 0, "a-3", 0},
		{"listed, others omitted", "a-1", 5, "a-1", 0},
		{"unlisted, none omitted: uses nothing", "a-2", 0, "", 0},
		{"unlisted before the last listed: uses nothing", "a-2", 5, "", 0},
		{"unlisted after the last listed, some omitted: unknown", "a-4", 5, "", 1},
		{"unlisted after the last listed, none omitted: uses nothing", "a-4", 0, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cq := fullQuota()
			cq.UID = "u-1"
			cq.Status.Namespaces = entries
			cq.Status.NamespacesOmitted = tt.omitted
			got, err := clusterquota.Applied(cq, tt.namespace)
			if err != nil {
				t.Fatal(err)
			}
			want := &clusterquota.AppliedClusterQuota{
				TypeMeta: metav1.TypeMeta{APIVersion: "quota.quotakit.io/v1alpha1", Kind: "AppliedClusterQuota"},
				ObjectMeta: metav1.ObjectMeta{
					Name: cq.Name, Namespace: tt.namespace,
					Labels: map[string]string{clusterquota.AppliedLabel: "true"},
					OwnerReferences: []metav1.OwnerReference{{
						APIVersion: "quota.quotakit.io/v1alpha1", Kind: "ClusterQuota", Name: cq.Name, UID: "u-1",
					}},
				},
				Spec: cq.Spec,
				Status: clusterquota.ClusterQuotaStatus{
					Total:              cq.Status.Total,
					NamespacesOmitted:  tt.wantOmitted,
					ObservedGeneration: cq.Status.ObservedGeneration,
					Conditions:         cq.Status.Conditions,
				},
			}
			for _, e := range entries {
				if e.Namespace == tt.wantEntry {
					want.Status.Namespaces = []clusterquota.ResourceQuotaStatusByNamespace{e}
				}
			}
			if diff := cmp.Diff(want, got, qcmp.Quantities()); diff != "" {
				t.Errorf("Applied(%s) (-want +got):\n%s", tt.namespace, diff)
			}
			checkNoSharing(t, reflect.ValueOf(&cq.Spec), reflect.ValueOf(&got.Spec), "Spec")
			checkNoSharing(t, reflect.ValueOf(&cq.Status.Total), reflect.ValueOf(&got.Status.Total), "Status.Total")
		})
	}
}

func TestAppliedErrors(t *testing.T) {
	ok := fullQuota()
	ok.UID = "u-1"
	noUID := fullQuota()
	for _, tt := range []struct {
		name      string
		cq        *clusterquota.ClusterQuota
		namespace string
	}{
		{"nil quota", nil, "a"},
		{"no uid", noUID, "a"},
		{"empty namespace", ok, ""},
		{"namespace not a DNS label", ok, "A_b"},
	} {
		if got, err := clusterquota.Applied(tt.cq, tt.namespace); err == nil {
			t.Errorf("Applied with %s = %v, want an error", tt.name, got)
		}
	}
}

func TestAppliedDeepCopy(t *testing.T) {
	checkAllSet(t, reflect.ValueOf(fullApplied(t)), "AppliedClusterQuota")
	for _, in := range []runtime.Object{
		fullApplied(t),
		&clusterquota.AppliedClusterQuota{},
		&clusterquota.AppliedClusterQuotaList{ListMeta: metav1.ListMeta{ResourceVersion: "7"}, Items: []clusterquota.AppliedClusterQuota{*fullApplied(t), {}}},
		&clusterquota.AppliedClusterQuotaList{Items: []clusterquota.AppliedClusterQuota{}},
	} {
		before, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		got := in.DeepCopyObject()
		if diff := cmp.Diff(in, got, qcmp.Quantities()); diff != "" {
			t.Errorf("%T.DeepCopyObject() differs from its original (-want +got):\n%s", in, diff)
		}
		checkNoSharing(t, reflect.ValueOf(in), reflect.ValueOf(got), "")
		scribble(reflect.ValueOf(got))
		if after, _ := json.Marshal(in); string(before) != string(after) {
			t.Errorf("changing the copy of a %T changed the original", in)
		}
	}
	if (*clusterquota.AppliedClusterQuota)(nil).DeepCopy() != nil || (*clusterquota.AppliedClusterQuota)(nil).DeepCopyObject() != nil ||
		(*clusterquota.AppliedClusterQuotaList)(nil).DeepCopy() != nil || (*clusterquota.AppliedClusterQuotaList)(nil).DeepCopyObject() != nil {
		t.Error("DeepCopy of a nil pointer is not nil")
	}
}

// TestAppliedSize measures the JSON of one copy, the figure behind the
// writer's cost in kube/README.md: a tenant quota of six resources over
// two namespaces, with its two conditions.
func TestAppliedSize(t *testing.T) {
	rl := corev1.ResourceList{}
	for _, r := range []corev1.ResourceName{"pods", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory", "count/secrets"} {
		rl[r] = resource.MustParse("1000")
	}
	cq := &clusterquota.ClusterQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "tenant-0001", UID: "6d8b2a3c-1c41-4f3e-9a53-2f0e3b1c7d10"},
		Spec: clusterquota.ClusterQuotaSpec{
			Selector: clusterquota.ClusterQuotaSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tenant": "tenant-0001"}}},
			Quota:    corev1.ResourceQuotaSpec{Hard: rl},
		},
		Status: clusterquota.ClusterQuotaStatus{
			Total:              corev1.ResourceQuotaStatus{Hard: rl, Used: rl},
			Namespaces:         []clusterquota.ResourceQuotaStatusByNamespace{{Namespace: "tenant-0001-a", Status: corev1.ResourceQuotaStatus{Used: rl}}},
			ObservedGeneration: 1,
			Conditions: []metav1.Condition{
				{Type: clusterquota.ConditionValid, Status: metav1.ConditionTrue, Reason: clusterquota.ReasonValid, Message: "the spec is valid", LastTransitionTime: metav1.Unix(1700000000, 0)},
				{Type: clusterquota.ConditionNamespacesEnforced, Status: metav1.ConditionTrue, Reason: clusterquota.ReasonAllEnforced, Message: "every selected namespace is enforced", LastTransitionTime: metav1.Unix(1700000000, 0)},
			},
		},
	}
	a, err := clusterquota.Applied(cq, "tenant-0001-a")
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > 2048 {
		t.Errorf("a copy takes %d bytes of JSON, want at most 2 KiB", len(data))
	}
	t.Logf("one copy: %d bytes of JSON; 10,000 copies: %.1f MB", len(data), float64(10000*len(data))/1e6)
}

func ExampleApplied() {
	cq := &clusterquota.ClusterQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "team-a", UID: "u-1"},
		Spec: clusterquota.ClusterQuotaSpec{
			Selector: clusterquota.ClusterQuotaSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}},
			Quota:    corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")}},
		},
		Status: clusterquota.ClusterQuotaStatus{
			Total: corev1.ResourceQuotaStatus{
				Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")},
				Used: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("7")},
			},
			Namespaces: []clusterquota.ResourceQuotaStatusByNamespace{
				{Namespace: "a-dev", Status: corev1.ResourceQuotaStatus{Used: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("3")}}},
				{Namespace: "a-prod", Status: corev1.ResourceQuotaStatus{Used: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("4")}}},
			},
		},
	}
	a, err := clusterquota.Applied(cq, "a-dev")
	if err != nil {
		panic(err)
	}
	total, here := a.Status.Total.Used[corev1.ResourcePods], a.Status.Namespaces[0].Status.Used[corev1.ResourcePods]
	fmt.Printf("%s/%s: %d namespace entry, pods used %s in total, %s here\n", a.Namespace, a.Name, len(a.Status.Namespaces), total.String(), here.String())
	// Output: a-dev/team-a: 1 namespace entry, pods used 7 in total, 3 here
}
