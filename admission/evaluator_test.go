package admission_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/quotakit/quotakit/admission"
	"github.com/quotakit/quotakit/internal/qcmp"
)

// TestEvaluatorConcurrentCreations is the scenario: 1,000 pod
// creations from 50 goroutines against pods: 500, 5 ms per status write and
// a conflicting writer on every seventh write. Exactly 500 are admitted and
// the stored status.used says 500.
func TestEvaluatorConcurrentCreations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(rq("ns", "pods", rl("pods", "500"), rl("pods", "0")))
		s.writeDelay = 5 * time.Millisecond
		var conflicts atomic.Int32
		s.interfere = func(n int, _ *corev1.ResourceQuota) bool {
			if n%7 == 0 {
				conflicts.Add(1)
				return true
			}
			return false
		}
		e := newEvaluator(t, s, admission.Options{})
		run(t, e)

		var admitted, exceeded atomic.Int32
		var wg sync.WaitGroup
		for g := range 50 {
			wg.Go(func() {
				for i := range 20 {
					err := e.Evaluate(t.Context(), podCreate("ns", "p", ""))
					switch {
					case err == nil:
						admitted.Add(1)
					case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "exceeded quota: pods"):
						exceeded.Add(1)
					default:
						t.Errorf("goroutine %d request %d: %v", g, i, err)
					}
				}
			})
		}
		wg.Wait()
		synctest.Wait()
		if got := admitted.Load(); got != 500 {
			t.Errorf("admitted %d pods, want 500", got)
		}
		if got := exceeded.Load(); got != 500 {
			t.Errorf("%d denied as exceeding quota, want 500", got)
		}
		if got := quantity(s.used("ns", "pods"), "pods"); got != 500 {
			t.Errorf("stored status.used pods = %d, want 500", got)
		}
		if conflicts.Load() == 0 {
			t.Errorf("no conflict was injected")
		}
	})
}

// TestEvaluatorPartialConflictReleases: a pod charged to two quotas whose
// write succeeds for one and conflicts for the other, which another writer
// has filled, is denied, and the quota that was written is given back its
// charge (kubernetes#133274 leaves it charged).
func TestEvaluatorPartialConflictReleases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(
			rq("ns", "a-pods", rl("pods", "10"), rl("pods", "3")),
			rq("ns", "b-pods", rl("pods", "5"), rl("pods", "4")),
		)
		bWrites := 0
		s.interfere = func(n int, stored *corev1.ResourceQuota) bool {
			if stored.Name != "b-pods" {
				return false
			}
			if bWrites++; bWrites == 1 {
				// Another API server admitted a pod first.
				stored.Status.Used = rl("pods", "5")
				return true
			}
			return false
		}
		e := newEvaluator(t, s, admission.Options{})
		run(t, e)

		err := e.Evaluate(t.Context(), podCreate("ns", "web", ""))
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "exceeded quota: b-pods, requested: pods=1, used: pods=5, limited: pods=5") {
			t.Fatalf("Evaluate = %v, want the exceeded quota denial of b-pods", err)
		}
		for name, want := range map[string]int64{"a-pods": 3, "b-pods": 5} {
			if got := quantity(s.used("ns", name), "pods"); got != want {
				t.Errorf("%s status.used pods = %d, want %d", name, got, want)
			}
		}
	})
}

// TestEvaluatorPartialConflictAdmits: when the conflicting quota still has
// room, the retry charges it and the request is admitted once in each.
func TestEvaluatorPartialConflictAdmits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(
			rq("ns", "a-pods", rl("pods", "10"), rl("pods", "3")),
			rq("ns", "b-pods", rl("pods", "5"), rl("pods", "1")),
		)
		bWrites := 0
		s.interfere = func(n int, stored *corev1.ResourceQuota) bool {
			if stored.Name != "b-pods" {
				return false
			}
			if bWrites++; bWrites == 1 {
				stored.Status.Used = rl("pods", "2")
				return true
			}
			return false
		}
		e := newEvaluator(t, s, admission.Options{})
		run(t, e)
		if err := e.Evaluate(t.Context(), podCreate("ns", "web", "")); err != nil {
			t.Fatalf("Evaluate = %v, want nil", err)
		}
		for name, want := range map[string]int64{"a-pods": 4, "b-pods": 3} {
			if got := quantity(s.used("ns", name), "pods"); got != want {
				t.Errorf("%s status.used pods = %d, want %d", name, got, want)
			}
		}
	})
}

