package kube_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/quotakit/quotakit"
	"github.com/quotakit/quotakit/clusterquota"
	"github.com/quotakit/quotakit/kube"
)

// TestClusterQuotaClient reads and writes a ClusterQuota through the
// dynamic client as admission.NewClusterAccessor does, and gets a
// namespace the cache does not hold yet live.
func TestClusterQuotaClient(t *testing.T) {
	ctx := t.Context()
	cq := &clusterquota.ClusterQuota{
		TypeMeta:   metav1.TypeMeta{APIVersion: clusterquota.SchemeGroupVersion.String(), Kind: "ClusterQuota"},
		ObjectMeta: metav1.ObjectMeta{Name: "team-a", ResourceVersion: "1"},
		Spec: clusterquota.ClusterQuotaSpec{
			Selector: clusterquota.ClusterQuotaSelector{AnnotationSelector: map[string]string{"team": "a"}},
			Quota:    corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"pods": resource.MustParse("5")}},
		},
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cq)
	if err != nil {
		t.Fatal(err)
	}
	gvr := clusterquota.SchemeGroupVersion.WithResource("clusterquotas")
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{gvr: "ClusterQuotaList"}, &unstructured.Unstructured{Object: content})
	typed := fake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a-1", Annotations: map[string]string{"team": "a"}}})
	client := kube.New(kube.Clients{Typed: typed, Dynamic: dyn}, quotakit.Options{})

	got, err := client.ListClusterQuotas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Name != "team-a" || got[0].Spec.Selector.AnnotationSelector["team"] != "a" {
		t.Fatalf("ListClusterQuotas = %+v, want team-a", got)
	}
	one, err := client.GetClusterQuota(ctx, "team-a")
	if err != nil || one.Name != "team-a" || one.Spec.Selector.AnnotationSelector["team"] != "a" {
		t.Fatalf("GetClusterQuota(team-a) = %+v, %v; want team-a", one, err)
	}
	if _, err := client.GetClusterQuota(ctx, "missing"); !apierrors.IsNotFound(err) {
		t.Errorf("GetClusterQuota(missing) error = %v, want NotFound", err)
	}
	update := got[0].DeepCopy()
	update.Status.Total.Used = corev1.ResourceList{"pods": resource.MustParse("2")}
	out, err := client.UpdateClusterQuotaStatus(ctx, update)
	if err != nil {
		t.Fatal(err)
	}
	if used := out.Status.Total.Used["pods"]; used.String() != "2" {
		t.Errorf("UpdateClusterQuotaStatus returned used pods %s, want 2", used.String())
	}
	if _, err := client.UpdateClusterQuotaStatus(ctx, nil); err == nil {
		t.Error("UpdateClusterQuotaStatus(nil): no error")
	}

	// The informer has not run: its cache is empty, and the getter reads
	// the namespace live.
	get := client.NamespaceGetter(client.NamespaceInformer())
	ns, err := get("a-1")
	if err != nil || ns.Annotations["team"] != "a" {
		t.Errorf("NamespaceGetter(a-1) = %v, %v; want the live namespace", ns, err)
	}
	if _, err := get("missing"); !apierrors.IsNotFound(err) {
		t.Errorf("NamespaceGetter(missing) error = %v, want NotFound", err)
	}
	if _, err := client.NamespaceGetter(nil)("a-1"); err == nil {
		t.Error("NamespaceGetter(nil informer): no error")
	}
	if _, err := kube.ClusterQuotaLister(nil)(); err == nil {
		t.Error("ClusterQuotaLister(nil informer): no error")
	}
	if cqs, err := kube.ClusterQuotaLister(client.ClusterQuotaInformer())(); err != nil || len(cqs) != 0 {
		t.Errorf("ClusterQuotaLister of an informer not run = %v, %v; want none", cqs, err)
	}
}
