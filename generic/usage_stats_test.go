package generic_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/quotakit/quotakit/generic"
	"github.com/quotakit/quotakit/internal/qcmp"
	"github.com/quotakit/quotakit/quota"
)

// listOf returns a ListFuncByNamespace serving objs in namespace "ns".
func listOf(objs ...runtime.Object) generic.ListFuncByNamespace {
	return func(ns string) ([]runtime.Object, error) {
		if ns != "ns" {
			return nil, nil
		}
		return objs, nil
	}
}

// sizeUsage charges every config map 1 "count/configmaps" and its
// data["size"] as "storage" when set.
func sizeUsage(obj runtime.Object) (corev1.ResourceList, error) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return nil, fmt.Errorf("not a config map: %T", obj)
	}
	rl := corev1.ResourceList{"count/configmaps": resource.MustParse("1")}
	if s, ok := cm.Data["size"]; ok {
		q, err := resource.ParseQuantity(s)
		if err != nil {
			return nil, err
		}
		rl["storage"] = q
	}
	return rl, nil
}

func sized(name, tier, size string) *corev1.ConfigMap {
	cm := configMap(name, tier)
	cm.Data = map[string]string{"size": size}
	return cm
}

func TestCalculateUsageStats(t *testing.T) {
	objs := []runtime.Object{
		sized("a", "gold", "1Gi"),
		sized("b", "silver", "500Mi"),
		sized("c", "", "100m"),
		configMap("d", "gold"),
	}
	tests := []struct {
		name    string
		options quota.UsageStatsOptions
		want    corev1.ResourceList
	}{
		{
			name:    "no objects in namespace: zero for each requested name",
			options: quota.UsageStatsOptions{Namespace: "other", Resources: []corev1.ResourceName{"count/configmaps", "storage"}},
			want:    corev1.ResourceList{"count/configmaps": resource.MustParse("0"), "storage": resource.MustParse("0")},
		},
		{
			name:    "sum of all objects, including names not requested",
			options: quota.UsageStatsOptions{Namespace: "ns", Resources: []corev1.ResourceName{"count/configmaps", "pods"}},
			want: corev1.ResourceList{
				"count/configmaps": resource.MustParse("4"),
				"pods":             resource.MustParse("0"),
				"storage":          resource.MustParse("1598029824100m"), // 1Gi + 500Mi + 0.1
			},
		},
		{
			name:    "scopes: only objects with a tier",
			options: quota.UsageStatsOptions{Namespace: "ns", Scopes: []corev1.ResourceQuotaScope{scopeTier}, Resources: []corev1.ResourceName{"count/configmaps"}},
			want: corev1.ResourceList{
				"count/configmaps": resource.MustParse("3"),
				"storage":          resource.MustParse("1524Mi"),
			},
		},
		{
			name: "scope selector: tier gold",
			options: quota.UsageStatsOptions{Namespace: "ns", ScopeSelector: &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
				req(scopeTier, corev1.ScopeSelectorOpIn, "gold"),
			}}},
			want: corev1.ResourceList{"count/configmaps": resource.MustParse("2"), "storage": resource.MustParse("1Gi")},
		},
		{
			name: "scopes and selector together: tier set and not gold",
			options: quota.UsageStatsOptions{
				Namespace: "ns",
				Scopes:    []corev1.ResourceQuotaScope{scopeTier},
				ScopeSelector: &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
					req(scopeTier, corev1.ScopeSelectorOpNotIn, "gold"),
				}},
			},
			want: corev1.ResourceList{"count/configmaps": resource.MustParse("1"), "storage": resource.MustParse("500Mi")},
		},
		{
			name: "nothing matches: only the requested zeros",
			options: quota.UsageStatsOptions{Namespace: "ns", Resources: []corev1.ResourceName{"storage"}, ScopeSelector: &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
				req(scopeTier, corev1.ScopeSelectorOpIn, "bronze"),
			}}},
			want: corev1.ResourceList{"storage": resource.MustParse("0")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := generic.CalculateUsageStats(tt.options, listOf(objs...), tierScope, sizeUsage)
			if err != nil {
				t.Fatalf("CalculateUsageStats() unexpected error: %v", err)
			}
			if diff := cmp.Diff(tt.want, got.Used, qcmp.Quantities()); diff != "" {
				t.Errorf("CalculateUsageStats() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCalculateUsageStatsZeroIsDecimalSI(t *testing.T) {
	got, err := generic.CalculateUsageStats(quota.UsageStatsOptions{Namespace: "ns", Resources: []corev1.ResourceName{"storage"}}, listOf(), tierScope, sizeUsage)
	if err != nil {
		t.Fatal(err)
	}
	q := got.Used["storage"]
	if q.Format != resource.DecimalSI || !q.IsZero() {
		t.Errorf("CalculateUsageStats() storage = %v (format %s), want 0 in DecimalSI", q.String(), q.Format)
	}
}

// Upstream returns the partial sum and a nil error when a scope cannot be
// evaluated (kubernetes#117676); the error must be returned instead.
func TestCalculateUsageStatsReturnsScopeErrors_kubernetes117676(t *testing.T) {
	objs := listOf(sized("a", "gold", "1"), sized("b", "gold", "2"))
	tests := []struct {
		name     string
		options  quota.UsageStatsOptions
		wantErr  string
		wantWrap error
	}{
		{
			name:     "scope func error",
			options:  quota.UsageStatsOptions{Namespace: "ns", Scopes: []corev1.ResourceQuotaScope{scopeBroken}},
			wantErr:  "generic: matching *v1.ConfigMap ns/a to scope Broken Exists []: broken scope",
			wantWrap: errBroken,
		},
		{
			name: "invalid operator",
			options: quota.UsageStatsOptions{Namespace: "ns", ScopeSelector: &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
				req(scopeTier, "Foo", "gold"),
			}}},
			wantErr: `"Foo" is not a valid scope selector operator`,
		},
		{
			name: "error after a non-matching requirement",
			options: quota.UsageStatsOptions{Namespace: "ns", ScopeSelector: &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
				req(scopeTier, corev1.ScopeSelectorOpIn, "silver"),
				req(scopeBroken, corev1.ScopeSelectorOpExists),
			}}},
			wantWrap: errBroken,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := generic.CalculateUsageStats(tt.options, objs, tierScope, sizeUsage)
			if err == nil {
				t.Fatalf("CalculateUsageStats() = %v, nil; want an error", got.Used)
			}
			if tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("CalculateUsageStats() error = %q, want one containing %q", err, tt.wantErr)
			}
			if tt.wantWrap != nil && !errors.Is(err, tt.wantWrap) {
				t.Errorf("CalculateUsageStats() error = %v, want it to wrap %v", err, tt.wantWrap)
			}
			if got.Used != nil {
				t.Errorf("CalculateUsageStats() returned usage %v with an error", got.Used)
			}
		})
	}
}

