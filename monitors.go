package quotakit

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit/cache"
	"github.com/quotakit/quotakit/evaluator"
	"github.com/quotakit/quotakit/generic"
	"github.com/quotakit/quotakit/internal/ledger"
	"github.com/quotakit/quotakit/internal/safe"
	"github.com/quotakit/quotakit/quota"
)

// resourceQuotas is the resource the controller keeps the status of.
var resourceQuotas = corev1.SchemeGroupVersion.WithResource("resourcequotas")

// monitor is one resource the controller lists and watches: its informer,
// the evaluator that charges it, and what that evaluator reads.
type monitor struct {
	gvr        schema.GroupVersionResource
	namespaced bool
	// optional reports a row of the resource table in an API group a
	// server may not serve (resource.k8s.io): with a discovering client,
	// the controller leaves it out when the server does not serve it.
	optional bool
	informer *cache.SharedIndexInformer
	// evaluator is nil for a resource listed only because other
	// resources' evaluators read it (device classes, for claims).
	evaluator quota.Evaluator
	// reads are the monitors whose informers evaluator lists, itself
	// included: its usage can be trusted once all of them have synced.
	reads []*monitor
	// readBy are the monitors whose evaluators read this one's informer
	// besides their own.
	readBy []*monitor
	// changesAt is the table's [evaluator.Resource.UsageChangesAt], or nil.
	changesAt func(obj runtime.Object) (time.Time, bool)
	// ledgered reports whether the controller's ledger keeps the usage of
	// m's objects: its evaluator reads nothing but the object, and is
	// quotakit's own, whose UsageStats is the sum of Usage over the
	// objects that Matches.
	ledgered bool
	// kept is m's resource as registered with the controller's ledger,
	// when ledgered (see [Controller.keep]).
	kept *ledger.Resource
	// registration is the controller's handler of m's informer, which
	// feeds the ledger.
	registration cache.ResourceEventHandlerRegistration
	// cancel and done stop a discovered monitor's informer and tell when
	// it has returned; they are nil for the monitors built with the
	// controller, which run as long as it does.
	cancel context.CancelFunc
	done   chan struct{}

	// charged remembers, per resource name a quota limits, whether
	// evaluator charges it (see charges).
	chargedMu sync.Mutex
	// guarded by chargedMu
	charged map[corev1.ResourceName]bool
}

// chargedNamesLimit bounds the names a monitor remembers: a cluster's
// quotas name a few dozen; beyond the bound, names are asked each time.
const chargedNamesLimit = 1024

// charges reports whether m's evaluator charges the resource name. Its
// MatchingResources filters names one by one, so the answer for each name
// is asked once and remembered: the controller asks at every event, for
// every quota of the namespace.
func (m *monitor) charges(name corev1.ResourceName) bool {
	m.chargedMu.Lock()
	defer m.chargedMu.Unlock()
	return m.chargesLocked(name)
}

// chargesAny reports whether m's evaluator charges a name of hard.
func (m *monitor) chargesAny(hard corev1.ResourceList) bool {
	m.chargedMu.Lock()
	defer m.chargedMu.Unlock()
	for name := range hard {
		if m.chargesLocked(name) {
			return true
		}
	}
	return false
}

// chargesLocked is charges; m.chargedMu must be held.
func (m *monitor) chargesLocked(name corev1.ResourceName) bool {
	ok, known := m.charged[name]
	if known {
		return ok
	}
	ok = len(m.evaluator.MatchingResources([]corev1.ResourceName{name})) > 0
	if m.charged == nil {
		m.charged = map[corev1.ResourceName]bool{}
	}
	if len(m.charged) < chargedNamesLimit {
		m.charged[name] = ok
	}
	return ok
}

// synced reports whether the informers of everything m's evaluator reads
// have synced, and the ledger has every object of the initial list.
func (m *monitor) synced() bool {
	if m.registration != nil && !m.registration.HasSynced() {
		return false
	}
	for _, r := range m.reads {
		if !r.informer.HasSynced() {
			return false
		}
	}
	return true
}

// resourceRow is a resource the controller is built to count: a row of
// [evaluator.Resources] or an [Options.Resources] entry.
type resourceRow struct {
	evaluator.Resource
	// custom builds an Options.Resources evaluator from its own list.
	custom func(list generic.ListFuncByNamespace) quota.Evaluator
	// callers reports that custom is the caller's code, not the
	// object-count evaluator.
	callers bool
}

