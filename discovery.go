package quotakit

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit/generic"
	"github.com/quotakit/quotakit/internal/safe"
)

// namesChanged tells the discovery loop that the resources quotas name may
// have changed. It never blocks.
func (c *Controller) namesChanged() {
	select {
	case c.names <- struct{}{}:
	default:
	}
}

// manageDiscovered keeps a monitor running for each discovered resource
// that some quota names and no static monitor counts, and none for the
// others, until ctx is done; then it stops them all. It rediscovers every
// Options.DiscoveryPeriod and at once when a quota names a resource the
// last discovery did not find.
func (c *Controller) manageDiscovered(ctx context.Context, log logr.Logger, wg *sync.WaitGroup) {
	d := &discovery{served: map[schema.GroupResource]schema.GroupVersionResource{}, asked: map[schema.GroupResource]bool{}}
	var tick <-chan time.Time
	if c.discoverer != nil {
		c.discover(ctx, log, d)
		if c.opts.DiscoveryPeriod > 0 {
			t := time.NewTicker(c.opts.DiscoveryPeriod)
			defer t.Stop()
			tick = t.C
		}
	}
	defer c.stopDiscovered(nil)
	for {
		c.reconcileDiscovered(ctx, log, wg, d)
		select {
		case <-ctx.Done():
			return
		case <-c.names:
		case <-tick:
			c.discover(ctx, log, d)
		}
	}
}

// discovery is what the discovery loop knows: the resources the server
// served at the last discovery, and the unknown resources that discovery
// was already asked about since.
type discovery struct {
	served map[schema.GroupResource]schema.GroupVersionResource
	asked  map[schema.GroupResource]bool
}

// discover asks the client which resources the server serves. On an error
// with no result the previous answer stays.
func (c *Controller) discover(ctx context.Context, log logr.Logger, d *discovery) {
	var resources []schema.GroupVersionResource
	err := safe.Call(func() error {
		var err error
		resources, err = c.discoverer.NamespacedResources(ctx)
		return err
	})
	if err != nil {
		log.Error(err, "resource discovery failed", "found", len(resources))
		if len(resources) == 0 {
			return
		}
	}
	served := make(map[schema.GroupResource]schema.GroupVersionResource, len(resources))
	for _, gvr := range resources {
		served[gvr.GroupResource()] = gvr
	}
	if err != nil {
		// A partial answer: keep what the groups that failed served before.
		for gr, gvr := range d.served {
			if _, ok := served[gr]; !ok {
				served[gr] = gvr
			}
		}
	}
	d.served = served
	clear(d.asked)
}

// reconcileDiscovered starts and stops discovered monitors to match the
// resources quotas name, and reports the quotas that name resources
// nobody counts.
func (c *Controller) reconcileDiscovered(ctx context.Context, log logr.Logger, wg *sync.WaitGroup, d *discovery) {
	quotas, err := c.quotas.List(nil)
	if err != nil {
		return
	}
	needed, unknown := c.classify(quotas, d)
	if c.discoverer != nil && ctx.Err() == nil {
		var fresh bool
		for _, names := range unknown {
			for _, n := range names {
				if gr, ok := countedResource(n); ok && !d.asked[gr] {
					fresh = true
					d.asked[gr] = true
				}
			}
		}
		if fresh {
			asked := maps.Clone(d.asked)
			c.discover(ctx, log, d)
			maps.Copy(d.asked, asked)
			needed, unknown = c.classify(quotas, d)
		}
	}

	var stale []*monitor
	c.mu.Lock()
	for gr, m := range c.discovered {
		if _, ok := needed[gr]; !ok {
			stale = append(stale, m)
			delete(c.discovered, gr)
			c.registry = nil
		}
	}
	c.mu.Unlock()
	if len(stale) > 0 {
		c.stopDiscovered(stale)
	}
	for gr, gvr := range needed {
		c.mu.RLock()
		_, running := c.discovered[gr]
		c.mu.RUnlock()
		if !running && ctx.Err() == nil {
			if err := c.startDiscovered(ctx, log, wg, gvr); err != nil {
				log.Error(err, "failed to count a discovered resource", "resource", gvr)
			}
		}
	}
	c.recordUncounted(c.reportUncounted(log, quotas, unknown))
}

