package bench

import (
	"context"
	"fmt"
	goruntime "runtime"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	upgeneric "k8s.io/apiserver/pkg/quota/v1/generic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/metadata/metadatainformer"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/controller-manager/pkg/informerfactory"
	"k8s.io/kubernetes/pkg/controller"
	"k8s.io/kubernetes/pkg/controller/resourcequota"
	quotainstall "k8s.io/kubernetes/pkg/quota/v1/install"

	"github.com/quotakit/quotakit"
	qcache "github.com/quotakit/quotakit/cache"
	"github.com/quotakit/quotakit/evaluator"
	"github.com/quotakit/quotakit/generic"
	"github.com/quotakit/quotakit/quota"
)

// Side-by-side benchmarks of kube-controller-manager 1.37.1's resource
// quota controller and quotakit's Controller. Each controller runs over its
// own client-go fake clientset holding the same objects, wired as
// kube-controller-manager wires it; time runs from building the controller
// until the last quota's status, as written to the clientset, holds the
// expected usage.

// ctrlWorkers is --concurrent-resource-quota-syncs' default, used by both.
const ctrlWorkers = 5

// benchPopulation is the cluster of the benchmarks: 10,000 pods and 100
// quotas.
var benchPopulation = population{namespaces: 50, pods: 200}

// population describes a cluster: namespaces, each with pods pods, two
// configmaps, a service and two quotas.
type population struct {
	namespaces, pods int
	// scoped makes the second quota of each namespace charge only pods of
	// PriorityClass "high", through a scope selector.
	scoped bool
}

// cluster is a population's objects, by resource and namespace, kept up to
// date with the deletions a benchmark makes.
type cluster struct {
	objects map[string]map[string][]runtime.Object
	quotas  []*corev1.ResourceQuota
}

func (p population) build() *cluster {
	c := &cluster{objects: map[string]map[string][]runtime.Object{"pods": {}, "configmaps": {}, "services": {}, "namespaces": {}}}
	for n := range p.namespaces {
		ns := fmt.Sprintf("ns-%02d", n)
		c.objects["namespaces"][""] = append(c.objects["namespaces"][""], &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		for i := range p.pods {
			// Nine running pods for one still pending; priority classes
			// rotate through "", high and low.
			pod := runningPod(n*p.pods + i)
			if i%10 == 9 {
				pod = specPod(n*p.pods + i)
			}
			pod.Namespace, pod.ResourceVersion = ns, ""
			c.objects["pods"][ns] = append(c.objects["pods"][ns], pod)
		}
		for i := range 2 {
			c.objects["configmaps"][ns] = append(c.objects["configmaps"][ns], &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("config-%d", i)},
				Data:       map[string]string{"app.yaml": "replicas: 3\n"},
			})
		}
		c.objects["services"][ns] = []runtime.Object{&corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"},
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: []corev1.ServicePort{{Port: 80}}},
		}}
		c.quotas = append(c.quotas, &corev1.ResourceQuota{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "compute"},
			Spec: corev1.ResourceQuotaSpec{Hard: rl("pods", "1k", "requests.cpu", "1k", "requests.memory", "1Ti",
				"limits.cpu", "2k", "limits.memory", "2Ti", "count/configmaps", "100", "services", "50")},
		})
		second := &corev1.ResourceQuota{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "objects"},
			Spec: corev1.ResourceQuotaSpec{Hard: rl("pods", "500", "requests.cpu", "500", "requests.memory", "500Gi",
				"limits.cpu", "1k", "limits.memory", "1Ti", "count/configmaps", "20", "services", "10")},
		}
		if p.scoped {
			// A PriorityClass scope admits pod resources only.
			second.Name = "high-priority"
			second.Spec.Hard = rl("pods", "100", "requests.cpu", "100", "requests.memory", "100Gi", "limits.cpu", "200", "limits.memory", "200Gi")
			second.Spec.ScopeSelector = &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
				{ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpIn, Values: []string{"high"}},
			}}
		}
		c.quotas = append(c.quotas, second)
	}
	return c
}

// all returns every object, for a new fake clientset.
func (c *cluster) all() []runtime.Object {
	var out []runtime.Object
	for _, byNS := range c.objects {
		for _, objs := range byNS {
			out = append(out, objs...)
		}
	}
	for _, rq := range c.quotas {
		out = append(out, rq)
	}
	return out
}

// clientset returns a fake clientset holding the cluster's objects, and
// the log of the quota statuses written to it. It is the plain object
// tracker: NewClientset's field-managed one builds a REST mapper on every
// write, about 1.5 ms of CPU per status write, which would be most of
// what the benchmarks measure.
func (c *cluster) clientset() (*fake.Clientset, *statusLog) {
	cs := fake.NewSimpleClientset(c.all()...) //nolint:staticcheck // see above

	return cs, newStatusLog(cs)
}

