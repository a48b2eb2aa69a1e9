package generic_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit/generic"
	"github.com/quotakit/quotakit/internal/qcmp"
	"github.com/quotakit/quotakit/quota"
)

func TestObjectCountQuotaResourceNameFor(t *testing.T) {
	tests := []struct {
		gr   schema.GroupResource
		want corev1.ResourceName
	}{
		{schema.GroupResource{Resource: "pods"}, "count/pods"},
		{schema.GroupResource{Resource: "configmaps"}, "count/configmaps"},
		{schema.GroupResource{Group: "apps", Resource: "deployments"}, "count/deployments.apps"},
		{schema.GroupResource{Group: "example.com", Resource: "widgets"}, "count/widgets.example.com"},
	}
	for _, tt := range tests {
		if got := generic.ObjectCountQuotaResourceNameFor(tt.gr); got != tt.want {
			t.Errorf("ObjectCountQuotaResourceNameFor(%v) = %q, want %q", tt.gr, got, tt.want)
		}
	}
}

var configMapsGR = schema.GroupResource{Resource: "configmaps"}

func TestObjectCountEvaluatorHandles(t *testing.T) {
	e := generic.NewObjectCountEvaluator(configMapsGR, nil, "configmaps")
	tests := []struct {
		op          admissionv1.Operation
		subresource string
		want        bool
	}{
		{admissionv1.Create, "", true},
		{admissionv1.Update, "", false},
		{admissionv1.Delete, "", false},
		{admissionv1.Connect, "", false},
		{admissionv1.Create, "status", false},
		{admissionv1.Update, "status", false},
		{admissionv1.Create, "scale", false},
	}
	for _, tt := range tests {
		a := &quota.AttributesRecord{Operation: tt.op, Subresource: tt.subresource, Object: configMap("a", "")}
		if got := e.Handles(a); got != tt.want {
			t.Errorf("Handles(%s %q) = %v, want %v", tt.op, tt.subresource, got, tt.want)
		}
	}
	if e.Handles(nil) {
		t.Error("Handles(nil) = true, want false")
	}
}

func TestObjectCountEvaluatorUsage(t *testing.T) {
	tests := []struct {
		name  string
		gr    schema.GroupResource
		alias corev1.ResourceName
		item  runtime.Object
		want  corev1.ResourceList
	}{
		{
			name:  "with alias",
			gr:    configMapsGR,
			alias: "configmaps",
			item:  configMap("a", ""),
			want:  corev1.ResourceList{"count/configmaps": resource.MustParse("1"), "configmaps": resource.MustParse("1")},
		},
		{
			name: "without alias, any object type",
			gr:   schema.GroupResource{Group: "apps", Resource: "deployments"},
			item: &corev1.Secret{},
			want: corev1.ResourceList{"count/deployments.apps": resource.MustParse("1")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := generic.NewObjectCountEvaluator(tt.gr, nil, tt.alias)
			if e.GroupResource() != tt.gr {
				t.Errorf("GroupResource() = %v, want %v", e.GroupResource(), tt.gr)
			}
			got, err := e.Usage(tt.item)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, qcmp.Quantities()); diff != "" {
				t.Errorf("Usage() mismatch (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := generic.NewObjectCountEvaluator(configMapsGR, nil, "").Usage(nil); err == nil {
		t.Error("Usage(nil) error = nil, want an error")
	}
}

func TestObjectCountEvaluatorMatching(t *testing.T) {
	e := generic.NewObjectCountEvaluator(configMapsGR, nil, "configmaps")
	gotNames := e.MatchingResources([]corev1.ResourceName{"pods", "configmaps", "count/configmaps", "count/secrets", "configmaps"})
	if diff := cmp.Diff([]corev1.ResourceName{"configmaps", "count/configmaps"}, gotNames); diff != "" {
		t.Errorf("MatchingResources() mismatch (-want +got):\n%s", diff)
	}

	tests := []struct {
		name  string
		quota *corev1.ResourceQuota
		want  bool
	}{
		{"count name", &corev1.ResourceQuota{Status: corev1.ResourceQuotaStatus{Hard: hard("count/configmaps")}}, true},
		{"alias", &corev1.ResourceQuota{Status: corev1.ResourceQuotaStatus{Hard: hard("configmaps")}}, true},
		{"other resource", &corev1.ResourceQuota{Status: corev1.ResourceQuotaStatus{Hard: hard("count/secrets")}}, false},
		{"scoped quota never matches", &corev1.ResourceQuota{
			Spec:   corev1.ResourceQuotaSpec{Scopes: []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeNotTerminating}},
			Status: corev1.ResourceQuotaStatus{Hard: hard("count/configmaps")},
		}, false},
		{"scope selector never matches", &corev1.ResourceQuota{
			Spec: corev1.ResourceQuotaSpec{ScopeSelector: &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
				req(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpNotIn, "high"),
			}}},
			Status: corev1.ResourceQuotaStatus{Hard: hard("configmaps")},
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := e.Matches(tt.quota, configMap("a", ""))
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("Matches() = %v, want %v", got, tt.want)
			}
		})
	}

	scopes := []corev1.ScopedResourceSelectorRequirement{req(corev1.ResourceQuotaScopeBestEffort, corev1.ScopeSelectorOpExists)}
	if got, err := e.MatchingScopes(configMap("a", ""), scopes); len(got) != 0 || err != nil {
		t.Errorf("MatchingScopes() = %v, %v, want empty, nil", got, err)
	}
	if got, err := e.UncoveredQuotaScopes(scopes, nil); len(got) != 0 || err != nil {
		t.Errorf("UncoveredQuotaScopes() = %v, %v, want empty, nil", got, err)
	}
	if err := e.Constraints([]corev1.ResourceName{"count/configmaps", "cpu"}, configMap("a", "")); err != nil {
		t.Errorf("Constraints() = %v, want nil", err)
	}
}