// TestEvaluatorConflictsExhausted: a quota that conflicts on every write
// denies with the conflict after 1+ConflictRetries rounds, and the quota
// that was written is released.
func TestEvaluatorConflictsExhausted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(
			rq("ns", "a-pods", rl("pods", "10"), rl("pods", "0")),
			rq("ns", "b-pods", rl("pods", "10"), rl("pods", "0")),
		)
		var bWrites int
		s.interfere = func(n int, stored *corev1.ResourceQuota) bool {
			if stored.Name == "b-pods" {
				bWrites++
				return true
			}
			return false
		}
		e := newEvaluator(t, s, admission.Options{ConflictRetries: 2})
		run(t, e)
		err := e.Evaluate(t.Context(), podCreate("ns", "web", ""))
		if !apierrors.IsConflict(err) {
			t.Fatalf("Evaluate = %v, want a Conflict", err)
		}
		if bWrites != 3 {
			t.Errorf("b-pods written %d times, want 3 (1 + ConflictRetries)", bWrites)
		}
		if got := quantity(s.used("ns", "a-pods"), "pods"); got != 0 {
			t.Errorf("a-pods status.used pods = %d, want 0 after the release", got)
		}
	})
}

// TestEvaluatorDeadline: a request whose write hangs returns the timeout
// error at the deadline, and its charge, written later, is released; a
// request queued behind it is withdrawn and never charged.
func TestEvaluatorDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(rq("ns", "pods", rl("pods", "10"), rl("pods", "0")))
		s.writeDelay = 15 * time.Second
		e := newEvaluator(t, s, admission.Options{Timeout: 30 * time.Second})
		run(t, e)

		start := time.Now()
		var wg sync.WaitGroup
		errs := make([]error, 2)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		wg.Go(func() { errs[0] = e.Evaluate(ctx, podCreate("ns", "first", "")) })
		synctest.Wait() // first is being written
		wg.Go(func() { errs[1] = e.Evaluate(ctx, podCreate("ns", "second", "")) })
		wg.Wait()
		if got := time.Since(start); got != 10*time.Second {
			t.Errorf("Evaluate returned after %v, want 10s (the context's deadline, before Options.Timeout)", got)
		}
		for i, err := range errs {
			if !apierrors.IsInternalError(err) || err.Error() != "Internal error occurred: resource quota evaluation timed out" {
				t.Errorf("request %d: Evaluate = %v, want the timeout error", i, err)
			}
		}
		time.Sleep(time.Minute) // the write lands, late
		synctest.Wait()
		if got := quantity(s.used("ns", "pods"), "pods"); got != 0 {
			t.Errorf("status.used pods = %d after both requests timed out, want 0", got)
		}
		// The first request's charge and its release; the second, withdrawn
		// before its batch, is never written.
		if s.writes != 2 {
			t.Errorf("%d status writes, want 2", s.writes)
		}
	})
}

// TestEvaluatorOptionsTimeout: Options.Timeout applies when the context
// has no earlier deadline.
func TestEvaluatorOptionsTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(rq("ns", "pods", rl("pods", "10"), rl("pods", "0")))
		s.writeDelay = time.Minute
		e := newEvaluator(t, s, admission.Options{Timeout: 2 * time.Second})
		run(t, e)
		start := time.Now()
		err := e.Evaluate(t.Context(), podCreate("ns", "web", ""))
		if !apierrors.IsInternalError(err) {
			t.Errorf("Evaluate = %v, want the timeout error", err)
		}
		if got := time.Since(start); got != 2*time.Second {
			t.Errorf("Evaluate returned after %v, want 2s", got)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if got := quantity(s.used("ns", "pods"), "pods"); got != 0 {
			t.Errorf("status.used pods = %d, want 0", got)
		}
	})
}

func TestEvaluatorCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(rq("ns", "pods", rl("pods", "10"), rl("pods", "0")))
		s.writeDelay = time.Second
		e := newEvaluator(t, s, admission.Options{})
		run(t, e)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- e.Evaluate(ctx, podCreate("ns", "web", "")) }()
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Evaluate = %v, want context.Canceled", err)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := quantity(s.used("ns", "pods"), "pods"); got != 0 {
			t.Errorf("status.used pods = %d, want 0", got)
		}
	})
}

