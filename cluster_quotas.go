package quotakit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

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
// what each quota selected at its last sync. A ClusterQuota is queued
// under its name, which, having no slash, is never a ResourceQuota's
// key.
type clusterQuotas struct {
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
	// written holds, by cluster quota name, the controller's last status
	// write and the resourceVersion it was written over, until the
	// informer delivers something else.
	// guarded by mu
	written map[string]ownWrite
	// lastErr is the error that ended each informer's last list or
	// watch, by resource, for Ready to give as the reason it is not
	// ready (with no CRD installed, the ClusterQuota informer fails every
	// attempt).
	// guarded by mu
	lastErr map[string]error
}

// ownWrite is a ClusterQuota as the controller wrote it, over version
// from.
type ownWrite struct {
	from string
	obj  *clusterquota.ClusterQuota
}

// freshest returns q, or the controller's own write of it when the
// informer still shows the version that write was made over: a status
// compared with a cache that lags behind the controller's own writes
// would take what the controller lowered for a new charge.
func (cq *clusterQuotas) freshest(q *clusterquota.ClusterQuota) *clusterquota.ClusterQuota {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	w, ok := cq.written[q.Name]
	if !ok {
		return q
	}
	if q.ResourceVersion == w.from {
		return w.obj
	}
	delete(cq.written, q.Name)
	return q
}

// wrote remembers that out was written over version from.
func (cq *clusterQuotas) wrote(from string, out *clusterquota.ClusterQuota) {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if from == "" || out.ResourceVersion == "" {
		delete(cq.written, out.Name)
		return
	}
	cq.written[out.Name] = ownWrite{from: from, obj: out}
}

// forgetWrite forgets the controller's last write of the ClusterQuota
// name, which a write over it made stale.
func (cq *clusterQuotas) forgetWrite(name string) {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	delete(cq.written, name)
}

// newClusterQuotas builds the informers of ClusterQuotas and namespaces
// over client, with the controller's handlers.
func (c *Controller) newClusterQuotas(client Client) (*clusterQuotas, error) {
	cq := &clusterQuotas{index: &clusterquota.Index{}, selected: map[string][]string{}, written: map[string]ownWrite{}, lastErr: map[string]error{}}
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
			c.queues.add(q.Name, true)
		},
		UpdateFunc: func(old, q *clusterquota.ClusterQuota) {
			cq.index.SetClusterQuota(q)
			// A spec change, and a status.total changed by admission (or
			// by the controller itself: such a sync writes nothing).
			if !equality.Semantic.DeepEqual(old.Spec, q.Spec) || !quota.Equals(old.Status.Total.Used, q.Status.Total.Used) {
				c.queues.add(q.Name, true)
			}
		},
		DeleteFunc: func(d cache.DeletedObject[*clusterquota.ClusterQuota]) {
			cq.index.DeleteClusterQuota(d.Key)
			c.queues.add(d.Key, false)
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
			c.queues.add(name, true)
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
			c.queues.add(name, true)
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
		c.queues.add(q.Name, false)
	}
}

// clusterAccount is the name of the ledger account of a ClusterQuota in
// each namespace it selects; no ResourceQuota has a slash in its name.
func clusterAccount(name string) string { return "clusterquota/" + name }

