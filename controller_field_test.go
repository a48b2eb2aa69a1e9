package quotakit_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/quotakit/quotakit"
	"github.com/quotakit/quotakit/cache"
	"github.com/quotakit/quotakit/cache/cachetest"
	"github.com/quotakit/quotakit/generic"
)

var (
	pvcsGVR    = corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")
	secretsGVR = corev1.SchemeGroupVersion.WithResource("secrets")
	jobsGVR    = batchv1.SchemeGroupVersion.WithResource("jobs")
)

// reshapingClient serves some resources of a testClient in another form:
// every object of those resources passes through reshape, in lists and in
// watch events, as a dynamic or metadata-only client would serve them.
type reshapingClient struct {
	*testClient
	reshape map[schema.GroupVersionResource]func(runtime.Object) runtime.Object
}

func (c *reshapingClient) ListerWatcher(gvr schema.GroupVersionResource, namespace string) cache.ListerWatcher {
	lw := c.testClient.ListerWatcher(gvr, namespace)
	f := c.reshape[gvr]
	if f == nil {
		return lw
	}
	return &cache.ListWatch{
		ListFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			list, err := lw.List(ctx, opts)
			if err != nil {
				return nil, err
			}
			items, err := meta.ExtractList(list)
			if err != nil {
				return nil, err
			}
			out := &unstructured.UnstructuredList{}
			lm, _ := meta.ListAccessor(list)
			out.SetResourceVersion(lm.GetResourceVersion())
			out.SetContinue(lm.GetContinue())
			var reshaped []runtime.Object
			for _, item := range items {
				reshaped = append(reshaped, f(item))
			}
			if len(reshaped) > 0 {
				if _, isMeta := reshaped[0].(*metav1.PartialObjectMetadata); isMeta {
					pl := &metav1.PartialObjectMetadataList{ListMeta: metav1.ListMeta{ResourceVersion: lm.GetResourceVersion(), Continue: lm.GetContinue()}}
					for _, o := range reshaped {
						pl.Items = append(pl.Items, *o.(*metav1.PartialObjectMetadata))
					}
					return pl, nil
				}
			}
			if err := meta.SetList(out, reshaped); err != nil {
				return nil, err
			}
			return out, nil
		},
		WatchFunc: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			w, err := lw.Watch(ctx, opts)
			if err != nil {
				return nil, err
			}
			return watch.Filter(w, func(ev watch.Event) (watch.Event, bool) {
				if ev.Type != watch.Bookmark && ev.Type != watch.Error {
					ev.Object = f(ev.Object)
				}
				return ev, true
			}), nil
		},
	}
}

// toUnstructured serves an object as a dynamic client does.
func toUnstructured(obj runtime.Object) runtime.Object {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		panic(err)
	}
	u := &unstructured.Unstructured{Object: m}
	if u.GetKind() == "" {
		u.SetAPIVersion("v1")
		u.SetKind(strings.TrimPrefix(fmt.Sprintf("%T", obj), "*v1."))
	}
	return u
}

// toMetadata serves an object as a metadata-only client does.
func toMetadata(obj runtime.Object) runtime.Object {
	m, err := meta.Accessor(obj)
	if err != nil {
		panic(err)
	}
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name: m.GetName(), Namespace: m.GetNamespace(), ResourceVersion: m.GetResourceVersion(), UID: m.GetUID(),
	}}
}

// logSink collects the logs of a controller.
type logSink struct {
	mu sync.Mutex
	// guarded by mu
	errors []string
	// guarded by mu
	infos []string
}

func (s *logSink) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if strings.Contains(args, `"error"=`) {
			s.errors = append(s.errors, args)
		} else {
			s.infos = append(s.infos, args)
		}
	}, funcr.Options{})
}

// count returns how many error logs contain substr.
func (s *logSink) count(substr string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return countContaining(s.errors, substr)
}

// countInfo returns how many other logs contain substr.
func (s *logSink) countInfo(substr string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return countContaining(s.infos, substr)
}

func countContaining(lines []string, substr string) int {
	n := 0
	for _, l := range lines {
		if strings.Contains(l, substr) {
			n++
		}
	}
	return n
}

