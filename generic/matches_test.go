package generic_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/quotakit/quotakit/generic"
)

// The tests in this package use config maps as objects and a small scope
// vocabulary, implemented by tierScope:
//   - "Tier": the value of the config map's "tier" label, matched with
//     ScopeLabelSelector (Exists: the label is set and not empty).
//   - "Broken": always an error.
//   - any other scope never matches.
const (
	scopeTier   corev1.ResourceQuotaScope = "Tier"
	scopeBroken corev1.ResourceQuotaScope = "Broken"
)

var errBroken = errors.New("broken scope")

func tierScope(req corev1.ScopedResourceSelectorRequirement, obj runtime.Object) (bool, error) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return false, errors.New("not a config map")
	}
	switch req.ScopeName {
	case scopeBroken:
		return false, errBroken
	case scopeTier:
		tier := cm.Labels["tier"]
		if req.Operator == corev1.ScopeSelectorOpExists {
			return tier != "", nil
		}
		sel, err := generic.ScopeLabelSelector(req)
		if err != nil {
			return false, err
		}
		set := labels.Set{}
		if tier != "" {
			set[string(scopeTier)] = tier
		}
		return sel.Matches(set), nil
	}
	return false, nil
}

func configMap(name, tier string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	if tier != "" {
		cm.Labels = map[string]string{"tier": tier}
	}
	return cm
}

// matchConfigMaps is a MatchingResourceNamesFunc that charges
// count/configmaps and configmaps.
func matchConfigMaps(input []corev1.ResourceName) []corev1.ResourceName {
	var out []corev1.ResourceName
	for _, n := range input {
		if n == "count/configmaps" || n == "configmaps" {
			out = append(out, n)
		}
	}
	return out
}

func hard(names ...corev1.ResourceName) corev1.ResourceList {
	rl := corev1.ResourceList{}
	for _, n := range names {
		rl[n] = resource.MustParse("10")
	}
	return rl
}

func req(scope corev1.ResourceQuotaScope, op corev1.ScopeSelectorOperator, values ...string) corev1.ScopedResourceSelectorRequirement {
	return corev1.ScopedResourceSelectorRequirement{ScopeName: scope, Operator: op, Values: values}
}

