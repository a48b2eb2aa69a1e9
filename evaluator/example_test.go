package evaluator_test

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/quotakit/quotakit/evaluator"
	"github.com/quotakit/quotakit/generic"
	"github.com/quotakit/quotakit/quota"
)

// A controller builds the registry from its informers; here the "informers"
// are a map of objects per resource and namespace.
func ExampleNewRegistry() {
	objects := map[string][]runtime.Object{
		"services": {
			&corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Port: 80}, {Port: 443}}}},
			&corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80}}}},
		},
		"persistentvolumeclaims": {
			&corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{
				StorageClassName: ptr.To("gold"),
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}},
			}},
		},
		"secrets": {&corev1.Secret{}, &corev1.Secret{}},
	}
	listers := func(gvr schema.GroupVersionResource) (generic.ListFuncByNamespace, error) {
		return func(namespace string) ([]runtime.Object, error) {
			return objects[gvr.Resource], nil
		}, nil
	}
	registry, err := evaluator.NewRegistry(listers, evaluator.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}

	hard := corev1.ResourceList{
		"services.nodeports":                                resource.MustParse("10"),
		"services.loadbalancers":                            resource.MustParse("1"),
		"gold.storageclass.storage.k8s.io/requests.storage": resource.MustParse("100Gi"),
		"count/secrets":                                     resource.MustParse("5"),
		"pods":                                              resource.MustParse("10"),
	}
	used, err := quota.CalculateUsage("default", nil, hard, registry, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, name := range quota.ResourceNames(used) {
		q := used[name]
		fmt.Printf("%s=%s\n", name, q.String())
	}
	// Output:
	// count/secrets=2
	// gold.storageclass.storage.k8s.io/requests.storage=10Gi
	// pods=0
	// services.loadbalancers=1
	// services.nodeports=3
}

// A quota whose scope selector names volume attributes classes charges the
// claims that refer to one of them, in spec or status.
func ExamplePersistentVolumeClaimEvaluator_Matches() {
	e := evaluator.NewPersistentVolumeClaimEvaluator(nil)
	q := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "fast-storage"},
		Spec: corev1.ResourceQuotaSpec{
			Hard: corev1.ResourceList{corev1.ResourceRequestsStorage: resource.MustParse("1Ti")},
			ScopeSelector: &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{{
				ScopeName: corev1.ResourceQuotaScopeVolumeAttributesClass,
				Operator:  corev1.ScopeSelectorOpIn,
				Values:    []string{"fast"},
			}}},
		},
		// Matching uses status.hard, which the controller copies from spec.
		Status: corev1.ResourceQuotaStatus{Hard: corev1.ResourceList{corev1.ResourceRequestsStorage: resource.MustParse("1Ti")}},
	}
	claims := map[string]*corev1.PersistentVolumeClaim{
		"requests fast":       {Spec: corev1.PersistentVolumeClaimSpec{VolumeAttributesClassName: ptr.To("fast")}},
		"moving from fast":    {Status: corev1.PersistentVolumeClaimStatus{CurrentVolumeAttributesClassName: ptr.To("fast"), ModifyVolumeStatus: &corev1.ModifyVolumeStatus{TargetVolumeAttributesClassName: "slow"}}},
		"slow":                {Spec: corev1.PersistentVolumeClaimSpec{VolumeAttributesClassName: ptr.To("slow")}},
		"no attributes class": {},
	}
	for _, name := range []string{"requests fast", "moving from fast", "slow", "no attributes class"} {
		ok, err := e.Matches(q, claims[name])
		fmt.Println(name, ok, err)
	}
	// Output:
	// requests fast true <nil>
	// moving from fast true <nil>
	// slow false <nil>
	// no attributes class false <nil>
}

// A LoadBalancer service that does not allocate node ports charges only the
// ports that ask for one explicitly.
func ExampleServiceEvaluator_Usage() {
	svc := &corev1.Service{Spec: corev1.ServiceSpec{
		Type:                          corev1.ServiceTypeLoadBalancer,
		AllocateLoadBalancerNodePorts: ptr.To(false),
		Ports:                         []corev1.ServicePort{{Port: 80, NodePort: 30080}, {Port: 443}},
	}}
	usage, err := evaluator.NewServiceEvaluator(nil).Usage(svc)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, name := range quota.ResourceNames(usage) {
		q := usage[name]
		fmt.Printf("%s=%s\n", name, q.String())
	}
	// Output:
	// count/services=1
	// services=1
	// services.loadbalancers=1
	// services.nodeports=1
}

// The claim usage rounds storage up to whole bytes and charges the larger of
// the request and the allocated size.
func ExamplePersistentVolumeClaimEvaluator_Usage() {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{corev1.BetaStorageClassAnnotation: "gold"}},
		Spec: corev1.PersistentVolumeClaimSpec{
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("5Gi")}},
		},
		Status: corev1.PersistentVolumeClaimStatus{
			AllocatedResources: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("8Gi")},
		},
	}
	usage, err := evaluator.NewPersistentVolumeClaimEvaluator(nil).Usage(pvc)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, name := range quota.ResourceNames(usage) {
		q := usage[name]
		fmt.Printf("%s=%s\n", name, q.String())
	}
	// Output:
	// count/persistentvolumeclaims=1
	// gold.storageclass.storage.k8s.io/persistentvolumeclaims=1
	// gold.storageclass.storage.k8s.io/requests.storage=8Gi
	// persistentvolumeclaims=1
	// requests.storage=8Gi
}

// The update filter tells a controller which updates may change usage.
func ExampleDefaultUpdateFilter() {
	filter := evaluator.DefaultUpdateFilter(evaluator.Options{})
	services := corev1.SchemeGroupVersion.WithResource("services")
	nodePort := func(ports ...int32) *corev1.Service {
		svc := &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort}}
		for _, p := range ports {
			svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Port: p})
		}
		return svc
	}
	fmt.Println(filter(services, nodePort(80), nodePort(80, 443)))
	fmt.Println(filter(services, nodePort(80), nodePort(8080)))
	fmt.Println(filter(corev1.SchemeGroupVersion.WithResource("configmaps"), &corev1.ConfigMap{}, &corev1.ConfigMap{}))
	// Output:
	// true
	// false
	// false
}

// Admission ignores a few virtual resources and events.
func ExampleDefaultIgnoredResources() {
	ignored := evaluator.DefaultIgnoredResources()
	for _, gr := range []schema.GroupResource{{Resource: "events"}, {Resource: "bindings"}, {Resource: "configmaps"}} {
		_, ok := ignored[gr]
		fmt.Println(gr, ok)
	}
	// Output:
	// events true
	// bindings true
	// configmaps false
}

// An admission webhook needs no listers: it asks the evaluator of the
// request's resource what the object charges.
func ExampleNewEvaluators() {
	evaluators, err := evaluator.NewEvaluators(nil, evaluator.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	registry := generic.NewRegistry(evaluators...)

	a := &quota.AttributesRecord{
		Operation: "CREATE",
		Resource:  corev1.SchemeGroupVersion.WithResource("configmaps"),
		Object:    &corev1.ConfigMap{},
	}
	e := registry.Get(a.Resource.GroupResource())
	usage, err := e.Usage(a.Object)
	fmt.Println(e.Handles(a), quota.ResourceNames(usage), err)
	// Output:
	// true [configmaps count/configmaps] <nil>
}
