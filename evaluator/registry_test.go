package evaluator_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit/evaluator"
	"github.com/quotakit/quotakit/generic"
	"github.com/quotakit/quotakit/internal/qcmp"
	"github.com/quotakit/quotakit/quota"
)

func groupResources(evals []quota.Evaluator) []string {
	out := make([]string, 0, len(evals))
	for _, e := range evals {
		out = append(out, e.GroupResource().String())
	}
	return out
}

func TestNewEvaluatorsAdmissionOnly(t *testing.T) {
	evals, err := evaluator.NewEvaluators(nil, evaluator.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"pods", "services", "persistentvolumeclaims", "configmaps", "replicationcontrollers", "resourcequotas", "secrets", "resourceclaims.resource.k8s.io"}
	if diff := cmp.Diff(want, groupResources(evals)); diff != "" {
		t.Errorf("NewEvaluators() resources mismatch (-want +got):\n%s", diff)
	}
	for _, e := range evals {
		_, err := e.UsageStats(quota.UsageStatsOptions{Namespace: "ns", Resources: []corev1.ResourceName{"pods"}})
		if e.GroupResource().Resource == "pods" {
			// The pod evaluator has its own error for this.
			if err == nil {
				t.Errorf("pods: UsageStats() without listers: error = nil, want an error")
			}
			continue
		}
		if !errors.Is(err, generic.ErrNoListFunc) {
			t.Errorf("%s: UsageStats() without listers: error = %v, want ErrNoListFunc", e.GroupResource(), err)
		}
	}
}

func TestCountedEvaluators(t *testing.T) {
	tests := []struct {
		resource string
		obj      runtime.Object
		want     corev1.ResourceList
	}{
		{"configmaps", &corev1.ConfigMap{}, rl("configmaps", "1", "count/configmaps", "1")},
		{"secrets", &corev1.Secret{}, rl("secrets", "1", "count/secrets", "1")},
		{"replicationcontrollers", &corev1.ReplicationController{}, rl("replicationcontrollers", "1", "count/replicationcontrollers", "1")},
		{"resourcequotas", &corev1.ResourceQuota{}, rl("resourcequotas", "1", "count/resourcequotas", "1")},
	}
	r, err := evaluator.NewRegistry(nil, evaluator.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.resource, func(t *testing.T) {
			e := r.Get(schema.GroupResource{Resource: tt.resource})
			if e == nil {
				t.Fatalf("Get(%s) = nil", tt.resource)
			}
			got, err := e.Usage(tt.obj)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, qcmp.Quantities()); diff != "" {
				t.Errorf("Usage() mismatch (-want +got):\n%s", diff)
			}
			names := e.MatchingResources([]corev1.ResourceName{"pods", corev1.ResourceName(tt.resource), corev1.ResourceName("count/" + tt.resource)})
			if len(names) != 2 {
				t.Errorf("MatchingResources() = %v, want the count name and the alias", names)
			}
		})
	}
}

