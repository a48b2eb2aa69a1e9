package quota_test

import (
	"errors"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit/internal/qcmp"
	"github.com/quotakit/quotakit/quota"
)

// fakeEvaluator charges a fixed set of names with fixed usage and records the
// options it was asked for.
type fakeEvaluator struct {
	gr    schema.GroupResource
	names []corev1.ResourceName
	used  corev1.ResourceList
	err   error
	calls []quota.UsageStatsOptions
}

func (e *fakeEvaluator) Constraints([]corev1.ResourceName, runtime.Object) error { return nil }
func (e *fakeEvaluator) GroupResource() schema.GroupResource                     { return e.gr }
func (e *fakeEvaluator) Handles(quota.Attributes) bool                           { return true }
func (e *fakeEvaluator) Matches(*corev1.ResourceQuota, runtime.Object) (bool, error) {
	return true, nil
}
func (e *fakeEvaluator) MatchingScopes(runtime.Object, []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	return nil, nil
}
func (e *fakeEvaluator) UncoveredQuotaScopes(_, _ []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	return nil, nil
}
func (e *fakeEvaluator) MatchingResources(input []corev1.ResourceName) []corev1.ResourceName {
	return quota.Intersection(input, e.names)
}
func (e *fakeEvaluator) Usage(runtime.Object) (corev1.ResourceList, error) { return e.used, nil }
func (e *fakeEvaluator) UsageStats(opts quota.UsageStatsOptions) (quota.UsageStats, error) {
	e.calls = append(e.calls, opts)
	if e.err != nil {
		return quota.UsageStats{}, e.err
	}
	return quota.UsageStats{Used: quota.Mask(e.used, opts.Resources)}, nil
}

// listRegistry is the smallest Registry: evaluators in a slice.
type listRegistry []quota.Evaluator

func (r *listRegistry) Add(e quota.Evaluator)    { *r = append(*r, e) }
func (r *listRegistry) Remove(e quota.Evaluator) {}
func (r *listRegistry) Get(gr schema.GroupResource) quota.Evaluator {
	for _, e := range *r {
		if e.GroupResource() == gr {
			return e
		}
	}
	return nil
}
func (r *listRegistry) List() []quota.Evaluator { return *r }

func TestCalculateUsage(t *testing.T) {
	podsGR := schema.GroupResource{Resource: "pods"}
	svcGR := schema.GroupResource{Resource: "services"}
	errBroken := errors.New("informer not synced")

	tests := []struct {
		name       string
		hard       corev1.ResourceList
		evaluators []*fakeEvaluator
		want       corev1.ResourceList
		wantErrs   []string
		wantErrIs  error
	}{
		{
			name: "sums matched resources of every evaluator",
			hard: rl("pods", "10", "requests.cpu", "4", "services", "5"),
			evaluators: []*fakeEvaluator{
				{gr: podsGR, names: names("pods", "requests.cpu", "limits.cpu"), used: rl("pods", "3", "requests.cpu", "1500m", "limits.cpu", "9")},
				{gr: svcGR, names: names("services"), used: rl("services", "2")},
			},
			want: rl("pods", "3", "requests.cpu", "1500m", "services", "2"),
		},
		{
			name: "resources no evaluator charges are left out",
			hard: rl("pods", "10", "example.com/unknown", "1"),
			evaluators: []*fakeEvaluator{
				{gr: podsGR, names: names("pods"), used: rl("pods", "1")},
			},
			want: rl("pods", "1"),
		},
		{
			name: "failed evaluator's resources are left out and its error returned",
			hard: rl("pods", "10", "services", "5"),
			evaluators: []*fakeEvaluator{
				{gr: podsGR, names: names("pods"), err: errBroken},
				{gr: svcGR, names: names("services"), used: rl("services", "4")},
			},
			want:      rl("services", "4"),
			wantErrs:  []string{"pods", "informer not synced"},
			wantErrIs: errBroken,
		},
		{
			name: "every evaluator failing joins every error",
			hard: rl("pods", "10", "services", "5"),
			evaluators: []*fakeEvaluator{
				{gr: podsGR, names: names("pods"), err: errors.New("pods broken")},
				{gr: svcGR, names: names("services"), err: errors.New("services broken")},
			},
			want:     rl(),
			wantErrs: []string{"pods broken", "services broken"},
		},
		{
			name:       "nil hard is empty usage",
			hard:       nil,
			evaluators: []*fakeEvaluator{{gr: podsGR, names: names("pods"), used: rl("pods", "1")}},
			want:       rl(),
		},
		{
			name: "zero usage is reported, not dropped",
			hard: rl("pods", "10"),
			evaluators: []*fakeEvaluator{
				{gr: podsGR, names: names("pods"), used: rl("pods", "0")},
			},
			want: rl("pods", "0"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := &listRegistry{}
			for _, e := range tt.evaluators {
				reg.Add(e)
			}
			got, err := quota.CalculateUsage("ns", nil, tt.hard, reg, nil)
			if diff := cmp.Diff(tt.want, got, qcmp.Quantities()); diff != "" {
				t.Errorf("CalculateUsage usage (-want +got):\n%s", diff)
			}
			if len(tt.wantErrs) == 0 && err != nil {
				t.Errorf("CalculateUsage error = %v, want nil", err)
			}
			for _, s := range tt.wantErrs {
				if err == nil || !strings.Contains(err.Error(), s) {
					t.Errorf("CalculateUsage error = %v, want it to mention %q", err, s)
				}
			}
			if tt.wantErrIs != nil && !errors.Is(err, tt.wantErrIs) {
				t.Errorf("errors.Is(%v, %v) = false, want true", err, tt.wantErrIs)
			}
		})
	}
}

