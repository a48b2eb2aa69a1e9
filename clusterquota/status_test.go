package clusterquota_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quotakit/quotakit/clusterquota"
	"github.com/quotakit/quotakit/internal/qcmp"
)

func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func TestSetNamespaceStatuses(t *testing.T) {
	tests := []struct {
		name         string
		used         map[string]corev1.ResourceList
		want         []clusterquota.ResourceQuotaStatusByNamespace
		wantOmitted  int32
		wantErr      bool
		startOmitted int32
	}{
		{name: "nil map", used: nil, want: nil},
		{name: "only zero usage", used: map[string]corev1.ResourceList{"a": rl("pods", "0"), "b": nil, "c": {}}, want: nil},
		{
			name: "sorted, zero namespaces and quantities dropped",
			used: map[string]corev1.ResourceList{
				"zeta":  rl("pods", "2", "requests.cpu", "0"),
				"alpha": rl("pods", "1", "requests.cpu", "250m"),
				"idle":  rl("pods", "0", "requests.cpu", "0"),
			},
			want: []clusterquota.ResourceQuotaStatusByNamespace{
				{Namespace: "alpha", Status: corev1.ResourceQuotaStatus{Used: rl("pods", "1", "requests.cpu", "250m")}},
				{Namespace: "zeta", Status: corev1.ResourceQuotaStatus{Used: rl("pods", "2")}},
			},
		},
		{
			name:         "omitted is recounted, not added to",
			used:         map[string]corev1.ResourceList{"a": rl("pods", "1")},
			startOmitted: 99,
			want:         []clusterquota.ResourceQuotaStatusByNamespace{{Namespace: "a", Status: corev1.ResourceQuotaStatus{Used: rl("pods", "1")}}},
		},
		{name: "empty namespace name", used: map[string]corev1.ResourceList{"": rl("pods", "1")}, wantErr: true, startOmitted: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &clusterquota.ClusterQuotaStatus{
				Total:             corev1.ResourceQuotaStatus{Used: rl("pods", "3")},
				Namespaces:        []clusterquota.ResourceQuotaStatusByNamespace{{Namespace: "old"}},
				NamespacesOmitted: tt.startOmitted,
			}
			before := s.DeepCopy()
			err := s.SetNamespaceStatuses(tt.used)
			if tt.wantErr {
				if err == nil {
					t.Fatal("SetNamespaceStatuses() = nil, want an error")
				}
				if diff := cmp.Diff(before, s, qcmp.Quantities()); diff != "" {
					t.Errorf("status changed on error (-before +after):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatalf("SetNamespaceStatuses() = %v", err)
			}
			if diff := cmp.Diff(tt.want, s.Namespaces, qcmp.Quantities()); diff != "" {
				t.Errorf("Namespaces (-want +got):\n%s", diff)
			}
			if s.NamespacesOmitted != tt.wantOmitted {
				t.Errorf("NamespacesOmitted = %d, want %d", s.NamespacesOmitted, tt.wantOmitted)
			}
			if diff := cmp.Diff(before.Total, s.Total, qcmp.Quantities()); diff != "" {
				t.Errorf("Total changed (-before +after):\n%s", diff)
			}
		})
	}
}

func TestSetNamespaceStatusesNil(t *testing.T) {
	var s *clusterquota.ClusterQuotaStatus
	if err := s.SetNamespaceStatuses(map[string]corev1.ResourceList{"a": rl("pods", "1")}); err == nil {
		t.Error("SetNamespaceStatuses on a nil status = nil, want an error")
	}
	if err := clusterquota.BoundStatus(nil); err == nil {
		t.Error("BoundStatus(nil) = nil, want an error")
	}
}

func TestSetNamespaceStatusesSharesNoMemory(t *testing.T) {
	used := map[string]corev1.ResourceList{"a": rl("pods", "1")}
	var s clusterquota.ClusterQuotaStatus
	if err := s.SetNamespaceStatuses(used); err != nil {
		t.Fatal(err)
	}
	used["a"][corev1.ResourcePods] = resource.MustParse("5")
	used["a"][corev1.ResourceServices] = resource.MustParse("1")
	if diff := cmp.Diff(rl("pods", "1"), s.Namespaces[0].Status.Used, qcmp.Quantities()); diff != "" {
		t.Errorf("changing the input changed the status (-want +got):\n%s", diff)
	}
}

// usageOf returns n namespaces named ns-00000, ns-00001, … with the
// usage that each of them gets from perNamespace.
func usageOf(n int, perNamespace func(i int) corev1.ResourceList) map[string]corev1.ResourceList {
	used := make(map[string]corev1.ResourceList, n)
	for i := 0; i < n; i++ {
		used[fmt.Sprintf("ns-%05d", i)] = perNamespace(i)
	}
	return used
}

func TestSetNamespaceStatusesCountBound(t *testing.T) {
	const n = clusterquota.MaxNamespaceStatuses + 500
	used := usageOf(n, func(int) corev1.ResourceList { return rl("pods", "1") })
	used["idle"] = rl("pods", "0") // not counted as omitted: it uses nothing
	var s clusterquota.ClusterQuotaStatus
	if err := s.SetNamespaceStatuses(used); err != nil {
		t.Fatal(err)
	}
	if len(s.Namespaces) != clusterquota.MaxNamespaceStatuses || s.NamespacesOmitted != 500 {
		t.Fatalf("listed %d, omitted %d; want %d and 500", len(s.Namespaces), s.NamespacesOmitted, clusterquota.MaxNamespaceStatuses)
	}
	for i, e := range s.Namespaces {
		if want := fmt.Sprintf("ns-%05d", i); e.Namespace != want {
			t.Fatalf("Namespaces[%d] = %q, want %q: the first names in order", i, e.Namespace, want)
		}
	}
}

func TestSetNamespaceStatusesByteBound(t *testing.T) {
	// A quota over 60 extended resources with long names, each used in
	// every namespace: entries of about 3 KiB, so the byte bound binds
	// long before the count bound.
	big := corev1.ResourceList{}
	for r := 0; r < 60; r++ {
		big[corev1.ResourceName(fmt.Sprintf("requests.example.com/accelerator-with-a-long-name-%02d", r))] = resource.MustParse("123456789")
	}
	used := usageOf(2000, func(int) corev1.ResourceList { return big })
	var s clusterquota.ClusterQuotaStatus
	if err := s.SetNamespaceStatuses(used); err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(s.Namespaces)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("60 resources a namespace: %d entries in %d bytes, %d omitted", len(s.Namespaces), len(data), s.NamespacesOmitted)
	if len(data) > clusterquota.MaxNamespaceStatusBytes {
		t.Errorf("status.namespaces takes %d bytes, more than MaxNamespaceStatusBytes (%d)", len(data), clusterquota.MaxNamespaceStatusBytes)
	}
	if len(s.Namespaces) == 0 || len(s.Namespaces) >= clusterquota.MaxNamespaceStatuses {
		t.Errorf("listed %d entries, want some but fewer than the count bound", len(s.Namespaces))
	}
	// One more entry would not have fit.
	entry, _ := json.Marshal(s.Namespaces[0])
	if len(data)+1+len(entry) <= clusterquota.MaxNamespaceStatusBytes {
		t.Errorf("stopped at %d bytes, but another entry of %d bytes fits", len(data), len(entry))
	}
	if got, want := int(s.NamespacesOmitted), 2000-len(s.Namespaces); got != want {
		t.Errorf("NamespacesOmitted = %d, want %d", got, want)
	}
}

// TestStatusSizeAt10000Namespaces is the bounded-status rule's reason to
// be: a quota over 10,000 namespaces, all of which use six resources,
// still encodes to well under etcd's request limit (1.5 MiB by default).
func TestStatusSizeAt10000Namespaces(t *testing.T) {
	const n = 10000
	hard := rl("pods", "100000", "requests.cpu", "5000", "requests.memory", "20Ti", "limits.cpu", "10000", "limits.memory", "40Ti", "count/configmaps", "100000")
	used := usageOf(n, func(i int) corev1.ResourceList {
		return rl("pods", fmt.Sprint(1+i%37), "requests.cpu", fmt.Sprintf("%dm", 250+i%1000), "requests.memory", fmt.Sprintf("%dMi", 512+i%2048),
			"limits.cpu", fmt.Sprintf("%dm", 500+i%1000), "limits.memory", fmt.Sprintf("%dMi", 1024+i%2048), "count/configmaps", fmt.Sprint(1+i%9))
	})
	total := corev1.ResourceList{}
	for _, u := range used {
		for name, q := range u {
			sum := total[name]
			sum.Add(q)
			total[name] = sum
		}
	}
	cq := &clusterquota.ClusterQuota{
		TypeMeta:   metav1.TypeMeta{APIVersion: clusterquota.SchemeGroupVersion.String(), Kind: "ClusterQuota"},
		ObjectMeta: metav1.ObjectMeta{Name: "tenant-with-ten-thousand-namespaces", Labels: map[string]string{"tenant": "big"}},
		Spec: clusterquota.ClusterQuotaSpec{
			Selector: clusterquota.ClusterQuotaSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tenant": "big"}}},
			Quota:    corev1.ResourceQuotaSpec{Hard: hard},
		},
		Status: clusterquota.ClusterQuotaStatus{Total: corev1.ResourceQuotaStatus{Hard: hard, Used: total}},
	}

	// What OpenShift's rule, every selected namespace, would write.
	unbounded := cq.DeepCopy()
	for ns, u := range used {
		unbounded.Status.Namespaces = append(unbounded.Status.Namespaces, clusterquota.ResourceQuotaStatusByNamespace{Namespace: ns, Status: corev1.ResourceQuotaStatus{Used: u}})
	}
	unboundedJSON, err := json.Marshal(unbounded)
	if err != nil {
		t.Fatal(err)
	}

	if err := cq.Status.SetNamespaceStatuses(used); err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(cq)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d namespaces: %d bytes of JSON (%d listed, %d omitted); listing every namespace: %d bytes",
		n, len(data), len(cq.Status.Namespaces), cq.Status.NamespacesOmitted, len(unboundedJSON))
	if len(data) >= 1<<20 {
		t.Errorf("the quota takes %d bytes of JSON, want under 1 MiB", len(data))
	}
	if len(cq.Status.Namespaces) != clusterquota.MaxNamespaceStatuses || cq.Status.NamespacesOmitted != n-clusterquota.MaxNamespaceStatuses {
		t.Errorf("listed %d, omitted %d; want %d and %d", len(cq.Status.Namespaces), cq.Status.NamespacesOmitted, clusterquota.MaxNamespaceStatuses, n-clusterquota.MaxNamespaceStatuses)
	}
	if err := clusterquota.Validate(cq); err != nil {
		t.Errorf("Validate() = %v", err)
	}
}

