package workqueue_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quotakit/quotakit/workqueue"
)

func TestParallelizeUntilVisitsEachPieceOnce(t *testing.T) {
	tests := []struct {
		workers, pieces, chunk int
	}{
		{workers: 1, pieces: 1, chunk: 0},
		{workers: 4, pieces: 1000, chunk: 0},
		{workers: 4, pieces: 1000, chunk: 7},
		{workers: 16, pieces: 3, chunk: 1},
		{workers: 3, pieces: 10, chunk: 100},
		{workers: 0, pieces: 5, chunk: -1}, // both count as 1
		{workers: -2, pieces: 50, chunk: 3},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("workers=%d/pieces=%d/chunk=%d", tt.workers, tt.pieces, tt.chunk), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				visits := make([]atomic.Int32, tt.pieces)
				err := workqueue.ParallelizeUntil(t.Context(), tt.workers, tt.pieces, func(p int) {
					visits[p].Add(1)
				}, workqueue.ParallelizeOptions{ChunkSize: tt.chunk})
				if err != nil {
					t.Fatalf("ParallelizeUntil() = %v, want nil", err)
				}
				for p := range visits {
					if n := visits[p].Load(); n != 1 {
						t.Errorf("piece %d visited %d times, want 1", p, n)
					}
				}
			})
		})
	}
}

func TestParallelizeUntilUsesWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Every piece blocks until all four workers hold one, which
		// only happens when four run at once.
		var wg sync.WaitGroup
		wg.Add(4)
		err := workqueue.ParallelizeUntil(t.Context(), 4, 4, func(int) {
			wg.Done()
			wg.Wait()
		}, workqueue.ParallelizeOptions{})
		if err != nil {
			t.Fatalf("ParallelizeUntil() = %v, want nil", err)
		}
	})
}

func TestParallelizeUntilNoPieces(t *testing.T) {
	for _, pieces := range []int{0, -1} {
		err := workqueue.ParallelizeUntil(t.Context(), 4, pieces, func(int) {
			t.Error("fn called with no pieces")
		}, workqueue.ParallelizeOptions{})
		if err != nil {
			t.Errorf("ParallelizeUntil(pieces=%d) = %v, want nil", pieces, err)
		}
	}
}

func TestParallelizeUntilCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancelCause(t.Context())
		stop := errors.New("enough")
		// The pieces run one at a time, so that the tenth cancels before
		// another worker counts a piece: without the lock, another worker
		// may run any number of pieces between the tenth's count and its
		// cancel.
		var mu sync.Mutex
		visited := 0
		err := workqueue.ParallelizeUntil(ctx, 2, 100, func(p int) {
			mu.Lock()
			defer mu.Unlock()
			if visited++; visited == 10 {
				cancel(stop)
			}
		}, workqueue.ParallelizeOptions{})
		if !errors.Is(err, stop) {
			t.Fatalf("ParallelizeUntil() = %v, want an error wrapping %v", err, stop)
		}
		// Each worker checks ctx before every piece: at most one piece
		// per other worker (one that had passed its check) starts after
		// the cancel.
		if visited < 10 || visited > 11 {
			t.Errorf("visited %d pieces, want 10 or 11", visited)
		}
	})
}

func TestParallelizeUntilAlreadyCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := workqueue.ParallelizeUntil(ctx, 4, 10, func(int) {
		t.Error("fn called with a cancelled context")
	}, workqueue.ParallelizeOptions{})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("ParallelizeUntil() = %v, want context.Canceled", err)
	}
}

func TestParallelizeUntilBadInput(t *testing.T) {
	var nilCtx context.Context
	if err := workqueue.ParallelizeUntil(nilCtx, 1, 1, func(int) {}, workqueue.ParallelizeOptions{}); err == nil || !strings.HasPrefix(err.Error(), "workqueue: ") {
		t.Errorf("ParallelizeUntil(nil ctx) = %v, want a workqueue error", err)
	}
	if err := workqueue.ParallelizeUntil(t.Context(), 1, 1, nil, workqueue.ParallelizeOptions{}); err == nil || !strings.HasPrefix(err.Error(), "workqueue: ") {
		t.Errorf("ParallelizeUntil(nil fn) = %v, want a workqueue error", err)
	}
}

func TestParallelizeUntilPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var after atomic.Int32
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("recovered %v, want boom", r)
			}
			// Workers stop taking pieces once the panic is recovered: each
			// of the other three finishes at most the piece it is in and
			// one it took before the recovery, not the 994 left. All
			// workers have exited (synctest would report a leak
			// otherwise).
			if n := after.Load(); n > 6 {
				t.Errorf("%d pieces finished after the panic, want at most 6", n)
			}
		}()
		var panicked atomic.Bool
		workqueue.ParallelizeUntil(t.Context(), 4, 1000, func(p int) {
			if p == 5 {
				panicked.Store(true)
				panic("boom")
			}
			// Virtual time stands still until every goroutine is blocked,
			// so the other workers sleep here until the panicking one has
			// been recovered; without the sleep, how many pieces they take
			// in the meantime depends on the scheduler.
			time.Sleep(time.Millisecond)
			if panicked.Load() {
				after.Add(1)
			}
		}, workqueue.ParallelizeOptions{})
		t.Error("ParallelizeUntil returned instead of panicking")
	})
}