// fieldObjects creates pods, services, PVCs, configmaps and secrets in ns,
// and a quota charging all of them.
func fieldObjects(t *testing.T, client *testClient) {
	t.Helper()
	create(t, client, podsGVR, testPod("a", "1", corev1.PodRunning))
	create(t, client, podsGVR, testPod("b", "250m", corev1.PodPending))
	create(t, client, podsGVR, testPod("done", "8", corev1.PodSucceeded))
	create(t, client, servicesGVR, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lb"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80}}},
	})
	create(t, client, pvcsGVR, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "data"},
		Spec:       corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{Requests: rl("storage", "10Gi")}},
	})
	for _, name := range []string{"c1", "c2"} {
		create(t, client, configsGVR, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Data: map[string]string{"k": "v"}})
	}
	create(t, client, secretsGVR, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}, Data: map[string][]byte{"k": []byte("v")}})
	create(t, client, quotasGVR, testQuota("all", rl("pods", "10", "requests.cpu", "10", "services.loadbalancers", "2",
		"requests.storage", "100Gi", "count/configmaps", "10", "secrets", "10")))
}

var fieldUsed = rl("pods", "2", "requests.cpu", "1250m", "services.loadbalancers", "1", "requests.storage", "10Gi", "count/configmaps", "2", "secrets", "1")

// TestControllerObjectForms checks that the same objects give the same
// statuses whether the client serves them typed, unstructured (a dynamic
// client) or, for counted resources, as metadata only.
func TestControllerObjectForms(t *testing.T) {
	forms := map[string]map[schema.GroupVersionResource]func(runtime.Object) runtime.Object{
		"typed": nil,
		"unstructured": {
			podsGVR: toUnstructured, servicesGVR: toUnstructured, pvcsGVR: toUnstructured,
			configsGVR: toUnstructured, secretsGVR: toUnstructured, quotasGVR: toUnstructured,
		},
		"metadata": {configsGVR: toMetadata, secretsGVR: toMetadata},
	}
	for name, reshape := range forms {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				client := newTestClient()
				defer client.Close()
				fieldObjects(t, client)
				c, stop := start(t, &reshapingClient{testClient: client, reshape: reshape}, quotakit.Options{})
				defer stop()
				settle()
				if !c.HasSynced() {
					t.Error("HasSynced() = false")
				}
				checkUsed(t, client, "all", fieldUsed)

				// Changes arrive in the same form through the watch.
				if err := client.Delete(context.Background(), podsGVR, "ns", "a", metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
				if err := client.Delete(context.Background(), configsGVR, "ns", "c1", metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
				settle()
				checkUsed(t, client, "all", rl("pods", "1", "requests.cpu", "250m", "services.loadbalancers", "1",
					"requests.storage", "10Gi", "count/configmaps", "1", "secrets", "1"))
			})
		})
	}
}

// TestControllerWrongType checks that a client serving objects of a type
// that cannot be converted leaves that resource unsynced, says so at error
// level, and keeps the quota's previous used values for it, while the
// other resources are counted.
func TestControllerWrongType(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := newTestClient()
		defer client.Close()
		fieldObjects(t, client)
		// The status the controller would have written earlier.
		rq := getQuota(t, client, "all")
		rq.Status = corev1.ResourceQuotaStatus{Hard: rq.Spec.Hard, Used: rl("pods", "7", "requests.cpu", "3")}
		if _, err := client.Server.UpdateStatus(context.Background(), quotasGVR, rq); err != nil {
			t.Fatal(err)
		}
		asConfigMap := func(obj runtime.Object) runtime.Object {
			m, _ := meta.Accessor(obj)
			return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: m.GetName(), Namespace: m.GetNamespace(), ResourceVersion: m.GetResourceVersion()}}
		}
		logs := &logSink{}
		c, stop := start(t, &reshapingClient{testClient: client, reshape: map[schema.GroupVersionResource]func(runtime.Object) runtime.Object{podsGVR: asConfigMap}}, quotakit.Options{Logger: logs.logger()})
		defer stop()
		time.Sleep(5 * time.Second) // the default StartGrace
		settle()
		if c.HasSynced() {
			t.Error("HasSynced() = true with pods of the wrong type")
		}
		if err := c.Ready(nil); err == nil || !strings.Contains(err.Error(), "pods") {
			t.Errorf("Ready() = %v, want an error naming pods", err)
		}
		if logs.count("ConfigMap") == 0 {
			t.Error("no error log names the wrong type")
		}
		if logs.countInfo("before these informers synced") == 0 {
			t.Error("no log says the workers started before the pods informer synced")
		}
		want := fieldUsed.DeepCopy()
		want["pods"], want["requests.cpu"] = rl("x", "7")["x"], rl("x", "3")["x"]
		checkUsed(t, client, "all", want)
	})
}