// expected returns the usage each quota should show, computed with
// quotakit's evaluators over the cluster's objects; TestControllersAgree
// checks that upstream computes the same.
func (c *cluster) expected(tb testing.TB) map[string]corev1.ResourceList {
	tb.Helper()
	registry, err := evaluator.NewRegistry(func(gvr schema.GroupVersionResource) (generic.ListFuncByNamespace, error) {
		return func(ns string) ([]runtime.Object, error) { return c.objects[gvr.Resource][ns], nil }, nil
	}, evaluator.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]corev1.ResourceList{}
	for _, rq := range c.quotas {
		used, err := quota.CalculateUsage(rq.Namespace, rq.Spec.Scopes, rq.Spec.Hard, registry, rq.Spec.ScopeSelector)
		if err != nil {
			tb.Fatal(err)
		}
		out[rq.Namespace+"/"+rq.Name] = used
	}
	return out
}

// statusLog records the status writes a fake clientset receives, through
// a reactor that runs before the write is stored, under the clientset's
// lock: a caller that reads the clientset after wait returns sees the write.
type statusLog struct {
	changed chan struct{}

	mu sync.Mutex
	// guarded by mu
	last    map[string]corev1.ResourceQuotaStatus
	writes  int
	want    func(key string, st corev1.ResourceQuotaStatus) bool
	ok      map[string]bool
	pending int
}

func newStatusLog(cs *fake.Clientset) *statusLog {
	l := &statusLog{changed: make(chan struct{}, 1), last: map[string]corev1.ResourceQuotaStatus{}}
	cs.PrependReactor("update", "resourcequotas", func(a clienttesting.Action) (bool, runtime.Object, error) {
		u, ok := a.(clienttesting.UpdateAction)
		if !ok || u.GetSubresource() != "status" {
			return false, nil, nil
		}
		if rq, ok := u.GetObject().(*corev1.ResourceQuota); ok {
			l.record(rq.Namespace+"/"+rq.Name, *rq.Status.DeepCopy())
		}
		return false, nil, nil
	})
	return l
}

func (l *statusLog) record(key string, st corev1.ResourceQuotaStatus) {
	l.mu.Lock()
	l.last[key] = st
	l.writes++
	if l.want != nil {
		l.check(key)
	}
	l.mu.Unlock()
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

// count returns the number of status writes so far.
func (l *statusLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.writes
}

// check updates whether the last status of key is wanted. l.mu is held.
func (l *statusLog) check(key string) {
	was, tracked := l.ok[key]
	if !tracked {
		return
	}
	st, written := l.last[key]
	now := written && l.want(key, st)
	l.ok[key] = now
	switch {
	case was && !now:
		l.pending++
	case !was && now:
		l.pending--
	}
}

// expect makes wait return once the last status written for each of keys
// satisfies want.
func (l *statusLog) expect(keys []string, want func(key string, st corev1.ResourceQuotaStatus) bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.want, l.ok, l.pending = want, map[string]bool{}, len(keys)
	for _, k := range keys {
		l.ok[k] = false
		l.check(k)
	}
}

// wait returns the number of status writes once every expected quota has a
// wanted status, or fails tb after timeout.
func (l *statusLog) wait(tb testing.TB, timeout time.Duration) int {
	tb.Helper()
	n, ok := l.waitFor(timeout)
	if !ok {
		l.mu.Lock()
		defer l.mu.Unlock()
		for k, ok := range l.ok {
			if !ok {
				tb.Fatalf("after %v and %d status writes, %d quotas lack the expected status; %s has %v", timeout, l.writes, l.pending, k, l.last[k])
			}
		}
	}
	return n
}

// waitFor is wait that reports a timeout instead of failing.
func (l *statusLog) waitFor(timeout time.Duration) (int, bool) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		pending, writes := l.pending, l.writes
		l.mu.Unlock()
		if pending == 0 {
			return writes, true
		}
		select {
		case <-l.changed:
		case <-deadline.C:
			return writes, false
		}
	}
}

// keys returns the keys of the cluster's quotas in namespaces (all when
// namespaces is nil).
func (c *cluster) keys(namespaces map[string]bool) []string {
	var out []string
	for _, rq := range c.quotas {
		if namespaces == nil || namespaces[rq.Namespace] {
			out = append(out, rq.Namespace+"/"+rq.Name)
		}
	}
	return out
}

