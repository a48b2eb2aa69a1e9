package quotakit_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/quotakit/quotakit"
	"github.com/quotakit/quotakit/cache"
	"github.com/quotakit/quotakit/cache/cachetest"
	"github.com/quotakit/quotakit/generic"
	"github.com/quotakit/quotakit/internal/qcmp"
	"github.com/quotakit/quotakit/quota"
	"github.com/quotakit/quotakit/workqueue"
)

var (
	podsGVR     = corev1.SchemeGroupVersion.WithResource("pods")
	servicesGVR = corev1.SchemeGroupVersion.WithResource("services")
	quotasGVR   = corev1.SchemeGroupVersion.WithResource("resourcequotas")
	configsGVR  = corev1.SchemeGroupVersion.WithResource("configmaps")
	widgetsGVR  = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
)

// testClient is a cachetest server whose lists of some resources fail,
// whose watches of some resources can be held, and whose status writes are
// counted and may fail.
type testClient struct {
	*cachetest.Server
	mu sync.Mutex
	// guarded by mu
	broken       map[schema.GroupVersionResource]bool
	held         map[schema.GroupVersionResource]chan struct{}
	statusWrites int
	statusErrs   []error
}

// hold stops the events of gvr's watches from reaching the controller
// until release: its informer lags behind the API.
func (c *testClient) hold(gvr schema.GroupVersionResource) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held[gvr] == nil {
		c.held[gvr] = make(chan struct{})
	}
}

func (c *testClient) release(gvr schema.GroupVersionResource) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ch := c.held[gvr]; ch != nil {
		close(ch)
		delete(c.held, gvr)
	}
}

// heldWatch forwards the events of inner while its resource is not held.
type heldWatch struct {
	inner    watch.Interface
	out      chan watch.Event
	stop     chan struct{}
	stopOnce sync.Once
}

func (w *heldWatch) ResultChan() <-chan watch.Event { return w.out }

func (w *heldWatch) Stop() {
	w.stopOnce.Do(func() { close(w.stop) })
	w.inner.Stop()
}

func (c *testClient) heldWatch(gvr schema.GroupVersionResource, inner watch.Interface) watch.Interface {
	w := &heldWatch{inner: inner, out: make(chan watch.Event), stop: make(chan struct{})}
	go func() {
		defer close(w.out)
		for ev := range inner.ResultChan() {
			c.mu.Lock()
			gate := c.held[gvr]
			c.mu.Unlock()
			if gate != nil {
				select {
				case <-gate:
				case <-w.stop:
					return
				}
			}
			select {
			case w.out <- ev:
			case <-w.stop:
				return
			}
		}
	}()
	return w
}

func newTestClient() *testClient {
	return &testClient{
		Server: cachetest.New(cachetest.Options{}),
		broken: map[schema.GroupVersionResource]bool{},
		held:   map[schema.GroupVersionResource]chan struct{}{},
	}
}

func (c *testClient) setBroken(gvr schema.GroupVersionResource, broken bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.broken[gvr] = broken
}

func (c *testClient) writes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.statusWrites
}

func (c *testClient) ListerWatcher(gvr schema.GroupVersionResource, namespace string) cache.ListerWatcher {
	lw := c.Server.ListerWatcher(gvr, namespace)
	return &cache.ListWatch{
		ListFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			c.mu.Lock()
			broken := c.broken[gvr]
			c.mu.Unlock()
			if broken {
				return nil, errors.New("conversion webhook unavailable")
			}
			return lw.List(ctx, opts)
		},
		WatchFunc: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			w, err := lw.Watch(ctx, opts)
			if err != nil {
				return nil, err
			}
			return c.heldWatch(gvr, w), nil
		},
	}
}

func (c *testClient) UpdateStatus(ctx context.Context, gvr schema.GroupVersionResource, obj runtime.Object) (runtime.Object, error) {
	c.mu.Lock()
	c.statusWrites++
	if len(c.statusErrs) > 0 {
		err := c.statusErrs[0]
		c.statusErrs = c.statusErrs[1:]
		c.mu.Unlock()
		return nil, err
	}
	c.mu.Unlock()
	return c.Server.UpdateStatus(ctx, gvr, obj)
}

