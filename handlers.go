package quotakit

import (
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit/cache"
	"github.com/quotakit/quotakit/internal/safe"
	"github.com/quotakit/quotakit/quota"
)

// change says that the usage an evaluator computes may have changed in a
// namespace, or in every namespace when namespace is "", or that a
// quota's charges in flight are due for a recheck. Rechecks go through
// this queue, with their moment, rather than the quota lanes: a lane's
// delaying queue keeps one moment per key, and a retry's earlier moment
// would take a recheck's place.
type change struct {
	resource  schema.GroupResource
	namespace string
	// quota, when set, is a quota whose charges in flight are to be
	// rechecked at at, or whose write was put off to at; resource and
	// namespace are then unset.
	quota quotaRef
	// at is, for a change that comes with time (the end of a pod's grace
	// period), its moment in Unix nanoseconds, so that two such changes of
	// one namespace stay two: the delaying queue keeps only the earlier
	// moment of equal items. Zero for a change an event reported.
	at int64
}

// timedChangeMargin is how long after an object's usage changes by itself
// (the end of a pod's deletion grace period) its quotas are recalculated:
// the evaluator charges the pod up to that moment included.
const timedChangeMargin = time.Millisecond

// quotaHandler queues the quotas that need a sync, and tells the monitor
// manager when the resources quotas name may have changed.
func (c *Controller) quotaHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs[*corev1.ResourceQuota]{
		AddFunc: func(rq *corev1.ResourceQuota, _ bool) {
			c.addQuota(rq)
			c.namesChanged()
		},
		UpdateFunc: c.updateQuota,
		DeleteFunc: func(d cache.DeletedObject[*corev1.ResourceQuota]) {
			ref := quotaRef{kind: c.resourceQuotas, key: d.Key}
			c.forget(ref)
			c.queues.add(ref, false)
			c.namesChanged()
		},
	}
}

// addQuota queues a quota that was created, or whose limits changed: on
// the priority lane when its status does not reflect its spec yet or lacks
// a used value that some evaluator computes, so that admission can enforce
// it soon; on the primary lane otherwise.
func (c *Controller) addQuota(rq *corev1.ResourceQuota) {
	c.queues.add(c.resourceQuotas.ref(rq), c.needsUsage(rq))
}

// needsUsage reports whether rq's status is missing something the
// controller computes: status.hard is not spec.hard, or a hard limit that
// an evaluator charges has no used value.
func (c *Controller) needsUsage(rq *corev1.ResourceQuota) bool {
	if !quota.Equals(rq.Spec.Hard, rq.Status.Hard) {
		return true
	}
	c.mu.RLock()
	monitors := c.monitorsLocked()
	c.mu.RUnlock()
	for name := range rq.Status.Hard {
		if _, ok := rq.Status.Used[name]; ok {
			continue
		}
		for _, m := range monitors {
			if m.evaluator != nil && m.charges(name) {
				return true
			}
		}
	}
	return false
}

// updateQuota queues a quota whose spec.hard, scopes or scope selector
// changed, one whose last status write conflicted, and one whose
// status.used someone else changed: admission charged it (or took a
// charge back), and the controller takes note of the charge in flight,
// so that it is released a charge window later if no object follows it
// (see [charges.Book]); such a sync writes nothing unless objects came or
// went meanwhile. The controller's own writes are ignored. Kubernetes
// ignores every status-only update, so a charge that no object follows
// stays until its next recount of the namespace (kubernetes#24527); it
// ignores scope selector changes until the next full resync, and retries
// a conflict only after its rate limiter's backoff (kubernetes#67761).
func (c *Controller) updateQuota(oldRQ, newRQ *corev1.ResourceQuota) {
	ref := c.resourceQuotas.ref(newRQ)
	if c.writes.TakeConflict(ref) {
		c.queues.add(ref, true)
		return
	}
	if quota.Equals(oldRQ.Spec.Hard, newRQ.Spec.Hard) &&
		equality.Semantic.DeepEqual(oldRQ.Spec.Scopes, newRQ.Spec.Scopes) &&
		equality.Semantic.DeepEqual(oldRQ.Spec.ScopeSelector, newRQ.Spec.ScopeSelector) {
		if c.charges.Holds() && !quota.Equals(oldRQ.Status.Used, newRQ.Status.Used) && !c.writes.Own(ref, newRQ) {
			c.queues.add(ref, false)
		}
		return
	}
	c.addQuota(newRQ)
	c.namesChanged()
}