// matches returns a want function for statusLog.expect: status.hard is
// spec.hard and status.used is the expected usage.
func (c *cluster) matches(expected map[string]corev1.ResourceList) func(string, corev1.ResourceQuotaStatus) bool {
	hard := map[string]corev1.ResourceList{}
	for _, rq := range c.quotas {
		hard[rq.Namespace+"/"+rq.Name] = rq.Spec.Hard
	}
	return func(key string, st corev1.ResourceQuotaStatus) bool {
		return quota.Equals(st.Hard, hard[key]) && quota.Equals(st.Used, expected[key])
	}
}

// impl starts a controller over cs; wait returns once ctx is done and every
// goroutine the controller started has exited.
type impl struct {
	name  string
	start func(ctx context.Context, tb testing.TB, cs *fake.Clientset) (wait func())
}

var impls = []impl{{"upstream", startUpstream}, {"quotakit", startQuotakit(quotakit.Options{})}}

// startUpstream runs kube-controller-manager's controller as
// newResourceQuotaController wires it, with --resource-quota-sync-period
// and the shared informers' resync at their defaults.
func startUpstream(ctx context.Context, tb testing.TB, cs *fake.Clientset) func() {
	ctx = logr.NewContext(ctx, logr.Discard())
	const resync = 12 * time.Hour
	trim := informers.WithTransform(func(obj any) (any, error) {
		if m, err := meta.Accessor(obj); err == nil {
			m.SetManagedFields(nil)
		}
		return obj, nil
	})
	typed := informers.NewSharedInformerFactoryWithOptions(cs, resync, trim)
	metadata := metadatainformer.NewSharedInformerFactory(metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme()), resync)
	factory := informerfactory.NewInformerFactory(typed, metadata)
	config, err := quotainstall.NewQuotaConfigurationForControllers(upgeneric.ListerFuncForResourceFunc(typed.ForResource), typed)
	if err != nil {
		tb.Fatal(err)
	}
	started := make(chan struct{})
	rq, err := resourcequota.NewController(ctx, &resourcequota.ControllerOptions{
		QuotaClient:               cs.CoreV1(),
		ResourceQuotaInformer:     typed.Core().V1().ResourceQuotas(),
		ResyncPeriod:              controller.StaticResyncPeriodFunc(5 * time.Minute),
		InformerFactory:           factory,
		ReplenishmentResyncPeriod: controller.StaticResyncPeriodFunc(resync),
		DiscoveryFunc:             coreDiscovery,
		IgnoredResourcesFunc:      config.IgnoredResources,
		InformersStarted:          started,
		Registry:                  upgeneric.NewRegistry(config.Evaluators()),
		UpdateFilter:              quotainstall.DefaultUpdateFilter(),
	})
	if err != nil {
		tb.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { rq.Run(ctx, ctrlWorkers) })
	wg.Go(func() { rq.Sync(ctx, coreDiscovery, 30*time.Second) })
	factory.Start(ctx.Done())
	close(started)
	return func() {
		wg.Wait()
		typed.Shutdown()
		metadata.Shutdown()
	}
}

// coreDiscovery is the discovery of an API server that serves the core/v1
// resources quota counts.
func coreDiscovery() ([]*metav1.APIResourceList, error) {
	verbs := metav1.Verbs{"create", "list", "watch", "delete"}
	list := &metav1.APIResourceList{GroupVersion: "v1"}
	for _, r := range []struct{ name, kind string }{
		{"pods", "Pod"}, {"services", "Service"}, {"configmaps", "ConfigMap"}, {"secrets", "Secret"},
		{"persistentvolumeclaims", "PersistentVolumeClaim"}, {"replicationcontrollers", "ReplicationController"},
		{"resourcequotas", "ResourceQuota"},
	} {
		list.APIResources = append(list.APIResources, metav1.APIResource{Name: r.name, Kind: r.kind, Namespaced: true, Verbs: verbs})
	}
	return []*metav1.APIResourceList{list}, nil
}

// startQuotakit runs quotakit's controller with opts; Workers is always
// ctrlWorkers.
func startQuotakit(opts quotakit.Options) func(ctx context.Context, tb testing.TB, cs *fake.Clientset) func() {
	opts.Workers = ctrlWorkers
	return func(ctx context.Context, tb testing.TB, cs *fake.Clientset) func() {
		ctrl, err := quotakit.NewController(kubeClient{cs}, opts)
		if err != nil {
			tb.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- ctrl.Run(ctx) }()
		return func() {
			if err := <-done; err != nil {
				tb.Errorf("Run = %v, want nil", err)
			}
		}
	}
}