var _ quotakit.Client = (*testClient)(nil)
var _ quotakit.Client = (*cachetest.Server)(nil)

// The controller is a controller-runtime Runnable that needs leader
// election (manager.Runnable and manager.LeaderElectionRunnable).
var _ interface {
	Start(context.Context) error
	NeedLeaderElection() bool
} = (*quotakit.Controller)(nil)

func create(t *testing.T, c *testClient, gvr schema.GroupVersionResource, obj runtime.Object) runtime.Object {
	t.Helper()
	out, err := c.Create(context.Background(), gvr, obj)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func testPod(name, cpu string, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{Requests: rl("cpu", cpu)}}}},
		Status:     corev1.PodStatus{Phase: phase},
	}
}

func registerWidgets(t *testing.T, c *testClient) {
	t.Helper()
	if err := c.Register(cachetest.Resource{GVR: widgetsGVR, Namespaced: true, Kind: "Widget"}); err != nil {
		t.Fatal(err)
	}
}

func widget(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("example.com/v1")
	u.SetKind("Widget")
	u.SetNamespace("ns")
	u.SetName(name)
	return u
}

func testQuota(name string, hard corev1.ResourceList) *corev1.ResourceQuota {
	return &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: corev1.ResourceQuotaSpec{Hard: hard}}
}

// start builds a controller over client and runs it. The function it
// returns stops the controller and checks that Run returned nil.
func start(t *testing.T, client quotakit.Client, opts quotakit.Options) (*quotakit.Controller, func()) {
	t.Helper()
	c, err := quotakit.NewController(client, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c, run(t, c)
}

// run runs c and returns a function that stops it and checks that Run
// returned nil.
func run(t *testing.T, c *quotakit.Controller) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(logr.NewContext(t.Context(), testr.New(t)))
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	return func() {
		t.Helper()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v", err)
		}
	}
}

// settle lets a second of fake time pass, enough for the controller's
// cache-sync polls and the queues' first retries, then waits until every
// goroutine of the bubble is blocked.
func settle() {
	time.Sleep(time.Second)
	synctest.Wait()
}

func status(t *testing.T, c *testClient, name string) corev1.ResourceQuotaStatus {
	t.Helper()
	obj, err := c.Get(context.Background(), quotasGVR, "ns", name)
	if err != nil {
		t.Fatal(err)
	}
	return obj.(*corev1.ResourceQuota).Status
}

func checkUsed(t *testing.T, c *testClient, name string, want corev1.ResourceList) {
	t.Helper()
	if diff := cmp.Diff(want, status(t, c, name).Used, qcmp.Quantities()); diff != "" {
		t.Errorf("status.used of %s (-want +got):\n%s", name, diff)
	}
}

func TestControllerComputesStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := newTestClient()
		defer client.Close()
		create(t, client, podsGVR, testPod("a", "1", corev1.PodRunning))
		create(t, client, podsGVR, testPod("b", "500m", corev1.PodPending))
		create(t, client, podsGVR, testPod("done", "8", corev1.PodSucceeded))
		create(t, client, servicesGVR, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Port: 80}, {Port: 443}}},
		})
		create(t, client, configsGVR, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cfg"}})
		create(t, client, configsGVR, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "cfg"}})
		hard := rl("pods", "10", "count/pods", "10", "requests.cpu", "4", "limits.memory", "1Gi", "services.nodeports", "5", "count/configmaps", "3", "resourcequotas", "2")
		create(t, client, quotasGVR, testQuota("compute", hard))

		c, stop := start(t, client, quotakit.Options{})
		defer stop()
		settle()

		if !c.HasSynced() {
			t.Error("HasSynced() = false after every informer synced")
		}
		got := status(t, client, "compute")
		if diff := cmp.Diff(hard, got.Hard, qcmp.Quantities()); diff != "" {
			t.Errorf("status.hard (-spec.hard +status.hard):\n%s", diff)
		}
		checkUsed(t, client, "compute", rl("pods", "2", "count/pods", "3", "requests.cpu", "1500m", "limits.memory", "0",
			"services.nodeports", "2", "count/configmaps", "1", "resourcequotas", "1"))
	})
}

func TestControllerRecalculatesOnChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := newTestClient()
		defer client.Close()
		create(t, client, podsGVR, testPod("a", "1", corev1.PodRunning))
		b := create(t, client, podsGVR, testPod("b", "2", corev1.PodRunning)).(*corev1.Pod)
		create(t, client, podsGVR, testPod("c", "4", corev1.PodRunning))
		create(t, client, quotasGVR, testQuota("q", rl("pods", "10", "requests.cpu", "10")))
		_, stop := start(t, client, quotakit.Options{})
		defer stop()
		settle()
		checkUsed(t, client, "q", rl("pods", "3", "requests.cpu", "7"))

		// A deletion releases usage.
		if err := client.Delete(context.Background(), podsGVR, "ns", "c", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		settle()
		checkUsed(t, client, "q", rl("pods", "2", "requests.cpu", "3"))

		// So does a pod that became terminal.
		b.Status.Phase = corev1.PodSucceeded
		if _, err := client.UpdateStatus(context.Background(), podsGVR, b); err != nil {
			t.Fatal(err)
		}
		settle()
		checkUsed(t, client, "q", rl("pods", "1", "requests.cpu", "1"))

		// A creation is charged as soon as the cache sees it (Kubernetes
		// leaves it to admission's charge and its next recount).
		d := create(t, client, podsGVR, testPod("d", "500m", corev1.PodPending)).(*corev1.Pod)
		settle()
		checkUsed(t, client, "q", rl("pods", "2", "requests.cpu", "1500m"))

		// So is an update that changes what a pod charges although the
		// update filter does not see it: a spec-only resize.
		d.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("250m")
		if _, err := client.Update(context.Background(), podsGVR, d); err != nil {
			t.Fatal(err)
		}
		settle()
		checkUsed(t, client, "q", rl("pods", "2", "requests.cpu", "1250m"))
	})
}

func TestControllerWritesOnlyChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := newTestClient()
		defer client.Close()
		create(t, client, podsGVR, testPod("a", "1", corev1.PodRunning))
		create(t, client, quotasGVR, testQuota("q", rl("pods", "10")))
		create(t, client, quotasGVR, testQuota("no-limits", nil)) // nothing to write, ever
		_, stop := start(t, client, quotakit.Options{ResyncPeriod: time.Minute})
		defer stop()
		settle()
		if got := client.writes(); got != 1 {
			t.Fatalf("%d status writes for a new quota, want 1", got)
		}
		time.Sleep(3 * time.Minute) // three full resyncs
		settle()
		if got := client.writes(); got != 1 {
			t.Errorf("%d status writes after resyncs that changed nothing, want 1", got)
		}
	})
}

func TestControllerFollowsSpec(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := newTestClient()
		defer client.Close()
		high := testPod("high", "1", corev1.PodRunning)
		high.Spec.PriorityClassName = "high"
		create(t, client, podsGVR, high)
		create(t, client, podsGVR, testPod("plain", "2", corev1.PodRunning))
		create(t, client, quotasGVR, testQuota("q", rl("requests.cpu", "10")))
		_, stop := start(t, client, quotakit.Options{})
		defer stop()
		settle()
		checkUsed(t, client, "q", rl("requests.cpu", "3"))

		// A new hard limit is reflected in status.hard and computed.
		rq := getQuota(t, client, "q")
		rq.Spec.Hard = rl("requests.cpu", "10", "pods", "5")
		rq = update(t, client, rq)
		settle()
		checkUsed(t, client, "q", rl("requests.cpu", "3", "pods", "2"))
		if diff := cmp.Diff(rq.Spec.Hard, status(t, client, "q").Hard, qcmp.Quantities()); diff != "" {
			t.Errorf("status.hard (-spec.hard +status.hard):\n%s", diff)
		}

		// A scope selector change is computed at once (Kubernetes waits
		// for the next full resync).
		rq = getQuota(t, client, "q")
		rq.Spec.ScopeSelector = &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
			{ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpIn, Values: []string{"high"}},
		}}
		update(t, client, rq)
		settle()
		checkUsed(t, client, "q", rl("requests.cpu", "1", "pods", "1"))

		// A limit removed from spec.hard leaves status.used too.
		rq = getQuota(t, client, "q")
		rq.Spec.Hard = rl("pods", "5")
		update(t, client, rq)
		settle()
		checkUsed(t, client, "q", rl("pods", "1"))
	})
}