// rowsOf returns the resources a controller with opts counts, core first,
// without the ignored ones except resourcequotas; an Options.Resources
// entry with no name or given twice is an error.
func rowsOf(opts Options, ignored map[schema.GroupResource]struct{}) ([]resourceRow, error) {
	var rows []resourceRow
	for _, r := range evaluator.Resources(opts.Evaluator) {
		rows = append(rows, resourceRow{Resource: r})
	}
	for _, r := range opts.Resources {
		row := resourceRow{Resource: evaluator.Resource{Resource: r.Resource, Object: r.Object, Namespaced: true}, custom: r.Evaluator, callers: r.Evaluator != nil}
		if r.Evaluator == nil {
			row.MetadataOnly = true
			row.custom = func(list generic.ListFuncByNamespace) quota.Evaluator {
				return generic.NewObjectCountEvaluator(r.Resource.GroupResource(), list, "")
			}
		}
		rows = append(rows, row)
	}
	seen := map[schema.GroupResource]bool{}
	kept := rows[:0]
	for _, r := range rows {
		gr := r.Resource.Resource.GroupResource()
		switch {
		case gr.Resource == "":
			return nil, fmt.Errorf("quotakit: NewController: a resource without a name: %v", r.Resource.Resource)
		case seen[gr]:
			return nil, fmt.Errorf("quotakit: NewController: resource %s given twice", gr)
		}
		seen[gr] = true
		if _, skip := ignored[gr]; skip && r.Resource.Resource != resourceQuotas {
			continue
		}
		kept = append(kept, r)
	}
	return kept, nil
}

// formOf returns how the informer of row stores objects.
func formOf(row resourceRow, wholeObjects bool) storedForm {
	gvr := row.Resource.Resource
	switch {
	case gvr == resourceQuotas:
		// The controller reads whole quotas, whatever else counts them.
		return typedForm(gvr, &corev1.ResourceQuota{}, nil)
	case row.MetadataOnly && wholeObjects:
		return anyForm(gvr)
	case row.MetadataOnly:
		return metadataForm(gvr)
	case row.Object == nil:
		return anyForm(gvr)
	}
	if _, isUnstructured := row.Object.(runtime.Unstructured); isUnstructured {
		return anyForm(gvr)
	}
	if row.Trim != nil && !wholeObjects {
		return typedForm(gvr, row.Object, row.Trim)
	}
	return typedForm(gvr, row.Object, nil)
}

// newInformer returns an informer of gvr from client, storing objects in
// form. namespace is ignored for a cluster-scoped resource.
func newInformer(client Client, gvr schema.GroupVersionResource, namespace string, form storedForm) (*cache.SharedIndexInformer, error) {
	lw := client.ListerWatcher(gvr, namespace)
	if lw == nil {
		return nil, fmt.Errorf("quotakit: the client has no ListerWatcher for %s", gvr)
	}
	// Named for the resource: counted resources all store metadata, and
	// their reflectors would otherwise all log as *v1.PartialObjectMetadata.
	inf := cache.NewSharedIndexInformer(lw, form.example, cache.SharedIndexInformerOptions{
		Reflector: cache.ReflectorOptions{Name: gvr.GroupResource().String()},
	})
	if err := inf.SetTransform(form.transform); err != nil {
		return nil, fmt.Errorf("quotakit: %w", err)
	}
	return inf, nil
}

