package workqueue_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/quotakit/quotakit/workqueue"
)

func TestRateLimitingQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		limiter := workqueue.NewItemExponentialFailureRateLimiter[string](time.Second, time.Minute)
		q := workqueue.NewRateLimiting(limiter, workqueue.Options{})
		defer q.ShutDown()

		start := time.Now()
		// Each failure doubles the wait before the item comes back.
		var waited []time.Duration
		for range 3 {
			q.AddRateLimited("a")
			before := time.Now()
			item, _ := q.Get()
			waited = append(waited, time.Since(before))
			q.Done(item)
		}
		if diff := cmp.Diff([]time.Duration{time.Second, 2 * time.Second, 4 * time.Second}, waited); diff != "" {
			t.Errorf("waits (-want +got):\n%s", diff)
		}
		if got := q.NumRequeues("a"); got != 3 {
			t.Errorf("NumRequeues(a) = %d, want 3", got)
		}
		q.Forget("a")
		if got := q.NumRequeues("a"); got != 0 {
			t.Errorf("NumRequeues(a) after Forget = %d, want 0", got)
		}
		q.AddRateLimited("a")
		item, _ := q.Get()
		q.Done(item)
		if got, want := time.Since(start), 8*time.Second; got != want {
			t.Errorf("elapsed = %v, want %v (the wait after Forget is the base again)", got, want)
		}
	})
}

func TestRateLimitingQueueDefaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for name, q := range map[string]*workqueue.RateLimitingQueue[string]{
			"nil limiter": workqueue.NewRateLimiting[string](nil, workqueue.Options{}),
			"zero value":  new(workqueue.RateLimitingQueue[string]),
		} {
			// DefaultControllerRateLimiter: 5ms, then 10ms.
			start := time.Now()
			q.AddRateLimited("a")
			item, _ := q.Get()
			q.Done(item)
			q.AddRateLimited("a")
			item, _ = q.Get()
			q.Done(item)
			if got, want := time.Since(start), 15*time.Millisecond; got != want {
				t.Errorf("%s: two rate-limited passes took %v, want %v", name, got, want)
			}
			if got := q.NumRequeues("a"); got != 2 {
				t.Errorf("%s: NumRequeues = %d, want 2", name, got)
			}
			q.ShutDown()
		}
	})
}