func getQuota(t *testing.T, c *testClient, name string) *corev1.ResourceQuota {
	t.Helper()
	obj, err := c.Get(context.Background(), quotasGVR, "ns", name)
	if err != nil {
		t.Fatal(err)
	}
	return obj.(*corev1.ResourceQuota)
}

func update(t *testing.T, c *testClient, rq *corev1.ResourceQuota) *corev1.ResourceQuota {
	t.Helper()
	obj, err := c.Update(context.Background(), quotasGVR, rq)
	if err != nil {
		t.Fatal(err)
	}
	return obj.(*corev1.ResourceQuota)
}

// TestControllerUnsyncedResourceDoesNotBlock checks that a resource whose
// informer cannot sync holds up only what it charges (kubernetes#133737:
// upstream's workers wait for every monitor).
func TestControllerUnsyncedResourceDoesNotBlock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := newTestClient()
		defer client.Close()
		client.setBroken(servicesGVR, true)
		create(t, client, podsGVR, testPod("a", "1", corev1.PodRunning))
		create(t, client, servicesGVR, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lb"},
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80}}},
		})
		create(t, client, quotasGVR, testQuota("pods-only", rl("pods", "10")))
		create(t, client, quotasGVR, testQuota("mixed", rl("pods", "10", "services.loadbalancers", "1")))
		c, stop := start(t, client, quotakit.Options{})
		defer stop()
		settle()
		if got := client.writes(); got != 0 {
			t.Errorf("%d status writes within the start grace, want none", got)
		}
		time.Sleep(5 * time.Second) // the default StartGrace
		settle()
		if c.HasSynced() {
			t.Error("HasSynced() = true while the services informer cannot list")
		}
		checkUsed(t, client, "pods-only", rl("pods", "1"))
		// The services quota is written with what is known; the unknown
		// resource has no used value, which admission treats as "status
		// unknown" rather than as zero.
		checkUsed(t, client, "mixed", rl("pods", "1"))

		client.setBroken(servicesGVR, false)
		time.Sleep(time.Minute) // the reflector's backoff
		settle()
		if !c.HasSynced() {
			t.Error("HasSynced() = false after the services informer synced")
		}
		checkUsed(t, client, "mixed", rl("pods", "1", "services.loadbalancers", "1"))
	})
}

func TestControllerRetriesFailedWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := newTestClient()
		defer client.Close()
		create(t, client, podsGVR, testPod("a", "1", corev1.PodRunning))
		create(t, client, quotasGVR, testQuota("q", rl("pods", "10")))
		conflict := apierrors.NewConflict(quotasGVR.GroupResource(), "q", errors.New("the object has been modified"))
		client.statusErrs = []error{conflict, conflict}
		_, stop := start(t, client, quotakit.Options{})
		defer stop()
		time.Sleep(time.Second) // past the rate limiter's first delays
		settle()
		checkUsed(t, client, "q", rl("pods", "1"))
		if got := client.writes(); got != 3 {
			t.Errorf("%d status writes, want 3 (two conflicts, one success)", got)
		}
	})
}

// failingEvaluator is a pod-count evaluator whose UsageStats can fail.
type failingEvaluator struct {
	quota.Evaluator
	fail *atomic.Bool
}

func (e failingEvaluator) UsageStats(opts quota.UsageStatsOptions) (quota.UsageStats, error) {
	if e.fail.Load() {
		return quota.UsageStats{}, errors.New("widget backend down")
	}
	return e.Evaluator.UsageStats(opts)
}