// classify returns the discovered resources that quotas name and no static
// monitor counts, and, per quota key, the names in spec.hard that nothing
// counts, or whose resource the controller may not list.
func (c *Controller) classify(quotas []*corev1.ResourceQuota, d *discovery) (map[schema.GroupResource]schema.GroupVersionResource, map[string][]corev1.ResourceName) {
	needed := map[schema.GroupResource]schema.GroupVersionResource{}
	unknown := map[string][]corev1.ResourceName{}
	var static []*monitor
	for _, m := range c.static {
		if m.evaluator != nil {
			static = append(static, m)
		}
	}
	c.mu.RLock()
	discovered := maps.Clone(c.discovered)
	c.mu.RUnlock()
	for _, rq := range quotas {
		for name := range rq.Spec.Hard {
			if i := slices.IndexFunc(static, func(m *monitor) bool { return m.charges(name) }); i >= 0 {
				if c.denied(static[i]) != nil {
					unknown[quotaKey(rq)] = append(unknown[quotaKey(rq)], name)
				}
				continue
			}
			gr, ok := countedResource(name)
			if gvr, served := d.served[gr]; ok && served {
				if _, ignored := c.ignored[gr]; !ignored {
					// Kept running even when forbidden, so that it is
					// counted as soon as the permission is granted.
					needed[gr] = gvr
					if m := discovered[gr]; m != nil && c.denied(m) != nil {
						unknown[quotaKey(rq)] = append(unknown[quotaKey(rq)], name)
					}
					continue
				}
			}
			unknown[quotaKey(rq)] = append(unknown[quotaKey(rq)], name)
		}
	}
	return needed, unknown
}

// countedResource returns the resource a count/<resource>.<group> name
// counts.
func countedResource(name corev1.ResourceName) (schema.GroupResource, bool) {
	rest, ok := strings.CutPrefix(string(name), "count/")
	if !ok || rest == "" {
		return schema.GroupResource{}, false
	}
	resource, group, _ := strings.Cut(rest, ".")
	return schema.GroupResource{Group: group, Resource: resource}, true
}

// startDiscovered starts a monitor of gvr, an object-count evaluator over
// an informer that keeps only metadata, and recalculates the quotas naming
// it once it has synced.
func (c *Controller) startDiscovered(ctx context.Context, log logr.Logger, wg *sync.WaitGroup, gvr schema.GroupVersionResource) error {
	form := metadataForm(gvr)
	if c.opts.WholeObjects {
		form = anyForm(gvr)
	}
	inf, err := newInformer(c.client, gvr, c.opts.Namespace, form)
	if err != nil {
		return err
	}
	gr := gvr.GroupResource()
	m := &monitor{gvr: gvr, namespaced: true, informer: inf, done: make(chan struct{})}
	m.evaluator = generic.NewObjectCountEvaluator(gr, listFunc(inf, gr, true), "")
	m.reads = []*monitor{m}
	m.ledgered = true
	if err := c.watchErrors(m); err != nil {
		return fmt.Errorf("quotakit: %w", err)
	}
	if m.registration, err = inf.AddEventHandler(c.monitorHandler(m)); err != nil {
		return fmt.Errorf("quotakit: %w", err)
	}
	mctx, cancel := context.WithCancel(ctx)
	m.cancel = cancel
	c.mu.Lock()
	c.discovered[gr] = m
	c.registry = nil
	c.mu.Unlock()
	log.Info("counting a discovered resource", "resource", gvr)
	wg.Go(func() {
		defer close(m.done)
		var inner sync.WaitGroup
		inner.Go(func() { inf.Run(mctx) })
		inner.Go(func() { c.recalculateWhenSynced(mctx, log, m) })
		inner.Wait()
	})
	return nil
}

// stopDiscovered stops the informers of monitors, or of every discovered
// monitor when monitors is nil, and returns once they have returned.
func (c *Controller) stopDiscovered(monitors []*monitor) {
	if monitors == nil {
		c.mu.Lock()
		for gr, m := range c.discovered {
			monitors = append(monitors, m)
			delete(c.discovered, gr)
		}
		c.registry = nil
		c.mu.Unlock()
	}
	for _, m := range monitors {
		m.cancel()
	}
	for _, m := range monitors {
		<-m.done
		if m.kept != nil {
			m.kept.Drop()
		}
	}
}

