package evaluator

import (
	"fmt"
	"slices"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit/generic"
	"github.com/quotakit/quotakit/quota"
)

// servicesGR is the resource the service evaluator charges.
var servicesGR = schema.GroupResource{Resource: "services"}

// serviceCountName is count/services.
const serviceCountName corev1.ResourceName = "count/services"

// ServiceEvaluator is the [quota.Evaluator] of core/v1 Services, with the
// semantics of Kubernetes 1.37. It charges
//
//   - count/services and services: 1 for every service;
//   - services.loadbalancers: 1 for a LoadBalancer service, 0 otherwise;
//   - services.nodeports: for a NodePort service, every port; for a
//     LoadBalancer service, every port, or, when
//     spec.allocateLoadBalancerNodePorts is false, only the ports with an
//     explicit nodePort; 0 otherwise.
//
// services.loadbalancers and services.nodeports are present, possibly zero,
// in every usage. Services have no scopes: a quota with any scope or scope
// selector never counts them. Creates and updates of the main resource go
// through quota, since an update can change the type or the ports.
//
// It is safe for concurrent use.
type ServiceEvaluator struct {
	listFunc generic.ListFuncByNamespace
}

var _ quota.Evaluator = (*ServiceEvaluator)(nil)

// NewServiceEvaluator returns the evaluator of services. listFunc lists the
// services of a namespace for UsageStats; it may be nil for an evaluator used
// only by admission, whose UsageStats then fails with
// [generic.ErrNoListFunc].
func NewServiceEvaluator(listFunc generic.ListFuncByNamespace) *ServiceEvaluator {
	return &ServiceEvaluator{listFunc: listFunc}
}

// Constraints does nothing: a service needs nothing to be charged.
func (e *ServiceEvaluator) Constraints(required []corev1.ResourceName, item runtime.Object) error {
	return nil
}

// GroupResource returns services in the core group.
func (e *ServiceEvaluator) GroupResource() schema.GroupResource { return servicesGR }

// Handles reports whether a is a create or an update of a service, not of
// one of its subresources.
func (e *ServiceEvaluator) Handles(a quota.Attributes) bool {
	if a == nil || a.GetSubresource() != "" {
		return false
	}
	op := a.GetOperation()
	return op == admissionv1.Create || op == admissionv1.Update
}

// Matches reports whether the quota's status.hard names a service resource
// and the quota has no scopes. item must be a *corev1.Service.
func (e *ServiceEvaluator) Matches(resourceQuota *corev1.ResourceQuota, item runtime.Object) (bool, error) {
	if _, err := asService(item); err != nil {
		return false, err
	}
	return generic.Matches(resourceQuota, item, e.MatchingResources, generic.MatchesNoScopeFunc)
}

// MatchingResources returns the names of input among count/services,
// services, services.loadbalancers and services.nodeports, sorted and
// without duplicates.
func (e *ServiceEvaluator) MatchingResources(input []corev1.ResourceName) []corev1.ResourceName {
	out := make([]corev1.ResourceName, 0, len(input))
	for _, name := range input {
		switch name {
		case serviceCountName, corev1.ResourceServices, corev1.ResourceServicesLoadBalancers, corev1.ResourceServicesNodePorts:
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// MatchingScopes returns an empty list: services match no scope. item must
// be a *corev1.Service.
func (e *ServiceEvaluator) MatchingScopes(item runtime.Object, scopes []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	if _, err := asService(item); err != nil {
		return []corev1.ScopedResourceSelectorRequirement{}, err
	}
	return []corev1.ScopedResourceSelectorRequirement{}, nil
}

// UncoveredQuotaScopes returns an empty list: services match no scope, so
// no scope limits them.
func (e *ServiceEvaluator) UncoveredQuotaScopes(limitedScopes, matchedQuotaScopes []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	return []corev1.ScopedResourceSelectorRequirement{}, nil
}

// Usage returns what a *corev1.Service consumes; see [ServiceEvaluator].
func (e *ServiceEvaluator) Usage(item runtime.Object) (corev1.ResourceList, error) {
	svc, err := asService(item)
	if err != nil {
		return nil, err
	}
	var loadBalancers int64
	if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
		loadBalancers = 1
	}
	return corev1.ResourceList{
		serviceCountName:                     *resource.NewQuantity(1, resource.DecimalSI),
		corev1.ResourceServices:              *resource.NewQuantity(1, resource.DecimalSI),
		corev1.ResourceServicesLoadBalancers: *resource.NewQuantity(loadBalancers, resource.DecimalSI),
		corev1.ResourceServicesNodePorts:     *resource.NewQuantity(serviceNodePorts(svc), resource.DecimalSI),
	}, nil
}

// serviceNodePorts is the number of node ports svc charges. A LoadBalancer
// service's node ports are not allocated yet at admission, so the count
// follows the intent: every port, unless allocation is switched off, in
// which case only the ports that ask for a node port explicitly.
func serviceNodePorts(svc *corev1.Service) int64 {
	switch svc.Spec.Type {
	case corev1.ServiceTypeNodePort:
		return int64(len(svc.Spec.Ports))
	case corev1.ServiceTypeLoadBalancer:
		if svc.Spec.AllocateLoadBalancerNodePorts != nil && !*svc.Spec.AllocateLoadBalancerNodePorts {
			var n int64
			for _, p := range svc.Spec.Ports {
				if p.NodePort != 0 {
					n++
				}
			}
			return n
		}
		return int64(len(svc.Spec.Ports))
	}
	return 0
}

// UsageStats sums the usage of the services of options.Namespace; see
// [generic.CalculateUsageStats]. A quota with scopes counts nothing.
func (e *ServiceEvaluator) UsageStats(options quota.UsageStatsOptions) (quota.UsageStats, error) {
	if e.listFunc == nil {
		return quota.UsageStats{}, fmt.Errorf("evaluator: usage stats of %s: %w", servicesGR, generic.ErrNoListFunc)
	}
	return generic.CalculateUsageStats(options, e.listFunc, generic.MatchesNoScopeFunc, e.Usage)
}

// serviceUsageMayChange reports whether an update from old to new may
// change what the service charges: its quota type (NodePort, LoadBalancer or
// neither) or its number of node ports changed. Upstream's update filter
// looks at the type only, so adding or removing ports of a NodePort service
// is not replenished until the next full resync.
func serviceUsageMayChange(oldSvc, newSvc *corev1.Service) bool {
	return quotaServiceType(oldSvc) != quotaServiceType(newSvc) || serviceNodePorts(oldSvc) != serviceNodePorts(newSvc)
}

// quotaServiceType is the type of svc as far as quota is concerned:
// NodePort, LoadBalancer, or "" for any other type.
func quotaServiceType(svc *corev1.Service) corev1.ServiceType {
	switch svc.Spec.Type {
	case corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
		return svc.Spec.Type
	}
	return ""
}

// asService returns obj as a non-nil *corev1.Service.
func asService(obj runtime.Object) (*corev1.Service, error) {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return nil, fmt.Errorf("evaluator: expected *v1.Service, got %T", obj)
	}
	if svc == nil {
		return nil, fmt.Errorf("evaluator: nil *v1.Service")
	}
	return svc, nil
}