func TestControllerKeepsUsageOfFailedEvaluator(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := newTestClient()
		defer client.Close()
		registerWidgets(t, client)
		create(t, client, widgetsGVR, widget("w1"))
		create(t, client, podsGVR, testPod("a", "1", corev1.PodRunning))
		create(t, client, quotasGVR, testQuota("q", rl("pods", "10", "count/widgets.example.com", "5")))
		var fail atomic.Bool
		_, stop := start(t, client, quotakit.Options{Resources: []quotakit.Resource{{
			Resource: widgetsGVR,
			Evaluator: func(list generic.ListFuncByNamespace) quota.Evaluator {
				return failingEvaluator{Evaluator: generic.NewObjectCountEvaluator(widgetsGVR.GroupResource(), list, ""), fail: &fail}
			},
		}}})
		defer stop()
		settle()
		checkUsed(t, client, "q", rl("pods", "1", "count/widgets.example.com", "1"))

		fail.Store(true)
		create(t, client, widgetsGVR, widget("w2"))
		create(t, client, podsGVR, testPod("b", "1", corev1.PodRunning))
		time.Sleep(5 * time.Minute) // a full resync
		settle()
		checkUsed(t, client, "q", rl("pods", "2", "count/widgets.example.com", "1"))
	})
}

func TestControllerCountsCustomResources(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := newTestClient()
		defer client.Close()
		registerWidgets(t, client)
		create(t, client, widgetsGVR, widget("w1"))
		create(t, client, widgetsGVR, widget("w2"))
		create(t, client, quotasGVR, testQuota("q", rl("count/widgets.example.com", "5")))
		_, stop := start(t, client, quotakit.Options{Resources: []quotakit.Resource{{Resource: widgetsGVR}}})
		defer stop()
		settle()
		checkUsed(t, client, "q", rl("count/widgets.example.com", "2"))
		if err := client.Delete(context.Background(), widgetsGVR, "ns", "w1", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		settle()
		checkUsed(t, client, "q", rl("count/widgets.example.com", "1"))
	})
}

// queueAdds counts the items added to each queue, by queue name.
type queueAdds struct {
	mu   sync.Mutex
	adds map[string]int // guarded by mu
}

type addCounter struct {
	q    *queueAdds
	name string
}

func (c addCounter) Inc() {
	c.q.mu.Lock()
	defer c.q.mu.Unlock()
	c.q.adds[c.name]++
}

type nopGauge struct{}

func (nopGauge) Inc() {}
func (nopGauge) Dec() {}

type nopHistogram struct{}

func (nopHistogram) Observe(float64) {}

func (q *queueAdds) NewDepthMetric(string) workqueue.GaugeMetric { return nopGauge{} }
func (q *queueAdds) NewAddsMetric(name string) workqueue.CounterMetric {
	return addCounter{q: q, name: name}
}
func (q *queueAdds) NewLatencyMetric(string) workqueue.HistogramMetric { return nopHistogram{} }
func (q *queueAdds) NewWorkDurationMetric(string) workqueue.HistogramMetric {
	return nopHistogram{}
}
func (q *queueAdds) NewUnfinishedWorkSecondsMetric(string, func() float64)          {}
func (q *queueAdds) NewLongestRunningProcessorSecondsMetric(string, func() float64) {}
func (q *queueAdds) NewRetriesMetric(string) workqueue.CounterMetric {
	return addCounter{q: q, name: "retries"}
}

func (q *queueAdds) take() map[string]int {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.adds
	q.adds = map[string]int{}
	return out
}

func TestControllerQueues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := newTestClient()
		defer client.Close()
		create(t, client, podsGVR, testPod("a", "1", corev1.PodRunning))
		current := testQuota("current", rl("pods", "10"))
		current.Status = corev1.ResourceQuotaStatus{Hard: rl("pods", "10"), Used: rl("pods", "1")}
		obj := create(t, client, quotasGVR, current).(*corev1.ResourceQuota)
		obj.Status = current.Status
		if _, err := client.Server.UpdateStatus(context.Background(), quotasGVR, obj); err != nil {
			t.Fatal(err)
		}
		metrics := &queueAdds{adds: map[string]int{}}
		_, stop := start(t, client, quotakit.Options{MetricsProvider: metrics})
		defer stop()
		settle()
		// The up-to-date quota goes to the primary queue; the pods monitor
		// syncing sends the quotas that charge pods to the priority queue,
		// none when it syncs before the quota informer has listed the
		// quota (the informers start together). When a worker of each
		// queue takes the quota at once, one leaves it to the other, which
		// queues it once more on the priority queue.
		adds := metrics.take()
		if adds["resourcequota_primary"] != 1 || adds["resourcequota_priority"] > 2 {
			t.Errorf("queue adds at start = %v, want 1 primary and up to 2 priority", adds)
		}
		for name := range adds {
			if name != "resourcequota_primary" && name != "resourcequota_priority" {
				t.Errorf("queue adds at start = %v, want only the quota queues'", adds)
			}
		}

		// A new quota without status goes to the priority queue.
		create(t, client, quotasGVR, testQuota("new", rl("pods", "10")))
		settle()
		if diff := cmp.Diff(map[string]int{"resourcequota_priority": 1}, metrics.take()); diff != "" {
			t.Errorf("queue adds for a new quota (-want +got):\n%s", diff)
		}
		checkUsed(t, client, "new", rl("pods", "1"))

		// A pod deletion goes through the changes queue to the priority
		// queue, once per quota that charges pods. It is a change for
		// claims too, whose usage depends on their owning pods; no quota
		// here charges claims.
		if err := client.Delete(context.Background(), podsGVR, "ns", "a", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		settle()
		if diff := cmp.Diff(map[string]int{"resource_quota_controller_resource_changes": 2, "resourcequota_priority": 2}, metrics.take()); diff != "" {
			t.Errorf("queue adds for a deletion (-want +got):\n%s", diff)
		}
	})
}

