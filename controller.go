package quotakit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit/cache"
	"github.com/quotakit/quotakit/evaluator"
	"github.com/quotakit/quotakit/generic"
	"github.com/quotakit/quotakit/quota"
	"github.com/quotakit/quotakit/workqueue"
)

// Options configures a [Controller]. The zero value means
// kube-controller-manager's defaults.
type Options struct {
	// Namespace limits the controller to the quotas and objects of one
	// namespace, for a tenant's own controller. Defaults to "": every
	// namespace.
	Namespace string
	// Workers is the number of goroutines that sync quotas from each of
	// the controller's two queues. Defaults to 5, as
	// --concurrent-resource-quota-syncs.
	Workers int
	// ResyncPeriod is how often every quota is recalculated from scratch,
	// whatever the events said. Defaults to 5 minutes, as
	// --resource-quota-sync-period; a negative period turns it off.
	ResyncPeriod time.Duration
	// Evaluator configures the core evaluators (pods, services,
	// persistentvolumeclaims and the counted configmaps, secrets,
	// replicationcontrollers and resourcequotas) and the default update
	// filter.
	Evaluator evaluator.Options
	// Resources are resources counted besides the core ones: custom
	// resources charged as count/<resource>.<group>, or resources with an
	// evaluator of their own.
	Resources []Resource
	// IgnoredResources are never counted and never watched. Defaults to
	// [evaluator.DefaultIgnoredResources]. Resourcequotas are watched
	// anyway, for the controller's own use.
	IgnoredResources map[schema.GroupResource]struct{}
	// UpdateFilter tells whether an update of an object may change the
	// usage it charges; when it does, the quotas of its namespace are
	// recalculated. Deletions always are, creations never (admission
	// charged them). Defaults to [evaluator.DefaultUpdateFilter] of
	// Evaluator.
	UpdateFilter func(gvr schema.GroupVersionResource, oldObj, newObj runtime.Object) bool
	// NewRateLimiter returns the rate limiter of one of the two quota
	// queues, which decides how soon a quota whose sync failed is tried
	// again. Defaults to [workqueue.DefaultControllerRateLimiter].
	NewRateLimiter func() workqueue.RateLimiter[string]
	// MetricsProvider receives the metrics of the controller's queues,
	// named as in kube-controller-manager: resourcequota_primary,
	// resourcequota_priority and resource_quota_controller_resource_changes.
	// Defaults to nil: no metrics.
	MetricsProvider workqueue.MetricsProvider
}

// Resource is a resource a [Controller] counts besides the core ones.
type Resource struct {
	// Resource is the resource to list and watch, in every namespace (or
	// in Options.Namespace).
	Resource schema.GroupVersionResource
	// Object is an object of the type the Client's ListerWatcher returns
	// for Resource, for example &v1.Widget{}; nil accepts any type, which
	// suits *unstructured.Unstructured objects.
	Object runtime.Object
	// Evaluator returns the resource's evaluator, which lists the resource
	// with list. Defaults to the object-count evaluator, which charges
	// count/<resource>.<group>.
	Evaluator func(list generic.ListFuncByNamespace) quota.Evaluator
}

// resourceQuotas is the resource the controller keeps the status of.
var resourceQuotas = corev1.SchemeGroupVersion.WithResource("resourcequotas")

