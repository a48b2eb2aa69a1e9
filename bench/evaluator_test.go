package bench

import (
	"fmt"
	goruntime "runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	upquota "k8s.io/apiserver/pkg/quota/v1"
	upgeneric "k8s.io/apiserver/pkg/quota/v1/generic"
	"k8s.io/client-go/tools/cache"
	upcore "k8s.io/kubernetes/pkg/quota/v1/evaluator/core"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/quotakit/quotakit/evaluator"
	"github.com/quotakit/quotakit/generic"
	"github.com/quotakit/quotakit/quota"
)

// Side-by-side benchmarks of Kubernetes 1.37.1's pod evaluator and ours.
// Both list the same client-go indexer: upstream through a GenericLister, as
// kube-controller-manager does, ours through a ListFuncByNamespace over the
// namespace index.

const benchPods = 10000

// upstreamListerFunc lists an indexer the way upstream's controller does.
func upstreamListerFunc(indexer cache.Indexer) upquota.ListerForResourceFunc {
	return func(gvr schema.GroupVersionResource) (cache.GenericLister, error) {
		return cache.NewGenericLister(indexer, gvr.GroupResource()), nil
	}
}

// oursListFunc lists one namespace of an indexer.
func oursListFunc(indexer cache.Indexer) generic.ListFuncByNamespace {
	return func(namespace string) ([]runtime.Object, error) {
		items, err := indexer.ByIndex(cache.NamespaceIndex, namespace)
		if err != nil {
			return nil, err
		}
		objs := make([]runtime.Object, len(items))
		for i, item := range items {
			objs[i] = item.(runtime.Object)
		}
		return objs, nil
	}
}

// rl builds a ResourceList whose names are separate strings, as in a
// decoded object.
func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(strings.Clone(kv[i]))] = resource.MustParse(kv[i+1])
	}
	return out
}

// specPod is the workload pod the issue describes: two containers, a
// logging sidecar and an init container, and limits on every third pod,
// with no status beyond its phase: a pod as created, or one whose kubelet
// does not report resources.
func specPod(i int) *corev1.Pod {
	always := corev1.ContainerRestartPolicyAlways
	app := corev1.Container{Name: "app", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "500m", "memory", "512Mi")}}
	proxy := corev1.Container{Name: "proxy", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "100m", "memory", "64Mi")}}
	logs := corev1.Container{Name: "logs", RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: rl("cpu", "50m", "memory", "32Mi")}}
	migrate := corev1.Container{Name: "migrate", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "1", "memory", "256Mi", "ephemeral-storage", "1Gi")}}
	if i%3 == 0 {
		app.Resources.Limits = rl("cpu", "1", "memory", "1Gi")
		proxy.Resources.Limits = rl("cpu", "200m", "memory", "128Mi")
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%05d", i), Namespace: "ns", ResourceVersion: "1"},
		Spec: corev1.PodSpec{
			InitContainers:    []corev1.Container{logs, migrate},
			Containers:        []corev1.Container{app, proxy},
			PriorityClassName: []string{"", "high", "low"}[i%3],
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSBurstable},
	}
}

// runningPod is specPod as a 1.37 kubelet reports it once running: the
// five pod conditions, and for each started container a status with its
// allocated and actuated resources, in their own maps as in a decoded
// object. That is twice the maps of specPod to read, and the in-place
// resize formula (spec, allocated, actuated) applies.
func runningPod(i int) *corev1.Pod {
	pod := specPod(i)
	pod.Status.Phase = corev1.PodRunning
	for _, t := range []corev1.PodConditionType{"PodReadyToStartContainers", corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady, corev1.PodScheduled} {
		pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue})
	}
	for _, c := range pod.Spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, runningStatus(c))
	}
	pod.Status.InitContainerStatuses = []corev1.ContainerStatus{runningStatus(pod.Spec.InitContainers[0]), {Name: "migrate"}}
	return pod
}

