package admission

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit/evaluator"
	"github.com/quotakit/quotakit/generic"
	"github.com/quotakit/quotakit/internal/isnil"
	"github.com/quotakit/quotakit/internal/safe"
	"github.com/quotakit/quotakit/quota"
)

// QuotaAccessor reads and writes the ResourceQuotas the [Evaluator] charges.
// [NewAccessor] builds one over a lister and a client; tests and programs
// that keep quotas in memory implement it directly. Implementations must be
// safe for concurrent use.
type QuotaAccessor interface {
	// GetQuotas returns the ResourceQuotas of namespace. The caller does not
	// modify them.
	GetQuotas(ctx context.Context, namespace string) ([]corev1.ResourceQuota, error)
	// UpdateQuotaStatus writes q's status with q's resourceVersion as a
	// precondition and returns the quota as stored. A quota changed since
	// that version is a Conflict error (apierrors.IsConflict).
	UpdateQuotaStatus(ctx context.Context, q *corev1.ResourceQuota) (*corev1.ResourceQuota, error)
}

// Options configures an [Evaluator]. The zero value means kube-apiserver's
// defaults.
type Options struct {
	// Registry holds the evaluators requests are charged with. The Evaluator
	// only reads it: a resource without an evaluator is counted by an
	// object-count evaluator made for the request, never added to
	// Registry nor kept (see [Evaluator.Evaluate]). Defaults to
	// evaluator.NewRegistry(nil, evaluator.Options{}), the core
	// evaluators without listers, which is all admission needs.
	Registry quota.Registry
	// IgnoredResources are allowed without a check. Defaults to
	// evaluator.DefaultIgnoredResources(); an empty non-nil map ignores
	// nothing.
	IgnoredResources map[schema.GroupResource]struct{}
	// LimitedResources are the resources whose consumption needs a covering
	// quota, as in kube-apiserver's ResourceQuotaConfiguration
	// ([LoadConfiguration] reads that file). Defaults to none.
	LimitedResources []quota.LimitedResource
	// Timeout bounds how long Evaluate waits for its answer; a context
	// deadline that comes earlier wins. It also bounds each call to the
	// QuotaAccessor. Defaults to 10 seconds, as kube-apiserver.
	Timeout time.Duration
	// ConflictRetries is how many times a batch whose status writes failed
	// re-reads the quotas and re-checks its requests before denying them
	// with the last write error; Timeout bounds the wait anyway. Defaults
	// to 100. kube-apiserver retries 3 times; but with several webhook
	// replicas checking one quota, or namespaces sharing a cluster quota,
	// a replica's batch can lose many races in a row to another's, whose
	// next batch writes right after its last one without a read, until
	// that one runs out of requests. 3 retries denied about 1 request in
	// 2,000 of a saturating load over 100 namespaces while the quotas had
	// room (BenchmarkAdmissionReplicas), and 10 denied some of a burst of
	// 200 creations over three namespaces of one cluster quota
	// (TestClusterQuotaExactAcrossReplicas). Each retry re-reads live, so
	// it costs a read and a write.
	ConflictRetries int
	// ReleaseAttempts is how many times a compensating write that releases
	// a charge is tried (each after a fresh read) before the Evaluator gives
	// up, logs an error and leaves the charge to the controller's next
	// recalculation. Defaults to 5.
	ReleaseAttempts int
	// BatchDelay bounds how long a namespace's next batch waits for more
	// requests after a batch's status writes return (group commit). The
	// wait is a quarter of the time those writes took, at most
	// BatchDelay, and ends as soon as as many requests have arrived as
	// the batch just answered: the callers just answered often come back
	// at once with their next request (a workload controller creating
	// pods in waves, a client in a loop), and one write then serves them
	// together with the requests already waiting, instead of the two
	// groups alternating between writes. Requests are checked as they
	// arrive during the wait, so the writes start as soon as it ends; when
	// its time is over, callers ready to run are let run first. A batch
	// that wrote nothing does not wait, nor does a request arriving at an
	// idle namespace. Defaults to 2 ms; negative turns the wait off, as
	// kube-apiserver.
	BatchDelay time.Duration
	// Enforced reports whether the requests of a namespace are checked at
	// all. A namespace it reports false for is allowed at once: no quota
	// of it is read, charged or named in an answer, whoever asks, so that
	// a review forged for a namespace that never opted in neither moves
	// nor reveals its usage. An error refuses the request with that
	// error. Defaults to every namespace, as kube-apiserver's plugin.
	// [SelectedNamespaces] builds it from the label selector that the
	// webhook configuration's namespaceSelector also uses, so that the
	// code knows which namespaces are enforced rather than assuming
	// that only those are sent.
	Enforced func(ctx context.Context, namespace string) (bool, error)
}