func TestObjectCountEvaluatorUsageStats(t *testing.T) {
	objs := listOf(configMap("a", ""), configMap("b", "gold"), configMap("c", ""))
	tests := []struct {
		name    string
		options quota.UsageStatsOptions
		want    corev1.ResourceList
	}{
		{
			name:    "counts every object under both names",
			options: quota.UsageStatsOptions{Namespace: "ns", Resources: []corev1.ResourceName{"configmaps"}},
			want:    corev1.ResourceList{"configmaps": resource.MustParse("3"), "count/configmaps": resource.MustParse("3")},
		},
		{
			name:    "empty namespace: zero for requested names only",
			options: quota.UsageStatsOptions{Namespace: "empty", Resources: []corev1.ResourceName{"count/configmaps"}},
			want:    corev1.ResourceList{"count/configmaps": resource.MustParse("0")},
		},
		{
			name:    "scoped quota counts nothing",
			options: quota.UsageStatsOptions{Namespace: "ns", Scopes: []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeTerminating}, Resources: []corev1.ResourceName{"count/configmaps"}},
			want:    corev1.ResourceList{"count/configmaps": resource.MustParse("0")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := generic.NewObjectCountEvaluator(configMapsGR, objs, "configmaps")
			got, err := e.UsageStats(tt.options)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got.Used, qcmp.Quantities()); diff != "" {
				t.Errorf("UsageStats() mismatch (-want +got):\n%s", diff)
			}
			// The shortcut must agree with the general sum.
			general, err := generic.CalculateUsageStats(tt.options, objs, generic.MatchesNoScopeFunc, e.Usage)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(general.Used, got.Used, qcmp.Quantities()); diff != "" {
				t.Errorf("UsageStats() differs from CalculateUsageStats (-general +got):\n%s", diff)
			}
		})
	}
}

func TestObjectCountEvaluatorUsageStatsErrors(t *testing.T) {
	errList := errors.New("not synced")
	tests := []struct {
		name     string
		list     generic.ListFuncByNamespace
		wantErr  string
		wantWrap error
	}{
		{name: "admission only: nil list func", wantErr: "generic: usage stats of configmaps", wantWrap: generic.ErrNoListFunc},
		{name: "list error", list: func(string) ([]runtime.Object, error) { return nil, errList }, wantErr: `listing configmaps in namespace "ns"`, wantWrap: errList},
		{name: "nil object", list: listOf(configMap("a", ""), nil), wantErr: "nil object"},
		{name: "nil *ConfigMap", list: listOf(configMap("a", ""), (*corev1.ConfigMap)(nil)), wantErr: "nil object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := generic.NewObjectCountEvaluator(configMapsGR, tt.list, "")
			_, err := e.UsageStats(quota.UsageStatsOptions{Namespace: "ns"})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("UsageStats() error = %v, want one containing %q", err, tt.wantErr)
			}
			if tt.wantWrap != nil && !errors.Is(err, tt.wantWrap) {
				t.Errorf("UsageStats() error = %v, want it to wrap %v", err, tt.wantWrap)
			}
		})
	}
}

func TestObjectCountEvaluatorUsageOfNil(t *testing.T) {
	e := generic.NewObjectCountEvaluator(configMapsGR, nil, "")
	for _, obj := range []runtime.Object{nil, (*corev1.ConfigMap)(nil)} {
		if got, err := e.Usage(obj); err == nil || !strings.Contains(err.Error(), "nil object") {
			t.Errorf("Usage(%#v) = %v, %v; want the nil object error", obj, got, err)
		}
	}
}
