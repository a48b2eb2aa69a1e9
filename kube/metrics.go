package kube

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quotakit/quotakit/workqueue"
)

// MetricsProvider is a [workqueue.MetricsProvider] that exposes quotakit's
// queues to Prometheus as client-go's workqueue metrics: the seven series
// workqueue_depth, workqueue_adds_total, workqueue_queue_duration_seconds,
// workqueue_work_duration_seconds, workqueue_unfinished_work_seconds,
// workqueue_longest_running_processor_seconds and workqueue_retries_total,
// so that dashboards and alerts written for kube-controller-manager or for
// controller-runtime keep working.
//
// Which of the two shapes it takes depends on the registry:
//
//   - In a registry without those names, or where they were registered
//     as kube-controller-manager exposes them, the series carry the one
//     label name (the queue's name) and kube-controller-manager's help
//     strings, with their "[BETA] " prefix, and histogram buckets (ten,
//     1e-8 s to 10 s).
//   - In a registry where controller-runtime registered them (its
//     metrics.Registry, once any controller-runtime controller package is
//     linked in), the series join controller-runtime's: labels name and
//     controller (both the queue's name, as controller-runtime sets them)
//     and, on workqueue_depth, priority (""), written through
//     controller-runtime's own collectors. Prometheus allows one label
//     set per name in a registry, so these are the only series such a
//     registry can hold.
//
// Two providers over one registry share its collectors, and queues of the
// same name share series. In a pedantic registry
// (prometheus.NewPedanticRegistry) only kube-controller-manager's shape
// works. The two gauges
// whose values the queues compute (unfinished work and longest running
// processor) are read at scrape time: no goroutine refreshes them.
//
// Build one with [NewMetricsProvider]; a zero or nil MetricsProvider
// gives no metrics. It is safe for concurrent use.
type MetricsProvider struct {
	depth, adds, latency, work, retries func(name string) any
	unfinished, longest                 *funcGauge
}

var _ workqueue.MetricsProvider = (*MetricsProvider)(nil)

// Exposed help strings of kube-controller-manager's workqueue metrics
// (component-base marks them BETA, which it prefixes to the help text).
const (
	helpDepth      = "[BETA] Current depth of workqueue"
	helpAdds       = "[BETA] Total number of adds handled by workqueue"
	helpLatency    = "[BETA] How long in seconds an item stays in workqueue before being requested."
	helpWork       = "[BETA] How long in seconds processing an item from workqueue takes."
	helpUnfinished = "[BETA] How many seconds of work has done that is in progress and hasn't been observed by work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases."
	helpLongest    = "[BETA] How many seconds has the longest running processor for workqueue been running."
	helpRetries    = "[BETA] Total number of retries handled by workqueue"
)

// Help strings of controller-runtime v0.25's workqueue metrics, needed to
// find its collectors in a registry: Prometheus hands out a registered
// collector only to one that describes itself identically.
const (
	crHelpDepth      = "Current depth of workqueue by workqueue and priority"
	crHelpLatency    = "How long in seconds an item stays in workqueue before being requested"
	crHelpUnfinished = "How many seconds of work has been done that is in progress and hasn't been observed by work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases."
	crHelpRetries    = "Total number of items added to the workqueue with a non-zero delay (rate-limited requeues, explicit RequeueAfter or AddAfter calls)"
)

// shape is one of the two label and help sets the series can take.
type shape struct {
	labels      []string
	depthLabels []string
	help        [7]string // depth, adds, latency, work, unfinished, longest, retries
	buckets     []float64
	values      func(name string) []string
	depthValues func(name string) []string
	// funcsAside says whether the two gauges of value functions must be
	// registered aside from a collector of the same name (see funcGauge).
	funcsAside bool
}

