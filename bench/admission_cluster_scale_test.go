package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/quotakit/quotakit/admission"
	"github.com/quotakit/quotakit/admission/admissiontest"
	"github.com/quotakit/quotakit/cache"
	"github.com/quotakit/quotakit/cache/cachetest"
	"github.com/quotakit/quotakit/clusterquota"
	"github.com/quotakit/quotakit/evaluator"
	"github.com/quotakit/quotakit/quota"
)

// The shape of issue 32: 10,000 namespaces, two to a tenant (ns-2i and
// ns-2i+1 carry tenant=t-i), and one ClusterQuota for each of the first
// N tenants, never limiting, its status.total written. Requests go to
// the same 100 tenants in every row, so that rows differ only in how
// many quotas exist; or, in the unselected rows, to the 200 namespaces of
// tenants 4,900 to 4,999, which no quota selects in a row of 1,000 quotas
// or none.
const (
	scaleNamespaces      = 10000
	scaleTenantsLoaded   = 100
	scaleFirstUnselected = 9800
	scaleRunTime         = 5 * time.Second
)

// countingClusterClient is admission's client of the in-memory API,
// counting its calls, with status writes that take latency.
type countingClusterClient struct {
	admissiontest.Client
	latency             time.Duration
	lists, gets, writes atomic.Int64
}

func (c *countingClusterClient) ListClusterQuotas(ctx context.Context) ([]clusterquota.ClusterQuota, error) {
	c.lists.Add(1)
	return c.Client.ListClusterQuotas(ctx)
}

func (c *countingClusterClient) GetClusterQuota(ctx context.Context, name string) (*clusterquota.ClusterQuota, error) {
	c.gets.Add(1)
	return c.Client.GetClusterQuota(ctx, name)
}

func (c *countingClusterClient) UpdateClusterQuotaStatus(ctx context.Context, cq *clusterquota.ClusterQuota) (*clusterquota.ClusterQuota, error) {
	c.writes.Add(1)
	time.Sleep(c.latency)
	return c.Client.UpdateClusterQuotaStatus(ctx, cq)
}

// scaleAPI is the in-memory API of the shape above with quotas
// ClusterQuotas.
func scaleAPI(b *testing.B, quotas int) *cachetest.Server {
	ctx := context.Background()
	// The informers share the API's objects: the process holds one copy
	// of each, as a webhook does, whose API server is another process.
	api := cachetest.New(cachetest.Options{ShareObjects: true})
	if err := admissiontest.RegisterClusterQuotas(api); err != nil {
		b.Fatal(err)
	}
	for i := range scaleNamespaces {
		name := "ns-" + strconv.Itoa(i)
		if _, err := api.Create(ctx, evaluator.Namespaces, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			"kubernetes.io/metadata.name": name, "tenant": "t-" + strconv.Itoa(i/2),
		}}}); err != nil {
			b.Fatal(err)
		}
	}
	hard := corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1000000000")}
	for i := range quotas {
		cq := &clusterquota.ClusterQuota{
			ObjectMeta: metav1.ObjectMeta{Name: "quota-" + strconv.Itoa(i)},
			Spec: clusterquota.ClusterQuotaSpec{
				Selector: clusterquota.ClusterQuotaSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tenant": "t-" + strconv.Itoa(i)}}},
				Quota:    corev1.ResourceQuotaSpec{Hard: hard},
			},
		}
		obj, err := api.Create(ctx, clusterquota.ClusterQuotas, cq)
		if err != nil {
			b.Fatal(err)
		}
		cq = obj.(*clusterquota.ClusterQuota)
		cq.Status.Total = corev1.ResourceQuotaStatus{Hard: hard, Used: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}
		if _, err := api.UpdateStatus(ctx, clusterquota.ClusterQuotas, cq); err != nil {
			b.Fatal(err)
		}
	}
	return api
}

