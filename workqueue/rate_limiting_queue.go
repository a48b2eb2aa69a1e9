package workqueue

import "sync"

// RateLimitingQueue is a [DelayingQueue] that delays re-adds as its
// [RateLimiter] says.
//
// The standard worker loop takes an item with Get, works on it, then calls
// [RateLimitingQueue.Forget] on success or [RateLimitingQueue.AddRateLimited]
// on a retriable failure, and in both cases Done. Forget does not replace
// Done: Forget clears the limiter's failure history, Done releases the item
// in the queue. Without Forget the limiter keeps counting an item's failures
// forever.
//
// The zero value is ready to use, with [DefaultControllerRateLimiter];
// [NewRateLimiting] chooses the limiter, names the queue or attaches
// metrics. It is safe for concurrent use and must not be copied after first
// use.
type RateLimitingQueue[T comparable] struct {
	DelayingQueue[T]

	// limiterOnce defaults limiter for the zero value.
	limiterOnce sync.Once
	limiter     RateLimiter[T]
}

// NewRateLimiting returns an empty rate-limiting queue configured by opts
// that asks limiter how long to delay AddRateLimited. A nil limiter means
// [DefaultControllerRateLimiter]. It starts no goroutine; see
// [DelayingQueue].
func NewRateLimiting[T comparable](limiter RateLimiter[T], opts Options) *RateLimitingQueue[T] {
	q := &RateLimitingQueue[T]{limiter: limiter}
	q.Queue.setUp(opts, true)
	return q
}

// rateLimiter returns the queue's limiter, creating the default one for the
// zero value.
func (q *RateLimitingQueue[T]) rateLimiter() RateLimiter[T] {
	q.limiterOnce.Do(func() {
		if q.limiter == nil {
			q.limiter = DefaultControllerRateLimiter[T]()
		}
	})
	return q.limiter
}

// AddRateLimited adds item after the delay the rate limiter returns for it,
// which counts as one more failure of item.
func (q *RateLimitingQueue[T]) AddRateLimited(item T) {
	q.AddAfter(item, q.rateLimiter().When(item))
}

// Forget tells the rate limiter that item succeeded, so that its next
// failure starts from the shortest delay again. It does not remove item from
// the queue and does not replace Done.
func (q *RateLimitingQueue[T]) Forget(item T) {
	q.rateLimiter().Forget(item)
}

// NumRequeues returns how many times item has been rate limited since it
// was last forgotten, as counted by the rate limiter.
func (q *RateLimitingQueue[T]) NumRequeues(item T) int {
	return q.rateLimiter().NumRequeues(item)
}
