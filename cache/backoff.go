package cache

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

// Backoff is the exponential backoff with jitter that paces a [Reflector]'s
// relists and watch retries. The zero value means client-go's defaults:
// 800ms doubling up to 30s, each delay stretched by up to 100% jitter, and
// the sequence restarted every 2 minutes.
//
// The rule, client-go 1.37's (wait.Backoff.DelayWithReset, as its
// Reflector uses it): delays run Initial, Initial·Factor, Initial·Factor²,
// ... up to Cap, and stay at Cap; each is then stretched by jitter. The
// first delay asked for more than ResetAfter after the sequence last
// (re)started, or after the reflector was created, starts the sequence
// again at Initial, whether or not failures went on in between. So during
// a long outage the reflector retries quickly for a while every
// ResetAfter, and once the API is back it relists sooner than it would
// with the delay pinned at Cap: with the defaults and no jitter, the first
// list comes at most 30s after the API returns, and on average about 13s
// later where a delay pinned at Cap would give 15s.
type Backoff struct {
	// Initial is the first delay. Defaults to 800ms.
	Initial time.Duration
	// Cap is the largest delay before jitter. Defaults to 30s.
	Cap time.Duration
	// Factor multiplies the delay after each use. Defaults to 2.
	Factor float64
	// Jitter stretches each delay d to a random value in [d, d+Jitter·d).
	// Defaults to 1. Use a negative value for no jitter.
	Jitter float64
	// ResetAfter is how long a delay sequence lasts: the first delay asked
	// for more than ResetAfter after the sequence started is Initial
	// again. Defaults to 2 minutes.
	ResetAfter time.Duration
}

func (b Backoff) withDefaults() Backoff {
	if b.Initial <= 0 {
		b.Initial = 800 * time.Millisecond
	}
	if b.Cap <= 0 {
		b.Cap = 30 * time.Second
	}
	if b.Factor < 1 {
		b.Factor = 2
	}
	switch {
	case b.Jitter == 0:
		b.Jitter = 1
	case b.Jitter < 0:
		b.Jitter = 0
	}
	if b.ResetAfter <= 0 {
		b.ResetAfter = 2 * time.Minute
	}
	return b
}

// backoffState is a position in a Backoff's delay sequence. It is safe for
// concurrent use, though a Reflector asks from one goroutine at a time.
type backoffState struct {
	b Backoff

	mu sync.Mutex
	// guarded by mu; next is the delay to hand out next, before jitter,
	// and started when the current sequence began.
	next    time.Duration
	started time.Time
}

// newBackoffState starts a sequence now: like upstream, the first restart
// comes ResetAfter after the reflector was created, not after its first
// failure.
func newBackoffState(b Backoff) *backoffState {
	return &backoffState{b: b, next: b.Initial, started: time.Now()}
}

// delay returns the next delay and advances the sequence.
func (s *backoffState) delay() time.Duration {
	s.mu.Lock()
	now := time.Now()
	if now.Sub(s.started) > s.b.ResetAfter {
		s.next, s.started = s.b.Initial, now
	}
	d := s.next
	s.next = min(time.Duration(float64(s.next)*s.b.Factor), s.b.Cap)
	s.mu.Unlock()
	if s.b.Jitter > 0 {
		d += time.Duration(rand.Float64() * s.b.Jitter * float64(d))
	}
	return d
}

// sleep waits for the next delay or until ctx is done, and reports whether
// the full delay passed.
func (s *backoffState) sleep(ctx context.Context) bool {
	t := time.NewTimer(s.delay())
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
