package admissiontest_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quotakit/quotakit/admission/admissiontest"
	"github.com/quotakit/quotakit/cache/cachetest"
	"github.com/quotakit/quotakit/clusterquota"
)

// TestClient: the cluster quota methods over an API that serves
// ClusterQuotas, their resourceVersion precondition, a namespace read,
// and errors, not panics, without an API.
func TestClient(t *testing.T) {
	ctx := t.Context()
	api := cachetest.New(cachetest.Options{})
	defer api.Close()
	if err := admissiontest.RegisterClusterQuotas(api); err != nil {
		t.Fatal(err)
	}
	c := admissiontest.New(api)
	if _, err := api.Create(ctx, clusterquota.SchemeGroupVersion.WithResource("clusterquotas"), &clusterquota.ClusterQuota{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.Create(ctx, corev1.SchemeGroupVersion.WithResource("namespaces"), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a-1"}}); err != nil {
		t.Fatal(err)
	}
	list, err := c.ListClusterQuotas(ctx)
	if err != nil || len(list) != 1 {
		t.Fatalf("ListClusterQuotas = %d, %v; want one", len(list), err)
	}
	cq, err := c.GetClusterQuota(ctx, "team-a")
	if err != nil {
		t.Fatal(err)
	}
	stale := cq.DeepCopy()
	cq.Status.Total.Used = corev1.ResourceList{corev1.ResourcePods: *cq.Status.Total.Used.Pods()}
	if _, err := c.UpdateClusterQuotaStatus(ctx, cq); err != nil {
		t.Fatalf("UpdateClusterQuotaStatus: %v", err)
	}
	if _, err := c.UpdateClusterQuotaStatus(ctx, stale); !apierrors.IsConflict(err) {
		t.Errorf("a write over a stale resourceVersion = %v, want a conflict", err)
	}
	if _, err := c.GetClusterQuota(ctx, "nobody"); !apierrors.IsNotFound(err) {
		t.Errorf("GetClusterQuota(nobody) = %v, want NotFound", err)
	}
	if ns, err := c.Namespace("a-1"); err != nil || ns.Name != "a-1" {
		t.Errorf("Namespace(a-1) = %v, %v", ns, err)
	}

	var zero admissiontest.Client
	if _, err := zero.ListQuotas(ctx, "a"); err == nil {
		t.Error("ListQuotas without an API: no error")
	}
	if _, err := zero.GetClusterQuota(ctx, "a"); err == nil {
		t.Error("GetClusterQuota without an API: no error")
	}
	if err := admissiontest.RegisterClusterQuotas(nil); err == nil {
		t.Error("RegisterClusterQuotas(nil): no error")
	}
}