func runningStatus(c corev1.Container) corev1.ContainerStatus {
	return corev1.ContainerStatus{
		Name:               strings.Clone(c.Name),
		AllocatedResources: c.Resources.Requests.DeepCopy(),
		Resources:          &corev1.ResourceRequirements{Requests: c.Resources.Requests.DeepCopy(), Limits: c.Resources.Limits.DeepCopy()},
	}
}

// podShapes are the pod populations every benchmark runs over.
var podShapes = []struct {
	name string
	pod  func(int) *corev1.Pod
}{
	{"pods=spec", specPod},
	{"pods=running", runningPod},
}

func podIndexer(tb testing.TB, n int, pod func(int) *corev1.Pod) cache.Indexer {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for i := range n {
		if err := indexer.Add(pod(i)); err != nil {
			tb.Fatal(err)
		}
	}
	return indexer
}

var benchNow = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

func BenchmarkPodUsage(b *testing.B) {
	for _, shape := range podShapes {
		pod := shape.pod(3)
		b.Run(shape.name+"/impl=upstream", func(b *testing.B) {
			e := upcore.NewPodEvaluator(nil, testingclock.NewFakeClock(benchNow))
			b.ReportAllocs()
			cpu := startCPU(b)
			for b.Loop() {
				if _, err := e.Usage(pod); err != nil {
					b.Fatal(err)
				}
			}
			cpu.report(b, 0)
		})
		b.Run(shape.name+"/impl=quotakit", func(b *testing.B) {
			e := evaluator.NewPodEvaluator(nil, evaluator.PodOptions{Now: func() time.Time { return benchNow }})
			b.ReportAllocs()
			cpu := startCPU(b)
			for b.Loop() {
				if _, err := e.Usage(pod); err != nil {
					b.Fatal(err)
				}
			}
			cpu.report(b, 0)
		})
	}
}

// statsResources is what the controller asks for a typical compute quota.
var statsResources = []corev1.ResourceName{"count/pods", "pods", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"}

// BenchmarkPodUsageStats sums a namespace of 10,000 pods, and of 1,000:
// the work per pod is the same, but 1,000 pods (12 MB) fit in the
// processor's cache and 10,000 (120 MB) do not, and reading pods from
// memory is most of what the quotakit evaluator spends.
func BenchmarkPodUsageStats(b *testing.B) {
	for _, n := range []int{benchPods, benchPods / 10} {
		for _, shape := range podShapes {
			benchmarkPodUsageStats(b, n, shape.name, shape.pod)
		}
	}
}

func benchmarkPodUsageStats(b *testing.B, n int, shape string, pod func(int) *corev1.Pod) {
	indexer := podIndexer(b, n, pod)
	for _, tc := range []struct {
		name     string
		selector *corev1.ScopeSelector
	}{
		{"scope=none", nil},
		{"scope=PriorityClassIn", &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
			{ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpIn, Values: []string{"high"}},
		}}},
	} {
		name := fmt.Sprintf("n=%d/%s/%s", n, shape, tc.name)
		opts := upquota.UsageStatsOptions{Namespace: "ns", Resources: statsResources, ScopeSelector: tc.selector}
		b.Run(name+"/impl=upstream", func(b *testing.B) {
			e := upcore.NewPodEvaluator(upstreamListerFunc(indexer), testingclock.NewFakeClock(benchNow))
			b.ReportAllocs()
			cpu := startCPU(b)
			for b.Loop() {
				if _, err := e.UsageStats(opts); err != nil {
					b.Fatal(err)
				}
			}
			reportPerPod(b, n)
			cpu.report(b, n)
		})
		b.Run(name+"/impl=quotakit", func(b *testing.B) {
			e := evaluator.NewPodEvaluator(oursListFunc(indexer), evaluator.PodOptions{Now: func() time.Time { return benchNow }})
			b.ReportAllocs()
			cpu := startCPU(b)
			for b.Loop() {
				if _, err := e.UsageStats(quota.UsageStatsOptions(opts)); err != nil {
					b.Fatal(err)
				}
			}
			reportPerPod(b, n)
			cpu.report(b, n)
		})
	}
}

