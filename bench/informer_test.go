package bench

import (
	"context"
	"fmt"
	"maps"
	goruntime "runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	clientcache "k8s.io/client-go/tools/cache"

	"github.com/quotakit/quotakit/cache"
)

// informerSource serves a list of pods, then one watch that delivers an
// update of every pod. A watch that asks for initial events (client-go's
// default WatchList mode) first gets every pod as an add and the
// end-of-initial-events bookmark. It is shared by both informers, so both do
// the same work on the same objects.
type informerSource struct {
	list    *corev1.PodList
	updates []*corev1.Pod
	mu      sync.Mutex
	served  bool
	// release is closed when the updates may start: once the informer
	// has synced, so that the time to sync measures the initial state
	// alone.
	release chan struct{}
	// syncOnly leaves the updates out: the scenario ends at the first
	// sync, for a profile of it alone.
	syncOnly bool
}

func newInformerSource(n, namespaces int) *informerSource {
	s := &informerSource{list: &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: fmt.Sprint(1000 + n)}}}
	s.list.Items = make([]corev1.Pod, n)
	for i := range n {
		s.list.Items[i] = *realisticPodIn(i, namespaces)
	}
	// Updates share everything but their metadata's labels and
	// resourceVersion with the listed pod, so that the source does not
	// hold two copies of 100k realistic pods.
	s.updates = make([]*corev1.Pod, n)
	for i := range n {
		u := s.list.Items[i]
		u.ResourceVersion = fmt.Sprint(1000 + n + 1 + i)
		u.Labels = maps.Clone(u.Labels)
		u.Labels["rev"] = "2"
		s.updates[i] = &u
	}
	return s
}

func (s *informerSource) List(context.Context, metav1.ListOptions) (runtime.Object, error) {
	return s.list, nil
}

// Watch returns, the first time, a watch that sends every update; later
// watches stay idle until stopped.
func (s *informerSource) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	s.mu.Lock()
	first := !s.served
	s.served = true
	s.mu.Unlock()
	w := watch.NewFakeWithChanSize(1024, false)
	if first {
		initial := opts.SendInitialEvents != nil && *opts.SendInitialEvents
		go func() {
			if initial {
				for i := range s.list.Items {
					if w.IsStopped() {
						return
					}
					w.Add(&s.list.Items[i])
				}
				w.Action(watch.Bookmark, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
					ResourceVersion: s.list.ResourceVersion,
					Annotations:     map[string]string{metav1.InitialEventsAnnotationKey: "true"},
				}})
			}
			select {
			case <-s.release:
			case <-ctx.Done():
				return
			}
			for _, u := range s.updates {
				if s.syncOnly {
					break
				}
				if w.IsStopped() {
					return
				}
				w.Modify(u)
			}
		}()
	}
	return w, nil
}

// heapSampler records the peak of live heap objects while it runs.
type heapSampler struct {
	stop chan struct{}
	done chan struct{}
	peak uint64
}

func startHeapSampler() *heapSampler {
	h := &heapSampler{stop: make(chan struct{}), done: make(chan struct{})}
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	go func() {
		defer close(h.done)
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(sample)
			h.peak = max(h.peak, sample[0].Value.Uint64())
			select {
			case <-h.stop:
				return
			case <-t.C:
			}
		}
	}()
	return h
}

func (h *heapSampler) finish() uint64 {
	close(h.stop)
	<-h.done
	return h.peak
}

func liveHeap() uint64 {
	goruntime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	return sample[0].Value.Uint64()
}

// informerRun is one informer implementation under test: start it with a
// counting handler and return its HasSynced and a stop function.
type informerRun func(ctx context.Context, src *informerSource, adds, updates *atomic.Int64) (synced func() bool, wait func())

func runOurInformer(ctx context.Context, src *informerSource, adds, updates *atomic.Int64) (func() bool, func()) {
	return runOurs(ctx, src, adds, updates, false)
}

func runOurInformerWatchList(ctx context.Context, src *informerSource, adds, updates *atomic.Int64) (func() bool, func()) {
	return runOurs(ctx, src, adds, updates, true)
}