var (
	kcmShape = shape{
		labels:      []string{"name"},
		depthLabels: []string{"name"},
		help:        [7]string{helpDepth, helpAdds, helpLatency, helpWork, helpUnfinished, helpLongest, helpRetries},
		// component-base's buckets: 1e-8 s to 10 s.
		buckets:     prometheus.ExponentialBuckets(10e-9, 10, 10),
		values:      func(name string) []string { return []string{name} },
		depthValues: func(name string) []string { return []string{name} },
	}
	crShape = shape{
		labels:      []string{"name", "controller"},
		depthLabels: []string{"name", "controller", "priority"},
		help: [7]string{crHelpDepth, "Total number of adds handled by workqueue", crHelpLatency,
			"How long in seconds processing an item from workqueue takes.", crHelpUnfinished,
			"How many seconds has the longest running processor for workqueue been running.", crHelpRetries},
		// controller-runtime's buckets: 1e-8 s to 1000 s.
		buckets:     prometheus.ExponentialBuckets(10e-9, 10, 12),
		values:      func(name string) []string { return []string{name, name} },
		depthValues: func(name string) []string { return []string{name, name, ""} },
		// controller-runtime registered these two as gauges it sets
		// itself; ours are registered aside (see funcGauge).
		funcsAside: true,
	}
)

// NewMetricsProvider registers the workqueue series in reg, or finds them
// there (see [MetricsProvider]), and returns a provider that writes them.
// It returns an error, and leaves reg as it was, when reg holds series of
// those names in a shape that is neither kube-controller-manager's nor
// controller-runtime's.
func NewMetricsProvider(reg prometheus.Registerer) (*MetricsProvider, error) {
	if reg == nil {
		return nil, errors.New("kube: NewMetricsProvider: nil Registerer")
	}
	p, kcmErr := register(reg, kcmShape)
	if kcmErr == nil {
		return p, nil
	}
	p, crErr := register(reg, crShape)
	if crErr == nil {
		return p, nil
	}
	return nil, fmt.Errorf("kube: NewMetricsProvider: the workqueue metrics are registered with labels or help strings neither of kube-controller-manager (%w) nor of controller-runtime (%w)", kcmErr, crErr)
}

// register registers the collectors of s in reg, or takes the identical
// ones reg already holds. On any other error it unregisters what it
// registered.
func register(reg prometheus.Registerer, s shape) (*MetricsProvider, error) {
	var added []prometheus.Collector
	fail := func(err error) (*MetricsProvider, error) {
		for _, c := range added {
			reg.Unregister(c)
		}
		return nil, err
	}
	// use registers c, returning it or the identical collector already
	// registered.
	use := func(c prometheus.Collector) (prometheus.Collector, error) {
		err := reg.Register(c)
		if err == nil {
			added = append(added, c)
			return c, nil
		}
		if are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); ok {
			return are.ExistingCollector, nil
		}
		return nil, err
	}
	gauge := func(name, help string, labels []string) prometheus.Collector {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: "workqueue", Name: name, Help: help}, labels)
	}
	counter := func(name, help string) prometheus.Collector {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "workqueue", Name: name, Help: help}, s.labels)
	}
	histogram := func(name, help string) prometheus.Collector {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: "workqueue", Name: name, Help: help, Buckets: s.buckets}, s.labels)
	}

	p := &MetricsProvider{}
	specs := []struct {
		c      prometheus.Collector
		values func(string) []string
		into   *func(string) any
	}{
		{gauge("depth", s.help[0], s.depthLabels), s.depthValues, &p.depth},
		{counter("adds_total", s.help[1]), s.values, &p.adds},
		{histogram("queue_duration_seconds", s.help[2]), s.values, &p.latency},
		{histogram("work_duration_seconds", s.help[3]), s.values, &p.work},
		{counter("retries_total", s.help[6]), s.values, &p.retries},
	}
	for _, spec := range specs {
		got, err := use(spec.c)
		if err != nil {
			return fail(err)
		}
		values := spec.values
		switch v := got.(type) {
		case *prometheus.GaugeVec:
			*spec.into = func(name string) any { return v.WithLabelValues(values(name)...) }
		case *prometheus.CounterVec:
			*spec.into = func(name string) any { return v.WithLabelValues(values(name)...) }
		case *prometheus.HistogramVec:
			*spec.into = func(name string) any { return v.WithLabelValues(values(name)...) }
		default:
			return fail(fmt.Errorf("a collector of type %T is registered in place of %T", got, spec.c))
		}
	}

	funcs := []struct {
		name, help string
		combine    func([]float64) float64
		into       **funcGauge
	}{
		{"unfinished_work_seconds", s.help[4], sum, &p.unfinished},
		{"longest_running_processor_seconds", s.help[5], slices.Max[[]float64], &p.longest},
	}
	for _, f := range funcs {
		desc := prometheus.NewDesc("workqueue_"+f.name, f.help, s.labels, nil)
		g := &funcGauge{
			desc:     desc,
			describe: desc,
			values:   s.values,
			combine:  f.combine,
			byName:   map[string][]func() float64{},
		}
		if s.funcsAside {
			g.describe = prometheus.NewDesc("quotakit_workqueue_"+f.name+"_functions", "Registration of quotakit's "+f.name+" gauge beside controller-runtime's; never collected.", nil, nil)
		}
		got, err := use(g)
		if err != nil {
			return fail(err)
		}
		existing, ok := got.(*funcGauge)
		if !ok {
			return fail(fmt.Errorf("a collector of type %T is registered in place of workqueue_%s", got, f.name))
		}
		*f.into = existing
	}
	return p, nil
}