// discoveringClient is a testClient that can discover resources.
type discoveringClient struct {
	*testClient
	mu sync.Mutex
	// guarded by mu
	served      []schema.GroupVersionResource
	discoveries int
	watches     map[schema.GroupVersionResource]int
}

func (c *discoveringClient) NamespacedResources(context.Context) ([]schema.GroupVersionResource, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.discoveries++
	return append([]schema.GroupVersionResource(nil), c.served...), nil
}

// ListerWatcher counts the open watches of each resource.
func (c *discoveringClient) ListerWatcher(gvr schema.GroupVersionResource, namespace string) cache.ListerWatcher {
	lw := c.testClient.ListerWatcher(gvr, namespace)
	return &cache.ListWatch{
		ListFunc: lw.List,
		WatchFunc: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			w, err := lw.Watch(ctx, opts)
			if err != nil {
				return nil, err
			}
			c.mu.Lock()
			c.watches[gvr]++
			c.mu.Unlock()
			return &countedWatch{Interface: w, stop: func() {
				c.mu.Lock()
				c.watches[gvr]--
				c.mu.Unlock()
			}}, nil
		},
	}
}

func (c *discoveringClient) openWatches(gvr schema.GroupVersionResource) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.watches[gvr]
}

type countedWatch struct {
	watch.Interface
	once sync.Once
	stop func()
}

func (w *countedWatch) Stop() {
	w.once.Do(w.stop)
	w.Interface.Stop()
}

var _ quotakit.Discoverer = (*discoveringClient)(nil)

func job(name string) *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
}

// TestControllerDiscovery checks that a quota on a discovered resource is
// counted, that its informer starts only when a quota names it and stops
// when none does, and that a quota naming a resource the server does not
// serve is reported once.
func TestControllerDiscovery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := &discoveringClient{testClient: newTestClient(), served: []schema.GroupVersionResource{podsGVR, jobsGVR}, watches: map[schema.GroupVersionResource]int{}}
		defer client.Close()
		if err := client.Register(cachetest.Resource{GVR: jobsGVR, Namespaced: true, NewList: func() runtime.Object { return &batchv1.JobList{} }}); err != nil {
			t.Fatal(err)
		}
		create(t, client.testClient, jobsGVR, job("j1"))
		create(t, client.testClient, jobsGVR, job("j2"))
		logs := &logSink{}
		c, stop := start(t, client, quotakit.Options{Logger: logs.logger()})
		defer stop()
		settle()
		if n := client.openWatches(jobsGVR); n != 0 {
			t.Errorf("%d watches of jobs before any quota names them, want 0", n)
		}

		create(t, client.testClient, quotasGVR, testQuota("jobs", rl("count/jobs.batch", "5")))
		settle()
		checkUsed(t, client.testClient, "jobs", rl("count/jobs.batch", "2"))
		if n := client.openWatches(jobsGVR); n != 1 {
			t.Errorf("%d watches of jobs while a quota names them, want 1", n)
		}
		if c.Registry().Get(jobsGVR.GroupResource()) == nil {
			t.Error("Registry() has no evaluator of jobs while a quota names them")
		}
		if err := client.Delete(context.Background(), jobsGVR, "ns", "j1", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		settle()
		checkUsed(t, client.testClient, "jobs", rl("count/jobs.batch", "1"))

		// A resource the server does not serve: reported once, however
		// often the quota is written and discovery runs.
		create(t, client.testClient, quotasGVR, testQuota("typo", rl("count/jobz.batch", "5", "pods", "3")))
		settle()
		time.Sleep(2 * time.Minute)
		settle()
		if n := logs.count("count/jobz.batch"); n != 1 {
			t.Errorf("%d error logs name count/jobz.batch, want 1", n)
		}
		if n := c.UncountedQuotas(); n != 1 {
			t.Errorf("UncountedQuotas() = %d, want 1", n)
		}
		checkUsed(t, client.testClient, "typo", rl("pods", "0"))

		// Once no quota names jobs, their informer stops.
		if err := client.Delete(context.Background(), quotasGVR, "ns", "jobs", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := client.Delete(context.Background(), quotasGVR, "ns", "typo", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		settle()
		if n := client.openWatches(jobsGVR); n != 0 {
			t.Errorf("%d watches of jobs after the quota was deleted, want 0", n)
		}
		if c.Registry().Get(jobsGVR.GroupResource()) != nil {
			t.Error("Registry() still has an evaluator of jobs")
		}
		if n := c.UncountedQuotas(); n != 0 {
			t.Errorf("UncountedQuotas() = %d after the quota was deleted, want 0", n)
		}

		// A resource that appears later is found by asking again at once.
		widgets := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
		registerWidgets(t, client.testClient)
		create(t, client.testClient, widgets, widget("w"))
		client.mu.Lock()
		client.served = append(client.served, widgets)
		before := client.discoveries
		client.mu.Unlock()
		create(t, client.testClient, quotasGVR, testQuota("widgets", rl("count/widgets.example.com", "5")))
		settle()
		checkUsed(t, client.testClient, "widgets", rl("count/widgets.example.com", "1"))
		client.mu.Lock()
		if client.discoveries != before+1 {
			t.Errorf("%d discoveries for a new resource, want 1", client.discoveries-before)
		}
		client.mu.Unlock()
	})
}