func runOurs(ctx context.Context, src *informerSource, adds, updates *atomic.Int64, watchList bool) (func() bool, func()) {
	inf := cache.NewSharedIndexInformer(src, &corev1.Pod{}, cache.SharedIndexInformerOptions{
		Indexers:  cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
		Reflector: cache.ReflectorOptions{UseWatchList: watchList},
	})
	inf.AddEventHandler(cache.ResourceEventHandlerFuncs[any]{
		AddFunc:    func(any, bool) { adds.Add(1) },
		UpdateFunc: func(_, _ any) { updates.Add(1) },
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		inf.Run(ctx)
	}()
	return inf.HasSynced, func() { <-done }
}

// listOnlyLW tells client-go's reflector that it cannot stream the initial
// state, as client-go's fake clientsets do, so that it lists instead.
type listOnlyLW struct{ *clientcache.ListWatch }

func (listOnlyLW) IsWatchListSemanticsUnSupported() bool { return true }

func runClientGoInformer(ctx context.Context, src *informerSource, adds, updates *atomic.Int64) (func() bool, func()) {
	return runClientGo(ctx, src, adds, updates, true)
}

func runClientGoInformerList(ctx context.Context, src *informerSource, adds, updates *atomic.Int64) (func() bool, func()) {
	return runClientGo(ctx, src, adds, updates, false)
}

func runClientGo(ctx context.Context, src *informerSource, adds, updates *atomic.Int64, watchList bool) (func() bool, func()) {
	var lw clientcache.ListerWatcher = &clientcache.ListWatch{
		ListWithContextFunc:  src.List,
		WatchFuncWithContext: src.Watch,
	}
	if !watchList {
		lw = listOnlyLW{lw.(*clientcache.ListWatch)}
	}
	inf := clientcache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, clientcache.Indexers{clientcache.NamespaceIndex: clientcache.MetaNamespaceIndexFunc})
	inf.AddEventHandler(clientcache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { adds.Add(1) },
		UpdateFunc: func(_, _ any) { updates.Add(1) },
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		inf.RunWithContext(ctx)
	}()
	return inf.HasSynced, func() { <-done }
}

// informerImpls are the informers compared, each listing the initial state
// and streaming it (client-go's default since WatchListClient went on by
// default; ours with ReflectorOptions.UseWatchList).
var informerImpls = map[string]informerRun{
	"quotakit-list":       runOurInformer,
	"quotakit-watchlist":  runOurInformerWatchList,
	"client-go-list":      runClientGoInformerList,
	"client-go-watchlist": runClientGoInformer,
}

// informerCPU returns the CPU time the process has used, user and system.
// On a machine shared with other jobs it measures an informer's work more
// steadily than wall time, which includes waiting for a core.
func informerCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// informerPoll is how often a scenario looks at HasSynced and the
// handler's counts: often enough that polling adds little to what is
// measured.
const informerPoll = 250 * time.Microsecond

// informerResult is what one run of a scenario measured.
type informerResult struct {
	// toAdds is the time until the handler had seen every add; toSync
	// until HasSynced (ours waits for the handlers; client-go's does not,
	// so it can come before toAdds); cpuToAdds the process CPU time
	// until toAdds.
	toAdds, toSync, cpuToAdds time.Duration
	// toUpdates is the time from max(toAdds, toSync) until the handler
	// had seen every update.
	toUpdates time.Duration
	// peak is the peak live heap above the baseline.
	peak uint64
}

// runInformerScenario runs one informer over src until its handler has
// seen every add and update.
func runInformerScenario(t testing.TB, run informerRun, src *informerSource) informerResult {
	n := int64(len(src.updates))
	src.served = false
	src.release = make(chan struct{})
	base := liveHeap()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var adds, updates atomic.Int64
	var r informerResult
	sampler := startHeapSampler()
	cpuStart := informerCPU()
	start := time.Now()
	synced, wait := run(ctx, src, &adds, &updates)
	deadline := start.Add(2 * time.Minute)
	for r.toAdds == 0 || r.toSync == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("after 2 minutes: %d adds, synced %v", adds.Load(), synced())
		}
		if r.toAdds == 0 && adds.Load() == n {
			r.toAdds = time.Since(start)
			r.cpuToAdds = informerCPU() - cpuStart
		}
		if r.toSync == 0 && synced() {
			r.toSync = time.Since(start)
		}
		time.Sleep(informerPoll)
	}
	both := time.Since(start)
	close(src.release)
	for !src.syncOnly && updates.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d updates after 2 minutes", updates.Load(), n)
		}
		time.Sleep(informerPoll)
	}
	r.toUpdates = time.Since(start) - both
	r.peak = sampler.finish()
	cancel()
	wait()
	if adds.Load() != n {
		t.Fatalf("handler saw %d adds, want %d", adds.Load(), n)
	}
	r.peak -= min(base, r.peak)
	return r
}

