package workqueue

import (
	"math"
	"sync"
	"time"
)

// BucketRateLimiter limits the overall rate of retries, whatever the item,
// with a token bucket: it holds up to burst tokens, refills at qps tokens
// per second, and every When takes one token, waiting for it if the bucket
// is empty. Its delays are those of client-go's TypedBucketRateLimiter
// around golang.org/x/time/rate's Limiter.Reserve().Delay(): a token is
// taken even when the caller has to wait for it.
//
// It does not track items: NumRequeues is always 0 and Forget does nothing.
// The zero value never delays. It is safe for concurrent use.
type BucketRateLimiter[T comparable] struct {
	mu sync.Mutex
	// guarded by mu
	qps    float64
	burst  float64
	tokens float64
	// last is when tokens was last brought up to date; zero means the
	// bucket has not been used and is full.
	last time.Time
}

// NewBucketRateLimiter returns a bucket that starts full with burst tokens
// and refills at qps tokens per second. A qps that is not positive (or is
// NaN or +Inf) means no limit; a burst below 1 counts as 1.
func NewBucketRateLimiter[T comparable](qps float64, burst int) *BucketRateLimiter[T] {
	if !(qps > 0) || math.IsInf(qps, 1) {
		qps = 0
	}
	return &BucketRateLimiter[T]{qps: qps, burst: float64(max(burst, 1))}
}

// When takes a token and returns how long the caller must wait until that
// token is there.
func (r *BucketRateLimiter[T]) When(T) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.qps == 0 {
		return 0
	}
	now := time.Now()
	if r.last.IsZero() {
		r.tokens = r.burst
	} else if elapsed := now.Sub(r.last); elapsed > 0 {
		r.tokens = min(r.burst, r.tokens+elapsed.Seconds()*r.qps)
	}
	r.last = now
	r.tokens--
	if r.tokens >= 0 {
		return 0
	}
	wait := -r.tokens / r.qps * float64(time.Second)
	if wait >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(wait)
}

// Forget does nothing: the bucket does not track items.
func (r *BucketRateLimiter[T]) Forget(T) {}

// NumRequeues returns 0: the bucket does not track items.
func (r *BucketRateLimiter[T]) NumRequeues(T) int { return 0 }