func TestNewControllerErrors(t *testing.T) {
	if _, err := quotakit.NewController(nil, quotakit.Options{}); err == nil {
		t.Error("NewController(nil) returned no error")
	}
	srv := cachetest.New(cachetest.Options{})
	defer srv.Close()
	if _, err := quotakit.NewController(srv, quotakit.Options{Resources: []quotakit.Resource{{Resource: podsGVR}}}); err == nil {
		t.Error("NewController with pods given twice returned no error")
	}
	other := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gadgets"}
	if _, err := quotakit.NewController(srv, quotakit.Options{Resources: []quotakit.Resource{{
		Resource:  other,
		Evaluator: func(list generic.ListFuncByNamespace) quota.Evaluator { return nil },
	}}}); err == nil {
		t.Error("NewController with a nil evaluator returned no error")
	}
	if _, err := quotakit.NewController(srv, quotakit.Options{Workers: -3}); err == nil || !strings.Contains(err.Error(), "Options.Workers is -3") {
		t.Errorf("NewController with -3 workers = %v, want an error naming Options.Workers", err)
	}
	// Cluster quotas count every namespace: watching one would count
	// only its objects and release the others' charges.
	if _, err := quotakit.NewController(srv, quotakit.Options{ClusterQuotas: true, Namespace: "team-a"}); err == nil || !strings.Contains(err.Error(), "Options.Namespace") {
		t.Errorf("NewController with ClusterQuotas and a Namespace = %v, want an error naming Options.Namespace", err)
	}
}

func TestControllerRunsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := cachetest.New(cachetest.Options{})
		defer srv.Close()
		c, err := quotakit.NewController(srv, quotakit.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if !c.NeedLeaderElection() {
			t.Error("NeedLeaderElection() = false")
		}
		stop := run(t, c)
		settle()
		if err := c.Start(t.Context()); err == nil {
			t.Error("a second Run returned no error")
		}
		stop()
	})
}

func TestControllerDropsManagedFields(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := newTestClient()
		defer client.Close()
		registerWidgets(t, client)
		u := widget("w1")
		u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}})
		create(t, client, widgetsGVR, u)
		var list generic.ListFuncByNamespace
		_, stop := start(t, client, quotakit.Options{Resources: []quotakit.Resource{{
			Resource: widgetsGVR,
			Evaluator: func(l generic.ListFuncByNamespace) quota.Evaluator {
				list = l
				return generic.NewObjectCountEvaluator(widgetsGVR.GroupResource(), l, "")
			},
		}}})
		defer stop()
		settle()
		objs, err := list("ns")
		if err != nil || len(objs) != 1 {
			t.Fatalf("list(ns) = %d objects, %v; want 1", len(objs), err)
		}
		if mf := objs[0].(*unstructured.Unstructured).GetManagedFields(); len(mf) != 0 {
			t.Errorf("cached widget has managedFields %v, want none", mf)
		}
	})
}

