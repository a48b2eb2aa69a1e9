package kube_test

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	// Linking controller-runtime's controller package registers its
	// workqueue collectors in crmetrics.Registry, as in any program with
	// controller-runtime controllers.
	_ "sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/quotakit/quotakit/kube"
	"github.com/quotakit/quotakit/workqueue"
)

// runs counts the runs of TestMetricsProviderControllerRuntimeRegistry.
var runs atomic.Int64

// series finds the series of family name whose labels include want.
func series(t *testing.T, g prometheus.Gatherer, name string, want map[string]string) (*dto.MetricFamily, *dto.Metric) {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if got, ok := labels[k]; !ok || got != v {
					continue metrics
				}
			}
			return f, m
		}
	}
	return nil, nil
}

// labelNames returns the sorted label names of m.
func labelNames(m *dto.Metric) []string {
	var out []string
	for _, l := range m.GetLabel() {
		out = append(out, l.GetName())
	}
	slices.Sort(out)
	return out
}

// exercise runs one item through a rate-limited queue named name: two adds
// (the second collapses), a Get with the item left unfinished, then Done
// and a rate-limited re-add.
func exercise(t *testing.T, p workqueue.MetricsProvider, name string) (finish func()) {
	t.Helper()
	q := workqueue.NewRateLimiting[string](workqueue.DefaultControllerRateLimiter[string](), workqueue.Options{Name: name, MetricsProvider: p})
	q.Add("a")
	q.Add("a")
	q.Add("b")
	item, shutdown := q.Get()
	if shutdown {
		t.Fatal("Get: queue shut down")
	}
	return func() {
		q.Done(item)
		q.AddRateLimited(item)
		q.ShutDown()
	}
}

func TestMetricsProviderFreshRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	p, err := kube.NewMetricsProvider(reg)
	if err != nil {
		t.Fatalf("NewMetricsProvider: %v", err)
	}
	finish := exercise(t, p, "resourcequota_primary")
	q := map[string]string{"name": "resourcequota_primary"}

	wantValues := []struct {
		metric string
		value  func(*dto.Metric) float64
		want   float64
		help   string
	}{
		{"workqueue_depth", func(m *dto.Metric) float64 { return m.GetGauge().GetValue() }, 1, "[BETA] Current depth of workqueue"},
		{"workqueue_adds_total", func(m *dto.Metric) float64 { return m.GetCounter().GetValue() }, 2, "[BETA] Total number of adds handled by workqueue"},
		{"workqueue_queue_duration_seconds", func(m *dto.Metric) float64 { return float64(m.GetHistogram().GetSampleCount()) }, 1, "[BETA] How long in seconds an item stays in workqueue before being requested."},
		{"workqueue_retries_total", func(m *dto.Metric) float64 { return m.GetCounter().GetValue() }, 0, "[BETA] Total number of retries handled by workqueue"},
	}
	for _, w := range wantValues {
		f, m := series(t, reg, w.metric, q)
		if m == nil {
			t.Errorf("%s%v: no series", w.metric, q)
			continue
		}
		if got := w.value(m); got != w.want {
			t.Errorf("%s = %v, want %v", w.metric, got, w.want)
		}
		if f.GetHelp() != w.help {
			t.Errorf("%s help = %q, want %q", w.metric, f.GetHelp(), w.help)
		}
		if diff := labelNames(m); !slices.Equal(diff, []string{"name"}) {
			t.Errorf("%s labels = %v, want [name]", w.metric, diff)
		}
	}
	if _, m := series(t, reg, "workqueue_unfinished_work_seconds", q); m == nil {
		t.Error("no workqueue_unfinished_work_seconds series")
	}
	if _, m := series(t, reg, "workqueue_longest_running_processor_seconds", q); m == nil {
		t.Error("no workqueue_longest_running_processor_seconds series")
	}
	_, m := series(t, reg, "workqueue_work_duration_seconds", q)
	if buckets := m.GetHistogram().GetBucket(); len(buckets) != 10 || buckets[9].GetUpperBound() != 10 {
		t.Errorf("work duration buckets = %v, want component-base's ten up to 10s", buckets)
	}

	finish()
	checks := []struct {
		metric string
		value  func(*dto.Metric) float64
		want   float64
	}{
		{"workqueue_retries_total", func(m *dto.Metric) float64 { return m.GetCounter().GetValue() }, 1},
		{"workqueue_work_duration_seconds", func(m *dto.Metric) float64 { return float64(m.GetHistogram().GetSampleCount()) }, 1},
	}
	for _, c := range checks {
		if _, m := series(t, reg, c.metric, q); c.value(m) != c.want {
			t.Errorf("after Done and AddRateLimited, %s = %v, want %v", c.metric, c.value(m), c.want)
		}
	}

	// A second provider over the same registry shares the collectors.
	p2, err := kube.NewMetricsProvider(reg)
	if err != nil {
		t.Fatalf("second NewMetricsProvider: %v", err)
	}
	exercise(t, p2, "resourcequota_priority")
	if _, m := series(t, reg, "workqueue_adds_total", map[string]string{"name": "resourcequota_priority"}); m.GetCounter().GetValue() != 2 {
		t.Errorf("adds of the second provider's queue = %v, want 2", m.GetCounter().GetValue())
	}
}

