package clusterquota_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quotakit/quotakit/clusterquota"
)

func TestSelects(t *testing.T) {
	ns := func(labels, annotations map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Labels: labels, Annotations: annotations}}
	}
	teamA := &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
	tests := []struct {
		name    string
		sel     clusterquota.ClusterQuotaSelector
		ns      *corev1.Namespace
		want    bool
		wantErr bool
	}{
		{name: "nothing set selects nothing", ns: ns(map[string]string{"team": "a"}, nil)},
		{name: "empty label selector selects nothing", sel: clusterquota.ClusterQuotaSelector{LabelSelector: &metav1.LabelSelector{}}, ns: ns(map[string]string{"team": "a"}, nil)},
		{name: "empty annotation map selects nothing", sel: clusterquota.ClusterQuotaSelector{AnnotationSelector: map[string]string{}}, ns: ns(nil, nil)},
		{name: "empty parts together select nothing", sel: clusterquota.ClusterQuotaSelector{LabelSelector: &metav1.LabelSelector{}, AnnotationSelector: map[string]string{}}, ns: ns(nil, nil)},
		{name: "labels match", sel: clusterquota.ClusterQuotaSelector{LabelSelector: teamA}, ns: ns(map[string]string{"team": "a", "x": "y"}, nil), want: true},
		{name: "labels differ", sel: clusterquota.ClusterQuotaSelector{LabelSelector: teamA}, ns: ns(map[string]string{"team": "b"}, nil)},
		{name: "namespace without labels", sel: clusterquota.ClusterQuotaSelector{LabelSelector: teamA}, ns: ns(nil, nil)},
		{
			name: "match expressions",
			sel: clusterquota.ClusterQuotaSelector{LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"prod"}},
			}}},
			ns:   ns(nil, nil),
			want: true,
		},
		{name: "annotations match exactly", sel: clusterquota.ClusterQuotaSelector{AnnotationSelector: map[string]string{"owner": "alice"}}, ns: ns(nil, map[string]string{"owner": "alice", "other": "x"}), want: true},
		{name: "annotation value differs", sel: clusterquota.ClusterQuotaSelector{AnnotationSelector: map[string]string{"owner": "alice"}}, ns: ns(nil, map[string]string{"owner": "alice2"})},
		{name: "annotation missing", sel: clusterquota.ClusterQuotaSelector{AnnotationSelector: map[string]string{"owner": "alice"}}, ns: ns(nil, nil)},
		{name: "empty annotation value must be present", sel: clusterquota.ClusterQuotaSelector{AnnotationSelector: map[string]string{"flag": ""}}, ns: ns(nil, nil)},
		{name: "empty annotation value present", sel: clusterquota.ClusterQuotaSelector{AnnotationSelector: map[string]string{"flag": ""}}, ns: ns(nil, map[string]string{"flag": ""}), want: true},
		{
			name: "both parts must match: both do",
			sel:  clusterquota.ClusterQuotaSelector{LabelSelector: teamA, AnnotationSelector: map[string]string{"owner": "alice"}},
			ns:   ns(map[string]string{"team": "a"}, map[string]string{"owner": "alice"}),
			want: true,
		},
		{
			name: "both parts must match: annotations do not",
			sel:  clusterquota.ClusterQuotaSelector{LabelSelector: teamA, AnnotationSelector: map[string]string{"owner": "alice"}},
			ns:   ns(map[string]string{"team": "a"}, nil),
		},
		{
			name: "both parts must match: labels do not",
			sel:  clusterquota.ClusterQuotaSelector{LabelSelector: teamA, AnnotationSelector: map[string]string{"owner": "alice"}},
			ns:   ns(nil, map[string]string{"owner": "alice"}),
		},
		{
			name: "empty label part beside annotations adds no restriction",
			sel:  clusterquota.ClusterQuotaSelector{LabelSelector: &metav1.LabelSelector{}, AnnotationSelector: map[string]string{"owner": "alice"}},
			ns:   ns(nil, map[string]string{"owner": "alice"}),
			want: true,
		},
		{
			name: "unknown operator is an error",
			sel: clusterquota.ClusterQuotaSelector{LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "tier", Operator: "Near", Values: []string{"x"}},
			}}},
			ns:      ns(nil, nil),
			wantErr: true,
		},
		{
			name:    "invalid label value is an error",
			sel:     clusterquota.ClusterQuotaSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "not a value!"}}},
			ns:      ns(map[string]string{"team": "a"}, nil),
			wantErr: true,
		},
		{
			name: "In without values is an error",
			sel: clusterquota.ClusterQuotaSelector{LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "tier", Operator: metav1.LabelSelectorOpIn},
			}}},
			ns:      ns(nil, nil),
			wantErr: true,
		},
		{name: "nil namespace is an error", sel: clusterquota.ClusterQuotaSelector{LabelSelector: teamA}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cq := &clusterquota.ClusterQuota{ObjectMeta: metav1.ObjectMeta{Name: "q"}, Spec: clusterquota.ClusterQuotaSpec{Selector: tt.sel}}
			got, err := cq.Selects(tt.ns)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Selects() error = %v, want error %t", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("Selects() = %t, want %t", got, tt.want)
			}
		})
	}
}

func TestSelectsNilQuota(t *testing.T) {
	var cq *clusterquota.ClusterQuota
	if ok, err := cq.Selects(&corev1.Namespace{}); ok || err == nil {
		t.Errorf("(*ClusterQuota)(nil).Selects() = %t, %v; want false and an error", ok, err)
	}
}
