package evaluator_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/quotakit/quotakit/evaluator"
)

func TestDefaultUpdateFilter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	opts := evaluator.Options{Pod: evaluator.PodOptions{Now: func() time.Time { return now }}}
	filter := evaluator.DefaultUpdateFilter(opts)

	v1 := corev1.SchemeGroupVersion
	pods, services, pvcs := v1.WithResource("pods"), v1.WithResource("services"), v1.WithResource("persistentvolumeclaims")

	runningPod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "c", Resources: &corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
			}}},
		},
	}
	podWith := func(f func(*corev1.Pod)) *corev1.Pod {
		p := runningPod.DeepCopy()
		f(p)
		return p
	}
	svcWith := func(svc *corev1.Service, f func(*corev1.Service)) *corev1.Service {
		c := svc.DeepCopy()
		f(c)
		return c
	}
	boundClaim := claim(specClass("gold"), request("10Gi"), allocated("10Gi"), vac("fast", "fast", ""))

	tests := []struct {
		name     string
		gvr      schema.GroupVersionResource
		old, obj runtime.Object
		want     bool
	}{
		// pods
		{"pod: nothing changed", pods, runningPod, runningPod.DeepCopy(), false},
		{"pod: label changed", pods, runningPod, podWith(func(p *corev1.Pod) { p.Labels = map[string]string{"a": "b"} }), false},
		{"pod: became Succeeded", pods, runningPod, podWith(func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), true},
		{"pod: became Failed", pods, runningPod, podWith(func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }), true},
		{"pod: terminating scope flipped", pods, runningPod, podWith(func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr.To[int64](30) }), true},
		{"pod: container status resources resized", pods, runningPod, podWith(func(p *corev1.Pod) {
			p.Status.ContainerStatuses[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("2")
		}), true},
		{"pod: deletion grace period over", pods, runningPod, podWith(func(p *corev1.Pod) {
			p.DeletionTimestamp = &metav1.Time{Time: now.Add(-time.Minute)}
			p.DeletionGracePeriodSeconds = ptr.To[int64](30)
		}), true},
		{"pod: deletion grace period not over", pods, runningPod, podWith(func(p *corev1.Pod) {
			p.DeletionTimestamp = &metav1.Time{Time: now.Add(time.Minute)}
			p.DeletionGracePeriodSeconds = ptr.To[int64](30)
		}), false},

		// services
		{"service: nothing changed", services, service(corev1.ServiceTypeNodePort, 0), service(corev1.ServiceTypeNodePort, 0), false},
		{"service: ClusterIP to NodePort", services, service(corev1.ServiceTypeClusterIP, 0), service(corev1.ServiceTypeNodePort, 0), true},
		{"service: NodePort to LoadBalancer", services, service(corev1.ServiceTypeNodePort, 0), service(corev1.ServiceTypeLoadBalancer, 0), true},
		{"service: LoadBalancer to ClusterIP", services, service(corev1.ServiceTypeLoadBalancer, 0), service(corev1.ServiceTypeClusterIP, 0), true},
		{"service: ClusterIP to ExternalName (neither charges)", services, service(corev1.ServiceTypeClusterIP, 0), service(corev1.ServiceTypeExternalName), false},
		// Upstream compares the type only and misses the next three.
		{"service: NodePort gained a port (upstream misses the count)", services, service(corev1.ServiceTypeNodePort, 0, 0), service(corev1.ServiceTypeNodePort, 0, 0, 0), true},
		{"service: LoadBalancer lost a port (upstream misses the count)", services, service(corev1.ServiceTypeLoadBalancer, 0, 0), service(corev1.ServiceTypeLoadBalancer, 0), true},
		{"service: LoadBalancer stopped allocating node ports (upstream misses the count)", services, service(corev1.ServiceTypeLoadBalancer, 0, 30001), withAllocateNodePorts(service(corev1.ServiceTypeLoadBalancer, 0, 30001), false), true},
		{"service: LoadBalancer not allocating, explicit node port unchanged count", services, withAllocateNodePorts(service(corev1.ServiceTypeLoadBalancer, 30001, 0), false), withAllocateNodePorts(service(corev1.ServiceTypeLoadBalancer, 0, 30002), false), false},
		{"service: ClusterIP gained a port (no node ports)", services, service(corev1.ServiceTypeClusterIP, 0), service(corev1.ServiceTypeClusterIP, 0, 0), false},
		{"service: port number changed", services, service(corev1.ServiceTypeNodePort, 30001), svcWith(service(corev1.ServiceTypeNodePort, 30001), func(s *corev1.Service) { s.Spec.Ports[0].Port = 8080 }), false},

		// persistent volume claims
		{"pvc: nothing changed (upstream pointer comparison says true)", pvcs, boundClaim, boundClaim.DeepCopy(), false},
		{"pvc: phase changed", pvcs, boundClaim, withPhase(boundClaim, corev1.ClaimLost), false},
		{"pvc: same allocated value in another format", pvcs, boundClaim, edit(boundClaim, allocated("10737418240")), false},
		{"pvc: allocated storage grew", pvcs, boundClaim, edit(boundClaim, allocated("20Gi")), true},
		{"pvc: allocated storage removed", pvcs, boundClaim, edit(boundClaim, func(p *corev1.PersistentVolumeClaim) { p.Status.AllocatedResources = nil }), true},
		{"pvc: volume attributes class target added", pvcs, boundClaim, edit(boundClaim, vac("slow", "fast", "slow")), true},
		{"pvc: volume attributes class set unchanged", pvcs, claim(vac("fast", "", "")), claim(vac("", "fast", "")), false},
		{"pvc: storage class assigned retroactively", pvcs, claim(request("1Gi")), claim(request("1Gi"), specClass("gold")), true},
		{"pvc: storage request lowered", pvcs, boundClaim, edit(boundClaim, request("5Gi")), true},
		{"pvc: storage request unchanged in another format", pvcs, boundClaim, edit(boundClaim, request("10737418240")), false},

		// anything else
		{"configmap: data changed", v1.WithResource("configmaps"), &corev1.ConfigMap{}, &corev1.ConfigMap{Data: map[string]string{"a": "b"}}, false},
		{"secret", v1.WithResource("secrets"), &corev1.Secret{}, &corev1.Secret{Type: corev1.SecretTypeOpaque}, false},
		{"services in another group", schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "services"}, service(corev1.ServiceTypeClusterIP), service(corev1.ServiceTypeNodePort, 0), false},

		// bad input never panics
		{"pod: wrong types", pods, service(corev1.ServiceTypeClusterIP), runningPod, false},
		{"pod: nil old", pods, nil, runningPod, false},
		{"pod: typed nil", pods, (*corev1.Pod)(nil), podWith(func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }), false},
		{"service: wrong types", services, runningPod, service(corev1.ServiceTypeNodePort, 0), false},
		{"service: nil new", services, service(corev1.ServiceTypeClusterIP), nil, false},
		{"service: typed nil", services, (*corev1.Service)(nil), service(corev1.ServiceTypeNodePort, 0), false},
		{"pvc: wrong types", pvcs, &corev1.PersistentVolume{}, boundClaim, false},
		{"pvc: nil both", pvcs, nil, nil, false},
		{"pvc: typed nil", pvcs, boundClaim, (*corev1.PersistentVolumeClaim)(nil), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := filter(tt.gvr, tt.old, tt.obj); got != tt.want {
				t.Errorf("filter(%s) = %v, want %v", tt.gvr.Resource, got, tt.want)
			}
		})
	}
}
