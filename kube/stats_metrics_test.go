package kube_test

import (
	"context"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quotakit/quotakit"
	"github.com/quotakit/quotakit/admission"
	"github.com/quotakit/quotakit/cache/cachetest"
	"github.com/quotakit/quotakit/clusterquota"
	"github.com/quotakit/quotakit/kube"
)

type noQuotas struct{}

func (noQuotas) GetQuotas(context.Context, string) ([]corev1.ResourceQuota, error) { return nil, nil }
func (noQuotas) UpdateQuotaStatus(_ context.Context, q *corev1.ResourceQuota) (*corev1.ResourceQuota, error) {
	return q, nil
}

func TestRegisterStatsMetrics(t *testing.T) {
	api := cachetest.New(cachetest.Options{})
	defer api.Close()
	ctrl, err := quotakit.NewController(api, quotakit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := admission.NewEvaluator(noQuotas{}, admission.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	if err := kube.RegisterControllerMetrics(reg, ctrl); err != nil {
		t.Fatal(err)
	}
	if err := kube.RegisterAdmissionMetrics(reg, e); err != nil {
		t.Fatal(err)
	}
	// Again: the second registration replaces the first.
	if err := kube.RegisterControllerMetrics(reg, ctrl); err != nil {
		t.Errorf("registering the controller's metrics again: %v", err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range families {
		names = append(names, f.GetName())
	}
	for _, want := range []string{
		"quotakit_resourcequota_drifts_total", "quotakit_resourcequota_uncounted_quotas", "quotakit_resourcequota_forbidden_resources", "quotakit_resourcequota_charges_released_total",
		"quotakit_resourcequota_status_conflicts_total", "quotakit_resourcequota_status_writes_put_off_total",
		"quotakit_clusterquota_invalid", "quotakit_clusterquota_unenforced",
		"quotakit_admission_status_writes_total", "quotakit_admission_conflicts_total", "quotakit_admission_retries_total",
		"quotakit_admission_retries_exhausted_total", "quotakit_admission_charges_released_total", "quotakit_admission_charges_unreleased_total",
	} {
		if !slices.Contains(names, want) {
			t.Errorf("metric %s not gathered; got %v", want, names)
		}
	}
	if err := kube.RegisterControllerMetrics(reg, nil); err == nil {
		t.Error("RegisterControllerMetrics(nil controller) = nil error")
	}
	if err := kube.RegisterAdmissionMetrics(nil, e); err == nil {
		t.Error("RegisterAdmissionMetrics(nil registerer) = nil error")
	}
}

type noClusterQuotas struct{}

func (noClusterQuotas) ListClusterQuotas(context.Context) ([]clusterquota.ClusterQuota, error) {
	return nil, nil
}

func (noClusterQuotas) GetClusterQuota(_ context.Context, name string) (*clusterquota.ClusterQuota, error) {
	return nil, apierrors.NewNotFound(clusterquota.Resource("clusterquotas"), name)
}

func (noClusterQuotas) UpdateClusterQuotaStatus(_ context.Context, cq *clusterquota.ClusterQuota) (*clusterquota.ClusterQuota, error) {
	return cq, nil
}

// TestRegisterClusterAccessorMetrics: a ClusterQuota that admission
// skips as invalid shows in the gauge.
func TestRegisterClusterAccessorMetrics(t *testing.T) {
	bad := &clusterquota.ClusterQuota{ObjectMeta: metav1.ObjectMeta{Name: "bad", ResourceVersion: "1"}, Spec: clusterquota.ClusterQuotaSpec{
		Selector: clusterquota.ClusterQuotaSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tenant": "b c"}}},
	}}
	var index clusterquota.Index
	index.SetClusterQuota(bad)
	ns := func(name string) (*corev1.Namespace, error) {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, nil
	}
	a := admission.NewClusterAccessor(nil, &index, ns, func() bool { return true }, noClusterQuotas{})
	reg := prometheus.NewRegistry()
	if err := kube.RegisterClusterAccessorMetrics(reg, a); err != nil {
		t.Fatal(err)
	}
	if _, err := a.GetQuotas(t.Context(), "team-b"); err != nil {
		t.Fatal(err)
	}
	got, err := testutil.GatherAndCount(reg, "quotakit_admission_clusterquotas_invalid")
	if err != nil || got != 1 {
		t.Fatalf("gathered %d series, %v", got, err)
	}
	families, _ := reg.Gather()
	if v := families[0].GetMetric()[0].GetGauge().GetValue(); v != 1 {
		t.Errorf("quotakit_admission_clusterquotas_invalid = %v, want 1", v)
	}
	if err := kube.RegisterClusterAccessorMetrics(reg, nil); err == nil {
		t.Error("RegisterClusterAccessorMetrics(nil accessor) = nil error")
	}
}
