package quotakit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit/cache"
	"github.com/quotakit/quotakit/evaluator"
	"github.com/quotakit/quotakit/internal/charges"
	"github.com/quotakit/quotakit/internal/ledger"
	"github.com/quotakit/quotakit/internal/ownwrites"
	"github.com/quotakit/quotakit/quota"
	"github.com/quotakit/quotakit/workqueue"
)

// Controller keeps the status of every ResourceQuota true: status.hard is
// spec.hard, and status.used is what the objects of the quota's namespace
// charge, as kube-controller-manager's resource quota controller computes
// it.
//
// It runs one informer per counted resource (the rows of
// [evaluator.Resources], Options.Resources, and, with a [Discoverer]
// client, every served resource some quota names) and one for
// ResourceQuotas, and recalculates a quota:
//
//   - when it is created, or its spec.hard or scope selector changes (a
//     quota whose status.hard differs from spec.hard, or that lacks a used
//     value, goes to a priority queue so that admission can start
//     enforcing it soon);
//   - when an object of its namespace that it may charge is deleted, or
//     updated in a way the update filter says may change usage (the pod
//     became terminal, a resize, a service's node ports, …), or created
//     or updated in any way that changes what the ledger (below) has it
//     charge the quota;
//   - when a pod deleted with a grace period reaches the end of it, which
//     no event marks when no kubelet finishes the deletion;
//   - when another writer changes its status.used (admission charged it),
//     and a charge window later (see Charges in flight below);
//   - every Options.ResyncPeriod.
//
// # Charges in flight
//
// Admission (kube-apiserver's plugin, or package admission in any number
// of webhook replicas) charges status.used before the object is stored,
// and the object reaches the informers after that. What a quota's
// status.used holds beyond what the cached objects charge is a charge in
// flight: a recalculation never writes it away while it is younger than
// Options.ChargeWindow (default 30 seconds, [DefaultChargeWindow]), so
// that no recount, at any time, takes back an admitted request whose
// object is on its way. What arriving objects have not accounted for
// once it is a window old is released: the creation failed after
// admission (a name already taken, a later webhook's denial, a forged
// review). Every write carries the quota's resourceVersion, so a charge
// made meanwhile makes it conflict and is read again, never lost. A
// status.used changed by someone else is synced at once, to note the
// charge (such a sync writes nothing unless objects came or went).
//
// Each arriving object takes back a charge held, so that what is held is
// only what no object has accounted for yet; an object that reaches the
// caches before the status that charged it is kept as a credit against
// that status, until the quota's resourceVersion passes the object's
// (kube-apiserver numbers both from one etcd revision). Each charge
// held is rechecked at its own expiry: in a quiet namespace a charge no
// object followed is released one window after it was made, plus the
// time to write. status.used does not say which object a charge was made
// for, so an arrival is taken for the oldest charge held, which never
// releases a charge whose object is on its way, whatever order the
// objects arrive in: a charge no object followed, while charges that
// follow it are accounted for by their objects, is released one window
// after the last of them, and no more than the last window's charges are
// ever held. Arriving objects are counted exactly for the resources the
// ledger keeps (the core table's and counted ones); for the caller's own
// evaluators only the growth of their usage is known to have arrived, so
// an object that arrives in the recalculation that also sees another
// deleted is taken for one on its way, and its charge held until it
// leaves the window. Releases are logged and counted
// ([Controller.ReleasedCharges]). A status.used raised by hand is a
// charge like any other, released a window later.
//
// Status writes that only release usage are coalesced: one goes out at
// once, and the releases that follow within 100ms go out together once
// that has passed ([Controller.PutOffWrites]). Each write the controller
// makes is one that admission, writing over the version it read, may
// conflict with, and kube-apiserver's plugin answers a creation 409 once
// its retries, which read its own lagging cache again, are spent.
// Conflicts of the controller's own writes are expected beside admission:
// they are retried, counted ([Controller.StatusConflicts]) and logged at
// V(1), not as errors.
//
// kube-controller-manager has no such rule: it recounts from its caches
// on deletions, updates and its resync, and a recount made while an
// admitted object is on its way writes its charge away, so that
// admission admits more than hard; and a charge no object follows stays
// until its next recount, up to the 5-minute resync, so that a loop of
// creations of a taken name blocks a namespace (kubernetes#24527, #61530,
// #70563, #76787, #110080, #119593). A negative ChargeWindow restores its
// behaviour.
//
// Usage is what [quota.CalculateUsage] computes over the informers'
// caches, kept in a ledger: each object's usage is computed once per
// version the informer delivers, and every event moves the totals of the
// quotas it matches by the difference, so that a recalculation costs
// O(quotas × resources), not O(objects in the namespace) as in
// Kubernetes. Each full resync recalculates every quota from the caches,
// writes that, and reports any difference from the ledger
// ([Controller.Drifts]). Status is written only when it changed, with the
// cached quota's resourceVersion as a precondition; failures are retried
// with the queue's rate limiter. Resources whose evaluator failed keep
// their previous used values, as in Kubernetes.
//
// # Never wrong in silence
//
// Objects come typed, unstructured or as metadata only (see [Client]);
// each informer converts them once to the form its evaluator reads, and
// counted resources are cached as metadata. An object that cannot be
// converted fails its informer's list, which is logged at error level and
// retried, and the resource's quotas keep their last used values rather
// than count zero. A quota whose spec.hard names a resource nobody counts
// (count/jobs.batch without discovery, a resource the server does not
// serve, a typo) is logged at error level, once for each change of those
// names, and counted by [Controller.UncountedQuotas]; other quotas are not
// held up. With a [Discoverer] client, table resources of an API group the
// server does not serve (resource claims before Kubernetes 1.34) are left
// out at start rather than listed in vain.
//
// # Where it differs from kube-controller-manager
//
//   - One resource whose informer never syncs (a broken conversion
//     webhook, a missing RBAC rule) does not hold up the others
//     (kubernetes#133737): workers start once the ResourceQuota informer
//     has synced and the others have, or Options.StartGrace has passed;
//     until a resource's informer (and those its evaluator
//     reads) has synced its resources keep their previous used values (a
//     new quota has none, which admission treats as unknown usage and
//     refuses, rather than as zero), and the quotas that charge it are
//     recalculated as soon as it syncs.
//   - Discovered resources are watched only while a quota names them, and
//     their informers really stop when none does. Kubernetes watches every
//     discovered resource and never stops the informer of one that
//     disappears (kubernetes#142072, #79610). Over 20 custom resources of
//     2,000 objects each, a quota naming one of them costs the controller
//     2.1 MiB of heap, against 37.8 MiB when all 20 are watched
//     (BenchmarkDiscoveredMemory). A quota naming a resource
//     discovery has not seen yet asks discovery again at once; Kubernetes
//     waits for its next 30-second round and then for the quota's next
//     recalculation.
//   - A quota's scopeSelector change triggers a recalculation; Kubernetes
//     waits for the next full resync.
//   - A creation, or an update the update filter does not see (a
//     spec-only resize), that changes what an object charges a quota
//     recalculates it. Kubernetes leaves creations to admission's charge
//     and its next recount of the namespace; but a recount made from a
//     cache that had not seen a creation yet overwrites that charge, and
//     the status stays short of it until another event in the namespace,
//     or the next full resync. The ledger makes such recalculations cheap,
//     and an unchanged status is not written.
//   - Used values are written in the format of their hard limit (memory
//     limited in Gi is used in Mi or Ki), so the same usage is always
//     written the same way. Kubernetes writes a sum in the format of
//     whichever object it summed first, 3328Mi one time and 3489660928 the
//     next.
//   - Recalculations caused by deletions and updates go to the priority
//     queue, so that released usage is not stuck behind a full resync of
//     every quota (kubernetes#122483).
//   - A pod deleted with a grace period is released when the period ends;
//     Kubernetes waits for an event or the next full resync.
//   - While the ResourceQuota informer has not delivered the controller's
//     own last status write, a new status is compared with that write,
//     not with the cached one, and written over it. Kubernetes compares
//     with the cache, so a lagging informer can make it skip a write the
//     stored status needs, leaving the quota wrong until the next full
//     resync; and its writes conflict until the informer catches up.
//   - A quota queued on both queues is never synced by two workers at
//     once (Kubernetes does, and the second write conflicts); a sync asked
//     for while one runs follows it.
//   - A quota whose status write conflicted is synced again as soon as the
//     informer delivers its next version, not only after the rate
//     limiter's backoff, which grows while the informer lags
//     (kubernetes#67761 reports those conflicts).
//
// Evaluators and the Client are the caller's code: a panic in one fails
// the sync it happened in, which is logged and retried, and does not end
// the process.
//
// A Controller runs once. Its methods are safe for concurrent use.
type Controller struct {
	client       Client
	discoverer   Discoverer // nil when the client cannot discover
	opts         Options
	ignored      map[schema.GroupResource]struct{}
	updateFilter func(gvr schema.GroupVersionResource, oldObj, newObj runtime.Object) bool

	quotaInformer *cache.SharedIndexInformer
	quotas        cache.Lister[*corev1.ResourceQuota]
	// static are the monitors built with the controller, sorted by
	// resource; they run as long as it does.
	static []*monitor

	queues  *quotaQueues
	changes *workqueue.DelayingQueue[change]
	// writes and charges serve both kinds of quota.
	writes  *ownwrites.Log[quotaRef]
	ledger  *ledger.Ledger
	charges *charges.Book[quotaRef]
	// resourceQuotas is the ResourceQuota kind.
	resourceQuotas resourceQuotaKind
	// cluster is the ClusterQuota kind, nil unless Options.ClusterQuotas.
	cluster *clusterQuotas
	// problems names the cluster quotas whose conditions are bad.
	problems clusterProblems
	// releases counts the syncs that released charges no object
	// followed.
	releases atomic.Int64
	// conflicts counts the status writes that conflicted, and putOffs
	// the writes put off to coalesce releases (see [writeInterval]).
	conflicts, putOffs atomic.Int64
	// resyncs counts the full resyncs started; a quota synced after one
	// is compared with a full recalculation once.
	resyncs atomic.Uint64
	// drifts counts the quotas whose ledger totals differed from a full
	// recalculation.
	drifts atomic.Int64
	// names is signalled when the resources that quotas name may have
	// changed, for the discovery loop.
	names chan struct{}

	mu sync.RWMutex
	// discovered are the monitors of discovered resources that some quota
	// names, by resource.
	// guarded by mu
	discovered map[schema.GroupResource]*monitor
	// registry holds the evaluators of every monitor; nil when the
	// monitors changed since it was built.
	// guarded by mu
	registry quota.Registry
	// uncounted holds, per key of a quota that names resources nobody
	// counts, those names as last reported.
	// guarded by mu
	uncounted map[string]string
	// denials are the resources the server forbids the controller to
	// list.
	denials listDenials

	started atomic.Bool
	running atomic.Bool
}

