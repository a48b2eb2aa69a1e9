package admission

import (
	"context"
	"fmt"
	"sync"
)

// flights runs one call per key at a time and hands its answer to every
// caller that asked for that key meanwhile, so that a burst of requests
// makes one live read of the API server, not one each. The zero value is
// ready; it is safe for concurrent use.
type flights[T any] struct {
	mu sync.Mutex
	// calls holds the call in progress for each key.
	// guarded by mu
	calls map[string]*flight[T]
}

type flight[T any] struct {
	done chan struct{}
	val  T
	err  error
}

// do returns fn's answer: of the call it makes itself, or of the call
// already in progress for key. A caller that waits on another's call
// stops waiting when ctx is done. A panic in fn is an error for every
// caller of that call.
func (f *flights[T]) do(ctx context.Context, key string, fn func() (T, error)) (val T, err error) {
	f.mu.Lock()
	c, ok := f.calls[key]
	if !ok {
		if f.calls == nil {
			f.calls = map[string]*flight[T]{}
		}
		c = &flight[T]{done: make(chan struct{})}
		f.calls[key] = c
	}
	f.mu.Unlock()
	if ok {
		select {
		case <-c.done:
			return c.val, c.err
		case <-ctx.Done():
			return val, ctx.Err()
		}
	}
	defer func() {
		// Also when fn panics: the callers waiting on this call must not
		// wait for ever.
		if r := recover(); r != nil {
			var zero T
			c.val, c.err = zero, fmt.Errorf("admission: a live read (%s) panicked: %v", key, r)
			val, err = c.val, c.err
		}
		f.mu.Lock()
		delete(f.calls, key)
		f.mu.Unlock()
		close(c.done)
	}()
	c.val, c.err = fn()
	return c.val, c.err
}