func TestMatches(t *testing.T) {
	tests := []struct {
		name    string
		quota   *corev1.ResourceQuota
		item    runtime.Object
		want    bool
		wantErr string
	}{
		{
			name:  "status.hard names a matched resource, no scopes",
			quota: &corev1.ResourceQuota{Status: corev1.ResourceQuotaStatus{Hard: hard("count/configmaps")}},
			item:  configMap("a", ""),
			want:  true,
		},
		{
			name:  "alias name matches too",
			quota: &corev1.ResourceQuota{Status: corev1.ResourceQuotaStatus{Hard: hard("configmaps", "pods")}},
			item:  configMap("a", ""),
			want:  true,
		},
		{
			name: "only spec.hard names the resource: status.hard decides",
			quota: &corev1.ResourceQuota{
				Spec:   corev1.ResourceQuotaSpec{Hard: hard("count/configmaps")},
				Status: corev1.ResourceQuotaStatus{Hard: hard("pods")},
			},
			item: configMap("a", ""),
			want: false,
		},
		{
			name:  "empty status.hard matches nothing",
			quota: &corev1.ResourceQuota{Spec: corev1.ResourceQuotaSpec{Hard: hard("count/configmaps")}},
			item:  configMap("a", ""),
			want:  false,
		},
		{
			name: "spec.scopes are Exists requirements: matched",
			quota: &corev1.ResourceQuota{
				Spec:   corev1.ResourceQuotaSpec{Scopes: []corev1.ResourceQuotaScope{scopeTier}},
				Status: corev1.ResourceQuotaStatus{Hard: hard("count/configmaps")},
			},
			item: configMap("a", "gold"),
			want: true,
		},
		{
			name: "spec.scopes are Exists requirements: not matched",
			quota: &corev1.ResourceQuota{
				Spec:   corev1.ResourceQuotaSpec{Scopes: []corev1.ResourceQuotaScope{scopeTier}},
				Status: corev1.ResourceQuotaStatus{Hard: hard("count/configmaps")},
			},
			item: configMap("a", ""),
			want: false,
		},
		{
			name: "scope selector In matched",
			quota: &corev1.ResourceQuota{
				Spec: corev1.ResourceQuotaSpec{ScopeSelector: &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
					req(scopeTier, corev1.ScopeSelectorOpIn, "gold", "silver"),
				}}},
				Status: corev1.ResourceQuotaStatus{Hard: hard("count/configmaps")},
			},
			item: configMap("a", "silver"),
			want: true,
		},
		{
			name: "every requirement must match: scope matched, selector not",
			quota: &corev1.ResourceQuota{
				Spec: corev1.ResourceQuotaSpec{
					Scopes: []corev1.ResourceQuotaScope{scopeTier},
					ScopeSelector: &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
						req(scopeTier, corev1.ScopeSelectorOpNotIn, "gold"),
					}},
				},
				Status: corev1.ResourceQuotaStatus{Hard: hard("count/configmaps")},
			},
			item: configMap("a", "gold"),
			want: false,
		},
		{
			name: "scope matched but no resource matched",
			quota: &corev1.ResourceQuota{
				Spec:   corev1.ResourceQuotaSpec{Scopes: []corev1.ResourceQuotaScope{scopeTier}},
				Status: corev1.ResourceQuotaStatus{Hard: hard("pods")},
			},
			item: configMap("a", "gold"),
			want: false,
		},
		{
			name: "scope error is returned",
			quota: &corev1.ResourceQuota{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "q"},
				Spec:       corev1.ResourceQuotaSpec{Scopes: []corev1.ResourceQuotaScope{scopeBroken}},
				Status:     corev1.ResourceQuotaStatus{Hard: hard("count/configmaps")},
			},
			item:    configMap("a", ""),
			wantErr: "quota ns/q: broken scope",
		},
		{
			name: "scope error after a non-matching scope is still returned",
			quota: &corev1.ResourceQuota{
				Spec: corev1.ResourceQuotaSpec{
					Scopes: []corev1.ResourceQuotaScope{scopeTier, scopeBroken},
				},
				Status: corev1.ResourceQuotaStatus{Hard: hard("pods")},
			},
			item:    configMap("a", ""),
			wantErr: "broken scope",
		},
		{
			name: "invalid operator names the operator",
			quota: &corev1.ResourceQuota{
				Spec: corev1.ResourceQuotaSpec{ScopeSelector: &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
					req(scopeTier, "Foo", "gold"),
				}}},
				Status: corev1.ResourceQuotaStatus{Hard: hard("count/configmaps")},
			},
			item:    configMap("a", "gold"),
			wantErr: `"Foo" is not a valid scope selector operator`,
		},
		{
			name:    "nil quota",
			item:    configMap("a", ""),
			wantErr: "nil resource quota",
		},
		{
			name:    "nil item",
			quota:   &corev1.ResourceQuota{Status: corev1.ResourceQuotaStatus{Hard: hard("count/configmaps")}},
			wantErr: "nil object",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := generic.Matches(tt.quota, tt.item, matchConfigMaps, tierScope)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Matches() error = %v, want one containing %q", err, tt.wantErr)
				}
				if got {
					t.Errorf("Matches() = true with an error")
				}
				return
			}
			if err != nil {
				t.Fatalf("Matches() unexpected error: %v", err)
			}
			if got != tt.want {
				t.Errorf("Matches() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestMatchesWrapsScopeError(t *testing.T) {
	q := &corev1.ResourceQuota{
		Spec:   corev1.ResourceQuotaSpec{Scopes: []corev1.ResourceQuotaScope{scopeBroken}},
		Status: corev1.ResourceQuotaStatus{Hard: hard("count/configmaps")},
	}
	_, err := generic.Matches(q, configMap("a", ""), matchConfigMaps, tierScope)
	if !errors.Is(err, errBroken) {
		t.Errorf("Matches() error = %v, want it to wrap %v", err, errBroken)
	}
}

func TestMatchesNoScopeFunc(t *testing.T) {
	for _, op := range []corev1.ScopeSelectorOperator{corev1.ScopeSelectorOpExists, corev1.ScopeSelectorOpIn, corev1.ScopeSelectorOpDoesNotExist} {
		got, err := generic.MatchesNoScopeFunc(req(corev1.ResourceQuotaScopeBestEffort, op), configMap("a", "gold"))
		if got || err != nil {
			t.Errorf("MatchesNoScopeFunc(%s) = %v, %v, want false, nil", op, got, err)
		}
	}
	// A scoped quota therefore never matches, an unscoped one does.
	q := &corev1.ResourceQuota{
		Spec:   corev1.ResourceQuotaSpec{Scopes: []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeNotTerminating}},
		Status: corev1.ResourceQuotaStatus{Hard: hard("count/configmaps")},
	}
	if got, err := generic.Matches(q, configMap("a", ""), matchConfigMaps, generic.MatchesNoScopeFunc); got || err != nil {
		t.Errorf("Matches(scoped quota, MatchesNoScopeFunc) = %v, %v, want false, nil", got, err)
	}
	q.Spec.Scopes = nil
	if got, err := generic.Matches(q, configMap("a", ""), matchConfigMaps, generic.MatchesNoScopeFunc); !got || err != nil {
		t.Errorf("Matches(unscoped quota, MatchesNoScopeFunc) = %v, %v, want true, nil", got, err)
	}
}