func BenchmarkCalculateUsage(b *testing.B) {
	hard := rl("count/pods", "20000", "pods", "20000", "requests.cpu", "10k", "requests.memory", "10Ti", "limits.cpu", "20k", "limits.memory", "20Ti")
	for _, shape := range podShapes {
		indexer := podIndexer(b, benchPods, shape.pod)
		b.Run(shape.name+"/impl=upstream", func(b *testing.B) {
			registry := upgeneric.NewRegistry([]upquota.Evaluator{upcore.NewPodEvaluator(upstreamListerFunc(indexer), testingclock.NewFakeClock(benchNow))})
			b.ReportAllocs()
			cpu := startCPU(b)
			for b.Loop() {
				if _, err := upquota.CalculateUsage("ns", nil, hard, registry, nil); err != nil {
					b.Fatal(err)
				}
			}
			reportPerPod(b, benchPods)
			cpu.report(b, benchPods)
		})
		{
			b.Run(shape.name+"/impl=quotakit", func(b *testing.B) {
				opts := evaluator.PodOptions{Now: func() time.Time { return benchNow }}
				registry := generic.NewRegistry(evaluator.NewPodEvaluator(oursListFunc(indexer), opts))
				b.ReportAllocs()
				cpu := startCPU(b)
				for b.Loop() {
					if _, err := quota.CalculateUsage("ns", nil, hard, registry, nil); err != nil {
						b.Fatal(err)
					}
				}
				reportPerPod(b, benchPods)
				cpu.report(b, benchPods)
			})
		}
	}
}

// reportPerPod adds the time per pod of a benchmark over pods pods.
func reportPerPod(b *testing.B, pods int) {
	if b.N > 0 {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(pods), "ns/pod")
	}
}

// cpuTimer measures the CPU time the process spends (all threads,
// garbage collection included). On a shared machine wall time also counts
// the time spent waiting for a CPU; CPU time does not, so the ratio of two
// implementations is steadier.
type cpuTimer struct{ start time.Duration }

// startCPU starts measuring CPU time. It first collects garbage, so that
// the collection of what the benchmark's setup left behind is not charged
// to the code under test.
func startCPU(b *testing.B) *cpuTimer {
	goruntime.GC()
	b.ResetTimer()
	return &cpuTimer{start: processCPU(b)}
}

// report adds cpu-ns/op, and cpu-ns/pod for a benchmark over pods pods
// (none when pods is 0).
func (c *cpuTimer) report(b *testing.B, pods int) {
	if b.N == 0 {
		return
	}
	d := float64((processCPU(b) - c.start).Nanoseconds()) / float64(b.N)
	b.ReportMetric(d, "cpu-ns/op")
	if pods > 0 {
		b.ReportMetric(d/float64(pods), "cpu-ns/pod")
	}
}

func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestBenchmarkResultsAgree makes sure the benchmarks compare equal work:
// both evaluators compute the same totals over the benchmark pods.
func TestBenchmarkResultsAgree(t *testing.T) {
	for _, shape := range podShapes {
		indexer := podIndexer(t, 300, shape.pod)
		opts := upquota.UsageStatsOptions{Namespace: "ns", Resources: statsResources}
		want, err := upcore.NewPodEvaluator(upstreamListerFunc(indexer), testingclock.NewFakeClock(benchNow)).UsageStats(opts)
		if err != nil {
			t.Fatal(err)
		}
		got, err := evaluator.NewPodEvaluator(oursListFunc(indexer), evaluator.PodOptions{Now: func() time.Time { return benchNow }}).UsageStats(quota.UsageStatsOptions(opts))
		if err != nil {
			t.Fatal(err)
		}
		if !quota.Equals(want.Used, got.Used) {
			t.Errorf("%s: UsageStats = %v, upstream %v", shape.name, got.Used, want.Used)
		}
	}
}
