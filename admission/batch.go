package admission

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/quotakit/quotakit/internal/reslist"
	"github.com/quotakit/quotakit/quota"
)

// waiter is one request waiting in a namespace's queue.
type waiter struct {
	attrs quota.Attributes
	eval  quota.Evaluator
	// state moves once, from waiting to answered (by the checking
	// goroutine) or to withdrawn (by Evaluate, when its caller stops
	// waiting); whoever moves it decides.
	state atomic.Int32
	// done receives the answer; buffered so that answering never blocks.
	done chan error

	// The fields below are used only by the goroutine checking the batch.

	// charged is what has been written to status.used for this request,
	// by quota name.
	charged quotaCharges
	// round is what this round of the batch charges it.
	round quotaCharges
}

// quotaCharges lists what was charged to quotas for one request, one entry
// per quota: a request charges few quotas.
type quotaCharges []quotaCharge

type quotaCharge struct {
	quota string
	added corev1.ResourceList
}

// add returns cs with d added to what the quota with key name was
// charged.
func (cs quotaCharges) add(name string, d corev1.ResourceList) quotaCharges {
	for i := range cs {
		if cs[i].quota == name {
			cs[i].added = quota.Add(cs[i].added, d)
			return cs
		}
	}
	return append(cs, quotaCharge{name, d})
}

const (
	waiting int32 = iota
	answered
	withdrawn
)

// answer delivers err unless the caller has withdrawn; it reports whether
// the caller gets err.
func (w *waiter) answer(err error) bool {
	if !w.state.CompareAndSwap(waiting, answered) {
		return false
	}
	w.done <- err
	return true
}

// withdraw takes the request back unless it has been answered; it reports
// whether it did.
func (w *waiter) withdraw() bool { return w.state.CompareAndSwap(waiting, withdrawn) }

// gone reports whether the caller has withdrawn.
func (w *waiter) gone() bool { return w.state.Load() == withdrawn }

// batchResult is what a batch leaves for the next one to decide how long
// to gather requests.
type batchResult struct {
	// n is how many requests the batch held.
	n int
	// wrote is how long its status writes took, zero when it wrote
	// nothing.
	wrote time.Duration
	// arrived is the namespace's arrival count (see
	// [namespaceWork.arrived]) when the last writes returned, before any
	// request of the batch was answered.
	arrived uint64
}

// checkBatch checks batch, the requests of key's namespace (or of the
// namespaces that share quotas under key: see [SharedQuotas]) in arrival
// order, and, in its first round, those that arrive while g lasts (see
// [Evaluator.more]); it writes their charges and answers them. Every
// request is answered (or has withdrawn) when it returns, and every charge
// written for a request that is not admitted has been released or logged
// as impossible to release.
func (e *Evaluator) checkBatch(ctx context.Context, key string, batch []*waiter, g *gathering) (r batchResult) {
	r.n = len(batch)
	set := newQuotaSet()
	var denied []denial // answered after their charges are released
	var release []*waiter
	defer func() {
		e.release(ctx, release)
		for _, d := range denied {
			d.w.answer(d.err)
		}
	}()
	// deny denies w: at once when nothing was written for it, and
	// otherwise once what was written is released.
	deny := func(w *waiter, err error) {
		if len(w.charged) == 0 {
			w.answer(err)
			return
		}
		release = append(release, w)
		denied = append(denied, denial{w, err})
	}

	pending := batch
	limited := e.limited
	quotas := set.list
	for round := 0; ; round++ {
		// running holds the quotas with the charges of the requests checked
		// so far: only status.used differs from quotas, a list of the
		// round's own once owned[i] is set. In the first round, a request
		// from a namespace not seen yet adds its quotas to both.
		running := slices.Clone(quotas)
		owned := make([]bool, len(running))
		var charged []*waiter
		for i := 0; ; i++ {
			if i == len(pending) {
				if round > 0 {
					break
				}
				more := e.more(ctx, key, g)
				if len(more) == 0 {
					break
				}
				pending = append(pending, more...)
				r.n += len(more)
			}
			w := pending[i]
			if w.gone() {
				if len(w.charged) > 0 {
					release = append(release, w)
				}
				continue
			}
			ns := w.attrs.GetNamespace()
			if round == 0 {
				if err := e.addNamespace(ctx, set, ns); err != nil {
					w.answer(err)
					continue
				}
				for k := len(running); k < len(set.list); k++ {
					quotas = append(quotas, set.list[k])
					running = append(running, set.list[k])
					owned = append(owned, false)
				}
				if len(set.members[ns]) == 0 && len(limited) == 0 {
					w.answer(nil) // no quota, nothing limited
					continue
				}
			}
			idx := set.members[ns]
			charges, err := checkOne(set.view(running, ns), w, limited)
			if err != nil {
				deny(w, err)
				continue
			}
			if w.attrs.IsDryRun() {
				w.answer(nil)
				continue
			}
			for _, c := range charges {
				at := idx[c.Quota]
				q := &running[at]
				if owned[at] {
					reslist.Accumulate(q.Status.Used, c.Added, false, nil)
				} else {
					q.Status.Used, owned[at] = quota.Add(q.Status.Used, c.Added), true
				}
				w.round = append(w.round, quotaCharge{set.keys[at], c.Added})
			}
			if w.round == nil {
				// Nothing (more) to charge: what an earlier round wrote
				// for it stands.
				w.answer(nil)
				continue
			}
			charged = append(charged, w)
		}
		if len(charged) == 0 {
			return r
		}

		start := time.Now()
		failed, lastErr := e.writeChanged(ctx, set.keys, quotas, running)
		r.wrote += time.Since(start)
		r.arrived = e.arrivals(key)
		for _, w := range charged {
			w.recordCharged(failed)
		}
		if len(failed) == 0 {
			for _, w := range charged {
				if !w.answer(nil) {
					// Withdrawn while its charge was being written.
					release = append(release, w)
				}
			}
			return r
		}
		if round >= e.retries {
			e.stats.exhausted.Add(int64(len(charged)))
			for _, w := range charged {
				deny(w, lastErr)
			}
			return r
		}
		e.stats.retries.Add(1)
		fresh := newQuotaSet()
		for _, ns := range set.namespaces() {
			if err := e.addNamespace(ctx, fresh, ns); err != nil {
				// As upstream: the write error, which says why a retry
				// was needed, not the read error.
				for _, w := range charged {
					deny(w, lastErr)
				}
				return r
			}
		}
		// Re-check against the quotas whose write failed; the others hold
		// the charges already. The limited-resources rule was decided in
		// the first round against every quota, and is not re-applied to
		// this subset (upstream re-applies it and can deny a request whose
		// covering quota was written).
		set = fresh.only(failed)
		quotas = set.list
		limited = nil
		pending = charged
	}
}