// coreResources are the resources of the core evaluators, with the type
// their informers hold.
var coreResources = []Resource{
	{Resource: corev1.SchemeGroupVersion.WithResource("pods"), Object: &corev1.Pod{}},
	{Resource: corev1.SchemeGroupVersion.WithResource("services"), Object: &corev1.Service{}},
	{Resource: corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims"), Object: &corev1.PersistentVolumeClaim{}},
	{Resource: corev1.SchemeGroupVersion.WithResource("configmaps"), Object: &corev1.ConfigMap{}},
	{Resource: corev1.SchemeGroupVersion.WithResource("secrets"), Object: &corev1.Secret{}},
	{Resource: corev1.SchemeGroupVersion.WithResource("replicationcontrollers"), Object: &corev1.ReplicationController{}},
	{Resource: resourceQuotas, Object: &corev1.ResourceQuota{}},
}

// Controller keeps the status of every ResourceQuota true: status.hard is
// spec.hard, and status.used is what the objects of the quota's namespace
// charge, as kube-controller-manager's resource quota controller computes
// it.
//
// It runs one informer per counted resource and one for ResourceQuotas, and
// recalculates a quota:
//
//   - when it is created, or its spec.hard or scope selector changes (a
//     quota whose status.hard differs from spec.hard, or that lacks a used
//     value, goes to a priority queue so that admission can start
//     enforcing it soon);
//   - when an object of its namespace that it may charge is deleted, or
//     updated in a way the update filter says may change usage (the pod
//     became terminal, a resize, a service's node ports, …);
//   - every Options.ResyncPeriod.
//
// Usage is computed with [quota.CalculateUsage] over the informers'
// caches. Status is written only when it changed, with the cached quota's
// resourceVersion as a precondition; failures are retried with the queue's
// rate limiter. Resources whose evaluator failed keep their previous used
// values, as in Kubernetes.
//
// Where it differs from kube-controller-manager:
//
//   - One resource whose informer never syncs (a broken conversion
//     webhook, a missing RBAC rule) does not hold up the others
//     (kubernetes#133737): workers start once the ResourceQuota informer
//     has synced; until a resource's informer has synced its resources
//     keep their previous used values (a new quota has none, which
//     admission treats as unknown usage and refuses, rather than as
//     zero), and the quotas that charge it are recalculated as soon as it
//     syncs.
//   - A quota's scopeSelector change triggers a recalculation; Kubernetes
//     waits for the next full resync.
//   - Recalculations caused by deletions and updates go to the priority
//     queue, so that released usage is not stuck behind a full resync of
//     every quota (kubernetes#122483).
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
//   - There is no discovery: the controller counts the core resources and
//     Options.Resources.
//
// Evaluators and the Client are the caller's code: a panic in one fails
// the sync it happened in, which is logged and retried, and does not end
// the process.
//
// A Controller runs once. Its methods are safe for concurrent use.
type Controller struct {
	client       Client
	workers      int
	resync       time.Duration
	updateFilter func(gvr schema.GroupVersionResource, oldObj, newObj runtime.Object) bool

	quotaInformer *cache.SharedIndexInformer
	quotas        cache.Lister[*corev1.ResourceQuota]
	// monitors are the counted resources, sorted by resource.
	monitors []*monitor
	registry quota.Registry

	primary  *workqueue.RateLimitingQueue[string]
	priority *workqueue.RateLimitingQueue[string]
	changes  *workqueue.Queue[change]

	// conflicted holds the keys of quotas whose last status write failed
	// with a conflict: the cached quota was stale. The next version the
	// informer delivers is synced at once instead of after the rate
	// limiter's backoff, which grows while the informer lags.
	conflicted sync.Map

	syncingMu sync.Mutex
	// syncing holds the keys being synced, with true when another sync
	// of the key was asked for meanwhile. A key is in both queues at times,
	// but two workers never sync it at once: that would only write twice,
	// the second time in conflict. guarded by syncingMu
	syncing map[string]bool

	writesMu sync.Mutex
	// writes holds, per quota key, the statuses the controller wrote that
	// its informer has not delivered yet. guarded by writesMu
	writes map[string]*ownWrites

	started atomic.Bool
}

// monitor is one counted resource: its informer and its evaluator.
type monitor struct {
	gvr       schema.GroupVersionResource
	informer  *cache.SharedIndexInformer
	evaluator quota.Evaluator
}

// change says that usage of resource may have changed in namespace.
type change struct {
	resource  schema.GroupResource
	namespace string
}

// NewController returns a controller of the ResourceQuotas client serves.
// It returns an error for a nil client, a resource given twice and
// evaluators that cannot be built.
func NewController(client Client, opts Options) (*Controller, error) {
	if client == nil {
		return nil, errors.New("quotakit: NewController: nil client")
	}
	c := &Controller{
		syncing:      map[string]bool{},
		writes:       map[string]*ownWrites{},
		client:       client,
		workers:      opts.Workers,
		resync:       opts.ResyncPeriod,
		updateFilter: opts.UpdateFilter,
	}
	if c.workers <= 0 {
		c.workers = 5
	}
	if c.resync == 0 {
		c.resync = 5 * time.Minute
	}
	if c.updateFilter == nil {
		c.updateFilter = evaluator.DefaultUpdateFilter(opts.Evaluator)
	}
	ignored := opts.IgnoredResources
	if ignored == nil {
		ignored = evaluator.DefaultIgnoredResources()
	}

	informers, err := newInformers(client, opts, ignored)
	if err != nil {
		return nil, err
	}
	c.quotaInformer = informers[resourceQuotas]
	c.quotas = cache.NewLister[*corev1.ResourceQuota](c.quotaInformer.GetIndexer(), resourceQuotas.GroupResource())
	if c.monitors, err = newMonitors(informers, opts, ignored); err != nil {
		return nil, err
	}
	registered := make([]quota.Evaluator, len(c.monitors))
	for i, m := range c.monitors {
		registered[i] = m.evaluator
	}
	c.registry = generic.NewRegistry(registered...)

	rateLimiter := opts.NewRateLimiter
	if rateLimiter == nil {
		rateLimiter = workqueue.DefaultControllerRateLimiter[string]
	}
	c.primary = workqueue.NewRateLimiting(rateLimiter(), workqueue.Options{Name: "resourcequota_primary", MetricsProvider: opts.MetricsProvider})
	c.priority = workqueue.NewRateLimiting(rateLimiter(), workqueue.Options{Name: "resourcequota_priority", MetricsProvider: opts.MetricsProvider})
	c.changes = workqueue.New[change](workqueue.Options{Name: "resource_quota_controller_resource_changes", MetricsProvider: opts.MetricsProvider})

	if _, err := c.quotaInformer.AddEventHandler(cache.TypedResourceEventHandlerFuncs[*corev1.ResourceQuota]{
		AddFunc:    func(rq *corev1.ResourceQuota, _ bool) { c.addQuota(rq) },
		UpdateFunc: c.updateQuota,
		DeleteFunc: func(d cache.DeletedObject[*corev1.ResourceQuota]) {
			c.forgetWrites(d.Key)
			c.conflicted.Delete(d.Key)
			c.primary.Add(d.Key)
		},
	}); err != nil {
		return nil, fmt.Errorf("quotakit: NewController: %w", err)
	}
	for _, m := range c.monitors {
		if _, err := m.informer.AddEventHandler(c.monitorHandler(m)); err != nil {
			return nil, fmt.Errorf("quotakit: NewController: %w", err)
		}
	}
	return c, nil
}

// newInformers returns an informer for resourcequotas and for every
// resource counted, core or not, that is not ignored.
func newInformers(client Client, opts Options, ignored map[schema.GroupResource]struct{}) (map[schema.GroupVersionResource]*cache.SharedIndexInformer, error) {
	informers := map[schema.GroupVersionResource]*cache.SharedIndexInformer{}
	seen := map[schema.GroupResource]bool{}
	for _, r := range slices.Concat(coreResources, opts.Resources) {
		gr := r.Resource.GroupResource()
		switch {
		case gr.Resource == "":
			return nil, fmt.Errorf("quotakit: NewController: a resource without a name: %v", r.Resource)
		case seen[gr]:
			return nil, fmt.Errorf("quotakit: NewController: resource %s given twice", gr)
		}
		seen[gr] = true
		if _, skip := ignored[gr]; skip && r.Resource != resourceQuotas {
			continue
		}
		lw := client.ListerWatcher(r.Resource, opts.Namespace)
		if lw == nil {
			return nil, fmt.Errorf("quotakit: NewController: the client has no ListerWatcher for %s", r.Resource)
		}
		inf := cache.NewSharedIndexInformer(lw, r.Object, cache.SharedIndexInformerOptions{})
		if err := inf.SetTransform(dropManagedFields); err != nil {
			return nil, fmt.Errorf("quotakit: NewController: %w", err)
		}
		informers[r.Resource] = inf
	}
	return informers, nil
}

// newMonitors pairs the informer of every counted resource with its
// evaluator, which lists through that informer: the core evaluators, and
// those of opts.Resources. They are sorted by resource.
func newMonitors(informers map[schema.GroupVersionResource]*cache.SharedIndexInformer, opts Options, ignored map[schema.GroupResource]struct{}) ([]*monitor, error) {
	listFor := func(gvr schema.GroupVersionResource) generic.ListFuncByNamespace {
		inf, ok := informers[gvr]
		if !ok {
			return nil
		}
		lister := cache.NewGenericLister(inf.GetIndexer(), gvr.GroupResource())
		return func(namespace string) ([]runtime.Object, error) { return lister.ByNamespace(namespace).List(nil) }
	}
	core, err := evaluator.NewEvaluators(func(gvr schema.GroupVersionResource) (generic.ListFuncByNamespace, error) {
		return listFor(gvr), nil
	}, opts.Evaluator)
	if err != nil {
		return nil, fmt.Errorf("quotakit: NewController: %w", err)
	}
	evaluators := map[schema.GroupResource]quota.Evaluator{}
	for _, e := range core {
		evaluators[e.GroupResource()] = e
	}
	for _, r := range opts.Resources {
		gr, list := r.Resource.GroupResource(), listFor(r.Resource)
		if r.Evaluator != nil {
			evaluators[gr] = r.Evaluator(list)
		} else {
			evaluators[gr] = generic.NewObjectCountEvaluator(gr, list, "")
		}
	}
	var monitors []*monitor
	for gvr, inf := range informers {
		gr := gvr.GroupResource()
		if _, skip := ignored[gr]; skip {
			continue
		}
		e := evaluators[gr]
		if e == nil || e.GroupResource() != gr {
			return nil, fmt.Errorf("quotakit: NewController: the evaluator of %s is missing or evaluates another resource", gr)
		}
		monitors = append(monitors, &monitor{gvr: gvr, informer: inf, evaluator: e})
	}
	slices.SortFunc(monitors, func(a, b *monitor) int {
		return cmp.Or(strings.Compare(a.gvr.Group, b.gvr.Group), strings.Compare(a.gvr.Resource, b.gvr.Resource))
	})
	return monitors, nil
}

// dropManagedFields removes metadata.managedFields from the objects the
// informers store, as kube-controller-manager does: quota never reads them,
// and they are often the larger part of an object.
func dropManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// Registry returns the evaluators the controller charges with, which list
// through its informers. Admission code running in the same process can
// use it with [quota.CheckRequest].
func (c *Controller) Registry() quota.Registry { return c.registry }

// HasSynced reports whether the ResourceQuota informer and the informer of
// every counted resource have synced.
func (c *Controller) HasSynced() bool {
	if !c.quotaInformer.HasSynced() {
		return false
	}
	for _, m := range c.monitors {
		if !m.informer.HasSynced() {
			return false
		}
	}
	return true
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
// ran. Logs go to the logr.Logger of ctx.
func (c *Controller) Run(ctx context.Context) error {
	if !c.started.CompareAndSwap(false, true) {
		return errors.New("quotakit: controller already started")
	}
	log := logr.FromContextOrDiscard(ctx).WithName("resourcequota")
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		c.primary.ShutDown()
		c.priority.ShutDown()
		c.changes.ShutDown()
		wg.Wait()
	}()

	wg.Go(func() { c.quotaInformer.Run(ctx) })
	for _, m := range c.monitors {
		if m.informer != c.quotaInformer {
			wg.Go(func() { m.informer.Run(ctx) })
		}
		// A resource that syncs late, or never, holds up only the quotas
		// that charge it: they are recalculated once it has synced.
		wg.Go(func() {
			if cache.WaitForCacheSync(ctx, m.informer.HasSynced) {
				if err := guard(func() error { c.enqueueMatching(m.evaluator, ""); return nil }); err != nil {
					log.Error(err, "failed to find the quotas a resource affects", "resource", m.gvr)
				}
			} else if ctx.Err() == nil {
				log.Info("informer stopped before it synced", "resource", m.gvr)
			}
		})
	}
	wg.Go(func() { c.replenishLoop(log) })

	log.Info("starting", "workers", c.workers, "resources", len(c.monitors))
	if !cache.WaitForCacheSync(ctx, c.quotaInformer.HasSynced) {
		return nil
	}
	for range c.workers {
		wg.Go(func() { c.worker(ctx, log, c.priority) })
		wg.Go(func() { c.worker(ctx, log, c.primary) })
	}
	if c.resync > 0 {
		wg.Go(func() {
			t := time.NewTicker(c.resync)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					c.enqueueAll()
				}
			}
		})
	}
	<-ctx.Done()
	log.Info("stopping")
	return nil
}

