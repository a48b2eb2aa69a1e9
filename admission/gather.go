package admission

import (
	"context"
	"runtime"
	"time"
)

// gathering is how the first round of a namespace's batch takes in the
// requests that arrive while it is being checked (group commit; see
// [Options.BatchDelay]). Each arrival is checked as it comes, against the
// running totals, so that when the last expected caller is back the
// batch's writes can start at once: the check overlaps the callers'
// return instead of following it.
type gathering struct {
	// until is when the batch stops waiting for arrivals; zero: the batch
	// takes only the requests queued when it began.
	until time.Time
	// want is the arrival count (see [namespaceWork.arrived]) at which the
	// batch stops waiting: the callers answered by the previous batch are
	// back.
	want  uint64
	timer *time.Timer
	// yielded is set once the gathering, its time over, has let the
	// goroutines ready to run go first: callers held up together (by a
	// garbage collector's pause, say) are often a few microseconds from
	// arriving when the timer fires, and waiting one more write would
	// double their latency.
	yielded bool
}

// nextGathering returns the gathering of the batch that follows one that
// held n requests and whose status writes took wrote and had seen arrived
// arrivals when they returned; none when the batch wrote nothing.
func (e *Evaluator) nextGathering(n int, wrote time.Duration, arrived uint64) gathering {
	wait := min(wrote/4, e.batchDelay)
	if wrote <= 0 || wait <= 0 {
		return gathering{}
	}
	return gathering{until: time.Now().Add(wait), want: arrived + uint64(n)}
}

// more returns the requests queued in namespace ns since the batch last
// took them, waiting for the next arrival while g lasts; nil when the
// batch should close: g is over (its time has passed or want arrivals
// have come), or ctx is done.
func (e *Evaluator) more(ctx context.Context, ns string, g *gathering) []*waiter {
	if g.until.IsZero() {
		return nil
	}
	for {
		e.mu.Lock()
		nw := e.namespaces[ns]
		if len(nw.pending) > 0 {
			batch := nw.pending
			nw.pending = nil
			e.mu.Unlock()
			return batch
		}
		wait := time.Until(g.until)
		if wait <= 0 && !g.yielded {
			g.yielded = true
			e.mu.Unlock()
			runtime.Gosched()
			continue
		}
		if nw.arrived >= g.want || wait <= 0 || ctx.Err() != nil {
			e.mu.Unlock()
			g.stop()
			return nil
		}
		nw.waiting = true
		e.mu.Unlock()

		if g.timer == nil {
			g.timer = time.NewTimer(wait)
		} else {
			g.timer.Reset(wait)
		}
		select {
		case <-nw.arrival:
		case <-g.timer.C:
		case <-ctx.Done():
		}
		e.mu.Lock()
		nw.waiting = false
		e.mu.Unlock()
	}
}

// stop ends g: the batch takes no more requests.
func (g *gathering) stop() {
	if g.timer != nil {
		g.timer.Stop()
	}
	*g = gathering{}
}

// arrivals returns how many requests have ever been added to namespace
// ns's queue while its goroutine runs.
func (e *Evaluator) arrivals(ns string) uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.namespaces[ns].arrived
}