// NewController returns a controller of the ResourceQuotas client serves.
// It returns an error for a nil client, a resource given twice or without
// a name, a resource the client has no ListerWatcher for, and evaluators
// that cannot be built. It starts nothing: call [Controller.Run].
func NewController(client Client, opts Options) (*Controller, error) {
	if client == nil {
		return nil, errors.New("quotakit: NewController: nil client")
	}
	if opts.Workers < 0 {
		return nil, fmt.Errorf("quotakit: NewController: Options.Workers is %d; want 0 (the default, 5) or more", opts.Workers)
	}
	if opts.ClusterQuotas && opts.Namespace != "" {
		// A ClusterQuota sums namespaces anywhere in the cluster: a
		// controller that watches one namespace would count only that
		// one's objects, and write admission's charges in the others
		// away as released.
		return nil, fmt.Errorf("quotakit: NewController: Options.ClusterQuotas counts objects in every namespace; it cannot be used with Options.Namespace %q", opts.Namespace)
	}
	if opts.Workers == 0 {
		opts.Workers = 5
	}
	if opts.StartGrace == 0 {
		opts.StartGrace = 5 * time.Second
	}
	if opts.ResyncPeriod == 0 {
		opts.ResyncPeriod = 5 * time.Minute
	}
	if opts.DiscoveryPeriod == 0 {
		opts.DiscoveryPeriod = 30 * time.Second
	}
	if opts.ChargeWindow == 0 {
		opts.ChargeWindow = DefaultChargeWindow
	}
	c := &Controller{
		client:       client,
		opts:         opts,
		ignored:      opts.IgnoredResources,
		updateFilter: opts.UpdateFilter,
		queues:       newQuotaQueues(opts),
		changes:      workqueue.NewDelaying[change](workqueue.Options{Name: "resource_quota_controller_resource_changes", MetricsProvider: opts.MetricsProvider}),
		writes:       ownwrites.New[quotaRef](),
		ledger:       ledger.New(),
		charges:      charges.New[quotaRef](opts.ChargeWindow),
		names:        make(chan struct{}, 1),
		discovered:   map[schema.GroupResource]*monitor{},
		uncounted:    map[string]string{},
	}
	c.resourceQuotas = resourceQuotaKind{c}
	c.discoverer, _ = client.(Discoverer)
	if c.updateFilter == nil {
		c.updateFilter = evaluator.DefaultUpdateFilter(opts.Evaluator)
	}
	if c.ignored == nil {
		c.ignored = evaluator.DefaultIgnoredResources()
	}
	rows, err := rowsOf(opts, c.ignored)
	if err != nil {
		return nil, err
	}
	if c.static, err = newMonitors(client, rows, opts); err != nil {
		return nil, err
	}
	for _, m := range c.static {
		if m.gvr == resourceQuotas {
			c.quotaInformer = m.informer
		}
	}
	if c.quotaInformer == nil {
		// Resourcequotas are ignored as a counted resource.
		if c.quotaInformer, err = newInformer(client, resourceQuotas, opts.Namespace, typedForm(resourceQuotas, &corev1.ResourceQuota{}, nil)); err != nil {
			return nil, fmt.Errorf("quotakit: NewController: %w", err)
		}
	}
	c.quotas = cache.NewLister[*corev1.ResourceQuota](c.quotaInformer.GetIndexer(), resourceQuotas.GroupResource())
	if opts.ClusterQuotas {
		if c.cluster, err = c.newClusterQuotas(client); err != nil {
			return nil, fmt.Errorf("quotakit: NewController: %w", err)
		}
	}
	if _, err := c.quotaInformer.AddEventHandler(c.quotaHandler()); err != nil {
		return nil, fmt.Errorf("quotakit: NewController: %w", err)
	}
	for _, m := range c.static {
		if err := c.watchErrors(m); err != nil {
			return nil, fmt.Errorf("quotakit: NewController: %w", err)
		}
		reg, err := m.informer.AddEventHandler(c.monitorHandler(m))
		if err != nil {
			return nil, fmt.Errorf("quotakit: NewController: %w", err)
		}
		if m.ledgered {
			m.registration = reg
		}
	}
	return c, nil
}

