package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit"
	"github.com/quotakit/quotakit/cache/cachetest"
	"github.com/quotakit/quotakit/evaluator"
	"github.com/quotakit/quotakit/generic"
	"github.com/quotakit/quotakit/quota"
)

// world is the demo's cluster: the in-memory API, a model of the objects
// the churn stored in it (from which the usage each quota should show
// after every event is computed), and the convergence tracker. Only the
// churn goroutine touches the model; stats are read by the view under mu.
type world struct {
	cfg config
	api *cachetest.Server
	rng *rand.Rand

	// model holds the objects stored, by resource, namespace and name.
	model      map[schema.GroupVersionResource]map[string]map[string]runtime.Object
	namespaces []string
	quotas     map[string]*corev1.ResourceQuota // by namespace/name, as created
	quotaKeys  []string                         // sorted
	// expected charges the model's objects; admission charges creations.
	expected  *generic.Registry
	admission *generic.Registry
	// evalAt, when not zero, is the time the expected registry's pod
	// evaluator reads, to compute usage just before and after a moment.
	evalAt      time.Time
	terminating []terminating
	seq         int
	track       *tracker

	mu sync.Mutex
	// guarded by mu
	stats stats
}

// terminating is a pod deleted with a grace period: its charge of compute
// resources ends at end, and its kubelet confirms the deletion at confirm.
type terminating struct {
	namespace, name string
	end, confirm    time.Time
	ended           bool
}

// stats counts what the churn did.
type stats struct {
	events, creates, denied, deletes, succeeded, graceful, confirmed, graceEnds int
	churnStart, churnEnd                                                        time.Time
}

func newWorld(ctx context.Context, cfg config) (*world, error) {
	w := &world{
		cfg:   cfg,
		api:   cachetest.New(cachetest.Options{}),
		rng:   rand.New(rand.NewPCG(cfg.Seed, 15)),
		model: map[schema.GroupVersionResource]map[string]map[string]runtime.Object{},
		track: newTracker(),
	}
	var err error
	opts := evaluator.Options{Pod: evaluator.PodOptions{Now: w.now}}
	if w.expected, err = evaluator.NewRegistry(w.modelLister, opts); err != nil {
		return nil, err
	}
	if w.admission, err = evaluator.NewRegistry(nil, evaluator.Options{}); err != nil {
		return nil, err
	}
	w.quotas = map[string]*corev1.ResourceQuota{}
	for i := range cfg.Namespaces {
		ns := fmt.Sprintf("team-%03d", i)
		w.namespaces = append(w.namespaces, ns)
		for _, q := range namespaceQuotas(ns) {
			if _, err := w.api.Create(ctx, quotasGVR, q); err != nil {
				return nil, err
			}
			key := ns + "/" + q.Name
			w.quotas[key] = q
			w.quotaKeys = append(w.quotaKeys, key)
			w.track.hard[key] = quota.ResourceNames(q.Spec.Hard)
		}
		// The starting objects are stored directly: the controller's
		// first sync charges them.
		for range cfg.Pods {
			if err := w.store(ctx, podsGVR, w.newPod(ns)); err != nil {
				return nil, err
			}
		}
		for j := range 3 {
			if err := w.store(ctx, servicesGVR, w.newService(ns, j == 0)); err != nil {
				return nil, err
			}
		}
		for range 5 {
			if err := w.store(ctx, configmapsGVR, w.newConfigMap(ns)); err != nil {
				return nil, err
			}
		}
	}
	slices.Sort(w.quotaKeys)
	return w, nil
}

func (w *world) close() { w.api.Close() }

// now is the clock of the expected registry's pod evaluator.
func (w *world) now() time.Time {
	if !w.evalAt.IsZero() {
		return w.evalAt
	}
	return time.Now()
}

// namespaceQuotas are the four quotas of every namespace.
func namespaceQuotas(ns string) []*corev1.ResourceQuota {
	q := func(name string, hard ...string) *corev1.ResourceQuota {
		rq := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{}}}
		for i := 0; i < len(hard); i += 2 {
			rq.Spec.Hard[corev1.ResourceName(hard[i])] = resource.MustParse(hard[i+1])
		}
		return rq
	}
	compute := q("compute", "pods", "300", "requests.cpu", "60", "requests.memory", "120Gi", "limits.cpu", "120", "limits.memory", "120Gi")
	objects := q("objects", "services", "30", "services.loadbalancers", "4", "count/configmaps", "25")
	bestEffort := q("besteffort", "pods", "8")
	bestEffort.Spec.Scopes = []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort}
	high := q("high-priority", "pods", "6", "requests.cpu", "2")
	high.Spec.ScopeSelector = &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{{
		ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpIn, Values: []string{"high"},
	}}}
	return []*corev1.ResourceQuota{compute, objects, bestEffort, high}
}