func TestCalculateUsagePassesOptions(t *testing.T) {
	e := &fakeEvaluator{gr: schema.GroupResource{Resource: "pods"}, names: names("pods", "requests.cpu", "requests.memory"), used: rl()}
	reg := &listRegistry{e}
	scopes := []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort}
	sel := &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{{
		ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpIn, Values: []string{"high"},
	}}}
	if _, err := quota.CalculateUsage("team-a", scopes, rl("requests.cpu", "1", "pods", "2", "secrets", "1"), reg, sel); err != nil {
		t.Fatalf("CalculateUsage: %v", err)
	}
	want := []quota.UsageStatsOptions{{
		Namespace:     "team-a",
		Scopes:        scopes,
		Resources:     names("pods", "requests.cpu"),
		ScopeSelector: sel,
	}}
	for _, c := range e.calls {
		sort.Slice(c.Resources, func(i, j int) bool { return c.Resources[i] < c.Resources[j] })
	}
	if diff := cmp.Diff(want, e.calls); diff != "" {
		t.Errorf("UsageStats calls (-want +got):\n%s", diff)
	}
}

func TestCalculateUsageSkipsEvaluatorsWithNothingToDo(t *testing.T) {
	pods := &fakeEvaluator{gr: schema.GroupResource{Resource: "pods"}, names: names("pods")}
	svcs := &fakeEvaluator{gr: schema.GroupResource{Resource: "services"}, names: names("services")}
	if _, err := quota.CalculateUsage("ns", nil, rl("pods", "1"), &listRegistry{pods, svcs, nil}, nil); err != nil {
		t.Fatalf("CalculateUsage: %v", err)
	}
	if len(svcs.calls) != 0 {
		t.Errorf("services evaluator was called %d times, want 0", len(svcs.calls))
	}
	if len(pods.calls) != 1 {
		t.Errorf("pods evaluator was called %d times, want 1", len(pods.calls))
	}
}

func TestCalculateUsageNilRegistry(t *testing.T) {
	if _, err := quota.CalculateUsage("ns", nil, rl("pods", "1"), (*listRegistry)(nil), nil); !errors.Is(err, quota.ErrNilRegistry) {
		t.Errorf("CalculateUsage(nil *listRegistry) error = %v, want %v", err, quota.ErrNilRegistry)
	}
	got, err := quota.CalculateUsage("ns", nil, rl("pods", "1"), nil, nil)
	if !errors.Is(err, quota.ErrNilRegistry) {
		t.Errorf("CalculateUsage(nil registry) error = %v, want %v", err, quota.ErrNilRegistry)
	}
	if got == nil || len(got) != 0 {
		t.Errorf("CalculateUsage(nil registry) = %v, want an empty list", got)
	}
}
