package kube_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/scheme"
	metadatafake "k8s.io/client-go/metadata/fake"

	"github.com/quotakit/quotakit"
	"github.com/quotakit/quotakit/kube"
)

// dynamicStatus is a kube.Client without a typed clientset, whose status
// writes go through the dynamic client too: every core resource comes
// unstructured, as from a program that only has a dynamic client.
type dynamicStatus struct {
	*kube.Client
	dynamic *dynamicfake.FakeDynamicClient
}

func (c dynamicStatus) UpdateStatus(ctx context.Context, gvr schema.GroupVersionResource, obj runtime.Object) (runtime.Object, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion("v1")
	u.SetKind("ResourceQuota")
	out, err := c.dynamic.Resource(gvr).Namespace(u.GetNamespace()).UpdateStatus(ctx, u, metav1.UpdateOptions{})
	if err != nil {
		return nil, err
	}
	rq := &corev1.ResourceQuota{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(out.Object, rq); err != nil {
		return nil, err
	}
	return rq, nil
}

// TestControllerOverDynamicClient runs the controller with pods, services
// and ResourceQuotas served by client-go's dynamic client, unstructured:
// the statuses are those typed objects give.
func TestControllerOverDynamicClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var objs []runtime.Object
		add := func(obj runtime.Object) {
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
			if err != nil {
				t.Fatal(err)
			}
			u := &unstructured.Unstructured{Object: m}
			gvks, _, err := scheme.Scheme.ObjectKinds(obj)
			if err != nil {
				t.Fatal(err)
			}
			u.SetGroupVersionKind(gvks[0])
			objs = append(objs, u)
		}
		add(&corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "q"}, Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
			corev1.ResourcePods: resource.MustParse("10"), corev1.ResourceRequestsCPU: resource.MustParse("4"), corev1.ResourceServicesLoadBalancers: resource.MustParse("2"),
		}}})
		for i, cpu := range []string{"500m", "1", "250m"} {
			add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("p%d", i)}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}},
			}}}})
		}
		add(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lb"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}})
		dyn := dynamicfake.NewSimpleDynamicClient(scheme.Scheme, objs...)
		meta := metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme())
		opts := quotakit.Options{}
		client := dynamicStatus{Client: kube.New(kube.Clients{Dynamic: dyn, Metadata: meta}, opts), dynamic: dyn}
		ctrl, err := quotakit.NewController(client, opts)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- ctrl.Run(ctx) }()
		time.Sleep(time.Second)
		synctest.Wait()

		got, err := dyn.Resource(corev1.SchemeGroupVersion.WithResource("resourcequotas")).Namespace("ns").Get(t.Context(), "q", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		used, _, _ := unstructured.NestedStringMap(got.Object, "status", "used")
		want := map[string]string{"pods": "3", "requests.cpu": "1750m", "services.loadbalancers": "1"}
		for k, v := range want {
			if used[k] != v {
				t.Errorf("status.used[%s] = %q, want %q (status.used %v)", k, used[k], v, used)
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	})
}