func TestCalculateUsageStatsErrors(t *testing.T) {
	errList := errors.New("cache not synced")
	tests := []struct {
		name     string
		list     generic.ListFuncByNamespace
		scope    generic.MatchesScopeFunc
		usage    generic.UsageFunc
		wantErr  string
		wantWrap error
	}{
		{name: "nil list func", scope: tierScope, usage: sizeUsage, wantWrap: generic.ErrNoListFunc},
		{
			name:     "list error",
			list:     func(string) ([]runtime.Object, error) { return nil, errList },
			scope:    tierScope,
			usage:    sizeUsage,
			wantErr:  `generic: listing namespace "ns": cache not synced`,
			wantWrap: errList,
		},
		{
			name:    "usage error",
			list:    listOf(sized("a", "", "not-a-quantity")),
			scope:   tierScope,
			usage:   sizeUsage,
			wantErr: "generic: usage of *v1.ConfigMap ns/a: quantities must match",
		},
		{
			name:    "wrong object type from the lister",
			list:    listOf(&corev1.Secret{}),
			scope:   tierScope,
			usage:   sizeUsage,
			wantErr: "not a config map: *v1.Secret",
		},
		{
			name:    "nil object from the lister",
			list:    listOf(nil),
			scope:   tierScope,
			usage:   sizeUsage,
			wantErr: "nil object",
		},
		{
			name:    "nil *ConfigMap from the lister",
			list:    listOf((*corev1.ConfigMap)(nil)),
			scope:   tierScope,
			usage:   sizeUsage,
			wantErr: "nil object",
		},
		{name: "nil scope func", list: listOf(), usage: sizeUsage, wantErr: "needs a scope func"},
		{name: "nil usage func", list: listOf(), scope: tierScope, wantErr: "needs a scope func and a usage func"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := generic.CalculateUsageStats(quota.UsageStatsOptions{Namespace: "ns"}, tt.list, tt.scope, tt.usage)
			if err == nil {
				t.Fatal("CalculateUsageStats() error = nil, want an error")
			}
			if tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("CalculateUsageStats() error = %q, want one containing %q", err, tt.wantErr)
			}
			if tt.wantWrap != nil && !errors.Is(err, tt.wantWrap) {
				t.Errorf("CalculateUsageStats() error = %v, want it to wrap %v", err, tt.wantWrap)
			}
		})
	}
}

