package workqueue

import (
	"math"
	"sync"
	"time"

	"github.com/quotakit/quotakit/internal/table"
)

// RateLimiter decides how long a failed item waits before it is retried.
// Implementations must be safe for concurrent use. Its method set is that of
// client-go's TypedRateLimiter, so limiters port by changing the import.
type RateLimiter[T comparable] interface {
	// When records one more failure of item and returns how long to wait
	// before retrying it.
	When(item T) time.Duration
	// Forget clears item's failure history, typically after it succeeded.
	Forget(item T)
	// NumRequeues returns the number of failures of item since it was last
	// forgotten.
	NumRequeues(item T) int
}

var (
	_ RateLimiter[string] = (*ItemExponentialFailureRateLimiter[string])(nil)
	_ RateLimiter[string] = (*ItemFastSlowRateLimiter[string])(nil)
	_ RateLimiter[string] = (*MaxOfRateLimiter[string])(nil)
	_ RateLimiter[string] = (*WithMaxWaitRateLimiter[string])(nil)
	_ RateLimiter[string] = (*BucketRateLimiter[string])(nil)
)

// DefaultControllerRateLimiter returns client-go's default limiter for
// controllers: the larger of a per-item exponential backoff from 5ms to
// 1000s and an overall token bucket of 10 qps with a burst of 100.
func DefaultControllerRateLimiter[T comparable]() RateLimiter[T] {
	return NewMaxOfRateLimiter(
		NewItemExponentialFailureRateLimiter[T](5*time.Millisecond, 1000*time.Second),
		NewBucketRateLimiter[T](10, 100),
	)
}

// DefaultItemBasedRateLimiter returns client-go's default per-item limiter:
// an exponential backoff from 1ms to 1000s.
func DefaultItemBasedRateLimiter[T comparable]() RateLimiter[T] {
	return NewItemExponentialFailureRateLimiter[T](time.Millisecond, 1000*time.Second)
}

// ItemExponentialFailureRateLimiter delays an item base·2^n, where n is the
// number of its earlier failures, capped at a maximum: base, 2·base,
// 4·base, and so on. The computation cannot overflow, however many failures
// an item has.
type ItemExponentialFailureRateLimiter[T comparable] struct {
	base, max time.Duration

	mu sync.Mutex
	// guarded by mu
	failures failureCounts[T]
}

// NewItemExponentialFailureRateLimiter returns a limiter whose first delay
// for an item is base and whose delays never exceed maxDelay. A negative
// base counts as 0.
func NewItemExponentialFailureRateLimiter[T comparable](base, maxDelay time.Duration) *ItemExponentialFailureRateLimiter[T] {
	return &ItemExponentialFailureRateLimiter[T]{
		base: max(base, 0),
		max:  maxDelay,
	}
}

// When returns base·2^n capped at the maximum delay, n being the number of
// earlier failures of item, and counts this failure.
func (r *ItemExponentialFailureRateLimiter[T]) When(item T) time.Duration {
	h := table.Hash(item)
	r.mu.Lock()
	n := r.failures.add(item, h)
	r.mu.Unlock()
	if r.base == 0 {
		// 0·2^n is 0 however many failures came before.
		return min(0, r.max)
	}
	// base<<n overflows exactly when base > MaxInt64>>n.
	if n >= 63 || r.base > math.MaxInt64>>n {
		return r.max
	}
	return min(r.base<<n, r.max)
}

// Forget clears item's failures.
func (r *ItemExponentialFailureRateLimiter[T]) Forget(item T) {
	h := table.Hash(item)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures.forget(item, h)
}

// NumRequeues returns the failures of item since it was last forgotten.
func (r *ItemExponentialFailureRateLimiter[T]) NumRequeues(item T) int {
	h := table.Hash(item)
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failures.get(item, h)
}

// ItemFastSlowRateLimiter delays an item by a short delay for its first
// failures and by a long one after that.
type ItemFastSlowRateLimiter[T comparable] struct {
	fast, slow      time.Duration
	maxFastAttempts int

	mu sync.Mutex
	// guarded by mu
	failures failureCounts[T]
}

