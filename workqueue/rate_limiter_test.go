package workqueue_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/quotakit/quotakit/workqueue"
)

// whens calls When n times for item and returns the delays.
func whens(r workqueue.RateLimiter[string], item string, n int) []time.Duration {
	var got []time.Duration
	for range n {
		got = append(got, r.When(item))
	}
	return got
}

const ms = time.Millisecond

func TestItemExponentialFailureRateLimiter(t *testing.T) {
	tests := []struct {
		name      string
		base, max time.Duration
		calls     int
		want      []time.Duration
	}{
		{name: "doubles", base: ms, max: time.Second, calls: 5, want: []time.Duration{1 * ms, 2 * ms, 4 * ms, 8 * ms, 16 * ms}},
		{name: "capped", base: ms, max: 5 * ms, calls: 5, want: []time.Duration{1 * ms, 2 * ms, 4 * ms, 5 * ms, 5 * ms}},
		{name: "zero base", base: 0, max: time.Second, calls: 3, want: []time.Duration{0, 0, 0}},
		{name: "zero base past 63 failures", base: 0, max: time.Second, calls: 70, want: make([]time.Duration, 70)},
		{name: "negative base counts as zero", base: -ms, max: time.Second, calls: 2, want: []time.Duration{0, 0}},
		{name: "negative base past 63 failures", base: -ms, max: time.Second, calls: 70, want: make([]time.Duration, 70)},
		{name: "huge base", base: math.MaxInt64 / 2, max: math.MaxInt64, calls: 3, want: []time.Duration{math.MaxInt64 / 2, math.MaxInt64 - 1, math.MaxInt64}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := workqueue.NewItemExponentialFailureRateLimiter[string](tt.base, tt.max)
			if diff := cmp.Diff(tt.want, whens(r, "one", tt.calls)); diff != "" {
				t.Errorf("When sequence (-want +got):\n%s", diff)
			}
			if got := r.NumRequeues("one"); got != tt.calls {
				t.Errorf("NumRequeues(one) = %d, want %d", got, tt.calls)
			}
			if got := r.NumRequeues("other"); got != 0 {
				t.Errorf("NumRequeues(other) = %d, want 0", got)
			}
			r.Forget("one")
			if got := r.NumRequeues("one"); got != 0 {
				t.Errorf("NumRequeues(one) after Forget = %d, want 0", got)
			}
			if got, want := r.When("one"), max(tt.base, 0); got != want {
				t.Errorf("When(one) after Forget = %v, want %v", got, want)
			}
		})
	}
}

func TestItemExponentialFailureRateLimiterNoOverflow(t *testing.T) {
	r := workqueue.NewItemExponentialFailureRateLimiter[string](ms, 1000*time.Second)
	got := whens(r, "one", 5)
	if diff := cmp.Diff([]time.Duration{1 * ms, 2 * ms, 4 * ms, 8 * ms, 16 * ms}, got); diff != "" {
		t.Errorf("first five delays (-want +got):\n%s", diff)
	}
	if got := r.When("one"); got != 32*ms {
		t.Errorf("sixth When = %v, want 32ms", got)
	}
	prev := 32 * ms
	for i := 7; i <= 1000; i++ {
		d := r.When("one")
		if d < prev || d > 1000*time.Second {
			t.Fatalf("When #%d = %v after %v, want non-decreasing and at most 1000s", i, d, prev)
		}
		prev = d
	}
	if prev != 1000*time.Second {
		t.Errorf("When #1000 = %v, want 1000s", prev)
	}
	if got := r.NumRequeues("one"); got != 1000 {
		t.Errorf("NumRequeues = %d, want 1000", got)
	}
}