func TestControllerOneNamespace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := newTestClient()
		defer client.Close()
		create(t, client, podsGVR, testPod("a", "1", corev1.PodRunning))
		other := testPod("a", "1", corev1.PodRunning)
		other.Namespace = "other"
		create(t, client, podsGVR, other)
		create(t, client, quotasGVR, testQuota("q", rl("pods", "10")))
		otherQuota := testQuota("q", rl("pods", "10"))
		otherQuota.Namespace = "other"
		create(t, client, quotasGVR, otherQuota)
		_, stop := start(t, client, quotakit.Options{Namespace: "ns"})
		defer stop()
		settle()
		checkUsed(t, client, "q", rl("pods", "1"))
		obj, err := client.Get(context.Background(), quotasGVR, "other", "q")
		if err != nil {
			t.Fatal(err)
		}
		if used := obj.(*corev1.ResourceQuota).Status.Used; used != nil {
			t.Errorf("a quota of another namespace got status.used %v", used)
		}
		for _, r := range client.Requests() {
			if r.Namespace != "ns" && r.GVR.Resource != "deviceclasses" { // cluster-scoped
				t.Errorf("%s of %s in namespace %q, want only ns", r.Verb, r.GVR.Resource, r.Namespace)
			}
		}
	})
}

func TestNewControllerRejectsUnnamedResource(t *testing.T) {
	srv := cachetest.New(cachetest.Options{})
	defer srv.Close()
	if _, err := quotakit.NewController(srv, quotakit.Options{Resources: []quotakit.Resource{{}}}); err == nil {
		t.Error("NewController with an unnamed resource returned no error")
	}
}

// TestControllerComparesWithItsOwnWrites checks that a status is compared
// with the controller's own last write when the informer has not delivered
// it yet. Comparing with the cached status, as Kubernetes does, skips a
// write the stored status needs: here the cache still says 2 pods, the
// stored status says 1, and the namespace has 2 again.
func TestControllerComparesWithItsOwnWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		client := newTestClient()
		defer client.Close()
		create(t, client, podsGVR, testPod("a", "1", corev1.PodRunning))
		create(t, client, podsGVR, testPod("b", "1", corev1.PodRunning))
		create(t, client, quotasGVR, testQuota("q", rl("pods", "10")))
		_, stop := start(t, client, quotakit.Options{ResyncPeriod: -1})
		defer stop()
		settle()
		checkUsed(t, client, "q", rl("pods", "2"))

		client.hold(quotasGVR)
		if err := client.Delete(ctx, podsGVR, "ns", "b", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		settle()
		checkUsed(t, client, "q", rl("pods", "1"))
		// Two creations (admission would have charged them) and a
		// deletion that triggers a recalculation: 2 pods again.
		create(t, client, podsGVR, testPod("c", "1", corev1.PodRunning))
		create(t, client, podsGVR, testPod("d", "1", corev1.PodRunning))
		if err := client.Delete(ctx, podsGVR, "ns", "d", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		settle()
		client.release(quotasGVR)
		settle()
		checkUsed(t, client, "q", rl("pods", "2"))
	})
}

// noWidgets is a client that serves no ListerWatcher for widgets.
type noWidgets struct{ *cachetest.Server }

func (c noWidgets) ListerWatcher(gvr schema.GroupVersionResource, namespace string) cache.ListerWatcher {
	if gvr == widgetsGVR {
		return nil
	}
	return c.Server.ListerWatcher(gvr, namespace)
}

func TestNewControllerNeedsListerWatchers(t *testing.T) {
	srv := cachetest.New(cachetest.Options{})
	defer srv.Close()
	if _, err := quotakit.NewController(noWidgets{srv}, quotakit.Options{Resources: []quotakit.Resource{{Resource: widgetsGVR}}}); err == nil {
		t.Error("NewController with a client without a ListerWatcher for widgets returned no error")
	}
}