// worker syncs the quotas of queue until it shuts down.
func (c *Controller) worker(ctx context.Context, log logr.Logger, queue *workqueue.RateLimitingQueue[string]) {
	for {
		key, shutdown := queue.Get()
		if shutdown {
			return
		}
		if !c.beginSync(key) {
			// Another worker syncs key; it syncs it again when done.
			queue.Forget(key)
			queue.Done(key)
			continue
		}
		err := guard(func() error { return c.syncQuota(ctx, key) })
		if err != nil {
			if ctx.Err() == nil {
				log.Error(err, "failed to sync resource quota", "quota", key)
			}
			queue.AddRateLimited(key)
		} else {
			queue.Forget(key)
		}
		if c.endSync(key) {
			c.priority.Add(key)
		}
		queue.Done(key)
	}
}

// beginSync marks key as being synced and reports true, or, when another
// worker syncs it, asks that worker to sync it again and reports false.
func (c *Controller) beginSync(key string) bool {
	c.syncingMu.Lock()
	defer c.syncingMu.Unlock()
	if _, busy := c.syncing[key]; busy {
		c.syncing[key] = true
		return false
	}
	c.syncing[key] = false
	return true
}

// endSync unmarks key and reports whether another sync was asked for
// while it ran.
func (c *Controller) endSync(key string) bool {
	c.syncingMu.Lock()
	defer c.syncingMu.Unlock()
	again := c.syncing[key]
	delete(c.syncing, key)
	return again
}