// scaleAccessor wires a ClusterAccessor as a webhook does: an informer of
// ClusterQuotas and one of namespaces feed a clusterquota.Index (what
// kube.ClusterQuotaIndex does over client-go), and the namespace getter
// reads the namespace informer's cache. It returns once both have synced.
func scaleAccessor(ctx context.Context, b *testing.B, api *cachetest.Server, client admission.ClusterQuotaClient, wg *sync.WaitGroup) *admission.ClusterAccessor {
	quotas := cache.NewSharedIndexInformer(api.ListerWatcher(clusterquota.ClusterQuotas, ""), &clusterquota.ClusterQuota{}, cache.SharedIndexInformerOptions{})
	nss := cache.NewSharedIndexInformer(api.ListerWatcher(evaluator.Namespaces, ""), &corev1.Namespace{}, cache.SharedIndexInformerOptions{})
	x := &clusterquota.Index{}
	reg, err := quotas.AddEventHandler(cache.ResourceEventHandlerFuncs[*clusterquota.ClusterQuota]{
		AddFunc:    func(cq *clusterquota.ClusterQuota, _ bool) { x.SetClusterQuota(cq) },
		UpdateFunc: func(_, cq *clusterquota.ClusterQuota) { x.SetClusterQuota(cq) },
		DeleteFunc: func(d cache.DeletedObject[*clusterquota.ClusterQuota]) { x.DeleteClusterQuota(d.Key) },
	})
	if err != nil {
		b.Fatal(err)
	}
	x.AddSynced(reg.HasSynced)
	if reg, err = nss.AddEventHandler(cache.ResourceEventHandlerFuncs[metav1.Object]{
		AddFunc:    func(ns metav1.Object, _ bool) { x.SetNamespace(ns) },
		UpdateFunc: func(_, ns metav1.Object) { x.SetNamespace(ns) },
		DeleteFunc: func(d cache.DeletedObject[metav1.Object]) { x.DeleteNamespace(d.Key) },
	}); err != nil {
		b.Fatal(err)
	}
	x.AddSynced(reg.HasSynced)
	wg.Go(func() { quotas.Run(ctx) })
	wg.Go(func() { nss.Run(ctx) })
	synced := func() bool { return quotas.HasSynced() && nss.HasSynced() }
	if !cache.WaitForCacheSync(ctx, synced, x.HasSynced) {
		b.Fatal("informers did not sync")
	}
	lister := cache.NewLister[*corev1.Namespace](nss.GetIndexer(), evaluator.Namespaces.GroupResource())
	getNamespace := func(name string) (*corev1.Namespace, error) { return lister.Get(name) }
	return admission.NewClusterAccessor(nil, x, getNamespace, synced, client)
}

