package kube_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimek8s "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"

	"github.com/quotakit/quotakit"
	"github.com/quotakit/quotakit/cache"
	"github.com/quotakit/quotakit/kube"
)

// BenchmarkCacheMemory measures the heap the controller's caches take for
// 10,000 secrets of 4 KiB each (spread over 100 namespaces), counted from
// metadata (the default) or cached whole (Options.WholeObjects): the live
// heap once every informer has synced, minus the live heap before the
// controller was built, both after a full GC. The fake clients hold the
// same objects in both runs, outside the difference. Run it with
// -benchtime=1x: each iteration builds and syncs a controller.
func BenchmarkCacheMemory(b *testing.B) {
	const secrets, size = 10_000, 4 << 10
	for _, whole := range []bool{false, true} {
		name := "metadata"
		if whole {
			name = "whole"
		}
		b.Run(name, func(b *testing.B) {
			var typedObjs, metaObjs []runtimek8s.Object
			for i := range secrets {
				om := metav1.ObjectMeta{
					Namespace: fmt.Sprintf("ns-%d", i%100), Name: fmt.Sprintf("secret-%d", i),
					UID: "00000000-0000-0000-0000-000000000000", ResourceVersion: "1",
					Labels: map[string]string{"app": "bench"},
				}
				typedObjs = append(typedObjs, &corev1.Secret{ObjectMeta: om, Data: map[string][]byte{"key": make([]byte, size)}})
				metaObjs = append(metaObjs, &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, ObjectMeta: om})
			}
			scheme := metadatafake.NewTestScheme()
			scheme.AddKnownTypeWithName(corev1.SchemeGroupVersion.WithKind("Secret"), &metav1.PartialObjectMetadata{})
			clients := kube.Clients{Typed: fake.NewClientset(typedObjs...), Metadata: metadatafake.NewSimpleMetadataClient(scheme, metaObjs...)}
			typedObjs, metaObjs = nil, nil

			for b.Loop() {
				before := liveHeap()
				opts := quotakit.Options{WholeObjects: whole, DiscoveryPeriod: -1, ResyncPeriod: -1}
				ctrl, err := quotakit.NewController(kube.New(clients, opts), opts)
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithCancel(b.Context())
				done := make(chan error, 1)
				go func() { done <- ctrl.Run(ctx) }()
				if !cache.WaitForCacheSync(ctx, ctrl.HasSynced) {
					b.Fatal("the controller did not sync")
				}
				after := liveHeap()
				b.ReportMetric(float64(after-before)/(1<<20), "cache-MiB")
				b.ReportMetric(float64(after-before)/secrets, "B/secret")
				cancel()
				if err := <-done; err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// liveHeap returns the bytes of live heap objects after a full collection.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
