package workqueue_test

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/quotakit/quotakit/workqueue"
)

// fakeProvider records every metric of every queue by "name/metric".
type fakeProvider struct {
	mu sync.Mutex
	// guarded by mu
	values       map[string]float64
	observations map[string][]float64
	polled       map[string]func() float64
}

var _ workqueue.MetricsProvider = (*fakeProvider)(nil)

func newFakeProvider() *fakeProvider {
	return &fakeProvider{
		values:       map[string]float64{},
		observations: map[string][]float64{},
		polled:       map[string]func() float64{},
	}
}

// fakeMetric is a gauge, counter or histogram stored in a fakeProvider.
type fakeMetric struct {
	p   *fakeProvider
	key string
}

func (m fakeMetric) Inc() { m.add(1) }
func (m fakeMetric) Dec() { m.add(-1) }
func (m fakeMetric) add(d float64) {
	m.p.mu.Lock()
	defer m.p.mu.Unlock()
	m.p.values[m.key] += d
}
func (m fakeMetric) Observe(v float64) {
	m.p.mu.Lock()
	defer m.p.mu.Unlock()
	m.p.observations[m.key] = append(m.p.observations[m.key], v)
}

// metric returns the metric stored under name/metric. Counters and gauges
// start at 0 in values; histograms appear in observations when observed.
func (p *fakeProvider) metric(name, metric string, histogram bool) fakeMetric {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := name + "/" + metric
	if !histogram {
		p.values[key] = 0
	}
	return fakeMetric{p, key}
}

func (p *fakeProvider) NewDepthMetric(name string) workqueue.GaugeMetric {
	return p.metric(name, "depth", false)
}
func (p *fakeProvider) NewAddsMetric(name string) workqueue.CounterMetric {
	return p.metric(name, "adds", false)
}
func (p *fakeProvider) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return p.metric(name, "latency", true)
}
func (p *fakeProvider) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return p.metric(name, "work", true)
}
func (p *fakeProvider) NewRetriesMetric(name string) workqueue.CounterMetric {
	return p.metric(name, "retries", false)
}
func (p *fakeProvider) NewUnfinishedWorkSecondsMetric(name string, value func() float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.polled[name+"/unfinished"] = value
}
func (p *fakeProvider) NewLongestRunningProcessorSecondsMetric(name string, value func() float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.polled[name+"/longest"] = value
}

// snapshot returns the counters and gauges, with the polled gauges read
// now.
func (p *fakeProvider) snapshot() map[string]float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]float64{}
	for k, v := range p.values {
		out[k] = v
	}
	for k, f := range p.polled {
		out[k] = f()
	}
	return out
}

func TestMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newFakeProvider()
		q := workqueue.NewDelaying[string](workqueue.Options{Name: "q", MetricsProvider: p})
		sleep := func(s int) { time.Sleep(time.Duration(s) * time.Second) }
		check := func(when string, want map[string]float64) {
			t.Helper()
			synctest.Wait()
			if diff := cmp.Diff(want, p.snapshot()); diff != "" {
				t.Errorf("%s: metrics (-want +got):\n%s", when, diff)
			}
		}

		// t=0
		q.Add("a")
		q.Add("b")
		q.Add("a") // collapses: not counted
		check("t=0", map[string]float64{"q/adds": 2, "q/depth": 2, "q/retries": 0, "q/unfinished": 0, "q/longest": 0})
		sleep(1)
		q.Get() // a, waited 1s, runs from t=1
		sleep(2)
		check("t=3", map[string]float64{"q/adds": 2, "q/depth": 1, "q/retries": 0, "q/unfinished": 2, "q/longest": 2})
		q.Get() // b, waited 3s, runs from t=3
		sleep(1)
		check("t=4", map[string]float64{"q/adds": 2, "q/depth": 0, "q/retries": 0, "q/unfinished": 4, "q/longest": 3})
		q.Add("a")  // while processed: counted, dirty from t=4
		q.Done("a") // worked 3s; queued again
		check("t=4 after Done", map[string]float64{"q/adds": 3, "q/depth": 1, "q/retries": 0, "q/unfinished": 1, "q/longest": 1})
		sleep(2)
		q.Get()     // a, waited 2s, runs from t=6
		q.Done("b") // worked 3s
		sleep(1)
		q.Done("a") // worked 1s
		q.AddAfter("c", time.Second)
		q.AddAfter("d", 0)
		q.AddAfter("d", time.Second) // counted as a retry; d stays once in the queue
		sleep(1)
		check("t=8", map[string]float64{"q/adds": 5, "q/depth": 2, "q/retries": 3, "q/unfinished": 0, "q/longest": 0})
		q.Add("d") // queued already: not counted
		q.ShutDown()
		q.AddAfter("e", 0) // after shut down: not counted
		check("after ShutDown", map[string]float64{"q/adds": 5, "q/depth": 2, "q/retries": 3, "q/unfinished": 0, "q/longest": 0})

		p.mu.Lock()
		defer p.mu.Unlock()
		want := map[string][]float64{"q/latency": {1, 3, 2}, "q/work": {3, 3, 1}}
		if diff := cmp.Diff(want, p.observations); diff != "" {
			t.Errorf("histograms (-want +got):\n%s", diff)
		}
	})
}

func TestMetricsPlainQueueHasNoRetries(t *testing.T) {
	p := newFakeProvider()
	q := workqueue.New[int](workqueue.Options{MetricsProvider: p}) // unnamed still reports
	q.Add(1)
	want := map[string]float64{"/adds": 1, "/depth": 1, "/unfinished": 0, "/longest": 0}
	if diff := cmp.Diff(want, p.snapshot()); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}
}

// nilProvider declines every metric.
type nilProvider struct{}

func (nilProvider) NewDepthMetric(string) workqueue.GaugeMetric                    { return nil }
func (nilProvider) NewAddsMetric(string) workqueue.CounterMetric                   { return nil }
func (nilProvider) NewLatencyMetric(string) workqueue.HistogramMetric              { return nil }
func (nilProvider) NewWorkDurationMetric(string) workqueue.HistogramMetric         { return nil }
func (nilProvider) NewRetriesMetric(string) workqueue.CounterMetric                { return nil }
func (nilProvider) NewUnfinishedWorkSecondsMetric(string, func() float64)          {}
func (nilProvider) NewLongestRunningProcessorSecondsMetric(string, func() float64) {}

func TestMetricsProviderMayDecline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := workqueue.NewRateLimiting[string](nil, workqueue.Options{Name: "q", MetricsProvider: nilProvider{}})
		q.AddRateLimited("a")
		item, _ := q.Get()
		q.Done(item)
		q.ShutDown()
	})
}