// syncClusterQuota brings the status of the ClusterQuota name up to date:
// status.total.hard is spec.quota.hard, status.total.used the sum over the
// selected namespaces of what their objects charge under spec.quota, plus
// admission's charges in flight (the same rule as ResourceQuotas'), and
// status.namespaces the per-namespace usage, bounded
// ([clusterquota.ClusterQuotaStatus.SetNamespaceStatuses]). When any
// namespace's usage cannot be computed, nothing is written: the last
// status stands, and the error is returned (logged, and retried).
func (c *Controller) syncClusterQuota(ctx context.Context, name string) error {
	if !c.cluster.hasSynced() {
		return errors.New("quotakit: the ClusterQuota and namespace informers have not synced")
	}
	q, err := c.cluster.lister.Get(name)
	if apierrors.IsNotFound(err) {
		c.forgetClusterQuota(name, nil)
		c.charges.forget(name)
		c.forgetProblems(name)
		c.writes.forget(name)
		return nil
	}
	if err != nil {
		return err
	}
	q = c.cluster.freshest(q)
	if verr := clusterquota.ValidateSpec(q); verr != nil {
		// Skipped, loudly: its Valid condition, a log line, a count.
		return c.writeInvalid(ctx, q, verr)
	}
	nss, ok := c.cluster.index.Namespaces(q)
	if !ok {
		// The index has not been fed this spec yet: the handler that
		// feeds it queues the quota again once it has.
		logr.FromContextOrDiscard(ctx).V(4).Info("cluster quota's selection not indexed yet", "clusterQuota", name)
		return nil
	}
	hard := q.Spec.Quota.Hard.DeepCopy()
	hardNames := quota.ResourceNames(hard)
	account := clusterAccount(name)
	perNS := map[string]corev1.ResourceList{}
	// parts are the ledger accounts of the namespaces, from which the
	// charge book counts arrivals namespace by namespace: a namespace
	// that joins brings usage that admission never charged.
	parts := map[string]usagePart{}
	total := corev1.ResourceList{}
	var selected, unenforced []string
	for _, nsName := range nss {
		m, err := c.cluster.nsLister.Get(nsName)
		if apierrors.IsNotFound(err) {
			continue // deleted: the index is told next
		}
		if err != nil {
			return err
		}
		selected = append(selected, m.Name)
		if !c.enforced(m.Labels) {
			unenforced = append(unenforced, m.Name)
		}
		rq := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: m.Name, Name: account}, Spec: *q.Spec.Quota.DeepCopy()}
		used, part, err := c.calculateUsage(ctx, rq)
		if err != nil {
			return fmt.Errorf("quotakit: cluster quota %s, namespace %s: %w", name, m.Name, err)
		}
		used = quota.Mask(used, hardNames)
		perNS[m.Name] = used
		parts[m.Name] = part
		total = quota.Add(total, used)
	}
	for _, n := range hardNames {
		if _, ok := total[n]; !ok && c.chargedByAny(n) {
			total[n] = resource.Quantity{Format: resource.DecimalSI}
		}
	}
	now := time.Now()
	settled := c.charges.settle(now, name, sighting{status: q.Status.Total.Used, rv: q.ResourceVersion, usage: total, parts: parts})
	used := corev1.ResourceList{}
	for n, v := range settled.used {
		used[n] = readable(v, hard[n])
	}
	updated := q.DeepCopy()
	updated.Status.Total = corev1.ResourceQuotaStatus{Hard: hard, Used: quota.Mask(used, hardNames)}
	if err := updated.Status.SetNamespaceStatuses(perNS); err != nil {
		return fmt.Errorf("quotakit: cluster quota %s: %w", name, err)
	}
	slices.Sort(unenforced)
	c.setValidity(ctx, updated, nil, now)
	c.setEnforcement(ctx, updated, unenforced, now)
	if !equality.Semantic.DeepEqual(updated.Status, q.Status) {
		if c.putOff(name, now, clusterOnlyReleases(q, updated)) {
			return nil
		}
		out, err := c.client.UpdateStatus(ctx, clusterQuotasGVR, updated)
		if apierrors.IsConflict(err) {
			// What the controller wrote before is no longer the stored
			// status: the informer's next version is.
			c.cluster.forgetWrite(name)
			c.conflicts.Add(1)
			return &conflictError{fmt.Errorf("quotakit: updating the status of cluster quota %s: %w", name, err)}
		}
		if err != nil {
			return fmt.Errorf("quotakit: updating the status of cluster quota %s: %w", name, err)
		}
		c.writes.stamp(name, now)
		if written := asClusterQuota(out); written != nil {
			c.cluster.wrote(q.ResourceVersion, written)
		}
	}
	c.settled(ctx, settled, updated.Status.Total.Used, now)
	c.forgetClusterQuota(name, selected)
	return nil
}

// asClusterQuota returns what a Client's UpdateStatus returned as a
// ClusterQuota: typed, or converted from unstructured; nil if neither.
func asClusterQuota(obj runtime.Object) *clusterquota.ClusterQuota {
	switch o := obj.(type) {
	case *clusterquota.ClusterQuota:
		return o
	case *unstructured.Unstructured:
		if o == nil {
			return nil
		}
		out := &clusterquota.ClusterQuota{}
		if runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, out) != nil {
			return nil
		}
		return out
	}
	return nil
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

// isClusterKey reports whether key names a ClusterQuota: a
// ResourceQuota's key is namespace/name.
func isClusterKey(key string) bool { return !strings.Contains(key, "/") }
