package bench

// Side-by-side benchmarks of quotakit's cache package and client-go's
// tools/cache: DeltaFIFO throughput and relist cost, Indexer write cost and
// memory, and namespace lookups. Each benchmark runs the same workload
// against both, as the sub-benchmarks "quotakit" and "client-go".
//
// Workloads of 100k pods report per-object metrics (ns/obj, B/obj,
// allocs/obj) next to the per-op ones, measured with runtime.MemStats
// around the b.Loop.

import (
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	kcache "k8s.io/client-go/tools/cache"

	"github.com/quotakit/quotakit/cache"
)

const (
	cachePods       = 100_000
	cacheNamespaces = 100
)

// cacheBenchPods returns n distinct realistic pods (see realisticPod),
// spread over cacheNamespaces namespaces.
func cacheBenchPods(n int) []*corev1.Pod {
	pods := make([]*corev1.Pod, n)
	for i := range pods {
		pods[i] = realisticPod(i)
	}
	return pods
}

// cachePerObject runs body once per b.Loop iteration and reports ns, bytes and
// allocations per object, body handling n objects each time.
func cachePerObject(b *testing.B, n int, body func()) {
	b.Helper()
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	iters := 0
	for b.Loop() {
		body()
		iters++
	}
	runtime.ReadMemStats(&after)
	objs := float64(iters * n)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/objs, "ns/obj")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/objs, "B/obj")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/objs, "allocs/obj")
}

// BenchmarkDeltaFIFOAddPop adds 100k pods to an empty queue and pops them
// all with a no-op process function.
func BenchmarkDeltaFIFOAddPop(b *testing.B) {
	pods := cacheBenchPods(cachePods)
	b.Run("quotakit", func(b *testing.B) {
		ctx := b.Context()
		process := func(cache.Deltas, bool) error { return nil }
		cachePerObject(b, len(pods), func() {
			f := cache.NewDeltaFIFO(cache.DeltaFIFOOptions{})
			for _, p := range pods {
				if err := f.Add(p); err != nil {
					b.Fatal(err)
				}
			}
			for range pods {
				if err := f.Pop(ctx, process); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("client-go", func(b *testing.B) {
		process := func(any, bool) error { return nil }
		cachePerObject(b, len(pods), func() {
			f := kcache.NewDeltaFIFOWithOptions(kcache.DeltaFIFOOptions{KeyFunction: kcache.MetaNamespaceKeyFunc})
			for _, p := range pods {
				if err := f.Add(p); err != nil {
					b.Fatal(err)
				}
			}
			for range pods {
				if _, err := f.Pop(process); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}

// BenchmarkDeltaFIFOReplace relists into an empty queue whose known
// objects hold 100k pods; 10% of them are gone from the list, so the
// Replace queues 90k Sync deltas and 10k tombstones.
func BenchmarkDeltaFIFOReplace(b *testing.B) {
	pods := cacheBenchPods(cachePods)
	var list []any
	for i, p := range pods {
		if i%10 != 0 {
			list = append(list, p)
		}
	}
	b.Run("quotakit", func(b *testing.B) {
		known := cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
		for _, p := range pods {
			_ = known.Add(p)
		}
		cachePerObject(b, len(pods), func() {
			f := cache.NewDeltaFIFO(cache.DeltaFIFOOptions{KnownObjects: known})
			if err := f.Replace(list, "2000000"); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("client-go", func(b *testing.B) {
		known := kcache.NewIndexer(kcache.DeletionHandlingMetaNamespaceKeyFunc, kcache.Indexers{kcache.NamespaceIndex: kcache.MetaNamespaceIndexFunc})
		for _, p := range pods {
			_ = known.Add(p)
		}
		cachePerObject(b, len(pods), func() {
			f := kcache.NewDeltaFIFOWithOptions(kcache.DeltaFIFOOptions{KeyFunction: kcache.MetaNamespaceKeyFunc, KnownObjects: known})
			if err := f.Replace(list, "2000000"); err != nil {
				b.Fatal(err)
			}
		})
	})
}

// BenchmarkIndexerAdd adds 100k pre-built pods to an empty indexer with the
// namespace index. B/obj is everything the indexer allocates per object
// (key, map slots, index sets, including map growth); the objects
// themselves are built beforehand and not counted.
func BenchmarkIndexerAdd(b *testing.B) {
	pods := cacheBenchPods(cachePods)
	b.Run("quotakit", func(b *testing.B) {
		cachePerObject(b, len(pods), func() {
			idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
			for _, p := range pods {
				if err := idx.Add(p); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("client-go", func(b *testing.B) {
		cachePerObject(b, len(pods), func() {
			idx := kcache.NewIndexer(kcache.MetaNamespaceKeyFunc, kcache.Indexers{kcache.NamespaceIndex: kcache.MetaNamespaceIndexFunc})
			for _, p := range pods {
				if err := idx.Add(p); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}

// BenchmarkIndexerRetained reports the heap an indexer with the namespace
// index keeps per stored object once 100k pre-built pods are in it, after
// garbage collection: the steady-state overhead, without the garbage of map
// growth.
func BenchmarkIndexerRetained(b *testing.B) {
	pods := cacheBenchPods(cachePods)
	retained := func(b *testing.B, build func() any) {
		var kept any
		var total uint64
		iters := 0
		for b.Loop() {
			b.StopTimer()
			kept = nil
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			b.StartTimer()
			kept = build()
			b.StopTimer()
			runtime.GC()
			runtime.ReadMemStats(&after)
			total += after.HeapAlloc - before.HeapAlloc
			iters++
			b.StartTimer()
		}
		runtime.KeepAlive(kept)
		b.ReportMetric(float64(total)/float64(iters*len(pods)), "retained-B/obj")
	}
	b.Run("quotakit", func(b *testing.B) {
		retained(b, func() any {
			idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
			for _, p := range pods {
				_ = idx.Add(p)
			}
			return idx
		})
	})
	b.Run("client-go", func(b *testing.B) {
		retained(b, func() any {
			idx := kcache.NewIndexer(kcache.MetaNamespaceKeyFunc, kcache.Indexers{kcache.NamespaceIndex: kcache.MetaNamespaceIndexFunc})
			for _, p := range pods {
				_ = idx.Add(p)
			}
			return idx
		})
	})
}

// BenchmarkByIndex reads the 1000 pods of one namespace out of 100k.
func BenchmarkByIndex(b *testing.B) {
	pods := cacheBenchPods(cachePods)
	b.Run("quotakit", func(b *testing.B) {
		idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
		for _, p := range pods {
			_ = idx.Add(p)
		}
		b.ReportAllocs()
		for b.Loop() {
			items, err := idx.ByIndex(cache.NamespaceIndex, "ns-042")
			if err != nil || len(items) != cachePods/cacheNamespaces {
				b.Fatalf("ByIndex = %d items, %v", len(items), err)
			}
		}
	})
	b.Run("client-go", func(b *testing.B) {
		idx := kcache.NewIndexer(kcache.MetaNamespaceKeyFunc, kcache.Indexers{kcache.NamespaceIndex: kcache.MetaNamespaceIndexFunc})
		for _, p := range pods {
			_ = idx.Add(p)
		}
		b.ReportAllocs()
		for b.Loop() {
			items, err := idx.ByIndex(kcache.NamespaceIndex, "ns-042")
			if err != nil || len(items) != cachePods/cacheNamespaces {
				b.Fatalf("ByIndex = %d items, %v", len(items), err)
			}
		}
	})
}
