package main

import (
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// tracker measures convergence latency: events that change what a quota
// should show are expected (the time and the usage just after), and each
// status write of the controller resolves the expectations of its quota up
// to the latest one whose usage it shows. It is safe for concurrent use:
// the churn expects, the controller's workers observe.
type tracker struct {
	// hard are the names of each quota, set before the controller runs.
	hard map[string][]corev1.ResourceName

	mu sync.Mutex
	// guarded by mu
	pending   map[string][]expectation
	latencies []time.Duration
	byKind    map[string][]time.Duration
	writes    int
	// recent holds the last few status writes of each quota, for changes
	// noticed after they happened (see expectSince).
	recent map[string][]written
}

// written is one status write: when, and the usage it showed.
type written struct {
	at   time.Time
	used corev1.ResourceList
}

// recentWrites is how many writes of each quota recent keeps: a change is
// noticed within one churn step of when it happened.
const recentWrites = 4

// expectation is a usage a quota should reach, since when, and the kind
// of event that changed it.
type expectation struct {
	kind string
	at   time.Time
	want corev1.ResourceList
}

func newTracker() *tracker {
	return &tracker{hard: map[string][]corev1.ResourceName{}, pending: map[string][]expectation{}, byKind: map[string][]time.Duration{}, recent: map[string][]written{}}
}

// expect records that quota key should show want because of an event of
// kind at at. An expectation of kind "" (a creation, which admission has
// already charged) is not measured: it is there so that a controller's
// write showing the usage after it resolves the expectations before it.
func (t *tracker) expect(kind, key string, at time.Time, want corev1.ResourceList) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pending[key] = append(t.pending[key], expectation{kind: kind, at: at, want: want})
}

// expectSince is expect for a change that happened at at but is noticed
// later, with no write of the churn to come after it (a grace period that
// ran out): the controller may already have written the status the change
// brings. The first such write since at resolves it and, as in observe,
// the expectations pending before it that the write came after: want is
// the usage with every change made so far.
func (t *tracker) expectSince(kind, key string, at time.Time, want corev1.ResourceList) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, w := range t.recent[key] {
		if w.at.Before(at) || !sameUsage(want, w.used, t.hard[key]) {
			continue
		}
		t.resolveLocked(kind, w.at.Sub(at))
		t.pending[key] = slices.DeleteFunc(t.pending[key], func(p expectation) bool {
			if p.at.After(w.at) {
				return false
			}
			t.resolveLocked(p.kind, w.at.Sub(p.at))
			return true
		})
		return
	}
	t.pending[key] = append(t.pending[key], expectation{kind: kind, at: at, want: want})
}

// observe records a status write of quota key at at. The latest pending
// expectation the write satisfies, and every earlier one, are resolved.
func (t *tracker) observe(key string, at time.Time, used corev1.ResourceList) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.writes++
	r := append(t.recent[key], written{at: at, used: used})
	t.recent[key] = r[max(0, len(r)-recentWrites):]
	ps := t.pending[key]
	for k := len(ps) - 1; k >= 0; k-- {
		if !sameUsage(ps[k].want, used, t.hard[key]) {
			continue
		}
		for _, p := range ps[:k+1] {
			t.resolveLocked(p.kind, at.Sub(p.at))
		}
		t.pending[key] = slices.Delete(ps, 0, k+1)
		return
	}
}

// resolveLocked records the latency of a resolved expectation of kind.
// t.mu must be held.
func (t *tracker) resolveLocked(kind string, d time.Duration) {
	if kind == "" {
		return
	}
	t.latencies = append(t.latencies, d)
	t.byKind[kind] = append(t.byKind[kind], d)
}

// summary returns the number of resolved expectations, their latency
// percentiles and maximum, the number still pending, and the number of
// status writes.
func (t *tracker) summary() (n int, p50, p99, maxL time.Duration, pending, writes int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, ps := range t.pending {
		for _, p := range ps {
			if p.kind != "" {
				pending++
			}
		}
	}
	n, p50, p99, maxL = percentiles(t.latencies)
	return n, p50, p99, maxL, pending, t.writes
}

// kinds returns the kinds of the events resolved so far, sorted.
func (t *tracker) kinds() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var ks []string
	for k := range t.byKind {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// summaryOf returns the latency percentiles of the events of one kind.
func (t *tracker) summaryOf(kind string) (n int, p50, p99, maxL time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return percentiles(t.byKind[kind])
}

// percentiles returns the count, median, 99th percentile and maximum of ls.
func percentiles(ls []time.Duration) (n int, p50, p99, maxL time.Duration) {
	if len(ls) == 0 {
		return 0, 0, 0, 0
	}
	s := slices.Clone(ls)
	slices.Sort(s)
	at := func(p float64) time.Duration { return s[min(len(s)-1, int(p*float64(len(s))))] }
	return len(s), at(0.50), at(0.99), s[len(s)-1]
}