func TestNewEvaluatorsWithListers(t *testing.T) {
	var asked []string
	listers := func(gvr schema.GroupVersionResource) (generic.ListFuncByNamespace, error) {
		asked = append(asked, gvr.String())
		switch gvr.Resource {
		case "services":
			return listOf(service(corev1.ServiceTypeNodePort, 0, 0)), nil
		case "secrets":
			return listOf(&corev1.Secret{}, &corev1.Secret{}, &corev1.Secret{}), nil
		}
		return listOf(), nil
	}
	r, err := evaluator.NewRegistry(listers, evaluator.Options{})
	if err != nil {
		t.Fatal(err)
	}
	wantAsked := []string{
		"/v1, Resource=pods", "/v1, Resource=services", "/v1, Resource=persistentvolumeclaims",
		"/v1, Resource=configmaps", "/v1, Resource=replicationcontrollers", "/v1, Resource=resourcequotas", "/v1, Resource=secrets",
		"resource.k8s.io/v1, Resource=resourceclaims", "/v1, Resource=pods", "resource.k8s.io/v1, Resource=deviceclasses",
	}
	if diff := cmp.Diff(wantAsked, asked); diff != "" {
		t.Errorf("listers called with (-want +got):\n%s", diff)
	}
	// The registry lists by group, then resource.
	wantOrder := []string{"configmaps", "persistentvolumeclaims", "pods", "replicationcontrollers", "resourcequotas", "secrets", "services", "resourceclaims.resource.k8s.io"}
	if diff := cmp.Diff(wantOrder, groupResources(r.List())); diff != "" {
		t.Errorf("List() mismatch (-want +got):\n%s", diff)
	}

	hard := rl("services.nodeports", "10", "secrets", "10", "count/configmaps", "10", "requests.storage", "1Gi")
	got, err := quota.CalculateUsage("ns", nil, hard, r, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := rl("services.nodeports", "2", "secrets", "3", "count/configmaps", "0", "requests.storage", "0")
	if diff := cmp.Diff(want, got, qcmp.Quantities()); diff != "" {
		t.Errorf("CalculateUsage() mismatch (-want +got):\n%s", diff)
	}
}

func TestNewEvaluatorsListerErrors(t *testing.T) {
	errNotServed := errors.New("not served")
	listers := func(gvr schema.GroupVersionResource) (generic.ListFuncByNamespace, error) {
		if gvr.Resource == "secrets" || gvr.Resource == "pods" {
			return nil, errNotServed
		}
		return listOf(), nil
	}
	evals, err := evaluator.NewEvaluators(listers, evaluator.Options{})
	if evals != nil || !errors.Is(err, errNotServed) {
		t.Fatalf("NewEvaluators() = %v, %v, want nil and the lister error", evals, err)
	}
	for _, want := range []string{"evaluator: lister for pods: not served", "evaluator: lister for secrets: not served"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("NewEvaluators() error = %q, want it to contain %q", err, want)
		}
	}
	if _, err := evaluator.NewRegistry(listers, evaluator.Options{}); !errors.Is(err, errNotServed) {
		t.Errorf("NewRegistry() error = %v, want the lister error", err)
	}
}

// A lister that returns no function for a resource leaves that evaluator
// admission-only; the others still sum.
func TestNewEvaluatorsNilListFunc(t *testing.T) {
	listers := func(gvr schema.GroupVersionResource) (generic.ListFuncByNamespace, error) {
		if gvr.Resource == "services" {
			return nil, nil
		}
		return listOf(&corev1.ConfigMap{}), nil
	}
	r, err := evaluator.NewRegistry(listers, evaluator.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Get(schema.GroupResource{Resource: "services"}).UsageStats(quota.UsageStatsOptions{Namespace: "ns"}); !errors.Is(err, generic.ErrNoListFunc) {
		t.Errorf("services UsageStats() error = %v, want ErrNoListFunc", err)
	}
	stats, err := r.Get(schema.GroupResource{Resource: "configmaps"}).UsageStats(quota.UsageStatsOptions{Namespace: "ns"})
	if err != nil {
		t.Fatal(err)
	}
	if q := stats.Used["count/configmaps"]; q.Cmp(resource.MustParse("1")) != 0 {
		t.Errorf("configmaps UsageStats() count/configmaps = %s, want 1", q.String())
	}
}

func TestDefaultIgnoredResources(t *testing.T) {
	want := map[schema.GroupResource]struct{}{
		{Resource: "bindings"}:                                                 {},
		{Resource: "componentstatuses"}:                                        {},
		{Group: "authentication.k8s.io", Resource: "tokenreviews"}:             {},
		{Group: "authentication.k8s.io", Resource: "selfsubjectreviews"}:       {},
		{Group: "authorization.k8s.io", Resource: "subjectaccessreviews"}:      {},
		{Group: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"}:  {},
		{Group: "authorization.k8s.io", Resource: "localsubjectaccessreviews"}: {},
		{Group: "authorization.k8s.io", Resource: "selfsubjectrulesreviews"}:   {},
		{Resource: "events"}:                         {},
		{Group: "events.k8s.io", Resource: "events"}: {},
	}
	got := evaluator.DefaultIgnoredResources()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("DefaultIgnoredResources() mismatch (-want +got):\n%s", diff)
	}
	delete(got, schema.GroupResource{Resource: "events"})
	if _, ok := evaluator.DefaultIgnoredResources()[schema.GroupResource{Resource: "events"}]; !ok {
		t.Error("modifying DefaultIgnoredResources()'s result changed later results")
	}
}