// BenchmarkAdmissionClusterQuotaScale runs 50 callers creating pods in a
// closed loop for 5 s against one Evaluator over a ClusterAccessor, in
// the shape above, with 5 ms status writes; run it with -benchtime=1x,
// one row per invocation, alternating the rows. It reports admitted
// requests per second, p50 and p99 latency, CPU per request (the whole
// process: the API, its informers, the engine), API calls per request,
// and lists, gets and conflicts in the run. It fails when a tenant's
// status.total.used is not exactly what was admitted in its namespaces.
func BenchmarkAdmissionClusterQuotaScale(b *testing.B) {
	rows := []struct {
		quotas     int
		unselected bool
	}{{100, false}, {1000, false}, {5000, false}, {0, true}, {1000, true}}
	for _, row := range rows {
		target := "selected"
		if row.unselected {
			target = "unselected"
		}
		b.Run(fmt.Sprintf("quotas=%d/%s", row.quotas, target), func(b *testing.B) {
			var res loadResult
			var cpu time.Duration
			var calls, lists, gets, conflicts int64
			for b.Loop() {
				api := scaleAPI(b, row.quotas)
				ctx, cancel := context.WithCancel(context.Background())
				var wg sync.WaitGroup
				client := &countingClusterClient{Client: admissiontest.New(api), latency: admissionWriteLatency}
				acc := scaleAccessor(ctx, b, api, client, &wg)
				e, err := admission.NewEvaluator(acc, admission.Options{})
				if err != nil {
					b.Fatal(err)
				}
				wg.Go(func() { _ = e.Run(ctx) })
				var names []string
				if row.unselected {
					for i := scaleFirstUnselected; i < scaleNamespaces; i++ {
						names = append(names, "ns-"+strconv.Itoa(i))
					}
				} else {
					for i := range 2 * scaleTenantsLoaded {
						names = append(names, "ns-"+strconv.Itoa(i))
					}
				}
				// The setup's garbage collected first: what follows is the
				// requests' cost.
				runtime.GC()
				start := processCPU(b)
				res = runScaleLoad(e, names, scaleRunTime)
				cpu = processCPU(b) - start
				stats := e.Stats()
				cancel()
				wg.Wait()
				if res.failed > 0 {
					b.Fatalf("%d requests failed", res.failed)
				}
				lists, gets, conflicts = client.lists.Load(), client.gets.Load(), stats.Conflicts
				calls = lists + gets + client.writes.Load()
				checkScaleUsage(b, api, row.quotas, row.unselected, res.admitted)
				api.Close()
			}
			requests := float64(res.admitted + res.failed)
			b.ReportMetric(res.perSecond(), "admitted/s")
			b.ReportMetric(float64(res.percentile(0.50).Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(res.percentile(0.99).Microseconds())/1000, "p99-ms")
			b.ReportMetric(float64(cpu.Microseconds())/requests, "cpu-µs/req")
			b.ReportMetric(float64(calls)/requests, "calls/req")
			b.ReportMetric(float64(lists), "lists")
			b.ReportMetric(float64(gets), "gets")
			b.ReportMetric(float64(conflicts), "conflicts")
		})
	}
}

// runScaleLoad has admissionCallers goroutines create pods in a closed
// loop for d, each in a namespace picked at random among names.
func runScaleLoad(e *admission.Evaluator, names []string, d time.Duration) loadResult {
	podGVR := corev1.SchemeGroupVersion.WithResource("pods")
	var (
		mu  sync.Mutex
		res loadResult
		wg  sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(d)
	for g := range admissionCallers {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(g), 32))
			var lat []time.Duration
			admitted, failed := 0, 0
			for i := 0; time.Now().Before(deadline); i++ {
				ns := names[rnd.IntN(len(names))]
				pod := admissionPod("p-"+strconv.Itoa(g)+"-"+strconv.Itoa(i), ns, "100m")
				t0 := time.Now()
				err := e.Evaluate(context.Background(), &quota.AttributesRecord{Operation: admissionv1.Create, Object: pod, Resource: podGVR, Namespace: ns, Name: pod.Name})
				lat = append(lat, time.Since(t0))
				if err != nil {
					failed++
				} else {
					admitted++
				}
			}
			mu.Lock()
			res.latencies = append(res.latencies, lat...)
			res.admitted += admitted
			res.failed += failed
			mu.Unlock()
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	slices.Sort(res.latencies)
	return res
}

// checkScaleUsage fails b unless the quotas' status.total.used sums to
// what was admitted in selected namespaces (nothing in unselected ones).
func checkScaleUsage(b *testing.B, api *cachetest.Server, quotas int, unselected bool, admitted int) {
	obj, err := api.List(context.Background(), clusterquota.ClusterQuotas, "", metav1.ListOptions{LabelSelector: labels.Everything().String()})
	if err != nil {
		b.Fatal(err)
	}
	var used int64
	for _, cq := range obj.(*clusterquota.ClusterQuotaList).Items {
		u := cq.Status.Total.Used[corev1.ResourcePods]
		used += u.Value()
	}
	want := int64(admitted)
	if unselected {
		want = 0
	}
	if used != want || len(obj.(*clusterquota.ClusterQuotaList).Items) != quotas {
		b.Fatalf("%d quotas use %d pods in all, want %d", len(obj.(*clusterquota.ClusterQuotaList).Items), used, want)
	}
}

// BenchmarkClusterAccessorLookup measures the accessor alone, in the
// shape above, without the engine, its status writes or the load's
// goroutines: one SharedKey and one GetQuotas, what the engine asks per
// request (the batch key) and per batch, for a namespace of the first
// 100 tenants (selected), or of the 100 tenants from 4,900 that no quota
// selects (unselected), on one goroutine: the part of a request's cost
// that the number of cluster quotas could change.
func BenchmarkClusterAccessorLookup(b *testing.B) {
	rows := []struct {
		quotas     int
		unselected bool
	}{{100, false}, {1000, false}, {5000, false}, {0, true}, {1000, true}}
	for _, row := range rows {
		target := "selected"
		first := 0
		if row.unselected {
			target, first = "unselected", scaleFirstUnselected
		}
		b.Run(fmt.Sprintf("quotas=%d/%s", row.quotas, target), func(b *testing.B) {
			api := scaleAPI(b, row.quotas)
			defer api.Close()
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			defer func() { cancel(); wg.Wait() }()
			acc := scaleAccessor(ctx, b, api, &countingClusterClient{Client: admissiontest.New(api)}, &wg)
			names := make([]string, 2*scaleTenantsLoaded)
			for i := range names {
				names[i] = "ns-" + strconv.Itoa(first+i)
			}
			want := 1
			if row.unselected {
				want = 0
			}
			runtime.GC()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				ns := names[i%len(names)]
				i++
				if k := acc.SharedKey(ns); (k != "") != (want == 1) {
					b.Fatalf("SharedKey(%s) = %q", ns, k)
				}
				quotas, err := acc.GetQuotas(ctx, ns)
				if err != nil || len(quotas) != want {
					b.Fatalf("GetQuotas(%s) = %d quotas, %v; want %d", ns, len(quotas), err, want)
				}
			}
		})
	}
}