// guard runs f and turns a panic into an error. Evaluators and the client
// are the caller's code: a panic in one fails one sync, which is retried,
// rather than the process that embeds the controller.
func guard(f func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("quotakit: recovered from a panic: %v\n%s", v, debug.Stack())
		}
	}()
	return f()
}

// replenishLoop turns changes into the recalculation of the quotas they
// affect.
func (c *Controller) replenishLoop(log logr.Logger) {
	for {
		ch, shutdown := c.changes.Get()
		if shutdown {
			return
		}
		if e := c.registry.Get(ch.resource); e != nil {
			if err := guard(func() error { c.enqueueMatching(e, ch.namespace); return nil }); err != nil {
				log.Error(err, "failed to find the quotas a change affects", "resource", ch.resource, "namespace", ch.namespace)
			}
		}
		c.changes.Done(ch)
	}
}

// monitorHandler reports the deletions of m's objects, and the updates the
// update filter lets through, as changes.
func (c *Controller) monitorHandler(m *monitor) cache.ResourceEventHandler {
	gr := m.gvr.GroupResource()
	return cache.TypedResourceEventHandlerFuncs[runtime.Object]{
		UpdateFunc: func(oldObj, newObj runtime.Object) {
			if !c.updateFilter(m.gvr, oldObj, newObj) {
				return
			}
			if ns, ok := namespaceOf(newObj); ok {
				c.changes.Add(change{resource: gr, namespace: ns})
			}
		},
		DeleteFunc: func(d cache.DeletedObject[runtime.Object]) {
			ns, _, err := cache.SplitMetaNamespaceKey(d.Key)
			if err == nil && ns != "" {
				c.changes.Add(change{resource: gr, namespace: ns})
			}
		},
	}
}