// TestEvaluatorDryRun: a dry run is checked against the running totals but
// never charged.
func TestEvaluatorDryRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(rq("ns", "pods", rl("pods", "2"), rl("pods", "1")))
		e := newEvaluator(t, s, admission.Options{})
		run(t, e)
		dry := podCreate("ns", "dry", "")
		dry.DryRun = true
		if err := e.Evaluate(t.Context(), dry); err != nil {
			t.Fatalf("dry run: Evaluate = %v, want nil", err)
		}
		if got := quantity(s.used("ns", "pods"), "pods"); got != 1 {
			t.Errorf("status.used pods = %d after a dry run, want 1", got)
		}
		if s.writes != 0 {
			t.Errorf("a dry run made %d writes, want 0", s.writes)
		}
		if err := e.Evaluate(t.Context(), podCreate("ns", "web", "")); err != nil {
			t.Fatalf("Evaluate = %v, want nil", err)
		}
		if err := e.Evaluate(t.Context(), dry); !apierrors.IsForbidden(err) {
			t.Errorf("dry run over quota: Evaluate = %v, want Forbidden", err)
		}
	})
}

// TestEvaluatorBatchOrder: requests of one batch are checked in arrival
// order against running totals, with one write for the batch.
func TestEvaluatorBatchOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(rq("ns", "cpu", rl("requests.cpu", "1"), rl("requests.cpu", "0")))
		e := newEvaluator(t, s, admission.Options{})
		// Queued before Run starts, so that they form one batch.
		errs := make([]error, 3)
		var wg sync.WaitGroup
		for i, cpu := range []string{"600m", "600m", "400m"} {
			wg.Go(func() { errs[i] = e.Evaluate(t.Context(), podCreate("ns", "p", cpu)) })
			synctest.Wait()
		}
		run(t, e)
		wg.Wait()
		if errs[0] != nil || errs[2] != nil {
			t.Errorf("first and third: Evaluate = %v, %v; want nil, nil", errs[0], errs[2])
		}
		if !apierrors.IsForbidden(errs[1]) {
			t.Errorf("second: Evaluate = %v, want Forbidden", errs[1])
		}
		if diff := cmp.Diff(rl("requests.cpu", "1"), s.used("ns", "cpu"), qcmp.Quantities()); diff != "" {
			t.Errorf("status.used (-want +got):\n%s", diff)
		}
		if s.writes != 1 {
			t.Errorf("%d writes for one batch, want 1", s.writes)
		}
	})
}

// TestEvaluatorNamespacesInParallel: a namespace whose write hangs does not
// hold up another.
func TestEvaluatorNamespacesInParallel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(rq("a", "pods", rl("pods", "10"), rl("pods", "0")), rq("b", "pods", rl("pods", "10"), rl("pods", "0")))
		s.writeDelay = time.Second
		e := newEvaluator(t, s, admission.Options{})
		run(t, e)
		start := time.Now()
		var wg sync.WaitGroup
		for _, ns := range []string{"a", "b"} {
			wg.Go(func() {
				if err := e.Evaluate(t.Context(), podCreate(ns, "p", "")); err != nil {
					t.Errorf("%s: Evaluate = %v", ns, err)
				}
			})
		}
		wg.Wait()
		if got := time.Since(start); got != time.Second {
			t.Errorf("two namespaces took %v, want 1s (one write each, in parallel)", got)
		}
	})
}

// TestEvaluatorWritesQuotasAtOnce: a request charged to two quotas waits
// for one write, not two.
func TestEvaluatorWritesQuotasAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(rq("ns", "a", rl("pods", "10"), rl("pods", "0")), rq("ns", "b", rl("pods", "10"), rl("pods", "0")))
		s.writeDelay = time.Second
		e := newEvaluator(t, s, admission.Options{})
		run(t, e)
		start := time.Now()
		if err := e.Evaluate(t.Context(), podCreate("ns", "p", "")); err != nil {
			t.Fatalf("Evaluate = %v", err)
		}
		if got := time.Since(start); got != time.Second {
			t.Errorf("Evaluate took %v, want 1s", got)
		}
		for _, name := range []string{"a", "b"} {
			if got := quantity(s.used("ns", name), "pods"); got != 1 {
				t.Errorf("%s status.used pods = %d, want 1", name, got)
			}
		}
	})
}