// monitorHandler turns the events of m's objects into changes: deletions
// always, updates the update filter lets through, and the moment an
// object's usage changes with no event (a pod's deletion grace period
// ends); for a ledgered resource, besides, every creation or update that
// moves what the object charges a quota the ledger keeps. They change the
// usage of m's evaluator in the object's namespace and that of the
// evaluators that read m besides their own resource (a claim's usage
// depends on its owning pod): in the object's namespace, or in every
// namespace for a cluster-scoped resource, on any change to one (device
// classes).
//
// Kubernetes recalculates on neither creations nor the updates its filter
// does not see (a spec-only resize): admission charged them, and its next
// recount of the namespace includes them. But a recount made from a cache
// that had not yet seen a creation overwrites admission's charge, and the
// status stays short of it until another event in the namespace; a
// recalculation when the ledger sees the object closes that window, and
// costs little (the totals are kept, and an unchanged status is not
// written).
func (c *Controller) monitorHandler(m *monitor) cache.ResourceEventHandler {
	c.keep(m)
	gr := m.gvr.GroupResource()
	changed := func(obj runtime.Object, own bool) {
		ns, _ := namespaceOf(obj)
		if own && m.evaluator != nil && ns != "" {
			c.changes.Add(change{resource: gr, namespace: ns})
		}
		if !m.namespaced {
			ns = ""
		}
		for _, by := range m.readBy {
			c.changes.Add(change{resource: by.gvr.GroupResource(), namespace: ns})
		}
	}
	timed := func(obj runtime.Object) {
		if m.changesAt == nil {
			return
		}
		if at, ok := m.changesAt(obj); ok {
			if d := time.Until(at); d >= 0 {
				if ns, ok := namespaceOf(obj); ok {
					c.changes.AddAfter(change{resource: gr, namespace: ns, at: at.UnixNano()}, d+timedChangeMargin)
				}
			}
		}
	}
	// record reports whether the object's charge to a quota moved.
	record := func(key string, obj runtime.Object) bool {
		if ns, _, err := cache.SplitMetaNamespaceKey(key); err == nil && ns != "" {
			return m.kept.Observe(ns, key, obj)
		}
		return false
	}
	recordObject := func(obj runtime.Object) bool {
		if !m.ledgered {
			return false
		}
		key, err := cache.MetaNamespaceKeyFunc(obj)
		return err == nil && record(key, obj)
	}
	return cache.ResourceEventHandlerFuncs[runtime.Object]{
		AddFunc: func(obj runtime.Object, initial bool) {
			moved := recordObject(obj)
			timed(obj)
			switch {
			case initial:
			case moved:
				changed(obj, true)
			case len(m.readBy) > 0:
				changed(obj, false)
			}
		},
		UpdateFunc: func(oldObj, newObj runtime.Object) {
			moved := recordObject(newObj)
			timed(newObj)
			if moved || m.namespaced && c.updateFilter(m.gvr, oldObj, newObj) || !m.namespaced && !sameVersion(oldObj, newObj) {
				changed(newObj, true)
			}
		},
		DeleteFunc: func(d cache.DeletedObject[runtime.Object]) {
			if m.ledgered {
				record(d.Key, nil)
			}
			if d.Object != nil {
				changed(d.Object, true)
				return
			}
			if ns, _, err := cache.SplitMetaNamespaceKey(d.Key); err == nil {
				changed(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns}}, true)
			}
		},
	}
}

// keep registers m's resource with the ledger when the ledger keeps its
// usage; every ledgered monitor has its handler built, once.
func (c *Controller) keep(m *monitor) {
	if m.ledgered && m.kept == nil {
		m.kept = c.ledger.Register(m.evaluator, m.changesAt)
	}
}

// sameVersion reports whether two objects carry the same resourceVersion:
// a resync, not an update.
func sameVersion(a, b runtime.Object) bool {
	ma, err1 := meta.Accessor(a)
	mb, err2 := meta.Accessor(b)
	return err1 == nil && err2 == nil && ma.GetResourceVersion() != "" && ma.GetResourceVersion() == mb.GetResourceVersion()
}

// namespaceOf returns the namespace of obj, false when it has none.
func namespaceOf(obj runtime.Object) (string, bool) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return "", false
	}
	return m.GetNamespace(), m.GetNamespace() != ""
}

// replenishLoop turns changes into the recalculation of the quotas they
// affect, on the priority lane: released usage should not wait behind a
// full resync of every quota (kubernetes#122483).
func (c *Controller) replenishLoop(log logr.Logger) {
	for {
		ch, shutdown := c.changes.Get()
		if shutdown {
			return
		}
		if ch.quota.kind != nil {
			c.queues.add(ch.quota, true)
		} else if m := c.monitorOf(ch.resource); m != nil && m.evaluator != nil {
			if err := safe.Call(func() error {
				if m.ledgered && ch.namespace != "" {
					m.kept.Refresh(ch.namespace, time.Now())
				}
				return c.enqueueMatching(m, ch.namespace)
			}); err != nil {
				log.Error(err, "failed to find the quotas a change affects", "resource", ch.resource, "namespace", ch.namespace)
			}
		}
		c.changes.Done(ch)
	}
}

// enqueueMatching puts on the priority lane every quota of namespace (of
// every namespace when namespace is "") that has a hard limit m's
// evaluator charges, in spec.hard or status.hard. Kubernetes looks at
// status.hard only, which misses a quota whose first status write the
// informer has not delivered yet: a resource whose informer syncs at that
// moment would be left out of that quota until the next full resync.
//
// It returns the error of listing the quotas, which the caller logs: the
// quotas stay as they are until the next change or the full resync.
func (c *Controller) enqueueMatching(m *monitor, namespace string) error {
	if m.evaluator == nil {
		return nil
	}
	quotas, err := c.quotas.ByNamespace(namespace).List(nil)
	if err != nil {
		return fmt.Errorf("quotakit: listing the resource quotas of namespace %q: %w", namespace, err)
	}
	for _, rq := range quotas {
		if m.chargesAny(rq.Spec.Hard) || m.chargesAny(rq.Status.Hard) {
			c.queues.add(c.resourceQuotas.ref(rq), true)
		}
	}
	c.enqueueClusterQuotas(m, namespace)
	return nil
}

// enqueueAll puts every quota on the primary lane, to be recalculated from
// the caches and compared with the ledger, and starts a resync generation;
// it returns the error of listing the quotas, and then starts none.
func (c *Controller) enqueueAll() error {
	quotas, err := c.quotas.List(nil)
	if err != nil {
		return fmt.Errorf("quotakit: listing the resource quotas: %w", err)
	}
	c.resyncs.Add(1)
	for _, rq := range quotas {
		c.queues.add(c.resourceQuotas.ref(rq), false)
	}
	c.enqueueAllClusterQuotas()
	return nil
}

// quotaKey returns the key of rq: namespace/name.
func quotaKey(rq *corev1.ResourceQuota) string { return rq.Namespace + "/" + rq.Name }