// newMonitors returns a monitor for every row, with informers from client,
// and their evaluators, which list through those informers. They are
// sorted by resource.
func newMonitors(client Client, rows []resourceRow, opts Options) ([]*monitor, error) {
	byGVR := map[schema.GroupVersionResource]*monitor{}
	var monitors []*monitor
	for _, row := range rows {
		ns := opts.Namespace
		if !row.Namespaced {
			ns = ""
		}
		inf, err := newInformer(client, row.Resource.Resource, ns, formOf(row, opts.WholeObjects))
		if err != nil {
			return nil, fmt.Errorf("quotakit: NewController: %w", err)
		}
		m := &monitor{gvr: row.Resource.Resource, namespaced: row.Namespaced, informer: inf, changesAt: row.UsageChangesAt,
			optional: row.custom == nil && row.Resource.Resource.Group != ""}
		byGVR[m.gvr] = m
		monitors = append(monitors, m)
	}
	for i, row := range rows {
		m := monitors[i]
		// listers records what the evaluator reads, so that its usage is
		// trusted only once all of that has synced.
		listers := func(gvr schema.GroupVersionResource) (generic.ListFuncByNamespace, error) {
			read := byGVR[gvr]
			if read == nil {
				return nil, nil
			}
			if !slices.Contains(m.reads, read) {
				m.reads = append(m.reads, read)
				if read != m {
					read.readBy = append(read.readBy, m)
				}
			}
			return listFunc(read.informer, gvr.GroupResource(), read.namespaced), nil
		}
		var err error
		switch {
		case row.custom != nil:
			list, _ := listers(m.gvr)
			if m.evaluator = row.custom(list); m.evaluator == nil {
				err = fmt.Errorf("the Evaluator function of %s returned nil", m.gvr.GroupResource())
			}
		case row.NewEvaluator != nil:
			m.evaluator, err = row.NewEvaluator(listers)
		}
		if err != nil {
			return nil, fmt.Errorf("quotakit: NewController: %w", err)
		}
		if m.evaluator != nil && m.evaluator.GroupResource() != m.gvr.GroupResource() {
			return nil, fmt.Errorf("quotakit: NewController: the evaluator of %s evaluates %s", m.gvr.GroupResource(), m.evaluator.GroupResource())
		}
		if m.evaluator != nil && !slices.Contains(m.reads, m) {
			m.reads = append(m.reads, m)
		}
	}
	for i, m := range monitors {
		m.ledgered = m.evaluator != nil && !rows[i].callers && len(m.reads) == 1
	}
	slices.SortFunc(monitors, func(a, b *monitor) int {
		return cmp.Or(strings.Compare(a.gvr.Group, b.gvr.Group), strings.Compare(a.gvr.Resource, b.gvr.Resource))
	})
	return monitors, nil
}

// listFunc returns the function an evaluator lists gr through: the objects
// of one namespace from inf's cache, or all of them for a cluster-scoped
// resource.
func listFunc(inf *cache.SharedIndexInformer, gr schema.GroupResource, namespaced bool) generic.ListFuncByNamespace {
	lister := cache.NewGenericLister(inf.GetIndexer(), gr)
	if !namespaced {
		return func(string) ([]runtime.Object, error) { return lister.List(nil) }
	}
	return func(namespace string) ([]runtime.Object, error) { return lister.ByNamespace(namespace).List(nil) }
}

// isStatic reports whether inf is the informer of a static monitor.
func (c *Controller) isStatic(inf *cache.SharedIndexInformer) bool {
	for _, m := range c.static {
		if m.informer == inf {
			return true
		}
	}
	return false
}

// recalculateWhenSynced waits until everything m's evaluator reads has
// synced, then recalculates the quotas it charges: a resource that syncs
// late, or never, holds up only those quotas.
func (c *Controller) recalculateWhenSynced(ctx context.Context, log logr.Logger, m *monitor) {
	if !cache.WaitForCacheSync(ctx, m.synced) {
		if ctx.Err() == nil {
			log.Info("informer stopped before it synced", "resource", m.gvr)
		}
		return
	}
	if err := safe.Call(func() error { return c.enqueueMatching(m, "") }); err != nil {
		log.Error(err, "failed to find the quotas a resource affects", "resource", m.gvr)
	}
}

// monitorOf returns the monitor of the evaluator of gr, or nil.
func (c *Controller) monitorOf(gr schema.GroupResource) *monitor {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if m := c.discovered[gr]; m != nil {
		return m
	}
	for _, m := range c.static {
		if m.gvr.GroupResource() == gr && m.evaluator != nil {
			return m
		}
	}
	return nil
}

// Registry returns a new registry of the evaluators the controller charges
// with now, which list through its informers. Admission code running in
// the same process can pass it as admission.Options.Registry; changing it
// changes nothing in the controller.
func (c *Controller) Registry() quota.Registry {
	return generic.NewRegistry(c.currentRegistry().List()...)
}

// currentRegistry returns the registry of every monitor's evaluator,
// building it again after the monitors changed. It is never changed once
// built.
func (c *Controller) currentRegistry() quota.Registry {
	c.mu.RLock()
	r := c.registry
	c.mu.RUnlock()
	if r != nil {
		return r
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.registry == nil {
		var evaluators []quota.Evaluator
		for _, m := range c.monitorsLocked() {
			if m.evaluator != nil {
				evaluators = append(evaluators, m.evaluator)
			}
		}
		c.registry = generic.NewRegistry(evaluators...)
	}
	return c.registry
}

// monitorsLocked returns the static and discovered monitors. c.mu must be
// held.
func (c *Controller) monitorsLocked() []*monitor {
	all := make([]*monitor, 0, len(c.static)+len(c.discovered))
	all = append(all, c.static...)
	for _, m := range c.discovered {
		all = append(all, m)
	}
	return all
}
