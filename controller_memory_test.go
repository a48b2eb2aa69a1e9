package quotakit_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit"
	"github.com/quotakit/quotakit/cache/cachetest"
)

// BenchmarkDiscoveredMemory measures the heap the controller keeps for
// discovered resources: a cluster of 20 custom resources of 2,000 objects
// each (about 2 KiB apiece), with quotas naming one of them, or all of
// them, as kube-controller-manager watches every discovered resource
// whether or not a quota names it. heap-MiB is the live heap after the
// controller has synced, less the API's own.
func BenchmarkDiscoveredMemory(b *testing.B) {
	const resources, objects = 20, 2000
	for _, named := range []int{1, resources} {
		b.Run(fmt.Sprintf("named=%d", named), func(b *testing.B) {
			var heap float64
			for b.Loop() {
				client := &discoveringClient{testClient: newTestClient(), watches: map[schema.GroupVersionResource]int{}}
				payload := strings.Repeat("x", 2048)
				for r := range resources {
					gvr := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: fmt.Sprintf("things%d", r)}
					if err := client.Register(cachetest.Resource{GVR: gvr, Namespaced: true, Kind: fmt.Sprintf("Thing%d", r)}); err != nil {
						b.Fatal(err)
					}
					client.served = append(client.served, gvr)
					for i := range objects {
						u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"data": payload}}}
						u.SetAPIVersion("example.com/v1")
						u.SetKind(fmt.Sprintf("Thing%d", r))
						u.SetNamespace(fmt.Sprintf("ns-%d", i%20))
						u.SetName(fmt.Sprintf("t-%d", i))
						u.SetLabels(map[string]string{"app": "demo", "tier": "backend"})
						if _, err := client.Create(context.Background(), gvr, u); err != nil {
							b.Fatal(err)
						}
					}
				}
				hard := map[string]string{}
				for r := range named {
					hard[fmt.Sprintf("count/things%d.example.com", r)] = "100000"
				}
				var kv []string
				for k, v := range hard {
					kv = append(kv, k, v)
				}
				q := testQuota("q", rl(kv...))
				q.Namespace = "ns-0"
				if _, err := client.Create(context.Background(), quotasGVR, q); err != nil {
					b.Fatal(err)
				}
				base := liveHeap()
				c, err := quotakit.NewController(client, quotakit.Options{})
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- c.Run(ctx) }()
				for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
					if c.HasSynced() && client.openWatches(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: fmt.Sprintf("things%d", named-1)}) > 0 {
						break
					}
					if time.Now().After(deadline) {
						b.Fatal("controller did not sync")
					}
				}
				time.Sleep(100 * time.Millisecond)
				heap += float64(liveHeap()-base) / (1 << 20)
				runtime.KeepAlive(c)
				cancel()
				<-done
				client.Close()
			}
			b.ReportMetric(heap/float64(b.N), "heap-MiB")
		})
	}
}

func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