// TestControllerWithoutDiscovery checks that, without a discovering
// client, a quota naming a resource nobody counts is logged once and
// counted by UncountedQuotas, and does not hold up its other resources.
func TestControllerWithoutDiscovery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := newTestClient()
		defer client.Close()
		create(t, client, podsGVR, testPod("a", "1", corev1.PodRunning))
		create(t, client, quotasGVR, testQuota("q", rl("count/jobs.batch", "5", "pods", "3")))
		logs := &logSink{}
		c, stop := start(t, client, quotakit.Options{Logger: logs.logger()})
		defer stop()
		settle()
		checkUsed(t, client, "q", rl("pods", "1"))
		// The quota is written again (its status changes) and edited.
		if err := client.Delete(context.Background(), podsGVR, "ns", "a", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		settle()
		checkUsed(t, client, "q", rl("pods", "0"))
		if n := logs.count("count/jobs.batch"); n != 1 {
			t.Errorf("%d error logs name count/jobs.batch, want 1", n)
		}
		if n := c.UncountedQuotas(); n != 1 {
			t.Errorf("UncountedQuotas() = %d, want 1", n)
		}
		rq := getQuota(t, client, "q")
		rq.Spec.Hard = rl("count/jobs.batch", "5", "count/deployments.apps", "1", "pods", "3")
		update(t, client, rq)
		settle()
		if n := logs.count("count/deployments.apps"); n != 1 {
			t.Errorf("%d error logs name count/deployments.apps after the quota changed, want 1", n)
		}
	})
}

// TestControllerRegistryIsACopy checks that changing the registry the
// controller hands out changes nothing in the controller.
func TestControllerRegistryIsACopy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := newTestClient()
		defer client.Close()
		create(t, client, podsGVR, testPod("a", "1", corev1.PodRunning))
		create(t, client, podsGVR, testPod("b", "1", corev1.PodRunning))
		create(t, client, podsGVR, testPod("c", "1", corev1.PodRunning))
		create(t, client, quotasGVR, testQuota("q", rl("pods", "3", "count/widgets.example.com", "1")))
		c, stop := start(t, client, quotakit.Options{})
		defer stop()
		settle()
		checkUsed(t, client, "q", rl("pods", "3"))
		r := c.Registry()
		// What admission does for a resource without an evaluator, and
		// worse.
		r.Add(generic.NewObjectCountEvaluator(widgetsGVR.GroupResource(), nil, ""))
		r.Remove(r.Get(podsGVR.GroupResource()))
		if err := client.Delete(context.Background(), podsGVR, "ns", "a", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		settle()
		checkUsed(t, client, "q", rl("pods", "2"))
		if c.Registry().Get(widgetsGVR.GroupResource()) != nil {
			t.Error("an evaluator added to Registry() reached the controller")
		}
	})
}

// TestControllerLogger checks that Options.Logger receives the logs
// rather than the logger of Run's context.
func TestControllerLogger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := newTestClient()
		defer client.Close()
		client.setBroken(servicesGVR, true)
		logs := &logSink{}
		ctxLogs := &logSink{}
		c, err := quotakit.NewController(client, quotakit.Options{Logger: logs.logger()})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(logr.NewContext(t.Context(), ctxLogs.logger()))
		done := make(chan error, 1)
		go func() { done <- c.Run(ctx) }()
		settle()
		cancel()
		<-done
		if logs.count("conversion webhook unavailable") == 0 {
			t.Error("Options.Logger got no error log of the failing services list")
		}
		if n := ctxLogs.count(""); n != 0 {
			t.Errorf("the context's logger got %d error logs, want 0", n)
		}
	})
}