func TestItemFastSlowRateLimiter(t *testing.T) {
	r := workqueue.NewItemFastSlowRateLimiter[string](5*ms, 10*time.Second, 3)
	want := []time.Duration{5 * ms, 5 * ms, 5 * ms, 10 * time.Second, 10 * time.Second}
	if diff := cmp.Diff(want, whens(r, "one", 5)); diff != "" {
		t.Errorf("When sequence (-want +got):\n%s", diff)
	}
	if got := r.NumRequeues("one"); got != 5 {
		t.Errorf("NumRequeues = %d, want 5", got)
	}
	if got := r.When("two"); got != 5*ms {
		t.Errorf("When(two) = %v, want 5ms: items are counted separately", got)
	}
	r.Forget("one")
	if got := r.When("one"); got != 5*ms {
		t.Errorf("When after Forget = %v, want 5ms", got)
	}
}

func TestMaxOfRateLimiter(t *testing.T) {
	r := workqueue.NewMaxOfRateLimiter(
		workqueue.NewItemFastSlowRateLimiter[string](5*ms, 3*time.Second, 3),
		nil, // ignored
		workqueue.NewItemExponentialFailureRateLimiter[string](ms, time.Second),
	)
	want := []time.Duration{5 * ms, 5 * ms, 5 * ms, 3 * time.Second, 3 * time.Second}
	if diff := cmp.Diff(want, whens(r, "one", 5)); diff != "" {
		t.Errorf("When sequence (-want +got):\n%s", diff)
	}
	if got := r.NumRequeues("one"); got != 5 {
		t.Errorf("NumRequeues = %d, want 5", got)
	}
	r.Forget("one")
	if got := r.NumRequeues("one"); got != 0 {
		t.Errorf("NumRequeues after Forget = %d, want 0 (every limiter forgets)", got)
	}
	empty := workqueue.NewMaxOfRateLimiter[string]()
	if got := empty.When("x"); got != 0 {
		t.Errorf("When with no limiters = %v, want 0", got)
	}
}

func TestWithMaxWaitRateLimiter(t *testing.T) {
	r := workqueue.NewWithMaxWaitRateLimiter(workqueue.NewItemExponentialFailureRateLimiter[string](ms, time.Hour), 5*ms)
	want := []time.Duration{1 * ms, 2 * ms, 4 * ms, 5 * ms, 5 * ms}
	if diff := cmp.Diff(want, whens(r, "one", 5)); diff != "" {
		t.Errorf("When sequence (-want +got):\n%s", diff)
	}
	if got := r.NumRequeues("one"); got != 5 {
		t.Errorf("NumRequeues = %d, want 5", got)
	}
	r.Forget("one")
	if got := r.When("one"); got != ms {
		t.Errorf("When after Forget = %v, want 1ms", got)
	}
	noop := workqueue.NewWithMaxWaitRateLimiter[string](nil, time.Second)
	if got := noop.When("x"); got != 0 {
		t.Errorf("When with nil limiter = %v, want 0", got)
	}
}

func TestBucketRateLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := workqueue.NewBucketRateLimiter[string](10, 3)
		// The full bucket lets three through, then every token costs
		// 100ms more; the bucket ignores which item asks.
		want := []time.Duration{0, 0, 0, 100 * ms, 200 * ms}
		if diff := cmp.Diff(want, whens(r, "any", 5)); diff != "" {
			t.Errorf("When sequence (-want +got):\n%s", diff)
		}
		// After 1s, 10 tokens have come in, of which 2 repay the debt and
		// 3 fit; the rest overflow.
		time.Sleep(time.Second)
		want = []time.Duration{0, 0, 0, 100 * ms}
		if diff := cmp.Diff(want, whens(r, "other", 4)); diff != "" {
			t.Errorf("When sequence after 1s (-want +got):\n%s", diff)
		}
		if got := r.NumRequeues("any"); got != 0 {
			t.Errorf("NumRequeues = %d, want 0", got)
		}
		r.Forget("any") // no effect
		time.Sleep(50 * ms)
		if got := r.When("any"); got != 150*ms {
			t.Errorf("When after 50ms = %v, want 150ms", got)
		}
	})
}