// reportUncounted logs, at error level, each quota that names resources
// nobody counts or the controller may not list, once per set of such
// names and reasons, remembers which quotas do for
// [Controller.UncountedQuotas], and returns the Events to record about
// them.
func (c *Controller) reportUncounted(log logr.Logger, quotas []*corev1.ResourceQuota, unknown map[string][]corev1.ResourceName) []uncountedEvent {
	c.mu.RLock()
	monitors := c.monitorsLocked()
	c.mu.RUnlock()
	fallback := "no evaluator charges them and the client cannot discover resources"
	if c.discoverer != nil {
		fallback = "no evaluator charges them and the server serves no such resource, or it is ignored"
	}
	var events []uncountedEvent
	c.mu.Lock()
	defer c.mu.Unlock()
	for key := range c.uncounted {
		if _, ok := unknown[key]; !ok {
			delete(c.uncounted, key)
		}
	}
	for _, rq := range quotas {
		key := quotaKey(rq)
		names, ok := unknown[key]
		if !ok {
			continue
		}
		slices.Sort(names)
		var reasons []string
		for _, n := range names {
			if err := c.deniedFor(monitors, n); err != nil {
				reasons = append(reasons, fmt.Sprintf("%s: %v", n, err))
			} else {
				reasons = append(reasons, fmt.Sprintf("%s: %s", n, fallback))
			}
		}
		// The controller's own status writes make new versions of the
		// quota; only a new set of uncounted names, or of reasons, is
		// news.
		version := fmt.Sprint(reasons)
		if c.uncounted[key] == version {
			continue
		}
		c.uncounted[key] = version
		err := fmt.Errorf("quotakit: resource quota %s limits %v, which are not counted (%s)", key, names, strings.Join(reasons, "; "))
		log.Error(err, "resource quota names resources that are not counted; they get no used value, so admission refuses any object charged for them, and a name no object is charged for (a misspelling) limits nothing", "quota", key, "resources", names)
		events = append(events, uncountedEvent{quota: rq, message: fmt.Sprintf("spec.hard names resources that are not counted, which keep their last used value or get none, so that admission refuses what would be charged for them: %s", strings.Join(reasons, "; "))})
	}
	return events
}

// dropUnserved leaves out the monitors of table resources in optional API
// groups that discovery says the server does not serve — resource claims
// on a cluster without Dynamic Resource Allocation — and the resources
// listed only for them, so that their informers do not retry a list that
// cannot succeed and HasSynced does not wait for them. A quota naming
// their resources is then reported as uncounted. The server's resources
// are read once: a resource served later is counted after a restart.
func (c *Controller) dropUnserved(ctx context.Context, log logr.Logger) {
	var served []schema.GroupVersionResource
	err := safe.Call(func() error {
		var err error
		served, err = c.discoverer.NamespacedResources(ctx)
		return err
	})
	if err != nil || len(served) == 0 {
		// Without a complete answer, keep everything: an informer that
		// cannot list is reported, never silent.
		if err != nil {
			log.Error(err, "resource discovery failed at start; every table resource is watched", "found", len(served))
		}
		return
	}
	isServed := map[schema.GroupResource]bool{}
	for _, gvr := range served {
		isServed[gvr.GroupResource()] = true
	}
	absent := map[*monitor]bool{}
	for _, m := range c.static {
		if m.optional && m.namespaced && !isServed[m.gvr.GroupResource()] {
			absent[m] = true
		}
	}
	for _, m := range c.static {
		if m.optional && m.evaluator == nil && len(m.readBy) > 0 && !slices.ContainsFunc(m.readBy, func(by *monitor) bool { return !absent[by] }) {
			absent[m] = true
		}
	}
	if len(absent) == 0 {
		return
	}
	var names []string
	for m := range absent {
		names = append(names, m.gvr.GroupResource().String())
	}
	slices.Sort(names)
	log.Info("the server does not serve these resources; they are not counted", "resources", names)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.static = slices.DeleteFunc(c.static, func(m *monitor) bool { return absent[m] })
	c.registry = nil
}
