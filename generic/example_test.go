package generic_test

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit/generic"
	"github.com/quotakit/quotakit/quota"
)

// A quota scoped with a scope selector charges only the objects that match
// it. Here the scope is a team label on config maps, matched with
// ScopeLabelSelector so that In, NotIn, Exists and DoesNotExist behave as
// they do for PriorityClass.
func ExampleMatches() {
	const teamScope corev1.ResourceQuotaScope = "Team"
	scopeFunc := func(req corev1.ScopedResourceSelectorRequirement, obj runtime.Object) (bool, error) {
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok {
			return false, fmt.Errorf("want a config map, got %T", obj)
		}
		if req.ScopeName != teamScope {
			return false, nil
		}
		sel, err := generic.ScopeLabelSelector(req)
		if err != nil {
			return false, err
		}
		set := labels.Set{}
		if team := cm.Labels["team"]; team != "" {
			set[string(teamScope)] = team
		}
		return sel.Matches(set), nil
	}
	matchFunc := func(names []corev1.ResourceName) []corev1.ResourceName {
		return quota.Intersection(names, []corev1.ResourceName{"count/configmaps"})
	}

	q := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "team-quota"},
		Spec: corev1.ResourceQuotaSpec{
			Hard: corev1.ResourceList{"count/configmaps": resource.MustParse("10")},
			ScopeSelector: &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
				{ScopeName: teamScope, Operator: corev1.ScopeSelectorOpNotIn, Values: []string{"platform"}},
			}},
		},
		Status: corev1.ResourceQuotaStatus{Hard: corev1.ResourceList{"count/configmaps": resource.MustParse("10")}},
	}
	for _, team := range []string{"web", "platform", ""} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"team": team}}}
		ok, err := generic.Matches(q, cm, matchFunc, scopeFunc)
		fmt.Printf("team %q: %v %v\n", team, ok, err)
	}

	q.Spec.ScopeSelector.MatchExpressions[0].Operator = "Contains"
	_, err := generic.Matches(q, &corev1.ConfigMap{}, matchFunc, scopeFunc)
	fmt.Println(err)
	// Output:
	// team "web": true <nil>
	// team "platform": false <nil>
	// team "": true <nil>
	// generic: quota default/team-quota: generic: "Contains" is not a valid scope selector operator
}

// The object-count evaluator charges one per object under
// count/<resource>.<group>, and under a legacy alias when it has one.
func ExampleNewObjectCountEvaluator() {
	deployments := generic.NewObjectCountEvaluator(schema.GroupResource{Group: "apps", Resource: "deployments"}, nil, "")
	usage, _ := deployments.Usage(&metav1.PartialObjectMetadata{})
	fmt.Println(quota.ResourceNames(usage))

	// With a list function it also sums a namespace.
	list := func(namespace string) ([]runtime.Object, error) {
		return []runtime.Object{&corev1.ConfigMap{}, &corev1.ConfigMap{}}, nil
	}
	configMaps := generic.NewObjectCountEvaluator(schema.GroupResource{Resource: "configmaps"}, list, corev1.ResourceConfigMaps)
	stats, _ := configMaps.UsageStats(quota.UsageStatsOptions{Namespace: "default", Resources: []corev1.ResourceName{"configmaps"}})
	for _, name := range quota.ResourceNames(stats.Used) {
		q := stats.Used[name]
		fmt.Printf("%s=%s\n", name, q.String())
	}
	// Output:
	// [count/deployments.apps]
	// configmaps=2
	// count/configmaps=2
}

// CalculateUsageStats sums what a UsageFunc reports for each object of a
// namespace that matches the quota's scopes.
func ExampleCalculateUsageStats() {
	list := func(namespace string) ([]runtime.Object, error) {
		return []runtime.Object{
			&corev1.ConfigMap{Data: map[string]string{"a": "xx"}},
			&corev1.ConfigMap{Data: map[string]string{"a": "x", "b": "yyy"}},
		}, nil
	}
	// Charge the number of data bytes.
	usage := func(obj runtime.Object) (corev1.ResourceList, error) {
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok {
			return nil, fmt.Errorf("want a config map, got %T", obj)
		}
		n := 0
		for _, v := range cm.Data {
			n += len(v)
		}
		return corev1.ResourceList{"example.com/data-bytes": *resource.NewQuantity(int64(n), resource.DecimalSI)}, nil
	}
	stats, err := generic.CalculateUsageStats(quota.UsageStatsOptions{
		Namespace: "default",
		Resources: []corev1.ResourceName{"example.com/data-bytes", "example.com/other"},
	}, list, generic.MatchesNoScopeFunc, usage)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, name := range quota.ResourceNames(stats.Used) {
		q := stats.Used[name]
		fmt.Printf("%s=%s\n", name, q.String())
	}
	// Output:
	// example.com/data-bytes=6
	// example.com/other=0
}

// A registry holds one evaluator per resource and lists them in a fixed
// order.
func ExampleNewRegistry() {
	r := generic.NewRegistry(
		generic.NewObjectCountEvaluator(schema.GroupResource{Group: "apps", Resource: "deployments"}, nil, ""),
		generic.NewObjectCountEvaluator(schema.GroupResource{Resource: "secrets"}, nil, corev1.ResourceSecrets),
		generic.NewObjectCountEvaluator(schema.GroupResource{Resource: "configmaps"}, nil, corev1.ResourceConfigMaps),
	)
	for _, e := range r.List() {
		fmt.Println(e.GroupResource(), e.MatchingResources([]corev1.ResourceName{"configmaps", "count/configmaps", "count/deployments.apps"}))
	}
	// Output:
	// configmaps [configmaps count/configmaps]
	// secrets []
	// deployments.apps [count/deployments.apps]
}

// A configuration bundles the evaluators with the resources quota ignores.
func ExampleNewConfiguration() {
	c := generic.NewConfiguration(
		[]quota.Evaluator{generic.NewObjectCountEvaluator(schema.GroupResource{Resource: "configmaps"}, nil, "")},
		map[schema.GroupResource]struct{}{{Resource: "events"}: {}},
	)
	_, ignored := c.IgnoredResources()[schema.GroupResource{Resource: "events"}]
	fmt.Println(len(c.Evaluators()), ignored)
	// Output:
	// 1 true
}

// The count name of a resource depends on its group.
func ExampleObjectCountQuotaResourceNameFor() {
	fmt.Println(generic.ObjectCountQuotaResourceNameFor(schema.GroupResource{Resource: "secrets"}))
	fmt.Println(generic.ObjectCountQuotaResourceNameFor(schema.GroupResource{Group: "batch", Resource: "jobs"}))
	// Output:
	// count/secrets
	// count/jobs.batch
}

// ScopeRequirements and ScopeLabelSelector give a quota's scopes and scope
// selector the meaning Kubernetes gives them for value-based scopes.
func ExampleScopeLabelSelector() {
	reqs := generic.ScopeRequirements(
		[]corev1.ResourceQuotaScope{corev1.ResourceQuotaScopePriorityClass},
		&corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
			{ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpNotIn, Values: []string{"low"}},
		}},
	)
	for _, req := range reqs {
		sel, err := generic.ScopeLabelSelector(req)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(sel, sel.Matches(labels.Set{"PriorityClass": "high"}), sel.Matches(labels.Set{}))
	}
	// Output:
	// PriorityClass true false
	// PriorityClass notin (low) true true
}