// TestControllerLateInformerAfterFirstWrite checks that a quota first
// written before the pods informer synced is recalculated when it syncs,
// even when the quota informer has not delivered that first write yet (its
// cached status.hard is then still empty).
func TestControllerLateInformerAfterFirstWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := newTestClient()
		defer client.Close()
		create(t, client, podsGVR, testPod("a", "1", corev1.PodRunning))
		create(t, client, configsGVR, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cfg"}})
		create(t, client, quotasGVR, testQuota("q", rl("pods", "10", "count/configmaps", "10")))
		client.setBroken(podsGVR, true)
		client.hold(quotasGVR)
		_, stop := start(t, client, quotakit.Options{ResyncPeriod: -1, StartGrace: -1})
		defer stop()
		settle()
		checkUsed(t, client, "q", rl("count/configmaps", "1"))

		client.setBroken(podsGVR, false)
		time.Sleep(time.Minute) // the pods reflector's backoff
		synctest.Wait()
		client.release(quotasGVR)
		settle()
		checkUsed(t, client, "q", rl("pods", "1", "count/configmaps", "1"))
	})
}

// panicking is an object-count evaluator whose UsageStats panics while
// fail is set.
type panicking struct {
	quota.Evaluator
	fail *atomic.Bool
}

func (e panicking) UsageStats(opts quota.UsageStatsOptions) (quota.UsageStats, error) {
	if e.fail.Load() {
		panic("widget evaluator bug")
	}
	return e.Evaluator.UsageStats(opts)
}

func TestControllerSurvivesPanickingEvaluator(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := newTestClient()
		defer client.Close()
		registerWidgets(t, client)
		create(t, client, widgetsGVR, widget("w1"))
		create(t, client, quotasGVR, testQuota("q", rl("count/widgets.example.com", "5")))
		var fail atomic.Bool
		fail.Store(true)
		_, stop := start(t, client, quotakit.Options{Resources: []quotakit.Resource{{
			Resource: widgetsGVR,
			Evaluator: func(list generic.ListFuncByNamespace) quota.Evaluator {
				return panicking{Evaluator: generic.NewObjectCountEvaluator(widgetsGVR.GroupResource(), list, ""), fail: &fail}
			},
		}}})
		defer stop()
		settle()
		// The quota may have been written before the widgets informer
		// synced, with no used value for widgets; never with one.
		if used := status(t, client, "q").Used; len(used) != 0 {
			t.Errorf("status.used = %v while the evaluator panics, want no used value", used)
		}
		fail.Store(false) // the bug is fixed; the sync is retried
		time.Sleep(time.Minute)
		synctest.Wait()
		checkUsed(t, client, "q", rl("count/widgets.example.com", "1"))
	})
}

// gatedStatus is a client whose status writes wait for a gate and count
// how many run at once.
type gatedStatus struct {
	*testClient
	gate    chan struct{}
	mu      sync.Mutex
	running int // guarded by mu
	most    int // guarded by mu
	calls   int // guarded by mu
}

func (c *gatedStatus) UpdateStatus(ctx context.Context, gvr schema.GroupVersionResource, obj runtime.Object) (runtime.Object, error) {
	c.mu.Lock()
	c.running++
	c.calls++
	c.most = max(c.most, c.running)
	c.mu.Unlock()
	<-c.gate
	c.mu.Lock()
	c.running--
	c.mu.Unlock()
	return c.testClient.UpdateStatus(ctx, gvr, obj)
}

// TestControllerSyncsAQuotaOnceAtATime checks that a quota queued on both
// queues is never synced by two workers at once, and that the sync asked
// for meanwhile still happens afterwards.
func TestControllerSyncsAQuotaOnceAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := &gatedStatus{testClient: newTestClient(), gate: make(chan struct{})}
		defer client.Close()
		create(t, client.testClient, podsGVR, testPod("a", "1", corev1.PodRunning))
		create(t, client.testClient, quotasGVR, testQuota("q", rl("pods", "10")))
		_, stop := start(t, client, quotakit.Options{ResyncPeriod: time.Minute})
		defer stop()
		settle() // a priority worker is writing the first status, held
		create(t, client.testClient, podsGVR, testPod("b", "1", corev1.PodRunning))
		time.Sleep(time.Minute) // the full resync queues q on the primary queue
		synctest.Wait()
		close(client.gate)
		settle()
		client.mu.Lock()
		most, calls := client.most, client.calls
		client.mu.Unlock()
		if most != 1 {
			t.Errorf("%d status writes of one quota ran at once, want 1", most)
		}
		if calls < 2 {
			t.Errorf("%d status writes, want the first and the one asked for meanwhile", calls)
		}
		checkUsed(t, client.testClient, "q", rl("pods", "2"))
	})
}
