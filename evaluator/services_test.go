package evaluator_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/quotakit/quotakit/evaluator"
	"github.com/quotakit/quotakit/generic"
	"github.com/quotakit/quotakit/internal/qcmp"
	"github.com/quotakit/quotakit/quota"
)

// service returns a service of type typ with one port per nodePort value
// (0 meaning no explicit node port).
func service(typ corev1.ServiceType, nodePorts ...int32) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "svc"},
		Spec:       corev1.ServiceSpec{Type: typ},
	}
	for i, np := range nodePorts {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Port: int32(80 + i), NodePort: np})
	}
	return svc
}

func withAllocateNodePorts(svc *corev1.Service, allocate bool) *corev1.Service {
	svc.Spec.AllocateLoadBalancerNodePorts = ptr.To(allocate)
	return svc
}

// serviceUsage is the usage of a service with the given numbers.
func serviceUsage(loadBalancers, nodePorts int64) corev1.ResourceList {
	return corev1.ResourceList{
		"count/services":         resource.MustParse("1"),
		"services":               resource.MustParse("1"),
		"services.loadbalancers": *resource.NewQuantity(loadBalancers, resource.DecimalSI),
		"services.nodeports":     *resource.NewQuantity(nodePorts, resource.DecimalSI),
	}
}

func TestServiceUsage(t *testing.T) {
	tests := []struct {
		name string
		svc  *corev1.Service
		want corev1.ResourceList
	}{
		{"ClusterIP with ports charges no node port", service(corev1.ServiceTypeClusterIP, 0, 0), serviceUsage(0, 0)},
		{"empty type", service("", 0), serviceUsage(0, 0)},
		{"ExternalName", service(corev1.ServiceTypeExternalName), serviceUsage(0, 0)},
		{"NodePort: every port", service(corev1.ServiceTypeNodePort, 30001, 0, 0), serviceUsage(0, 3)},
		{"NodePort without ports", service(corev1.ServiceTypeNodePort), serviceUsage(0, 0)},
		{"LoadBalancer: one load balancer and every port", service(corev1.ServiceTypeLoadBalancer, 0, 0), serviceUsage(1, 2)},
		{"LoadBalancer allocating node ports", withAllocateNodePorts(service(corev1.ServiceTypeLoadBalancer, 0, 30001, 0), true), serviceUsage(1, 3)},
		{"LoadBalancer not allocating: explicit node ports only", withAllocateNodePorts(service(corev1.ServiceTypeLoadBalancer, 30001, 0, 30002), false), serviceUsage(1, 2)},
		{"LoadBalancer not allocating, no explicit node port", withAllocateNodePorts(service(corev1.ServiceTypeLoadBalancer, 0, 0), false), serviceUsage(1, 0)},
		{"allocateLoadBalancerNodePorts false on a NodePort service is ignored", withAllocateNodePorts(service(corev1.ServiceTypeNodePort, 0, 0), false), serviceUsage(0, 2)},
	}
	e := evaluator.NewServiceEvaluator(nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := e.Usage(tt.svc)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, qcmp.Quantities()); diff != "" {
				t.Errorf("Usage() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestServiceBadObjects(t *testing.T) {
	e := evaluator.NewServiceEvaluator(nil)
	q := &corev1.ResourceQuota{Status: corev1.ResourceQuotaStatus{Hard: corev1.ResourceList{"services": resource.MustParse("1")}}}
	for name, obj := range map[string]runtime.Object{
		"nil":           nil,
		"typed nil":     (*corev1.Service)(nil),
		"wrong type":    &corev1.Pod{},
		"list of items": &corev1.ServiceList{},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := e.Usage(obj); err == nil || !strings.HasPrefix(err.Error(), "evaluator: ") {
				t.Errorf("Usage() error = %v, want an evaluator error", err)
			}
			if ok, err := e.Matches(q, obj); ok || err == nil {
				t.Errorf("Matches() = %v, %v, want false and an error", ok, err)
			}
			if _, err := e.MatchingScopes(obj, nil); err == nil {
				t.Error("MatchingScopes() error = nil, want an error")
			}
		})
	}
}