// namespaceOf returns the namespace of obj, false when it has none.
func namespaceOf(obj runtime.Object) (string, bool) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return "", false
	}
	return m.GetNamespace(), m.GetNamespace() != ""
}

// enqueueMatching puts on the priority queue every quota of namespace (of
// every namespace when namespace is "") that has a hard limit e charges, in
// spec.hard or status.hard. Kubernetes looks at status.hard only, which
// misses a quota whose first status write the informer has not delivered
// yet: a resource whose informer syncs at that moment would be left out of
// that quota until the next full resync.
func (c *Controller) enqueueMatching(e quota.Evaluator, namespace string) {
	quotas, err := c.quotas.ByNamespace(namespace).List(nil)
	if err != nil {
		return
	}
	for _, rq := range quotas {
		if len(e.MatchingResources(quota.ResourceNames(rq.Spec.Hard))) > 0 ||
			len(e.MatchingResources(quota.ResourceNames(rq.Status.Hard))) > 0 {
			c.priority.Add(quotaKey(rq))
		}
	}
}

// enqueueAll puts every quota on the primary queue.
func (c *Controller) enqueueAll() {
	quotas, err := c.quotas.List(nil)
	if err != nil {
		return
	}
	for _, rq := range quotas {
		c.primary.Add(quotaKey(rq))
	}
}

func quotaKey(rq *corev1.ResourceQuota) string { return rq.Namespace + "/" + rq.Name }