// NewItemFastSlowRateLimiter returns a limiter that returns fast for the
// first maxFastAttempts failures of an item and slow afterwards.
func NewItemFastSlowRateLimiter[T comparable](fast, slow time.Duration, maxFastAttempts int) *ItemFastSlowRateLimiter[T] {
	return &ItemFastSlowRateLimiter[T]{
		fast:            fast,
		slow:            slow,
		maxFastAttempts: maxFastAttempts,
	}
}

// When counts a failure of item and returns the fast delay while item has
// failed at most maxFastAttempts times, the slow delay otherwise.
func (r *ItemFastSlowRateLimiter[T]) When(item T) time.Duration {
	h := table.Hash(item)
	r.mu.Lock()
	n := r.failures.add(item, h) + 1
	r.mu.Unlock()
	if n <= r.maxFastAttempts {
		return r.fast
	}
	return r.slow
}

// Forget clears item's failures.
func (r *ItemFastSlowRateLimiter[T]) Forget(item T) {
	h := table.Hash(item)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures.forget(item, h)
}

// NumRequeues returns the failures of item since it was last forgotten.
func (r *ItemFastSlowRateLimiter[T]) NumRequeues(item T) int {
	h := table.Hash(item)
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failures.get(item, h)
}

// MaxOfRateLimiter combines limiters by taking, for each item, the longest
// delay any of them asks for.
type MaxOfRateLimiter[T comparable] struct {
	limiters []RateLimiter[T]
}

// NewMaxOfRateLimiter returns a limiter over limiters; nil entries are
// ignored. Without limiters, When returns 0.
func NewMaxOfRateLimiter[T comparable](limiters ...RateLimiter[T]) *MaxOfRateLimiter[T] {
	r := &MaxOfRateLimiter[T]{}
	for _, l := range limiters {
		if l != nil {
			r.limiters = append(r.limiters, l)
		}
	}
	return r
}

// When asks every limiter, so that each records the failure, and returns
// the longest delay.
func (r *MaxOfRateLimiter[T]) When(item T) time.Duration {
	var d time.Duration
	for _, l := range r.limiters {
		d = max(d, l.When(item))
	}
	return d
}

// Forget forgets item in every limiter.
func (r *MaxOfRateLimiter[T]) Forget(item T) {
	for _, l := range r.limiters {
		l.Forget(item)
	}
}

// NumRequeues returns the largest count any limiter reports.
func (r *MaxOfRateLimiter[T]) NumRequeues(item T) int {
	n := 0
	for _, l := range r.limiters {
		n = max(n, l.NumRequeues(item))
	}
	return n
}

// WithMaxWaitRateLimiter caps the delays of another limiter.
type WithMaxWaitRateLimiter[T comparable] struct {
	limiter  RateLimiter[T]
	maxDelay time.Duration
}

// NewWithMaxWaitRateLimiter returns a limiter that asks limiter and returns
// at most maxDelay. A nil limiter never delays.
func NewWithMaxWaitRateLimiter[T comparable](limiter RateLimiter[T], maxDelay time.Duration) *WithMaxWaitRateLimiter[T] {
	if limiter == nil {
		limiter = NewMaxOfRateLimiter[T]()
	}
	return &WithMaxWaitRateLimiter[T]{limiter: limiter, maxDelay: maxDelay}
}

// When returns the wrapped limiter's delay, capped at the maximum.
func (r *WithMaxWaitRateLimiter[T]) When(item T) time.Duration {
	return min(r.limiter.When(item), r.maxDelay)
}

// Forget forgets item in the wrapped limiter.
func (r *WithMaxWaitRateLimiter[T]) Forget(item T) { r.limiter.Forget(item) }

// NumRequeues returns the wrapped limiter's count.
func (r *WithMaxWaitRateLimiter[T]) NumRequeues(item T) int { return r.limiter.NumRequeues(item) }