// kubeClient is a quotakit.Client over a typed clientset, for the core/v1
// resources only; examples/kube/kubeadapter is the complete one.
type kubeClient struct{ cs kubernetes.Interface }

func (k kubeClient) ListerWatcher(gvr schema.GroupVersionResource, ns string) qcache.ListerWatcher {
	if gvr.Group == "resource.k8s.io" && gvr.Version == "v1" {
		switch gvr.Resource {
		case "resourceclaims":
			return listWatch(k.cs.ResourceV1().ResourceClaims(ns))
		case "deviceclasses":
			return listWatch(k.cs.ResourceV1().DeviceClasses())
		}
	}
	if gvr.Group != "" || gvr.Version != "v1" {
		return nil
	}
	core := k.cs.CoreV1()
	switch gvr.Resource {
	case "pods":
		return listWatch(core.Pods(ns))
	case "services":
		return listWatch(core.Services(ns))
	case "persistentvolumeclaims":
		return listWatch(core.PersistentVolumeClaims(ns))
	case "configmaps":
		return listWatch(core.ConfigMaps(ns))
	case "secrets":
		return listWatch(core.Secrets(ns))
	case "replicationcontrollers":
		return listWatch(core.ReplicationControllers(ns))
	case "resourcequotas":
		return listWatch(core.ResourceQuotas(ns))
	}
	return nil
}

func (k kubeClient) UpdateStatus(ctx context.Context, _ schema.GroupVersionResource, obj runtime.Object) (runtime.Object, error) {
	rq, ok := obj.(*corev1.ResourceQuota)
	if !ok {
		return nil, fmt.Errorf("UpdateStatus of %T, want *v1.ResourceQuota", obj)
	}
	out, err := k.cs.CoreV1().ResourceQuotas(rq.Namespace).UpdateStatus(ctx, rq, metav1.UpdateOptions{})
	if err != nil {
		return nil, err // not a typed nil
	}
	return out, nil
}

// listWatch adapts a typed client of one resource whose List returns L.
func listWatch[L runtime.Object](c interface {
	List(context.Context, metav1.ListOptions) (L, error)
	Watch(context.Context, metav1.ListOptions) (watch.Interface, error)
}) qcache.ListerWatcher {
	return &qcache.ListWatch{
		ListFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			list, err := c.List(ctx, opts)
			if err != nil {
				return nil, err
			}
			return list, nil
		},
		WatchFunc: c.Watch,
	}
}

// BenchmarkControllerInitialSync times a controller's start over a cluster
// whose quotas have no status yet: from building the controller to the
// last quota's status holding the expected usage. Setting up the fake
// clientset and shutting the controller down are not timed.
func BenchmarkControllerInitialSync(b *testing.B) {
	c := benchPopulation.build()
	expected := c.expected(b)
	keys := c.keys(nil)
	for _, im := range impls {
		b.Run("impl="+im.name, func(b *testing.B) {
			b.ReportAllocs()
			var writes, cpu float64
			for b.Loop() {
				b.StopTimer()
				cs, log := c.clientset()
				log.expect(keys, c.matches(expected))
				ctx, cancel := context.WithCancel(b.Context())
				goruntime.GC()
				cpu0 := processCPU(b)
				b.StartTimer()

				wait := im.start(ctx, b, cs)
				n := log.wait(b, 30*time.Second)

				b.StopTimer()
				cpu += float64(processCPU(b) - cpu0)
				writes += float64(n)
				cancel()
				wait()
				b.StartTimer()
			}
			b.ReportMetric(cpu/float64(b.N), "cpu-ns/op")
			b.ReportMetric(writes/float64(b.N)/float64(len(keys)), "writes/quota")
		})
	}
}

// replenishBatch is the number of pods a replenishment iteration deletes,
// two in each namespace.
const replenishBatch = 100