func TestBucketRateLimiterBadInput(t *testing.T) {
	tests := []struct {
		name  string
		qps   float64
		burst int
		want  []time.Duration
	}{
		{name: "zero qps means no limit", qps: 0, burst: 1, want: []time.Duration{0, 0, 0}},
		{name: "negative qps means no limit", qps: -1, burst: 1, want: []time.Duration{0, 0, 0}},
		{name: "NaN qps means no limit", qps: math.NaN(), burst: 1, want: []time.Duration{0, 0, 0}},
		{name: "infinite qps means no limit", qps: math.Inf(1), burst: 1, want: []time.Duration{0, 0, 0}},
		{name: "zero burst counts as one", qps: 1, burst: 0, want: []time.Duration{0, time.Second, 2 * time.Second}},
		{name: "tiny qps does not overflow", qps: 1e-300, burst: 1, want: []time.Duration{0, math.MaxInt64, math.MaxInt64}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := workqueue.NewBucketRateLimiter[string](tt.qps, tt.burst)
				if diff := cmp.Diff(tt.want, whens(r, "x", len(tt.want))); diff != "" {
					t.Errorf("When sequence (-want +got):\n%s", diff)
				}
			})
		})
	}
	var zero workqueue.BucketRateLimiter[string]
	if got := zero.When("x"); got != 0 {
		t.Errorf("zero value When = %v, want 0", got)
	}
}

func TestDefaultRateLimiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		item := workqueue.DefaultItemBasedRateLimiter[string]()
		want := []time.Duration{1 * ms, 2 * ms, 4 * ms}
		if diff := cmp.Diff(want, whens(item, "x", 3)); diff != "" {
			t.Errorf("DefaultItemBasedRateLimiter (-want +got):\n%s", diff)
		}

		ctrl := workqueue.DefaultControllerRateLimiter[string]()
		want = []time.Duration{5 * ms, 10 * ms, 20 * ms}
		if diff := cmp.Diff(want, whens(ctrl, "x", 3)); diff != "" {
			t.Errorf("DefaultControllerRateLimiter per item (-want +got):\n%s", diff)
		}
		// The overall bucket (10 qps, burst 100) takes over once 100
		// distinct items have failed at the same instant.
		for i := range 97 {
			ctrl.When(fmt.Sprint("item-", i))
		}
		if got := ctrl.When("fresh"); got != 100*ms {
			t.Errorf("When(fresh) after 100 tokens = %v, want 100ms", got)
		}
		if got := ctrl.NumRequeues("x"); got != 3 {
			t.Errorf("NumRequeues(x) = %d, want 3", got)
		}
	})
}

// TestPerItemRateLimitersCountManyItems fails and forgets 2000 items at
// random in both per-item limiters, checking every count against a map, so
// that their failure tables grow, shrink and reuse records.
func TestPerItemRateLimitersCountManyItems(t *testing.T) {
	limiters := map[string]workqueue.RateLimiter[string]{
		"exponential": workqueue.NewItemExponentialFailureRateLimiter[string](ms, time.Second),
		"fast-slow":   workqueue.NewItemFastSlowRateLimiter[string](ms, time.Second, 3),
	}
	for name, r := range limiters {
		t.Run(name, func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(1, 2))
			model := map[string]int{}
			for step := range 30000 {
				item := fmt.Sprint("item-", rnd.IntN(2000))
				if rnd.IntN(3) == 0 {
					r.Forget(item)
					delete(model, item)
				} else {
					r.When(item)
					model[item]++
				}
				if got, want := r.NumRequeues(item), model[item]; got != want {
					t.Fatalf("step %d: NumRequeues(%s) = %d, want %d", step, item, got, want)
				}
			}
			for item, want := range model {
				if got := r.NumRequeues(item); got != want {
					t.Errorf("NumRequeues(%s) = %d, want %d", item, got, want)
				}
			}
		})
	}
}