// recordCharged adds what this round charged w to what has been written
// for it, but for the quotas named in failed, whose writes failed.
func (w *waiter) recordCharged(failed []string) {
	if w.charged == nil && len(failed) == 0 {
		w.charged, w.round = w.round, nil
		return
	}
	for _, c := range w.round {
		if !slices.Contains(failed, c.quota) {
			w.charged = w.charged.add(c.quota, c.added)
		}
	}
	w.round = nil
}

// checkOne is [quota.ChargeRequest] for one waiter. A panic in the
// evaluator, which may be the caller's code, denies that request with an
// error instead of taking the process down.
func checkOne(quotas []corev1.ResourceQuota, w *waiter, limited []quota.LimitedResource) (charges []quota.Charge, err error) {
	defer func() {
		if r := recover(); r != nil {
			charges, err = nil, fmt.Errorf("admission: quota evaluator of %s panicked: %v", w.attrs.GetResource().GroupResource(), r)
		}
	}()
	return quota.ChargeRequest(quotas, w.attrs, w.eval, limited)
}

type denial struct {
	w   *waiter
	err error
}

// writeChanged writes the status of each quota of after whose status.used
// differs from before (keys names them), and returns the keys of those
// whose write failed, sorted, with the error of the last of them. The
// writes of different quotas are independent (each has its own
// resourceVersion), so they are made at once, and a batch that charges
// two quotas waits for one write, not two (kube-apiserver writes them one
// after the other).
func (e *Evaluator) writeChanged(ctx context.Context, keys []string, before, after []corev1.ResourceQuota) (failed []string, lastErr error) {
	var changed []int
	for i := range after {
		if !quota.Equals(before[i].Status.Used, after[i].Status.Used) {
			changed = append(changed, i)
		}
	}
	slices.SortFunc(changed, func(i, j int) int { return cmp.Compare(keys[i], keys[j]) })
	errs := make([]error, len(changed))
	if len(changed) == 1 {
		_, errs[0] = e.updateStatus(ctx, &after[changed[0]])
	} else {
		var wg sync.WaitGroup
		for k, i := range changed {
			wg.Go(func() { _, errs[k] = e.updateStatus(ctx, &after[i]) })
		}
		wg.Wait()
	}
	for k, i := range changed {
		if errs[k] != nil {
			failed = append(failed, keys[i])
			lastErr = errs[k]
		}
	}
	return failed, lastErr
}