// TestInformerScenario checks, on a small scale, that both informers do
// the benchmark's work: every add and every update reaches the handler.
func TestInformerScenario(t *testing.T) {
	src := newInformerSource(2000, 100)
	for name, run := range informerImpls {
		t.Run(name, func(t *testing.T) { runInformerScenario(t, run, src) })
	}
}

// BenchmarkInformer lists 100k realistic pods (see realisticPod) over
// 1,000 namespaces, with the namespace index, and then watches an update
// of each, with one handler, reporting the time until the handler has
// seen every add and the process CPU time spent until then, the time to
// HasSynced, the time from both until the handler has seen every update,
// and the peak live heap above what the source itself holds. Run the
// implementations alternately, one -count=1 at a time: see BENCHMARKS.md.
func BenchmarkInformer(b *testing.B) {
	const n = 100_000
	src := newInformerSource(n, 1000)
	for _, name := range []string{"quotakit-list", "client-go-list", "quotakit-watchlist", "client-go-watchlist"} {
		run := informerImpls[name]
		b.Run(name, func(b *testing.B) {
			var total informerResult
			iters := 0
			for b.Loop() {
				r := runInformerScenario(b, run, src)
				total.toAdds += r.toAdds
				total.toSync += r.toSync
				total.cpuToAdds += r.cpuToAdds
				total.toUpdates += r.toUpdates
				total.peak += r.peak
				iters++
			}
			ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 / float64(iters) }
			b.ReportMetric(ms(total.toAdds), "ms-to-adds")
			b.ReportMetric(ms(total.toSync), "ms-to-synced")
			b.ReportMetric(ms(total.cpuToAdds), "cpu-ms-to-adds")
			b.ReportMetric(ms(total.toUpdates), "ms-for-updates")
			b.ReportMetric(float64(total.peak)/float64(iters)/1e6, "peak-heap-MB")
		})
	}
}

// BenchmarkInformerFloor measures the floor under an informer's first
// sync of the same 100k pods: walking the already-decoded objects once
// into a store keyed by namespace/name with a namespace index, and handing
// each to a handler once. No informer can deliver the adds faster than
// this on the same machine; BenchmarkInformer's figures are read against
// it.
func BenchmarkInformerFloor(b *testing.B) {
	const n = 100_000
	src := newInformerSource(n, 1000)
	b.ReportAllocs()
	var adds atomic.Int64
	handler := func(any) { adds.Add(1) }
	for b.Loop() {
		items := make(map[string]any, n)
		byNS := map[string]map[string]struct{}{}
		for i := range src.list.Items {
			p := &src.list.Items[i]
			key := p.Namespace + "/" + p.Name
			items[key] = p
			keys := byNS[p.Namespace]
			if keys == nil {
				keys = map[string]struct{}{}
				byNS[p.Namespace] = keys
			}
			keys[key] = struct{}{}
			handler(p)
		}
	}
	if adds.Load()%n != 0 {
		b.Fatalf("%d adds, not a multiple of %d", adds.Load(), n)
	}
}

// BenchmarkInformerSync is BenchmarkInformer's first sync alone, without
// the updates: the benchmark to profile (-cpuprofile) for where the first
// sync spends its time.
func BenchmarkInformerSync(b *testing.B) {
	const n = 100_000
	src := newInformerSource(n, 1000)
	src.syncOnly = true
	for _, name := range []string{"quotakit-list", "client-go-list"} {
		run := informerImpls[name]
		b.Run(name, func(b *testing.B) {
			var total time.Duration
			iters := 0
			for b.Loop() {
				total += runInformerScenario(b, run, src).toAdds
				iters++
			}
			b.ReportMetric(float64(total.Microseconds())/1e3/float64(iters), "ms-to-adds")
		})
	}
}
