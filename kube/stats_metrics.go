package kube

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quotakit/quotakit"
	"github.com/quotakit/quotakit/admission"
)

// RegisterControllerMetrics registers, in reg, the counts a
// [quotakit.Controller] keeps besides its queues', read at each scrape:
//
//   - quotakit_resourcequota_drifts_total: full resyncs that found a
//     quota's usage kept from events wrong ([quotakit.Controller.Drifts]);
//   - quotakit_resourcequota_uncounted_quotas: quotas naming a resource
//     nobody counts, or that the controller may not list
//     ([quotakit.Controller.UncountedQuotas]);
//   - quotakit_resourcequota_forbidden_resources: resources a quota names
//     that the server forbids the controller to list or watch
//     ([quotakit.Controller.ForbiddenResources]);
//   - quotakit_resourcequota_charges_released_total: recalculations that
//     released admission charges no object followed within the charge
//     window ([quotakit.Controller.ReleasedCharges]);
//   - quotakit_resourcequota_status_conflicts_total: status writes of the
//     controller's that conflicted with another writer's, admission's
//     charges: expected under load, retried, logged at V(1)
//     ([quotakit.Controller.StatusConflicts]);
//   - quotakit_resourcequota_status_writes_put_off_total: status writes
//     that only released usage, put off to go out with the next releases
//     ([quotakit.Controller.PutOffWrites]);
//   - quotakit_clusterquota_invalid: ClusterQuotas skipped because their
//     spec is invalid ([quotakit.Controller.InvalidClusterQuotas]);
//   - quotakit_clusterquota_unenforced: ClusterQuotas that select
//     namespaces admission does not enforce
//     ([quotakit.Controller.UnenforcedClusterQuotas]).
//
// Registering another controller in the same registry replaces the
// series of the first. It returns the registration error, if any; a nil
// controller is one.
func RegisterControllerMetrics(reg prometheus.Registerer, c *quotakit.Controller) error {
	if c == nil || reg == nil {
		return errors.New("kube: RegisterControllerMetrics: nil controller or registerer")
	}
	return registerAll(reg,
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "quotakit_resourcequota_drifts_total",
			Help: "Full resyncs that found a quota's usage kept from events different from a recalculation.",
		}, func() float64 { return float64(c.Drifts()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "quotakit_resourcequota_uncounted_quotas",
			Help: "Quotas whose spec.hard names a resource nobody counts, or that the controller may not list.",
		}, func() float64 { return float64(c.UncountedQuotas()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "quotakit_resourcequota_forbidden_resources",
			Help: "Resources the controller counts, or a quota names, whose list or watch the API server refuses with 403 Forbidden.",
		}, func() float64 { return float64(c.ForbiddenResources()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "quotakit_resourcequota_charges_released_total",
			Help: "Recalculations that released admission charges that no object followed within the charge window.",
		}, func() float64 { return float64(c.ReleasedCharges()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "quotakit_resourcequota_status_conflicts_total",
			Help: "Status writes of the controller that conflicted with another writer's (admission charging the quota); each is retried.",
		}, func() float64 { return float64(c.StatusConflicts()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "quotakit_resourcequota_status_writes_put_off_total",
			Help: "Status writes that only released usage, put off to go out together with the releases that followed within 100ms.",
		}, func() float64 { return float64(c.PutOffWrites()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "quotakit_clusterquota_invalid",
			Help: "ClusterQuotas whose spec is invalid: each limits nothing and is not recounted until it is fixed (condition Valid=False).",
		}, func() float64 { return float64(c.InvalidClusterQuotas()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "quotakit_clusterquota_unenforced",
			Help: "ClusterQuotas that select namespaces admission does not enforce (condition NamespacesEnforced=False).",
		}, func() float64 { return float64(c.UnenforcedClusterQuotas()) }),
	)
}

// RegisterClusterAccessorMetrics registers, in reg, the gauge
// quotakit_admission_clusterquotas_invalid: the ClusterQuotas that
// admission skips because their spec is invalid
// ([admission.ClusterAccessor.Invalid]), read at each scrape. A nil
// accessor is an error.
func RegisterClusterAccessorMetrics(reg prometheus.Registerer, a *admission.ClusterAccessor) error {
	if a == nil || reg == nil {
		return errors.New("kube: RegisterClusterAccessorMetrics: nil accessor or registerer")
	}
	return registerAll(reg, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "quotakit_admission_clusterquotas_invalid",
		Help: "ClusterQuotas that admission skips because their spec is invalid: each limits nothing until it is fixed.",
	}, func() float64 { return float64(len(a.Invalid())) }))
}

// RegisterAdmissionMetrics registers, in reg, the counters of an
// [admission.Evaluator] ([admission.Stats]), read at each scrape:
// quotakit_admission_status_writes_total, _conflicts_total,
// _retries_total, _retries_exhausted_total (requests denied because the
// writes kept failing), _charges_released_total and
// _charges_unreleased_total (charges of requests not admitted, written
// back or left to the controller). Registering another evaluator in the
// same registry replaces the series of the first. A nil evaluator is an
// error.
func RegisterAdmissionMetrics(reg prometheus.Registerer, e *admission.Evaluator) error {
	if e == nil || reg == nil {
		return errors.New("kube: RegisterAdmissionMetrics: nil evaluator or registerer")
	}
	counter := func(name, help string, value func(admission.Stats) int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "quotakit_admission_" + name, Help: help},
			func() float64 { return float64(value(e.Stats())) })
	}
	return registerAll(reg,
		counter("status_writes_total", "Quota status writes made by admission: charges and releases.", func(s admission.Stats) int64 { return s.Writes }),
		counter("conflicts_total", "Quota status writes that failed with a conflict.", func(s admission.Stats) int64 { return s.Conflicts }),
		counter("retries_total", "Times a batch re-read its quotas and checked its requests again after a failed write.", func(s admission.Stats) int64 { return s.Retries }),
		counter("retries_exhausted_total", "Requests denied because the status writes kept failing after every retry.", func(s admission.Stats) int64 { return s.Exhausted }),
		counter("charges_released_total", "Writes that took back the charges of requests that were not admitted.", func(s admission.Stats) int64 { return s.Released }),
		counter("charges_unreleased_total", "Quotas whose charges of requests not admitted could not be taken back.", func(s admission.Stats) int64 { return s.Unreleased }),
	)
}

// registerAll registers every collector of cs in place of any collector of
// the same series, and returns the errors.
func registerAll(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	var errs []error
	for _, c := range cs {
		reg.Unregister(c)
		errs = append(errs, reg.Register(c))
	}
	return errors.Join(errs...)
}