// NeedLeaderElection reports true: two controllers writing the same
// statuses would only conflict. With [Controller.Start] it makes the
// controller a controller-runtime Runnable.
func (c *Controller) NeedLeaderElection() bool { return true }

// Start runs the controller until ctx is done; it is [Controller.Run] under
// the name controller-runtime's manager calls.
func (c *Controller) Start(ctx context.Context) error { return c.Run(ctx) }

// Run starts the informers, waits for the ResourceQuota informer to sync,
// and syncs quotas until ctx is done. It returns nil once every goroutine
// it started has exited, or an error at once if the controller already
// ran. Logs go to Options.Logger, else to the logr.Logger of ctx.
func (c *Controller) Run(ctx context.Context) error {
	if !c.started.CompareAndSwap(false, true) {
		return errors.New("quotakit: controller already started")
	}
	log := c.opts.Logger
	if log.GetSink() == nil {
		log = logr.FromContextOrDiscard(ctx)
	}
	log = log.WithName("resourcequota")
	ctx, cancel := context.WithCancel(logr.NewContext(ctx, log))
	var wg sync.WaitGroup
	c.running.Store(true)
	defer func() {
		cancel()
		c.queues.shutDown()
		c.changes.ShutDown()
		wg.Wait()
		c.running.Store(false)
	}()

	if c.discoverer != nil {
		c.dropUnserved(ctx, log)
	}
	if !c.isStatic(c.quotaInformer) {
		wg.Go(func() { c.quotaInformer.Run(ctx) })
	}
	for _, m := range c.static {
		wg.Go(func() { m.informer.Run(ctx) })
		if m.evaluator != nil {
			wg.Go(func() { c.recalculateWhenSynced(ctx, log, m) })
		}
	}
	wg.Go(func() { c.replenishLoop(log) })
	if c.cluster != nil {
		c.cluster.run(ctx, &wg)
	}

	log.Info("starting", "workers", c.opts.Workers, "resources", len(c.static))
	if !cache.WaitForCacheSync(ctx, c.quotaInformer.HasSynced) {
		return nil
	}
	if !c.awaitStatic(ctx, log) {
		return nil
	}
	for range c.opts.Workers {
		wg.Go(func() { c.queues.work(ctx, log, c.queues.priority, c.syncQuota) })
		wg.Go(func() { c.queues.work(ctx, log, c.queues.primary, c.syncQuota) })
	}
	wg.Go(func() { c.manageDiscovered(ctx, log, &wg) })
	if c.opts.ResyncPeriod > 0 {
		wg.Go(func() {
			t := time.NewTicker(c.opts.ResyncPeriod)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					if err := c.enqueueAll(); err != nil {
						log.Error(err, "full resync skipped; the quotas are recalculated on their next change or the next resync")
					}
				}
			}
		})
	}
	<-ctx.Done()
	log.Info("stopping")
	return nil
}

// awaitStatic waits until the informers of every resource counted from the
// start have synced, or Options.StartGrace has passed, and then logs those
// that have not (their resources keep their previous used values until
// they do); it reports false when ctx is done.
func (c *Controller) awaitStatic(ctx context.Context, log logr.Logger) bool {
	var synced []cache.InformerSynced
	for _, m := range c.static {
		if m.evaluator != nil {
			synced = append(synced, m.synced)
		}
	}
	if c.opts.StartGrace > 0 {
		graceCtx, cancel := context.WithTimeout(ctx, c.opts.StartGrace)
		defer cancel()
		cache.WaitForCacheSync(graceCtx, synced...)
	}
	if ctx.Err() != nil {
		return false
	}
	var late []string
	for _, m := range c.static {
		if m.evaluator != nil && !m.synced() {
			late = append(late, m.gvr.GroupResource().String())
		}
	}
	if len(late) > 0 && c.opts.StartGrace > 0 {
		log.Info("starting workers before these informers synced; their resources keep their previous used values until they do",
			"grace", c.opts.StartGrace, "resources", late)
	}
	return true
}