// modelLister lists the model's objects of gvr in a namespace.
func (w *world) modelLister(gvr schema.GroupVersionResource) (generic.ListFuncByNamespace, error) {
	return func(ns string) ([]runtime.Object, error) {
		var out []runtime.Object
		for _, obj := range w.model[gvr][ns] {
			out = append(out, obj)
		}
		return out, nil
	}, nil
}

// store creates obj in the API and the model, uncharged.
func (w *world) store(ctx context.Context, gvr schema.GroupVersionResource, obj runtime.Object) error {
	if _, err := w.api.Create(ctx, gvr, obj); err != nil {
		return err
	}
	w.put(gvr, obj)
	return nil
}

func (w *world) put(gvr schema.GroupVersionResource, obj runtime.Object) {
	m, _ := meta.Accessor(obj)
	if w.model[gvr] == nil {
		w.model[gvr] = map[string]map[string]runtime.Object{}
	}
	if w.model[gvr][m.GetNamespace()] == nil {
		w.model[gvr][m.GetNamespace()] = map[string]runtime.Object{}
	}
	w.model[gvr][m.GetNamespace()][m.GetName()] = obj
}

// count returns the number of objects of gvr in the model.
func (w *world) count(gvr schema.GroupVersionResource) int {
	n := 0
	for _, objs := range w.model[gvr] {
		n += len(objs)
	}
	return n
}

func (w *world) name(prefix string) string {
	w.seq++
	return fmt.Sprintf("%s-%d", prefix, w.seq)
}

// newPod returns a running pod of a random kind: with requests and limits
// (most), BestEffort, or of PriorityClass "high".
func (w *world) newPod(ns string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: w.name("pod"), Labels: map[string]string{"app": "web"}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	kind := w.rng.IntN(100)
	for i := range 1 + w.rng.IntN(2) {
		c := corev1.Container{Name: fmt.Sprintf("c%d", i), Image: "registry.example/app:1"}
		if kind >= 15 {
			cpu := resource.MustParse([]string{"100m", "250m", "500m"}[w.rng.IntN(3)])
			mem := resource.MustParse([]string{"128Mi", "256Mi", "512Mi"}[w.rng.IntN(3)])
			limit := cpu.DeepCopy()
			limit.Add(cpu)
			c.Resources = corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: limit, corev1.ResourceMemory: mem},
			}
		}
		p.Spec.Containers = append(p.Spec.Containers, c)
	}
	if kind >= 85 {
		p.Spec.PriorityClassName = "high"
	}
	return p
}

func (w *world) newService(ns string, lb bool) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: w.name("svc")}}
	s.Spec.Type = corev1.ServiceTypeClusterIP
	if lb {
		s.Spec.Type = corev1.ServiceTypeLoadBalancer
	}
	s.Spec.Ports = []corev1.ServicePort{{Port: 80}}
	return s
}

func (w *world) newConfigMap(ns string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: w.name("cm")}, Data: map[string]string{"k": "v"}}
}

// usageOf returns what the quota key should show for the model at the
// evaluator's clock.
func (w *world) usageOf(key string) (corev1.ResourceList, error) {
	q := w.quotas[key]
	u, err := quota.CalculateUsage(q.Namespace, q.Spec.Scopes, q.Spec.Hard, w.expected, q.Spec.ScopeSelector)
	return quota.Mask(u, quota.ResourceNames(q.Spec.Hard)), err
}

// namespaceUsage returns usageOf for every quota of ns.
func (w *world) namespaceUsage(ns string) (map[string]corev1.ResourceList, error) {
	out := map[string]corev1.ResourceList{}
	for key, q := range w.quotas {
		if q.Namespace != ns {
			continue
		}
		u, err := w.usageOf(key)
		if err != nil {
			return nil, err
		}
		out[key] = u
	}
	return out, nil
}

// change applies an event of a kind the controller must react to: local changes
// the model, write makes the same change in the API. Every quota of ns
// whose expected usage the event changes is told to the tracker before
// the write, so that no status write can come before its expectation.
func (w *world) change(kind, ns string, local func(), write func() error) error {
	// Both sides at one instant, so that a grace period ending in between
	// is not taken for this event's doing (due reports it).
	at := time.Now()
	w.evalAt = at
	defer func() { w.evalAt = time.Time{} }()
	before, err := w.namespaceUsage(ns)
	if err != nil {
		return err
	}
	local()
	after, err := w.namespaceUsage(ns)
	if err != nil {
		return err
	}
	for key, u := range after {
		if !sameUsage(before[key], u, w.track.hard[key]) {
			w.track.expect(kind, key, at, u)
		}
	}
	return write()
}

