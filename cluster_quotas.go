package quotakit

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/go-logr/logr"

	"github.com/quotakit/quotakit/cache"
	"github.com/quotakit/quotakit/clusterquota"
	"github.com/quotakit/quotakit/quota"
)

var (
	clusterQuotasGVR = clusterquota.SchemeGroupVersion.WithResource("clusterquotas")
	namespacesGVR    = corev1.SchemeGroupVersion.WithResource("namespaces")
)

// clusterQuotas is the controller's side for ClusterQuotas (see
// Options.ClusterQuotas): their informer and the namespaces', the index
// of which quotas select which namespaces that their events keep, and
// what each quota selected at its last sync. It is the ClusterQuota
// kind of quota ([quotaKind]): a ClusterQuota's key is its name.
type clusterQuotas struct {
	c          *Controller
	quotas     *cache.SharedIndexInformer
	namespaces *cache.SharedIndexInformer
	lister     cache.Lister[*clusterquota.ClusterQuota]
	nsLister   cache.Lister[*metav1.PartialObjectMetadata]
	// index is fed by the same handlers that queue the quotas, before
	// they queue them: a sync queued by an event sees the index with that
	// event applied.
	index *clusterquota.Index

	mu sync.Mutex
	// selected holds, by cluster quota name, the namespaces it selected
	// at its last sync, whose ledger accounts it keeps.
	// guarded by mu
	selected map[string][]string
	// lastErr is the error that ended each informer's last list or
	// watch, by resource, for Ready to give as the reason it is not
	// ready (with no CRD installed, the ClusterQuota informer fails every
	// attempt).
	// guarded by mu
	lastErr map[string]error
}

// newClusterQuotas builds the informers of ClusterQuotas and namespaces
// over client, with the controller's handlers.
func (c *Controller) newClusterQuotas(client Client) (*clusterQuotas, error) {
	cq := &clusterQuotas{c: c, index: &clusterquota.Index{}, selected: map[string][]string{}, lastErr: map[string]error{}}
	var err error
	if cq.quotas, err = newInformer(client, clusterQuotasGVR, "", typedForm(clusterQuotasGVR, &clusterquota.ClusterQuota{}, nil)); err != nil {
		return nil, err
	}
	if cq.namespaces, err = newInformer(client, namespacesGVR, "", metadataForm(namespacesGVR)); err != nil {
		return nil, err
	}
	for _, inf := range cq.informers() {
		if err := inf.i.SetWatchErrorHandler(func(ctx context.Context, _ *cache.Reflector, err error) {
			cq.recordError(ctx, inf.resource, err)
		}); err != nil {
			return nil, err
		}
	}
	cq.lister = cache.NewLister[*clusterquota.ClusterQuota](cq.quotas.GetIndexer(), clusterquota.Resource("clusterquotas"))
	cq.nsLister = cache.NewLister[*metav1.PartialObjectMetadata](cq.namespaces.GetIndexer(), namespacesGVR.GroupResource())
	reg, err := cq.quotas.AddEventHandler(cache.ResourceEventHandlerFuncs[*clusterquota.ClusterQuota]{
		AddFunc: func(q *clusterquota.ClusterQuota, _ bool) {
			cq.index.SetClusterQuota(q)
			c.queues.add(cq.ref(q.Name), true)
		},
		UpdateFunc: func(old, q *clusterquota.ClusterQuota) {
			cq.index.SetClusterQuota(q)
			// A spec change, a status.total changed by admission (or by
			// the controller itself: such a sync writes nothing), and the
			// version after a write of the controller's that conflicted.
			ref := cq.ref(q.Name)
			if c.writes.TakeConflict(ref) || !equality.Semantic.DeepEqual(old.Spec, q.Spec) || !quota.Equals(old.Status.Total.Used, q.Status.Total.Used) {
				c.queues.add(ref, true)
			}
		},
		DeleteFunc: func(d cache.DeletedObject[*clusterquota.ClusterQuota]) {
			cq.index.DeleteClusterQuota(d.Key)
			c.queues.add(cq.ref(d.Key), false)
		},
	})
	if err != nil {
		return nil, err
	}
	cq.index.AddSynced(reg.HasSynced)
	if reg, err = cq.namespaces.AddEventHandler(cache.ResourceEventHandlerFuncs[*metav1.PartialObjectMetadata]{
		AddFunc: func(ns *metav1.PartialObjectMetadata, _ bool) {
			cq.index.SetNamespace(ns)
			c.enqueueSelecting(nil, ns)
		},
		UpdateFunc: func(old, ns *metav1.PartialObjectMetadata) {
			cq.index.SetNamespace(ns)
			if !equality.Semantic.DeepEqual(old.Labels, ns.Labels) || !equality.Semantic.DeepEqual(old.Annotations, ns.Annotations) {
				c.enqueueSelecting(old, ns)
			}
		},
		DeleteFunc: func(d cache.DeletedObject[*metav1.PartialObjectMetadata]) {
			// Which quotas selected it, before the index forgets it.
			c.enqueueSelecting(d.Object, nil)
			cq.index.DeleteNamespace(d.Key)
		},
	}); err != nil {
		return nil, err
	}
	cq.index.AddSynced(reg.HasSynced)
	return cq, nil
}

// ref returns the reference of the ClusterQuota name.
func (cq *clusterQuotas) ref(name string) quotaRef { return quotaRef{kind: cq, key: name} }

// run runs the two informers until ctx is done, in wg.
func (cq *clusterQuotas) run(ctx context.Context, wg *sync.WaitGroup) {
	wg.Go(func() { cq.quotas.Run(ctx) })
	wg.Go(func() { cq.namespaces.Run(ctx) })
}