// Default values of [Options].
const (
	DefaultTimeout         = 10 * time.Second
	DefaultConflictRetries = 100
	DefaultReleaseAttempts = 5
	DefaultBatchDelay      = 2 * time.Millisecond
)

var errNotBuilt = errors.New("admission: the Evaluator was not built by NewEvaluator")

// ErrStopped is returned by [Evaluator.Evaluate] for a request made after
// [Evaluator.Run] has returned, or still waiting when it returns.
var ErrStopped = errors.New("admission: quota evaluator stopped")

// Evaluator checks admission requests against the ResourceQuotas of their
// namespace and charges them, for many concurrent callers, as
// kube-apiserver's ResourceQuota admission plugin does, without its
// faults. It is safe for concurrent use.
//
// Requests of one namespace are checked in batches, in arrival order,
// against the running totals of the quotas: each request sees the charges
// of those before it, and one status write per changed quota serves the
// whole batch. A namespace is never checked by two goroutines at once;
// requests that arrive while a batch's quotas are being written form the
// next batch. Different namespaces are checked in parallel, one goroutine
// per namespace with waiting requests (kube-apiserver uses 5 workers for
// all namespaces). After a batch's writes, the next batch of the namespace
// waits a little for the callers just answered to come back
// ([Options.BatchDelay]), checking each request as it arrives, so that
// callers in a loop share one write instead of alternating between two.
//
// A write that fails (a Conflict when another writer changed the quota)
// makes the batch re-read the quotas and re-check its still-charged
// requests against the quotas whose write failed, up to
// [Options.ConflictRetries] more rounds; then they are denied with the last
// write error, as upstream. The limited-resources rule is decided in the
// first round, against every quota of the namespace; upstream applies it
// again to the subset and can deny a request whose covering quota was
// written.
//
// # No charge without an admission
//
// The Evaluator guarantees that status.used is never left charged for a
// request it did not admit, in three cases where kube-apiserver leaves it
// charged until the controller's next recalculation:
//
//   - a request charged to several quotas, whose write succeeded for some
//     and failed for others, and that the retries then deny
//     (kubernetes#133274);
//   - a request whose caller stopped waiting (the deadline passed, the
//     context was cancelled) before its batch was checked: it is withdrawn
//     and never written; upstream leaves it queued and may charge it later;
//   - a request whose caller stopped waiting after its batch was checked,
//     while the write carrying its charge was being made.
//
// In each case the charge already written is released by a compensating
// write (status.used minus exactly what was added, on a fresh read,
// conditioned on its resourceVersion, retried [Options.ReleaseAttempts]
// times) before a denial is answered. What remains: if the process dies
// between a write and its compensation, or every compensating write fails
// (logged at error level), the quota stays over-charged by that request
// until the ResourceQuota controller's next recalculation, as it would
// upstream. A compensation that races with the controller's own
// recalculation can under-charge by at most the released amount, until the
// next one.
//
// # Deadline
//
// Evaluate returns by [Options.Timeout] or its context's deadline, whichever
// is earlier, with kube-apiserver's error (HTTP 500, "Internal error
// occurred: resource quota evaluation timed out"), never later; a cancelled
// context returns the cancellation at once. Neither leaves a charge behind
// (see above).
//
// The Evaluator does its work in [Evaluator.Run], which must be running for
// requests to be answered; requests made before Run starts wait for it.
type Evaluator struct {
	accessor        QuotaAccessor
	registry        quota.Registry
	ignored         map[schema.GroupResource]struct{}
	limited         []quota.LimitedResource
	timeout         time.Duration
	retries         int
	releaseAttempts int
	batchDelay      time.Duration
	enforced        func(context.Context, string) (bool, error)

	// wg counts the goroutines checking namespaces, for Run to join.
	wg sync.WaitGroup

	stats stats

	mu sync.Mutex
	// guarded by mu
	state runState
	// namespaces holds the waiting requests of each namespace that has
	// some, and whether a goroutine is checking it.
	// guarded by mu
	namespaces map[string]*namespaceWork
	// ready lists the namespaces whose requests came before Run started,
	// for Run to start their goroutines.
	// guarded by mu
	ready []string
	// start starts the goroutine of a namespace, with Run's context; set
	// while Run runs, so that a request starts its namespace's goroutine
	// itself, without a hop through Run.
	// guarded by mu
	start func(ns string)
}

type runState int

const (
	notStarted runState = iota
	running
	stopped
)