// BenchmarkControllerReplenishment times how soon a running controller
// releases the usage of deleted pods: each iteration deletes two pods in
// each of the 50 namespaces and waits until all 100 quotas show the
// usage without them. Deletions accumulate; once half of the pods are
// gone the cluster and the controller are rebuilt, untimed, so namespaces
// hold between 100 and 200 pods.
func BenchmarkControllerReplenishment(b *testing.B) {
	for _, im := range impls {
		b.Run("impl="+im.name, func(b *testing.B) {
			var (
				c      *cluster
				cs     *fake.Clientset
				log    *statusLog
				cancel context.CancelFunc = func() {}
				wait                      = func() {}
			)
			defer func() { cancel(); wait() }()
			// stuck counts the starts after which some quota never got its
			// pod usage (see TestControllersAgree); such a start is
			// retried, so that deletions are timed from a synced state.
			stuck := 0
			setup := func() {
				for {
					cancel()
					wait()
					c = benchPopulation.build()
					cs, log = c.clientset()
					log.expect(c.keys(nil), c.matches(c.expected(b)))
					var ctx context.Context
					ctx, cancel = context.WithCancel(b.Context())
					wait = im.start(ctx, b, cs)
					if _, ok := log.waitFor(10 * time.Second); ok {
						return
					}
					if stuck++; stuck == 10 {
						log.wait(b, 0)
					}
				}
			}
			b.ReportAllocs()
			var writes, cpu float64
			for b.Loop() {
				b.StopTimer()
				if c == nil || len(c.objects["pods"]["ns-00"]) < benchPopulation.pods/2+replenishBatch/benchPopulation.namespaces {
					setup()
				}
				var deleted []*corev1.Pod
				for ns, pods := range c.objects["pods"] {
					for _, p := range pods[:replenishBatch/benchPopulation.namespaces] {
						deleted = append(deleted, p.(*corev1.Pod))
					}
					c.objects["pods"][ns] = pods[replenishBatch/benchPopulation.namespaces:]
				}
				log.expect(c.keys(nil), c.matches(c.expected(b)))
				before := log.count()
				cpu0 := processCPU(b)
				b.StartTimer()

				for _, p := range deleted {
					if err := cs.CoreV1().Pods(p.Namespace).Delete(b.Context(), p.Name, metav1.DeleteOptions{}); err != nil {
						b.Fatal(err)
					}
				}
				n := log.wait(b, time.Minute)

				b.StopTimer()
				cpu += float64(processCPU(b) - cpu0)
				writes += float64(n - before)
				b.StartTimer()
			}
			b.ReportMetric(cpu/float64(b.N), "cpu-ns/op")
			b.ReportMetric(writes/float64(b.N)/float64(len(c.quotas)), "writes/quota")
			b.ReportMetric(float64(stuck), "stuck-starts")
		})
	}
}

// TestControllersAgree runs both controllers over the same small cluster,
// one quota of each namespace scoped to a PriorityClass, and compares the
// statuses they store. It also checks that quotakit's status is the usage
// the benchmarks wait for.
func TestControllersAgree(t *testing.T) {
	c := population{namespaces: 3, pods: 20, scoped: true}.build()
	keys := c.keys(nil)
	// Every hard resource has a used value: both controllers compute a
	// resource only once its informer has synced, and the cluster does not
	// change, so the first complete status is the final one.
	complete := func(_ string, st corev1.ResourceQuotaStatus) bool {
		for name := range st.Hard {
			if _, ok := st.Used[name]; !ok {
				return false
			}
		}
		return len(st.Hard) > 0
	}
	agreeImpls := impls
	got := map[string]map[string]corev1.ResourceQuotaStatus{}
	for _, im := range agreeImpls {
		cs, log := c.clientset()
		log.expect(keys, complete)
		ctx, cancel := context.WithCancel(t.Context())
		wait := im.start(ctx, t, cs)
		log.wait(t, 30*time.Second)
		list, err := cs.CoreV1().ResourceQuotas("").List(t.Context(), metav1.ListOptions{})
		cancel()
		wait()
		if err != nil {
			t.Fatal(err)
		}
		got[im.name] = map[string]corev1.ResourceQuotaStatus{}
		for _, rq := range list.Items {
			got[im.name][rq.Namespace+"/"+rq.Name] = rq.Status
		}
	}

	if diff := cmp.Diff(got["upstream"], got["quotakit"], sumCmp); diff != "" {
		t.Errorf("statuses (-upstream +quotakit):\n%s", diff)
	}
	want := map[string]corev1.ResourceQuotaStatus{}
	for key, used := range c.expected(t) {
		want[key] = corev1.ResourceQuotaStatus{Used: used, Hard: got["quotakit"][key].Hard}
	}
	if diff := cmp.Diff(want, got["quotakit"], sumCmp); diff != "" {
		t.Errorf("quotakit statuses against CalculateUsage (-want +got):\n%s", diff)
	}
	// Pods are counted by hand too.
	for _, rq := range c.quotas {
		want := 0
		for _, p := range c.objects["pods"][rq.Namespace] {
			if rq.Spec.ScopeSelector == nil || p.(*corev1.Pod).Spec.PriorityClassName == "high" {
				want++
			}
		}
		key := rq.Namespace + "/" + rq.Name
		if q := got["upstream"][key].Used[corev1.ResourcePods]; q.Value() != int64(want) {
			t.Errorf("%s: used pods = %s, want %d", key, q.String(), want)
		}
	}
}