func TestScopeRequirements(t *testing.T) {
	tests := []struct {
		name     string
		scopes   []corev1.ResourceQuotaScope
		selector *corev1.ScopeSelector
		want     []corev1.ScopedResourceSelectorRequirement
	}{
		{name: "none"},
		{name: "empty selector", selector: &corev1.ScopeSelector{}},
		{
			name:   "scopes become Exists",
			scopes: []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeTerminating, corev1.ResourceQuotaScopeBestEffort},
			want: []corev1.ScopedResourceSelectorRequirement{
				req(corev1.ResourceQuotaScopeTerminating, corev1.ScopeSelectorOpExists),
				req(corev1.ResourceQuotaScopeBestEffort, corev1.ScopeSelectorOpExists),
			},
		},
		{
			name:   "scopes first, then expressions in order",
			scopes: []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeNotTerminating},
			selector: &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
				req(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpIn, "high"),
				req(corev1.ResourceQuotaScopeVolumeAttributesClass, corev1.ScopeSelectorOpDoesNotExist),
			}},
			want: []corev1.ScopedResourceSelectorRequirement{
				req(corev1.ResourceQuotaScopeNotTerminating, corev1.ScopeSelectorOpExists),
				req(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpIn, "high"),
				req(corev1.ResourceQuotaScopeVolumeAttributesClass, corev1.ScopeSelectorOpDoesNotExist),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := generic.ScopeRequirements(tt.scopes, tt.selector)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ScopeRequirements() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestScopeLabelSelector(t *testing.T) {
	const pc = corev1.ResourceQuotaScopePriorityClass
	high := labels.Set{string(pc): "high"}
	low := labels.Set{string(pc): "low"}
	none := labels.Set{}
	tests := []struct {
		name    string
		req     corev1.ScopedResourceSelectorRequirement
		matches map[string]bool // label set name → want
		wantErr string
	}{
		{
			name:    "In",
			req:     req(pc, corev1.ScopeSelectorOpIn, "high", "medium"),
			matches: map[string]bool{"high": true, "low": false, "none": false},
		},
		{
			name:    "NotIn matches an object without a value",
			req:     req(pc, corev1.ScopeSelectorOpNotIn, "high"),
			matches: map[string]bool{"high": false, "low": true, "none": true},
		},
		{
			name:    "Exists",
			req:     req(pc, corev1.ScopeSelectorOpExists),
			matches: map[string]bool{"high": true, "low": true, "none": false},
		},
		{
			name:    "DoesNotExist",
			req:     req(pc, corev1.ScopeSelectorOpDoesNotExist),
			matches: map[string]bool{"high": false, "low": false, "none": true},
		},
		{name: "unknown operator", req: req(pc, "Foo", "high"), wantErr: `generic: "Foo" is not a valid scope selector operator`},
		{name: "empty operator", req: req(pc, ""), wantErr: `generic: "" is not a valid scope selector operator`},
		{name: "In without values", req: req(pc, corev1.ScopeSelectorOpIn), wantErr: "PriorityClass In []"},
		{name: "Exists with values", req: req(pc, corev1.ScopeSelectorOpExists, "high"), wantErr: "PriorityClass Exists [high]"},
		{name: "invalid value", req: req(pc, corev1.ScopeSelectorOpIn, "not a label value!"), wantErr: "generic: scope selector"},
	}
	sets := map[string]labels.Set{"high": high, "low": low, "none": none}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sel, err := generic.ScopeLabelSelector(tt.req)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ScopeLabelSelector(%v) error = %v, want one containing %q", tt.req, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ScopeLabelSelector(%v) unexpected error: %v", tt.req, err)
			}
			for setName, want := range tt.matches {
				if got := sel.Matches(sets[setName]); got != want {
					t.Errorf("ScopeLabelSelector(%v).Matches(%s) = %v, want %v", tt.req, setName, got, want)
				}
			}
		})
	}
}