// namespaceWork is the queue of one namespace.
type namespaceWork struct {
	pending []*waiter
	// busy is set while a goroutine owns the namespace; requests added
	// meanwhile wait for its next batch.
	busy bool
	// arrived counts the requests ever added.
	arrived uint64
	// waiting is set while the namespace's goroutine waits for the next
	// request (see [Evaluator.more]), which then signals arrival; arrival
	// holds at most one signal, and a stale one only wakes the goroutine
	// to look again.
	waiting bool
	arrival chan struct{}
}

// NewEvaluator returns an Evaluator that reads and writes quotas through
// accessor. It starts nothing; call [Evaluator.Run].
func NewEvaluator(accessor QuotaAccessor, opts Options) (*Evaluator, error) {
	if accessor == nil {
		return nil, errors.New("admission: NewEvaluator: nil quota accessor")
	}
	e := &Evaluator{
		accessor:        accessor,
		registry:        opts.Registry,
		ignored:         opts.IgnoredResources,
		limited:         opts.LimitedResources,
		timeout:         opts.Timeout,
		retries:         opts.ConflictRetries,
		releaseAttempts: opts.ReleaseAttempts,
		batchDelay:      opts.BatchDelay,
		enforced:        opts.Enforced,
		namespaces:      make(map[string]*namespaceWork),
	}
	if e.registry == nil {
		r, err := evaluator.NewRegistry(nil, evaluator.Options{})
		if err != nil {
			return nil, fmt.Errorf("admission: NewEvaluator: %w", err)
		}
		e.registry = r
	}
	if e.ignored == nil {
		e.ignored = evaluator.DefaultIgnoredResources()
	}
	if e.timeout <= 0 {
		e.timeout = DefaultTimeout
	}
	if e.retries <= 0 {
		e.retries = DefaultConflictRetries
	}
	if e.releaseAttempts <= 0 {
		e.releaseAttempts = DefaultReleaseAttempts
	}
	if e.batchDelay == 0 {
		e.batchDelay = DefaultBatchDelay
	}
	for i, l := range e.limited {
		if l.Resource == "" {
			return nil, fmt.Errorf("admission: NewEvaluator: limitedResources[%d].resource: Required value", i)
		}
	}
	return e, nil
}

// Run checks the waiting requests until ctx is done, then answers every
// request still waiting with [ErrStopped] and returns once all its
// goroutines have. Charges being released when ctx ends are still released
// first (each accessor call bounded by [Options.Timeout]), so that stopping
// leaves none behind. It returns an error if called more than once.
func (e *Evaluator) Run(ctx context.Context) error {
	if e.accessor == nil {
		return errNotBuilt
	}
	e.mu.Lock()
	if e.state != notStarted {
		e.mu.Unlock()
		return errors.New("admission: Evaluator.Run called more than once")
	}
	e.state = running
	e.start = func(ns string) { e.wg.Go(func() { e.work(ctx, ns) }) }
	for _, ns := range e.ready { // requests made before Run started
		e.start(ns)
	}
	e.ready = nil
	e.mu.Unlock()

	<-ctx.Done()
	e.mu.Lock()
	// From now on no goroutine starts: the ones running drain their
	// namespaces, answering with ErrStopped.
	e.state = stopped
	e.start = nil
	e.mu.Unlock()
	e.wg.Wait()
	return nil
}

// Evaluate checks the request a against the quotas of its namespace and, if
// it is admitted, charges it. It returns nil when the request is admitted,
// and otherwise kube-apiserver's error: a Forbidden error with its message
// for a denial (see [quota.CheckRequest]), the last write error when the
// quotas kept conflicting, the timeout error, or ctx's error when ctx was
// cancelled.
//
// Allowed without a check, as kube-apiserver: requests that are not
// namespaced, creations of namespaces, operations other than CREATE and
// UPDATE, ignored resources, requests the resource's evaluator does not
// handle, and every request of a namespace with no quota when no resource
// is limited. A dry-run request is checked against the running totals, but
// never charged.
//
// A resource the registry has no evaluator for is charged as
// count/<resource>.<group> by an object-count evaluator made for the
// request and dropped with it, so that the resources reviews name, forged
// or not, leave nothing behind; kube-apiserver keeps one per resource.
func (e *Evaluator) Evaluate(ctx context.Context, a quota.Attributes) error {
	if e.accessor == nil {
		return errNotBuilt
	}
	if isnil.Value(a) {
		return errors.New("admission: Evaluate: nil attributes")
	}
	gr := a.GetResource().GroupResource()
	if gr.Resource == "" {
		return fmt.Errorf("admission: Evaluate: %s request names no resource", a.GetOperation())
	}
	switch {
	case a.GetNamespace() == "",
		gr == schema.GroupResource{Resource: "namespaces"} && a.GetOperation() == admissionv1.Create,
		a.GetOperation() != admissionv1.Create && a.GetOperation() != admissionv1.Update:
		return nil
	}
	if _, ok := e.ignored[gr]; ok {
		return nil
	}
	ev := e.evaluatorFor(gr)
	if !ev.Handles(a) {
		return nil
	}
	if e.enforced != nil {
		var enforced bool
		err := safe.Call(func() (err error) {
			enforced, err = e.enforced(ctx, a.GetNamespace())
			return err
		})
		if err != nil || !enforced {
			return err
		}
	}

	w := &waiter{attrs: a, eval: ev, done: make(chan error, 1)}
	if err := e.enqueue(e.batchKey(a.GetNamespace()), w); err != nil {
		return err
	}
	timeout := time.NewTimer(e.timeout)
	defer timeout.Stop()
	select {
	case err := <-w.done:
		return err
	case <-ctx.Done():
	case <-timeout.C:
	}
	if !w.withdraw() {
		// Answered at the same moment: the answer stands.
		return <-w.done
	}
	if err := ctx.Err(); err == nil || errors.Is(err, context.DeadlineExceeded) {
		return apierrors.NewInternalError(errors.New("resource quota evaluation timed out"))
	}
	return fmt.Errorf("admission: quota evaluation: %w", context.Cause(ctx))
}