// hasSynced reports whether both informers have synced and their
// handlers have fed the index their initial lists.
func (cq *clusterQuotas) hasSynced() bool {
	return cq.quotas.HasSynced() && cq.namespaces.HasSynced() && cq.index.HasSynced()
}

// namedInformer is an informer with the resource it serves.
type namedInformer struct {
	resource string
	i        *cache.SharedIndexInformer
}

func (cq *clusterQuotas) informers() []namedInformer {
	return []namedInformer{
		{clusterQuotasGVR.GroupResource().String(), cq.quotas},
		{namespacesGVR.GroupResource().String(), cq.namespaces},
	}
}

// recordError logs err, which ended a list or watch of resource, at error
// level (an expired watch, which is routine, at V(4)) and keeps it as
// that resource's last error.
func (cq *clusterQuotas) recordError(ctx context.Context, resource string, err error) {
	log := logr.FromContextOrDiscard(ctx)
	if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
		log.V(4).Info("watch expired", "err", err)
		return
	}
	log.Error(err, "listing or watching failed")
	cq.mu.Lock()
	cq.lastErr[resource] = err
	cq.mu.Unlock()
}

// unsynced names each of the two informers that has not synced, with the
// last error that ended its list or watch.
func (cq *clusterQuotas) unsynced() []string {
	var out []string
	for _, inf := range cq.informers() {
		if inf.i.HasSynced() {
			continue
		}
		cq.mu.Lock()
		last := cq.lastErr[inf.resource]
		cq.mu.Unlock()
		if last != nil {
			out = append(out, fmt.Sprintf("%s (last error: %v)", inf.resource, last))
		} else {
			out = append(out, inf.resource)
		}
	}
	return out
}

// enqueueSelecting queues every valid ClusterQuota that selects old or ns
// (either may be nil), found in the index: a namespace that joins or
// leaves a selection moves its usage at once. A namespace deleted without
// a last state queues every quota.
func (c *Controller) enqueueSelecting(old, ns *metav1.PartialObjectMetadata) {
	if old == nil && ns == nil {
		c.enqueueAllClusterQuotas()
		return
	}
	for _, m := range []*metav1.PartialObjectMetadata{old, ns} {
		if m == nil {
			continue
		}
		for _, name := range c.cluster.index.Lookup(m).Names {
			c.queues.add(c.cluster.ref(name), true)
		}
	}
}

// enqueueClusterQuotas queues the ClusterQuotas that select namespace and
// limit a name m's evaluator charges.
func (c *Controller) enqueueClusterQuotas(m *monitor, namespace string) {
	if c.cluster == nil || namespace == "" {
		if c.cluster != nil && namespace == "" {
			c.enqueueAllClusterQuotas()
		}
		return
	}
	ns, err := c.cluster.nsLister.Get(namespace)
	if err != nil {
		return
	}
	for _, name := range c.cluster.index.Lookup(ns).Names {
		if q := c.cluster.index.Get(name); q != nil && m.chargesAny(q.Spec.Quota.Hard) {
			c.queues.add(c.cluster.ref(name), true)
		}
	}
}

// enqueueAllClusterQuotas queues every ClusterQuota on the primary lane.
func (c *Controller) enqueueAllClusterQuotas() {
	if c.cluster == nil {
		return
	}
	quotas, err := c.cluster.lister.List(nil)
	if err != nil {
		return
	}
	for _, q := range quotas {
		c.queues.add(c.cluster.ref(q.Name), false)
	}
}

// forgetClusterQuota drops the ledger accounts of the ClusterQuota name in
// the namespaces it selected at its last sync and no longer selects (all
// of them when selected is nil: it was deleted), and keeps selected.
func (c *Controller) forgetClusterQuota(name string, selected []string) {
	c.cluster.mu.Lock()
	before := c.cluster.selected[name]
	if selected == nil {
		delete(c.cluster.selected, name)
	} else {
		c.cluster.selected[name] = selected
	}
	c.cluster.mu.Unlock()
	now := map[string]bool{}
	for _, ns := range selected {
		now[ns] = true
	}
	for _, ns := range before {
		if !now[ns] {
			c.ledger.Forget(ns, clusterAccount(name))
		}
	}
}

// chargedByAny reports whether some monitor's evaluator charges name.
func (c *Controller) chargedByAny(name corev1.ResourceName) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, m := range c.monitorsLocked() {
		if m.evaluator != nil && m.charges(name) {
			return true
		}
	}
	return false
}

// ClusterQuotaCaches are the controller's caches of ClusterQuotas, for a
// component beside it that reads them, so that it keeps no second copy:
// a writer of tenants' copies of the quotas, a metrics collector.
type ClusterQuotaCaches struct {
	// Quotas is the informer of ClusterQuotas; its store holds
	// *clusterquota.ClusterQuota.
	Quotas *cache.SharedIndexInformer
	// Namespaces is the informer of the namespaces' metadata; its store
	// holds *metav1.PartialObjectMetadata.
	Namespaces *cache.SharedIndexInformer
	// Index says which ClusterQuotas select which namespace, kept from
	// both informers' events.
	Index *clusterquota.Index
}

// ClusterQuotaCaches returns the controller's caches of ClusterQuotas,
// and false without Options.ClusterQuotas. [Controller.Run] runs the
// informers: they fill once it runs and stop with it. A caller may add
// event handlers and read the stores and the index; it must not run the
// informers or change what they hold.
func (c *Controller) ClusterQuotaCaches() (ClusterQuotaCaches, bool) {
	if c.cluster == nil {
		return ClusterQuotaCaches{}, false
	}
	return ClusterQuotaCaches{Quotas: c.cluster.quotas, Namespaces: c.cluster.namespaces, Index: c.cluster.index}, true
}