// TestMetricsProviderControllerRuntimeRegistry registers into the registry
// where controller-runtime registered its workqueue collectors: the series
// must join controller-runtime's, with its labels, and move.
func TestMetricsProviderControllerRuntimeRegistry(t *testing.T) {
	// Precondition: controller-runtime's collectors are there, and a
	// provider of kube-controller-manager's shape could not register.
	if err := crmetrics.Registry.Register(prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "workqueue_depth", Help: "[BETA] Current depth of workqueue"}, []string{"name"})); err == nil {
		t.Fatal("controller-runtime's workqueue_depth is not registered in its registry")
	}
	p, err := kube.NewMetricsProvider(crmetrics.Registry)
	if err != nil {
		t.Fatalf("NewMetricsProvider: %v", err)
	}
	// controller-runtime's registry is the process's: a queue name of
	// its own for each run keeps -count=N runs apart.
	name := fmt.Sprintf("quotakit_test_%d", runs.Add(1))
	finish := exercise(t, p, name)
	q := map[string]string{"name": name, "controller": name}

	f, m := series(t, crmetrics.Registry, "workqueue_depth", q)
	if m == nil {
		t.Fatal("no workqueue_depth series")
	}
	if m.GetGauge().GetValue() != 1 || !slices.Equal(labelNames(m), []string{"controller", "name", "priority"}) {
		t.Errorf("workqueue_depth = %v with labels %v, want 1 with controller, name, priority", m.GetGauge().GetValue(), labelNames(m))
	}
	if !strings.HasPrefix(f.GetHelp(), "Current depth of workqueue by") {
		t.Errorf("workqueue_depth help = %q, want controller-runtime's", f.GetHelp())
	}
	if _, m := series(t, crmetrics.Registry, "workqueue_adds_total", q); m.GetCounter().GetValue() != 2 {
		t.Errorf("workqueue_adds_total = %v, want 2", m.GetCounter().GetValue())
	}
	if _, m := series(t, crmetrics.Registry, "workqueue_unfinished_work_seconds", q); m == nil {
		t.Error("no workqueue_unfinished_work_seconds series")
	}
	if _, m := series(t, crmetrics.Registry, "workqueue_longest_running_processor_seconds", q); m == nil {
		t.Error("no workqueue_longest_running_processor_seconds series")
	}
	finish()
	if _, m := series(t, crmetrics.Registry, "workqueue_retries_total", q); m.GetCounter().GetValue() != 1 {
		t.Errorf("workqueue_retries_total = %v, want 1", m.GetCounter().GetValue())
	}
}

// TestMetricsProviderConflict checks that a registry holding the names in
// a third shape gets an error and is left as it was.
func TestMetricsProviderConflict(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounterVec(prometheus.CounterOpts{Name: "workqueue_retries_total", Help: "other"}, []string{"queue"}))
	if _, err := kube.NewMetricsProvider(reg); err == nil || !strings.Contains(err.Error(), "kube: NewMetricsProvider") {
		t.Fatalf("NewMetricsProvider = %v, want an error", err)
	}
	// What the failed call registered is gone: kube-controller-manager's
	// depth gauge registers afresh.
	if err := reg.Register(prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "workqueue_depth", Help: "[BETA] Current depth of workqueue"}, []string{"name"})); err != nil {
		t.Errorf("registering workqueue_depth after the failed NewMetricsProvider: %v", err)
	}
	if _, err := kube.NewMetricsProvider(nil); err == nil {
		t.Error("NewMetricsProvider(nil) = nil error, want one")
	}
}

// TestMetricsProvidersShareFunctionGauges checks that two providers over
// controller-runtime's registry with queues of one name give one series of
// the gauges computed at scrape time, adding up, and a registry that still
// gathers.
func TestMetricsProvidersShareFunctionGauges(t *testing.T) {
	name := fmt.Sprintf("quotakit_test_%d", runs.Add(1))
	for _, v := range []float64{1.5, 2} {
		p, err := kube.NewMetricsProvider(crmetrics.Registry)
		if err != nil {
			t.Fatalf("NewMetricsProvider: %v", err)
		}
		p.NewUnfinishedWorkSecondsMetric(name, func() float64 { return v })
		p.NewLongestRunningProcessorSecondsMetric(name, func() float64 { return v })
	}
	q := map[string]string{"name": name, "controller": name}
	if _, m := series(t, crmetrics.Registry, "workqueue_unfinished_work_seconds", q); m.GetGauge().GetValue() != 3.5 {
		t.Errorf("unfinished work = %v, want 3.5 (the sum)", m.GetGauge().GetValue())
	}
	if _, m := series(t, crmetrics.Registry, "workqueue_longest_running_processor_seconds", q); m.GetGauge().GetValue() != 2 {
		t.Errorf("longest running processor = %v, want 2 (the maximum)", m.GetGauge().GetValue())
	}
}

// TestMetricsProviderZero checks that a zero or nil provider gives a queue
// no metrics instead of panicking.
func TestMetricsProviderZero(t *testing.T) {
	for _, p := range []*kube.MetricsProvider{{}, nil} {
		exercise(t, p, "zero")()
	}
}