// TestControllerGracefulDeletion checks that a pod deleted with a grace
// period stops being charged when the period ends, though no event marks
// that moment, without a full resync.
func TestControllerGracefulDeletion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := newTestClient()
		defer client.Close()
		pod := create(t, client, podsGVR, testPod("a", "2", corev1.PodRunning)).(*corev1.Pod)
		create(t, client, podsGVR, testPod("b", "1", corev1.PodRunning))
		create(t, client, quotasGVR, testQuota("q", rl("pods", "10", "requests.cpu", "10")))
		_, stop := start(t, client, quotakit.Options{ResyncPeriod: -1})
		defer stop()
		settle()
		checkUsed(t, client, "q", rl("pods", "2", "requests.cpu", "3"))

		// What the API server writes for a delete with a 30 s grace
		// period, when no kubelet finishes it.
		now := metav1.Now()
		grace := int64(30)
		pod.DeletionTimestamp, pod.DeletionGracePeriodSeconds = &now, &grace
		if _, err := client.Update(context.Background(), podsGVR, pod); err != nil {
			t.Fatal(err)
		}
		time.Sleep(29 * time.Second)
		synctest.Wait()
		checkUsed(t, client, "q", rl("pods", "2", "requests.cpu", "3"))
		time.Sleep(2 * time.Second)
		synctest.Wait()
		checkUsed(t, client, "q", rl("pods", "1", "requests.cpu", "1"))
	})
}

// TestControllerReadiness checks HasSynced and Ready before, during and
// after Run.
func TestControllerReadiness(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := newTestClient()
		defer client.Close()
		c, err := quotakit.NewController(client, quotakit.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if c.HasSynced() {
			t.Error("HasSynced() = true before Run")
		}
		if err := c.Ready(nil); !errors.Is(err, quotakit.ErrNotRunning) {
			t.Errorf("Ready() before Run = %v, want ErrNotRunning", err)
		}
		stop := run(t, c)
		settle()
		if !c.HasSynced() {
			t.Error("HasSynced() = false while running")
		}
		if err := c.Ready(nil); err != nil {
			t.Errorf("Ready() while running = %v", err)
		}
		stop()
		if c.HasSynced() {
			t.Error("HasSynced() = true after Run returned")
		}
		if err := c.Ready(nil); !errors.Is(err, quotakit.ErrNotRunning) {
			t.Errorf("Ready() after Run = %v, want ErrNotRunning", err)
		}
	})
}

// TestControllerReadableUsage checks that the same usage is written the
// same way whatever order its objects are summed in, in the format of the
// quota's limit: a sum takes the format of its first term, so a decimal
// quantity summed first would make the sum decimal.
func TestControllerReadableUsage(t *testing.T) {
	memories := []string{"1Gi", "512Mi", "256M", "1536Mi"}
	orders := [][]int{{0, 1, 2, 3}, {2, 3, 1, 0}, {3, 2, 0, 1}, {1, 3, 0, 2}}
	for _, order := range orders {
		synctest.Test(t, func(t *testing.T) {
			client := newTestClient()
			defer client.Close()
			for i, j := range order {
				p := testPod(fmt.Sprintf("p%d", i), "100m", corev1.PodRunning)
				p.Spec.Containers[0].Resources.Requests["memory"] = rl("m", memories[j])["m"]
				create(t, client, podsGVR, p)
			}
			create(t, client, quotasGVR, testQuota("q", rl("requests.memory", "8Gi", "requests.cpu", "2")))
			_, stop := start(t, client, quotakit.Options{})
			defer stop()
			settle()
			used := status(t, client, "q").Used
			mem, cpu := used["requests.memory"], used["requests.cpu"]
			if got, want := mem.String()+" "+cpu.String(), "3395728Ki 400m"; got != want {
				t.Errorf("order %v: status.used written as %q, want %q", order, got, want)
			}
		})
	}
}

var claimsGVR = schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "resourceclaims"}

// gpuClaim is a claim of count devices of class gpu.
func gpuClaim(name string, count int64) *resourcev1.ResourceClaim {
	return &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name:    "gpus",
			Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: count},
		}}}},
	}
}