// The sum is built in place: it must neither modify the lists usageFunc
// returns (an evaluator may return a shared or cached list) nor share
// arbitrary-precision values with them.
func TestCalculateUsageStatsDoesNotModifyUsage(t *testing.T) {
	shared := corev1.ResourceList{
		"small": resource.MustParse("1"),
		"huge":  resource.MustParse("123456789012345678901234567890"), // stored as inf.Dec
	}
	usage := func(runtime.Object) (corev1.ResourceList, error) { return shared, nil }
	got, err := generic.CalculateUsageStats(quota.UsageStatsOptions{Namespace: "ns"}, listOf(configMap("a", ""), configMap("b", ""), configMap("c", "")), tierScope, usage)
	if err != nil {
		t.Fatal(err)
	}
	want := corev1.ResourceList{
		"small": resource.MustParse("3"),
		"huge":  resource.MustParse("370370367037037036703703703670"),
	}
	if diff := cmp.Diff(want, got.Used, qcmp.Quantities()); diff != "" {
		t.Errorf("CalculateUsageStats() mismatch (-want +got):\n%s", diff)
	}
	wantShared := corev1.ResourceList{
		"small": resource.MustParse("1"),
		"huge":  resource.MustParse("123456789012345678901234567890"),
	}
	if diff := cmp.Diff(wantShared, shared, qcmp.Quantities()); diff != "" {
		t.Errorf("usage list was modified (-want +got):\n%s", diff)
	}
}

// CalculateUsageStats allocates a fixed amount per call, whatever the number
// of objects, when usageFunc itself does not allocate.
func TestCalculateUsageStatsAllocations(t *testing.T) {
	usageList := corev1.ResourceList{"count/configmaps": resource.MustParse("1"), "storage": resource.MustParse("1Gi")}
	usage := func(runtime.Object) (corev1.ResourceList, error) { return usageList, nil }
	opts := quota.UsageStatsOptions{
		Namespace: "ns",
		Resources: []corev1.ResourceName{"count/configmaps", "storage"},
		Scopes:    []corev1.ResourceQuotaScope{scopeTier},
	}
	allocs := func(n int) float64 {
		objs := make([]runtime.Object, n)
		for i := range objs {
			objs[i] = configMap(fmt.Sprint(i), "gold")
		}
		list := listOf(objs...)
		return testing.AllocsPerRun(20, func() {
			if _, err := generic.CalculateUsageStats(opts, list, tierScope, usage); err != nil {
				t.Fatal(err)
			}
		})
	}
	small, large := allocs(10), allocs(1000)
	if large != small {
		t.Errorf("CalculateUsageStats allocations: %v for 10 objects, %v for 1000; want the same", small, large)
	}
}
