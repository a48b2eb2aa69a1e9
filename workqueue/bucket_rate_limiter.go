package workqueue

import (
	"math"
	"time"

	"golang.org/x/time/rate"
)

// BucketRateLimiter limits the overall rate of retries, whatever the item,
// with a token bucket from golang.org/x/time/rate: every When takes a token
// (see [rate.Limiter.Reserve]) and returns how long to wait until it is
// there. It behaves like client-go's TypedBucketRateLimiter.
//
// It does not track items: NumRequeues is always 0 and Forget does nothing.
// It is safe for concurrent use.
type BucketRateLimiter[T comparable] struct {
	// Limiter is the token bucket. A nil Limiter never delays. A limiter
	// that can never grant a token (a zero burst, or a zero limit once the
	// burst is spent) makes When return [rate.InfDuration], as in client-go.
	Limiter *rate.Limiter
}

// NewBucketRateLimiter returns a bucket that starts full with burst tokens
// and refills at qps tokens per second. A qps that is not positive (or is
// NaN) means no limit; a burst below 1 counts as 1.
func NewBucketRateLimiter[T comparable](qps float64, burst int) *BucketRateLimiter[T] {
	limit := rate.Limit(qps)
	if !(qps > 0) || math.IsInf(qps, 1) {
		limit = rate.Inf
	}
	return &BucketRateLimiter[T]{Limiter: rate.NewLimiter(limit, max(burst, 1))}
}

// When takes a token and returns how long the caller must wait until that
// token is there.
func (r *BucketRateLimiter[T]) When(T) time.Duration {
	if r.Limiter == nil {
		return 0
	}
	return r.Limiter.Reserve().Delay()
}

// Forget does nothing: the bucket does not track items.
func (r *BucketRateLimiter[T]) Forget(T) {}

// NumRequeues returns 0: the bucket does not track items.
func (r *BucketRateLimiter[T]) NumRequeues(T) int { return 0 }