func TestServiceHandles(t *testing.T) {
	tests := []struct {
		op          admissionv1.Operation
		subresource string
		want        bool
	}{
		{admissionv1.Create, "", true},
		{admissionv1.Update, "", true},
		{admissionv1.Delete, "", false},
		{admissionv1.Connect, "", false},
		{admissionv1.Create, "status", false},
		{admissionv1.Update, "status", false},
		{admissionv1.Connect, "proxy", false},
	}
	e := evaluator.NewServiceEvaluator(nil)
	for _, tt := range tests {
		a := &quota.AttributesRecord{Operation: tt.op, Subresource: tt.subresource, Object: service(corev1.ServiceTypeNodePort, 0), OldObject: service(corev1.ServiceTypeClusterIP)}
		if got := e.Handles(a); got != tt.want {
			t.Errorf("Handles(%s %q) = %v, want %v", tt.op, tt.subresource, got, tt.want)
		}
	}
	if e.Handles(nil) {
		t.Error("Handles(nil) = true, want false")
	}
}

func TestServiceMatchingResources(t *testing.T) {
	e := evaluator.NewServiceEvaluator(nil)
	got := e.MatchingResources([]corev1.ResourceName{
		"services.nodeports", "pods", "services", "count/services", "services.loadbalancers", "services", "count/services.core", "requests.storage",
	})
	want := []corev1.ResourceName{"count/services", "services", "services.loadbalancers", "services.nodeports"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("MatchingResources() mismatch (-want +got):\n%s", diff)
	}
	if got := e.MatchingResources(nil); len(got) != 0 {
		t.Errorf("MatchingResources(nil) = %v, want empty", got)
	}
}

func TestServiceMatches(t *testing.T) {
	hardOf := func(names ...corev1.ResourceName) corev1.ResourceList {
		rl := corev1.ResourceList{}
		for _, n := range names {
			rl[n] = resource.MustParse("5")
		}
		return rl
	}
	tests := []struct {
		name  string
		quota *corev1.ResourceQuota
		want  bool
	}{
		{"services", &corev1.ResourceQuota{Status: corev1.ResourceQuotaStatus{Hard: hardOf("services")}}, true},
		{"count/services", &corev1.ResourceQuota{Status: corev1.ResourceQuotaStatus{Hard: hardOf("count/services", "pods")}}, true},
		{"services.nodeports", &corev1.ResourceQuota{Status: corev1.ResourceQuotaStatus{Hard: hardOf("services.nodeports")}}, true},
		{"no service resource", &corev1.ResourceQuota{Status: corev1.ResourceQuotaStatus{Hard: hardOf("pods", "requests.storage")}}, false},
		{"only in spec.hard", &corev1.ResourceQuota{Spec: corev1.ResourceQuotaSpec{Hard: hardOf("services")}}, false},
		{"scoped quota", &corev1.ResourceQuota{
			Spec:   corev1.ResourceQuotaSpec{Scopes: []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeNotBestEffort}},
			Status: corev1.ResourceQuotaStatus{Hard: hardOf("services")},
		}, false},
		{"scope selector", &corev1.ResourceQuota{
			Spec: corev1.ResourceQuotaSpec{ScopeSelector: &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
				{ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpDoesNotExist},
			}}},
			Status: corev1.ResourceQuotaStatus{Hard: hardOf("services")},
		}, false},
	}
	e := evaluator.NewServiceEvaluator(nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := e.Matches(tt.quota, service(corev1.ServiceTypeClusterIP))
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("Matches() = %v, want %v", got, tt.want)
			}
		})
	}
	if _, err := e.Matches(nil, service(corev1.ServiceTypeClusterIP)); err == nil {
		t.Error("Matches(nil quota) error = nil, want an error")
	}
}