// admit charges a creation to the quotas of its namespace as quota
// admission does: quota.CheckRequest over the quotas as stored, then a
// status write of each quota it charges, with the quota's resourceVersion
// as precondition; a conflict is retried for the quotas not charged yet.
// It returns false when a quota denies the object.
func (w *world) admit(ctx context.Context, gvr schema.GroupVersionResource, obj runtime.Object) (bool, error) {
	e := w.admission.Get(gvr.GroupResource())
	if e == nil {
		return true, nil
	}
	m, _ := meta.Accessor(obj)
	attrs := &quota.AttributesRecord{Operation: admissionv1.Create, Object: obj, Resource: gvr, Namespace: m.GetNamespace(), Name: m.GetName()}
	charged := map[string]bool{}
	for range 100 {
		list, err := w.api.List(ctx, quotasGVR, m.GetNamespace(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		var qs []corev1.ResourceQuota
		for _, q := range list.(*corev1.ResourceQuotaList).Items {
			if !charged[q.Name] {
				qs = append(qs, q)
			}
		}
		updated, err := quota.CheckRequest(qs, attrs, e, nil)
		if apierrors.IsForbidden(err) {
			// Denied, unless a retry after a conflict is denied for the
			// quotas left: the ones charged already admitted it.
			return len(charged) > 0, nil
		}
		if err != nil {
			return false, fmt.Errorf("quotademo: admission of %s %s/%s: %w", gvr.Resource, m.GetNamespace(), m.GetName(), err)
		}
		conflict := false
		for i := range updated {
			q := &updated[i]
			j := slices.IndexFunc(qs, func(o corev1.ResourceQuota) bool { return o.Name == q.Name })
			if j >= 0 && quota.Equals(q.Status.Used, qs[j].Status.Used) {
				continue
			}
			if _, err := w.api.UpdateStatus(ctx, quotasGVR, q); apierrors.IsConflict(err) {
				conflict = true
				break
			} else if err != nil {
				return false, err
			}
			charged[q.Name] = true
		}
		if !conflict {
			return true, nil
		}
	}
	return false, fmt.Errorf("quotademo: admission of %s %s/%s: too many conflicts", gvr.Resource, m.GetNamespace(), m.GetName())
}

// create admits obj and, when admitted, stores it.
func (w *world) create(ctx context.Context, gvr schema.GroupVersionResource, obj runtime.Object) error {
	ok, err := w.admit(ctx, gvr, obj)
	if err != nil {
		return err
	}
	w.bump(func(s *stats) {
		s.creates++
		if !ok {
			s.denied++
		}
	})
	if !ok {
		return nil
	}
	// Admission has charged the object; the controller's next write of a
	// quota of the namespace shows it too, and so resolves the changes
	// expected before it (a grace period that ran out a moment earlier).
	m, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	return w.change("", m.GetNamespace(), func() { w.put(gvr, obj) }, func() error {
		_, err := w.api.Create(ctx, gvr, obj)
		return err
	})
}

// remove deletes namespace/name of gvr.
func (w *world) remove(ctx context.Context, gvr schema.GroupVersionResource, ns, name string) error {
	return w.change(gvr.Resource+" deleted", ns, func() { delete(w.model[gvr][ns], name) }, func() error {
		return w.api.Delete(ctx, gvr, ns, name, metav1.DeleteOptions{})
	})
}

func (w *world) bump(f func(*stats)) {
	w.mu.Lock()
	f(&w.stats)
	w.mu.Unlock()
}

func (w *world) snapshot() stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

// startController runs quotakit's controller over the API, recording its
// status writes, and returns a function that stops it and waits (once).
func (w *world) startController(ctx context.Context) (func(), error) {
	client := &recordingClient{Server: w.api, observe: w.track.observe}
	c, err := quotakit.NewController(client, quotakit.Options{ResyncPeriod: w.cfg.Resync, ChargeWindow: w.cfg.ChargeWindow})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	return sync.OnceFunc(func() {
		cancel()
		<-done
	}), nil
}

// recordingClient is the API as the controller sees it, telling the
// tracker of every quota status the controller writes.
type recordingClient struct {
	*cachetest.Server
	observe func(key string, at time.Time, used corev1.ResourceList)
}

// UpdateStatus writes through to the API and reports a written quota.
func (c *recordingClient) UpdateStatus(ctx context.Context, gvr schema.GroupVersionResource, obj runtime.Object) (runtime.Object, error) {
	out, err := c.Server.UpdateStatus(ctx, gvr, obj)
	if rq, ok := out.(*corev1.ResourceQuota); ok && err == nil && gvr == quotasGVR {
		c.observe(rq.Namespace+"/"+rq.Name, time.Now(), rq.Status.Used)
	}
	return out, err
}