// sum returns the sum of vs.
func sum(vs []float64) float64 {
	var s float64
	for _, v := range vs {
		s += v
	}
	return s
}

// NewDepthMetric returns the depth gauge of queue name.
func (p *MetricsProvider) NewDepthMetric(name string) workqueue.GaugeMetric {
	if p == nil || p.depth == nil {
		return nil
	}
	return p.depth(name).(prometheus.Gauge)
}

// NewAddsMetric returns the adds counter of queue name.
func (p *MetricsProvider) NewAddsMetric(name string) workqueue.CounterMetric {
	if p == nil || p.adds == nil {
		return nil
	}
	return p.adds(name).(prometheus.Counter)
}

// NewLatencyMetric returns the queue duration histogram of queue name.
func (p *MetricsProvider) NewLatencyMetric(name string) workqueue.HistogramMetric {
	if p == nil || p.latency == nil {
		return nil
	}
	return p.latency(name).(prometheus.Observer)
}

// NewWorkDurationMetric returns the work duration histogram of queue name.
func (p *MetricsProvider) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	if p == nil || p.work == nil {
		return nil
	}
	return p.work(name).(prometheus.Observer)
}

// NewRetriesMetric returns the retries counter of queue name.
func (p *MetricsProvider) NewRetriesMetric(name string) workqueue.CounterMetric {
	if p == nil || p.retries == nil {
		return nil
	}
	return p.retries(name).(prometheus.Counter)
}

// NewUnfinishedWorkSecondsMetric exposes value as the unfinished work of
// queue name, read at each scrape. Queues of the same name add up.
func (p *MetricsProvider) NewUnfinishedWorkSecondsMetric(name string, value func() float64) {
	if p != nil && p.unfinished != nil {
		p.unfinished.add(name, value)
	}
}

// NewLongestRunningProcessorSecondsMetric exposes value as the longest
// running processor of queue name, read at each scrape. Of queues of the
// same name, the longest counts.
func (p *MetricsProvider) NewLongestRunningProcessorSecondsMetric(name string, value func() float64) {
	if p != nil && p.longest != nil {
		p.longest.add(name, value)
	}
}

// funcGauge is a gauge family whose values are functions, called at
// scrape time, one series per queue name.
//
// It describes itself to the registry by describe, which is desc, the
// family it collects, except beside controller-runtime's gauge of the same
// name: a registry holds one collector per description, so there describe
// is a description of its own that is never collected, and the registry,
// which does not check collected metrics against descriptions unless it
// is pedantic, merges the series of both collectors into one family at
// scrape time (the help, type and label names agree; the queue names must
// differ from controller-runtime's controllers'). Either way a second
// provider over the same registry finds this collector by its description
// and shares it.
type funcGauge struct {
	desc, describe *prometheus.Desc
	values         func(name string) []string
	combine        func([]float64) float64

	mu sync.Mutex
	// byName holds the value functions of each queue name.
	// guarded by mu
	byName map[string][]func() float64
}

func (g *funcGauge) add(name string, value func() float64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.byName[name] = append(g.byName[name], value)
}

// Describe implements prometheus.Collector.
func (g *funcGauge) Describe(ch chan<- *prometheus.Desc) {
	ch <- g.describe
}

// Collect implements prometheus.Collector. The value functions are called
// without g.mu held: they are the queues' code.
func (g *funcGauge) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	byName := make(map[string][]func() float64, len(g.byName))
	for name, fs := range g.byName {
		byName[name] = slices.Clone(fs)
	}
	g.mu.Unlock()
	for name, fs := range byName {
		vs := make([]float64, len(fs))
		for i, f := range fs {
			vs[i] = f()
		}
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, g.combine(vs), g.values(name)...)
	}
}
