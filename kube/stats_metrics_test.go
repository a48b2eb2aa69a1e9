package kube_test

import (
	"context"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/quotakit/quotakit"
	"github.com/quotakit/quotakit/admission"
	"github.com/quotakit/quotakit/cache/cachetest"
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
		"quotakit_resourcequota_drifts_total", "quotakit_resourcequota_uncounted_quotas", "quotakit_resourcequota_charges_released_total",
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