func TestServiceScopesAndConstraints(t *testing.T) {
	e := evaluator.NewServiceEvaluator(nil)
	scopes := []corev1.ScopedResourceSelectorRequirement{
		{ScopeName: corev1.ResourceQuotaScopeBestEffort, Operator: corev1.ScopeSelectorOpExists},
		{ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpIn, Values: []string{"high"}},
	}
	if got, err := e.MatchingScopes(service(corev1.ServiceTypeNodePort), scopes); err != nil || len(got) != 0 {
		t.Errorf("MatchingScopes() = %v, %v, want empty, nil", got, err)
	}
	if got, err := e.UncoveredQuotaScopes(scopes, nil); err != nil || len(got) != 0 {
		t.Errorf("UncoveredQuotaScopes() = %v, %v, want empty, nil", got, err)
	}
	if err := e.Constraints([]corev1.ResourceName{"services", "cpu"}, service(corev1.ServiceTypeNodePort)); err != nil {
		t.Errorf("Constraints() = %v, want nil", err)
	}
	if gr := e.GroupResource(); gr.Group != "" || gr.Resource != "services" {
		t.Errorf("GroupResource() = %v, want services", gr)
	}
}

func listOf(objs ...runtime.Object) generic.ListFuncByNamespace {
	return func(ns string) ([]runtime.Object, error) {
		if ns != "ns" {
			return nil, nil
		}
		return objs, nil
	}
}

func TestServiceUsageStats(t *testing.T) {
	list := listOf(
		service(corev1.ServiceTypeClusterIP, 0),
		service(corev1.ServiceTypeNodePort, 0, 0),
		service(corev1.ServiceTypeLoadBalancer, 0, 0, 0),
		withAllocateNodePorts(service(corev1.ServiceTypeLoadBalancer, 30001, 0), false),
	)
	tests := []struct {
		name    string
		options quota.UsageStatsOptions
		want    corev1.ResourceList
	}{
		{
			name:    "sum",
			options: quota.UsageStatsOptions{Namespace: "ns", Resources: []corev1.ResourceName{"services"}},
			want: corev1.ResourceList{
				"count/services":         resource.MustParse("4"),
				"services":               resource.MustParse("4"),
				"services.loadbalancers": resource.MustParse("2"),
				"services.nodeports":     resource.MustParse("6"),
			},
		},
		{
			name:    "empty namespace",
			options: quota.UsageStatsOptions{Namespace: "other", Resources: []corev1.ResourceName{"services", "services.nodeports"}},
			want:    corev1.ResourceList{"services": resource.MustParse("0"), "services.nodeports": resource.MustParse("0")},
		},
		{
			name:    "scoped quota counts nothing",
			options: quota.UsageStatsOptions{Namespace: "ns", Scopes: []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeTerminating}, Resources: []corev1.ResourceName{"services"}},
			want:    corev1.ResourceList{"services": resource.MustParse("0")},
		},
	}
	e := evaluator.NewServiceEvaluator(list)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := e.UsageStats(tt.options)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got.Used, qcmp.Quantities()); diff != "" {
				t.Errorf("UsageStats() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestServiceUsageStatsErrors(t *testing.T) {
	_, err := evaluator.NewServiceEvaluator(nil).UsageStats(quota.UsageStatsOptions{Namespace: "ns"})
	if !errors.Is(err, generic.ErrNoListFunc) || !strings.Contains(err.Error(), "services") {
		t.Errorf("UsageStats() without a list func: error = %v, want ErrNoListFunc naming services", err)
	}
	_, err = evaluator.NewServiceEvaluator(listOf(&corev1.Pod{})).UsageStats(quota.UsageStatsOptions{Namespace: "ns"})
	if err == nil || !strings.Contains(err.Error(), "expected *v1.Service, got *v1.Pod") {
		t.Errorf("UsageStats() over a pod: error = %v, want a type error", err)
	}
}
