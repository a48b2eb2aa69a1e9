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
// The package overview (doc.go) says when it recalculates a quota, how
// it keeps admission's charges in flight, how it is never wrong in
// silence, and where it differs from kube-controller-manager.
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