// TestEvaluatorBatchDelay shows what the batch delay buys and costs. Twenty
// callers in a closed loop, 5 ms per status write: with the delay, the
// callers just answered come back before the next write and every write
// serves all twenty, so 200 creations take 10 writes; without it, as in
// kube-apiserver, the callers split into groups that alternate, and they
// take about twice as many. A lone caller waits for its own writes only:
// the delay ends as soon as the one caller it waits for is back.
func TestEvaluatorBatchDelay(t *testing.T) {
	const callers, each = 20, 10
	closedLoop := func(t *testing.T, delay time.Duration) (writes int, took time.Duration) {
		s := newStore(rq("ns", "pods", rl("pods", "1000"), rl("pods", "0")))
		s.writeDelay = 5 * time.Millisecond
		e := newEvaluator(t, s, admission.Options{BatchDelay: delay})
		run(t, e)
		start := time.Now()
		var wg sync.WaitGroup
		for range callers {
			wg.Go(func() {
				for range each {
					if err := e.Evaluate(t.Context(), podCreate("ns", "p", "")); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		took = time.Since(start)
		if got := quantity(s.used("ns", "pods"), "pods"); got != callers*each {
			t.Errorf("used pods = %d, want %d", got, callers*each)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.writes, took
	}
	synctest.Test(t, func(t *testing.T) {
		writes, took := closedLoop(t, 0)
		t.Logf("with the default delay: %d writes in %v", writes, took)
		// The first request starts a write alone; the other 19 join the
		// second, and from then on all twenty come back together.
		if writes > each+1 {
			t.Errorf("default delay: %d writes, want at most %d", writes, each+1)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		writes, took := closedLoop(t, -1)
		t.Logf("without the delay: %d writes in %v", writes, took)
		// The callers split into groups that alternate between writes;
		// how many of them catch the next write depends on scheduling, so
		// only this is certain: more writes than the delay ever needs
		// (16 to 20 here, against 10 or 11).
		if writes <= each+1 {
			t.Errorf("no delay: %d writes, want more than the %d the delay needs", writes, each+1)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		s := newStore(rq("ns", "pods", rl("pods", "10"), rl("pods", "0")))
		s.writeDelay = 5 * time.Millisecond
		e := newEvaluator(t, s, admission.Options{})
		run(t, e)
		for i := range 3 {
			start := time.Now()
			if err := e.Evaluate(t.Context(), podCreate("ns", "p", "")); err != nil {
				t.Fatal(err)
			}
			if took := time.Since(start); took != s.writeDelay {
				t.Errorf("lone request %d took %v, want one write, %v", i, took, s.writeDelay)
			}
		}
	})
}

// TestEvaluatorChecksArrivalsDuringTheWait checks that a request arriving
// while a batch waits for the callers just answered (Options.BatchDelay) is
// checked as it arrives: a denial does not wait for the batch to close.
func TestEvaluatorChecksArrivalsDuringTheWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(rq("ns", "pods", rl("pods", "3"), rl("pods", "0")))
		s.writeDelay = 5 * time.Millisecond
		e := newEvaluator(t, s, admission.Options{})
		run(t, e)
		var wg sync.WaitGroup
		admit := func(name string) {
			wg.Go(func() {
				if err := e.Evaluate(t.Context(), podCreate("ns", name, "")); err != nil {
					t.Errorf("%s: %v", name, err)
				}
			})
		}
		// The first request is written alone, from 0 to 5 ms; the next two
		// form the next batch, which waits until 6.25 ms for the first
		// caller (who does not come back) and is written until 11.25 ms.
		admit("first")
		synctest.Wait()
		admit("a")
		admit("b")
		// Then the next batch waits until 12.5 ms for those two callers,
		// who do not come back either. A request over the quota arrives
		// in the middle of that wait.
		time.Sleep(11*time.Millisecond + 500*time.Microsecond)
		start := time.Now()
		err := e.Evaluate(t.Context(), podCreate("ns", "over", ""))
		if took := time.Since(start); took != 0 {
			t.Errorf("a request arriving during the wait was answered after %v, want at once", took)
		}
		if !apierrors.IsForbidden(err) {
			t.Errorf("over-quota request: %v, want Forbidden", err)
		}
		wg.Wait()
		if got := quantity(s.used("ns", "pods"), "pods"); got != 3 {
			t.Errorf("used pods = %d, want 3", got)
		}
	})
}