func TestBoundStatus(t *testing.T) {
	entry := func(ns string, used corev1.ResourceList) clusterquota.ResourceQuotaStatusByNamespace {
		return clusterquota.ResourceQuotaStatusByNamespace{Namespace: ns, Status: corev1.ResourceQuotaStatus{Used: used}}
	}
	tests := []struct {
		name        string
		in          clusterquota.ClusterQuotaStatus
		want        []clusterquota.ResourceQuotaStatusByNamespace
		wantOmitted int32
		wantErr     bool
	}{
		{name: "empty", in: clusterquota.ClusterQuotaStatus{}, want: nil},
		{
			name: "sorted, zeros dropped, hard kept",
			in: clusterquota.ClusterQuotaStatus{Namespaces: []clusterquota.ResourceQuotaStatusByNamespace{
				entry("b", rl("pods", "2", "services", "0")),
				entry("idle", rl("pods", "0")),
				{Namespace: "a", Status: corev1.ResourceQuotaStatus{Hard: rl("pods", "9"), Used: rl("pods", "1")}},
			}},
			want: []clusterquota.ResourceQuotaStatusByNamespace{
				{Namespace: "a", Status: corev1.ResourceQuotaStatus{Hard: rl("pods", "9"), Used: rl("pods", "1")}},
				entry("b", rl("pods", "2")),
			},
		},
		{
			name:        "cut entries are added to those already omitted",
			in:          clusterquota.ClusterQuotaStatus{Namespaces: manyEntries(clusterquota.MaxNamespaceStatuses + 3), NamespacesOmitted: 10},
			want:        manyEntries(clusterquota.MaxNamespaceStatuses),
			wantOmitted: 13,
		},
		{name: "duplicate namespace", in: clusterquota.ClusterQuotaStatus{Namespaces: []clusterquota.ResourceQuotaStatusByNamespace{entry("a", rl("pods", "1")), entry("a", rl("pods", "2"))}}, wantErr: true},
		{name: "empty namespace name", in: clusterquota.ClusterQuotaStatus{Namespaces: []clusterquota.ResourceQuotaStatusByNamespace{entry("", rl("pods", "1"))}}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.in.DeepCopy()
			err := clusterquota.BoundStatus(s)
			if tt.wantErr {
				if err == nil {
					t.Fatal("BoundStatus() = nil, want an error")
				}
				if diff := cmp.Diff(&tt.in, s, qcmp.Quantities()); diff != "" {
					t.Errorf("status changed on error (-before +after):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatalf("BoundStatus() = %v", err)
			}
			if diff := cmp.Diff(tt.want, s.Namespaces, qcmp.Quantities()); diff != "" {
				t.Errorf("Namespaces (-want +got):\n%s", diff)
			}
			if s.NamespacesOmitted != tt.wantOmitted {
				t.Errorf("NamespacesOmitted = %d, want %d", s.NamespacesOmitted, tt.wantOmitted)
			}
			// Idempotent.
			again := s.DeepCopy()
			if err := clusterquota.BoundStatus(again); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(s, again, qcmp.Quantities()); diff != "" {
				t.Errorf("BoundStatus is not idempotent (-once +twice):\n%s", diff)
			}
		})
	}
}

// manyEntries returns n entries in name order, each using one pod.
func manyEntries(n int) []clusterquota.ResourceQuotaStatusByNamespace {
	out := make([]clusterquota.ResourceQuotaStatusByNamespace, n)
	for i := range out {
		out[i] = clusterquota.ResourceQuotaStatusByNamespace{Namespace: fmt.Sprintf("ns-%05d", i), Status: corev1.ResourceQuotaStatus{Used: rl("pods", "1")}}
	}
	return out
}

// TestSetNamespaceStatusesAgreesWithBoundStatus: the two entry points
// apply one rule.
func TestSetNamespaceStatusesAgreesWithBoundStatus(t *testing.T) {
	used := usageOf(1200, func(i int) corev1.ResourceList {
		return rl("pods", fmt.Sprint(i%3), "requests.cpu", strings.Repeat("1", 1+i%4))
	})
	var a clusterquota.ClusterQuotaStatus
	if err := a.SetNamespaceStatuses(used); err != nil {
		t.Fatal(err)
	}
	var b clusterquota.ClusterQuotaStatus
	for ns, u := range used {
		b.Namespaces = append(b.Namespaces, clusterquota.ResourceQuotaStatusByNamespace{Namespace: ns, Status: corev1.ResourceQuotaStatus{Used: u}})
	}
	if err := clusterquota.BoundStatus(&b); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&a, &b, qcmp.Quantities()); diff != "" {
		t.Errorf("SetNamespaceStatuses and BoundStatus differ (-set +bound):\n%s", diff)
	}
}

func BenchmarkSetNamespaceStatuses10000(b *testing.B) {
	used := usageOf(10000, func(i int) corev1.ResourceList {
		return rl("pods", fmt.Sprint(1+i%37), "requests.cpu", fmt.Sprintf("%dm", 250+i%1000), "requests.memory", fmt.Sprintf("%dMi", 512+i%2048))
	})
	b.ReportAllocs()
	var s clusterquota.ClusterQuotaStatus
	for b.Loop() {
		if err := s.SetNamespaceStatuses(used); err != nil {
			b.Fatal(err)
		}
	}
}
