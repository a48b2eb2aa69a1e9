package workqueue

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// ParallelizeOptions configures [ParallelizeUntil]. The zero value means
// chunks of one piece.
type ParallelizeOptions struct {
	// ChunkSize is how many consecutive pieces a worker takes at a time.
	// Larger chunks cost less coordination when pieces are cheap. Defaults
	// to 1; values below 1 count as 1.
	ChunkSize int
}

// ParallelizeUntil calls fn once for every piece in [0, pieces) from up to
// workers goroutines, and returns when all of them have exited.
//
// Each piece is visited exactly once unless ctx is cancelled: workers check
// ctx before every piece and stop once it is done. ParallelizeUntil returns
// nil exactly when fn was called for every piece, and otherwise an error
// wrapping the cause of ctx's cancellation. pieces <= 0 returns nil at once;
// workers below 1 count as 1; a nil ctx or fn is an error.
//
// A panic in fn stops the other workers from taking further pieces and is
// raised again in the caller once every worker has exited, instead of
// crashing the program from a goroutine the caller cannot recover in.
func ParallelizeUntil(ctx context.Context, workers, pieces int, fn func(piece int), opts ParallelizeOptions) error {
	if ctx == nil {
		return errors.New("workqueue: ParallelizeUntil: nil context")
	}
	if fn == nil {
		return errors.New("workqueue: ParallelizeUntil: nil func")
	}
	if pieces <= 0 {
		return nil
	}
	chunkSize := max(opts.ChunkSize, 1)
	chunks := (pieces-1)/chunkSize + 1
	workers = min(max(workers, 1), chunks)

	var (
		next      atomic.Int64 // next chunk to hand out
		started   atomic.Int64 // pieces fn was called for
		panicOnce sync.Once
		panicVal  any
		panicked  atomic.Bool
	)
	done := ctx.Done()
	work := func() {
		n := int64(0)
		defer func() {
			started.Add(n)
			if r := recover(); r != nil {
				panicOnce.Do(func() { panicVal = r })
				panicked.Store(true)
			}
		}()
		for !panicked.Load() {
			chunk := int(next.Add(1) - 1)
			if chunk >= chunks {
				return
			}
			end := min((chunk+1)*chunkSize, pieces)
			for piece := chunk * chunkSize; piece < end; piece++ {
				select {
				case <-done:
					return
				default:
				}
				n++
				fn(piece)
			}
		}
	}

	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Go(work)
	}
	// The caller's goroutine is the last worker.
	work()
	wg.Wait()

	if panicked.Load() {
		panic(panicVal)
	}
	if n := started.Load(); n < int64(pieces) {
		return fmt.Errorf("workqueue: ParallelizeUntil stopped after %d of %d pieces: %w", n, pieces, context.Cause(ctx))
	}
	return nil
}