// TestControllerDeviceQuota checks a quota on the devices of a class:
// claims deleted release their devices at once, claims created are
// counted (by the next full resync, as admission charged them), and a
// claim replaced by one of another size moves status.used.
func TestControllerDeviceQuota(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := newTestClient()
		defer client.Close()
		create(t, client, claimsGVR, gpuClaim("a", 2))
		create(t, client, claimsGVR, gpuClaim("b", 1))
		create(t, client, quotasGVR, testQuota("gpus", rl("gpu.deviceclass.resource.k8s.io/devices", "8", "count/resourceclaims.resource.k8s.io", "10")))
		_, stop := start(t, client, quotakit.Options{ResyncPeriod: time.Minute})
		defer stop()
		settle()
		checkUsed(t, client, "gpus", rl("gpu.deviceclass.resource.k8s.io/devices", "3", "count/resourceclaims.resource.k8s.io", "2"))

		if err := client.Delete(context.Background(), claimsGVR, "ns", "a", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		settle()
		checkUsed(t, client, "gpus", rl("gpu.deviceclass.resource.k8s.io/devices", "1", "count/resourceclaims.resource.k8s.io", "1"))

		// Claims are immutable: a claim re-allocated with more devices is a
		// new claim.
		if err := client.Delete(context.Background(), claimsGVR, "ns", "b", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		create(t, client, claimsGVR, gpuClaim("b2", 4))
		create(t, client, claimsGVR, gpuClaim("c", 1))
		time.Sleep(time.Minute)
		settle()
		checkUsed(t, client, "gpus", rl("gpu.deviceclass.resource.k8s.io/devices", "5", "count/resourceclaims.resource.k8s.io", "2"))
	})
}

// TestControllerLeavesOutUnservedResources checks that, with a
// discovering client, table resources the server does not serve (resource
// claims on a cluster without Dynamic Resource Allocation) are neither
// listed nor waited for, and a quota naming them is reported.
func TestControllerLeavesOutUnservedResources(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := &discoveringClient{testClient: newTestClient(), served: []schema.GroupVersionResource{podsGVR, quotasGVR}, watches: map[schema.GroupVersionResource]int{}}
		defer client.Close()
		create(t, client.testClient, podsGVR, testPod("a", "1", corev1.PodRunning))
		create(t, client.testClient, quotasGVR, testQuota("q", rl("pods", "5", "count/resourceclaims.resource.k8s.io", "5")))
		c, stop := start(t, client, quotakit.Options{})
		defer stop()
		settle()
		if !c.HasSynced() {
			t.Error("HasSynced() = false")
		}
		for _, r := range client.Requests() {
			if r.GVR.Group == "resource.k8s.io" {
				t.Errorf("%s of %s, which the server does not serve", r.Verb, r.GVR.Resource)
			}
		}
		checkUsed(t, client.testClient, "q", rl("pods", "1"))
		if n := c.UncountedQuotas(); n != 1 {
			t.Errorf("UncountedQuotas() = %d, want 1", n)
		}
	})
}

// TestControllerGracefulDeletionsApart checks that the ends of two grace
// periods in one namespace are both recalculated: a later end must not be
// lost while an earlier one waits.
func TestControllerGracefulDeletionsApart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := newTestClient()
		defer client.Close()
		a := create(t, client, podsGVR, testPod("a", "1", corev1.PodRunning)).(*corev1.Pod)
		b := create(t, client, podsGVR, testPod("b", "1", corev1.PodRunning)).(*corev1.Pod)
		create(t, client, quotasGVR, testQuota("q", rl("pods", "10")))
		_, stop := start(t, client, quotakit.Options{ResyncPeriod: -1})
		defer stop()
		settle()
		checkUsed(t, client, "q", rl("pods", "2"))
		grace := int64(10)
		for _, p := range []*corev1.Pod{a, b} {
			now := metav1.Now()
			p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &now, &grace
			if _, err := client.Update(context.Background(), podsGVR, p); err != nil {
				t.Fatal(err)
			}
			time.Sleep(5 * time.Second)
		}
		time.Sleep(time.Second) // a's grace period is over
		synctest.Wait()
		checkUsed(t, client, "q", rl("pods", "1"))
		time.Sleep(5 * time.Second) // so is b's
		synctest.Wait()
		checkUsed(t, client, "q", rl("pods", "0"))
	})
}
