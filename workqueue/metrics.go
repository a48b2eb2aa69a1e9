package workqueue

import "time"

// MetricsProvider creates the metrics of one queue. [New], [NewDelaying] and
// [NewRateLimiting] call each method once, with [Options.Name], before the
// queue is returned. The meaning of every metric is that of client-go's
// workqueue; the package documentation lists the Prometheus series an
// adapter should register so that dashboards built for client-go keep
// working.
//
// The interface has one method per series instead of the usual one to
// four, so that an adapter maps each method onto exactly one Prometheus
// collector. A method may return nil for a metric the provider does not
// want.
//
// The queue never calls a metric while holding its lock, but it calls them
// from any goroutine that uses the queue, so metrics must be safe for
// concurrent use.
type MetricsProvider interface {
	// NewDepthMetric returns the gauge of items waiting to be processed:
	// incremented when an item becomes dirty, decremented when a worker
	// takes it.
	NewDepthMetric(name string) GaugeMetric
	// NewAddsMetric returns the counter of adds that made an item dirty.
	// Adds that collapse into a waiting item are not counted; an add while
	// the item is processed is.
	NewAddsMetric(name string) CounterMetric
	// NewLatencyMetric returns the histogram of seconds an item waited
	// between becoming dirty and being handed out by Get.
	NewLatencyMetric(name string) HistogramMetric
	// NewWorkDurationMetric returns the histogram of seconds between Get
	// and Done.
	NewWorkDurationMetric(name string) HistogramMetric
	// NewUnfinishedWorkSecondsMetric registers a gauge whose value is the
	// summed age, in seconds, of the items being processed. The queue
	// computes value on demand, exactly, whenever value is called — for
	// example by a Prometheus GaugeFunc at scrape time — so no goroutine
	// has to refresh it (client-go refreshes it every 500ms). value is safe
	// for concurrent use and may be called after the queue shut down.
	NewUnfinishedWorkSecondsMetric(name string, value func() float64)
	// NewLongestRunningProcessorSecondsMetric registers a gauge whose value
	// is the age, in seconds, of the item that has been processed longest;
	// value behaves like that of NewUnfinishedWorkSecondsMetric.
	NewLongestRunningProcessorSecondsMetric(name string, value func() float64)
	// NewRetriesMetric returns the counter of AddAfter calls (and so of
	// AddRateLimited calls) on a delaying or rate-limiting queue. A plain
	// [Queue] does not call it.
	NewRetriesMetric(name string) CounterMetric
}

// GaugeMetric is a value that goes up and down.
type GaugeMetric interface {
	// Inc adds 1.
	Inc()
	// Dec subtracts 1.
	Dec()
}

// CounterMetric is a value that only goes up.
type CounterMetric interface {
	// Inc adds 1.
	Inc()
}

// HistogramMetric records observations, in seconds.
type HistogramMetric interface {
	// Observe records one observation.
	Observe(float64)
}

// queueMetrics holds one queue's metrics. Every field is non-nil; metrics a
// provider declined are no-ops. It is immutable after creation.
type queueMetrics struct {
	// epoch is the origin of the queue's timestamps; durations since it use
	// the monotonic clock.
	epoch        time.Time
	depth        GaugeMetric
	adds         CounterMetric
	latency      HistogramMetric
	workDuration HistogramMetric
	retries      CounterMetric
}

func newQueueMetrics(p MetricsProvider, name string, retries bool) *queueMetrics {
	m := &queueMetrics{
		epoch:        time.Now(),
		depth:        orNop[GaugeMetric](p.NewDepthMetric(name)),
		adds:         orNop[CounterMetric](p.NewAddsMetric(name)),
		latency:      orNop[HistogramMetric](p.NewLatencyMetric(name)),
		workDuration: orNop[HistogramMetric](p.NewWorkDurationMetric(name)),
		retries:      nopMetric{},
	}
	if retries {
		m.retries = orNop[CounterMetric](p.NewRetriesMetric(name))
	}
	return m
}

// orNop replaces a nil metric with one that does nothing.
func orNop[M any](m M) M {
	if any(m) == nil {
		return any(nopMetric{}).(M)
	}
	return m
}

// nopMetric implements every metric interface by doing nothing.
type nopMetric struct{}

// Inc does nothing.
func (nopMetric) Inc() {}

// Dec does nothing.
func (nopMetric) Dec() {}

// Observe does nothing.
func (nopMetric) Observe(float64) {}

// since returns the time elapsed since m.epoch.
func (m *queueMetrics) since() time.Duration { return time.Since(m.epoch) }

// added records n items that became dirty.
func (m *queueMetrics) added(n int) {
	for range n {
		m.adds.Inc()
		m.depth.Inc()
	}
}

// got records an item handed out by Get after waiting for waited.
func (m *queueMetrics) got(waited time.Duration) {
	m.depth.Dec()
	m.latency.Observe(waited.Seconds())
}

// done records an item whose processing took took.
func (m *queueMetrics) done(took time.Duration) {
	m.workDuration.Observe(took.Seconds())
}

// unfinishedWorkSeconds returns the summed age of the items being processed.
func (q *Queue[T]) unfinishedWorkSeconds() float64 {
	total, _ := q.runningAges()
	return total.Seconds()
}

// longestRunningProcessorSeconds returns the age of the oldest item being
// processed.
func (q *Queue[T]) longestRunningProcessorSeconds() float64 {
	_, longest := q.runningAges()
	return longest.Seconds()
}

// runningAges sums the ages of the items being processed and finds the
// largest. It is computed when a metrics provider asks, so the values are
// exact at that instant and no goroutine has to refresh them.
func (q *Queue[T]) runningAges() (total, longest time.Duration) {
	now := q.metrics.since()
	q.mu.Lock()
	defer q.unlock()
	for _, slot := range q.running {
		age := now - q.stamp(slot).started
		total += age
		longest = max(longest, age)
	}
	return total, longest
}