// enqueue adds w to the queue of key (its namespace, or the namespaces it
// shares quotas with: see [Evaluator.batchKey]) and makes sure a goroutine will
// check it.
func (e *Evaluator) enqueue(ns string, w *waiter) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.state == stopped {
		return ErrStopped
	}
	nw := e.namespaces[ns]
	if nw == nil {
		nw = &namespaceWork{arrival: make(chan struct{}, 1)}
		e.namespaces[ns] = nw
	}
	nw.pending = append(nw.pending, w)
	nw.arrived++
	if nw.waiting {
		select {
		case nw.arrival <- struct{}{}:
		default:
		}
	}
	if !nw.busy {
		nw.busy = true
		if e.state == running {
			e.start(ns)
		} else {
			e.ready = append(e.ready, ns)
		}
	}
	return nil
}

// work checks the batches of queue ns (a namespace, or a shared key) until
// none is waiting.
func (e *Evaluator) work(ctx context.Context, ns string) {
	var g gathering
	for {
		e.mu.Lock()
		nw := e.namespaces[ns]
		batch := nw.pending
		nw.pending = nil
		if len(batch) == 0 && g.until.IsZero() {
			delete(e.namespaces, ns)
			e.mu.Unlock()
			return
		}
		e.mu.Unlock()
		if ctx.Err() != nil {
			g.stop()
			for _, w := range batch {
				w.answer(ErrStopped)
			}
			continue
		}
		if len(batch) == 0 {
			// The previous batch's callers are not back yet.
			if batch = e.more(ctx, ns, &g); len(batch) == 0 {
				continue
			}
		}
		r := e.checkBatch(ctx, ns, batch, &g)
		g.stop()
		g = e.nextGathering(r.n, r.wrote, r.arrived)
	}
}

// SharedQuotas is implemented by a [QuotaAccessor] whose namespaces can
// share quotas, such as [ClusterAccessor]: the requests of namespaces
// with the same key are checked in one batch, against one running total
// of each quota they share, and charged in one write, instead of racing
// each other's writes. Namespaces with the empty key are batched alone.
type SharedQuotas interface {
	// SharedKey returns the key of namespace: the same for namespaces
	// that share a quota, "" for one that shares none.
	SharedKey(namespace string) string
}

// batchKey returns the queue the requests of namespace ns wait in: their
// namespace's, or the one of the namespaces it shares quotas with. A
// shared key begins with a character no namespace name has.
func (e *Evaluator) batchKey(ns string) string {
	if sq, ok := e.accessor.(SharedQuotas); ok {
		if k := sq.SharedKey(ns); k != "" {
			return "*" + k
		}
	}
	return ns
}

// evaluatorFor returns the registry's evaluator of gr, or an object-count
// evaluator made for this request.
//
// kube-apiserver adds an object-count evaluator to its registry for each
// resource it is asked about, and keeps it for good. Reviews name any
// resource their sender likes, so kept evaluators would grow without
// bound with forged names (100,000 of them kept 21 MiB); making one costs
// about 100 ns and three small allocations, less than a lock shared by
// every request would under contention, so none is kept.
func (e *Evaluator) evaluatorFor(gr schema.GroupResource) quota.Evaluator {
	if ev := e.registry.Get(gr); ev != nil {
		return ev
	}
	// A nil list func: admission only asks for the usage of one object.
	return generic.NewObjectCountEvaluator(gr, nil, "")
}