// release takes back from status.used what was written for ws: for each
// quota, on a fresh read, status.used minus the sum of their charges
// (never below zero), conditioned on the read resourceVersion, retried on
// any failure up to e.releaseAttempts reads. What cannot be released is
// logged at error level; the controller's next recalculation corrects it.
func (e *Evaluator) release(ctx context.Context, ws []*waiter) {
	if len(ws) == 0 {
		return
	}
	// Releasing goes on when Run is stopping, so that stopping leaves no
	// charge behind; each call is still bounded by the timeout.
	ctx = context.WithoutCancel(ctx)
	total := make(map[string]corev1.ResourceList) // by quota key
	var namespaces []string
	for _, w := range ws {
		for _, c := range w.charged {
			total[c.quota] = quota.Add(total[c.quota], c.added)
		}
		w.charged = nil
		if ns := w.attrs.GetNamespace(); !slices.Contains(namespaces, ns) {
			namespaces = append(namespaces, ns)
		}
	}
	var lastErr error
	for attempt := 0; attempt < e.releaseAttempts && len(total) > 0; attempt++ {
		set := newQuotaSet()
		var err error
		for _, ns := range namespaces {
			if err = e.addNamespace(ctx, set, ns); err != nil {
				break
			}
		}
		if err != nil {
			lastErr = err
			continue
		}
		for key, d := range total {
			i := slices.Index(set.keys, key)
			if i < 0 {
				// Deleted: nothing left to release.
				delete(total, key)
				continue
			}
			q := set.list[i].DeepCopy()
			q.Status.Used = subtractFloor(q.Status.Used, d)
			if _, err := e.updateStatus(ctx, q); err != nil {
				lastErr = err
				continue
			}
			e.stats.released.Add(1)
			delete(total, key)
		}
	}
	if len(total) > 0 {
		e.stats.unreleased.Add(int64(len(total)))
		keys := make([]string, 0, len(total))
		for key := range total {
			keys = append(keys, key)
		}
		slices.Sort(keys)
		logr.FromContextOrDiscard(ctx).Error(lastErr, "admission: could not release quota charges of requests that were not admitted; the quota controller's next recalculation will",
			"quotas", keys)
	}
}

// subtractFloor returns used minus d, never below zero, keeping exactly
// the names of used.
func subtractFloor(used, d corev1.ResourceList) corev1.ResourceList {
	out := make(corev1.ResourceList, len(used))
	for name, u := range used {
		q := u.DeepCopy()
		if v, ok := d[name]; ok {
			q.Sub(v)
			if q.Sign() < 0 {
				q.Set(0)
			}
		}
		out[name] = q
	}
	return out
}

// getQuotas reads the quotas of ns, bounded by the Evaluator's timeout. A
// panic in the accessor, the caller's code, is an error.
func (e *Evaluator) getQuotas(ctx context.Context, ns string) (quotas []corev1.ResourceQuota, err error) {
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			quotas, err = nil, fmt.Errorf("error resolving quota: admission: the quota accessor panicked: %v", r)
		}
	}()
	quotas, err = e.accessor.GetQuotas(ctx, ns)
	if err != nil {
		return nil, resolvingError(err)
	}
	return quotas, nil
}

// resolvingError is err, an accessor's read error, as kube-apiserver words
// it: "error resolving quota: …", a 500. An API status that asks the
// caller to retry (a Retry-After, as [ClusterAccessor] answers before
// its caches can tell) keeps its code and Retry-After, so that
// kube-apiserver passes them on and clients such as client-go retry on
// their own instead of failing.
func resolvingError(err error) error {
	var se *apierrors.StatusError
	if errors.As(err, &se) && se.ErrStatus.Details != nil && se.ErrStatus.Details.RetryAfterSeconds > 0 {
		st := se.Status()
		st.Details = st.Details.DeepCopy()
		st.Message = "error resolving quota: " + st.Message
		return &apierrors.StatusError{ErrStatus: st}
	}
	return fmt.Errorf("error resolving quota: %w", err)
}

// updateStatus writes q's status, bounded by the Evaluator's timeout. A
// panic in the accessor is an error: the write may or may not have been
// made, as with any failed write.
func (e *Evaluator) updateStatus(ctx context.Context, q *corev1.ResourceQuota) (out *corev1.ResourceQuota, err error) {
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("admission: the quota accessor panicked writing %s/%s: %v", q.Namespace, q.Name, r)
		}
	}()
	e.stats.writes.Add(1)
	out, err = e.accessor.UpdateQuotaStatus(ctx, q)
	if apierrors.IsConflict(err) {
		e.stats.conflicts.Add(1)
	}
	if err == nil && out == nil {
		return nil, errors.New("admission: quota accessor returned no quota and no error")
	}
	return out, err
}
