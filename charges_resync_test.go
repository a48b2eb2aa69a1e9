package quotakit

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quotakit/quotakit/cache"
	"github.com/quotakit/quotakit/cache/cachetest"
)

// TestResyncCountsAnArrivalOnce pins a cause of a quota of 50 holding 51
// pods beside kube-apiserver's plugin: a full resync recalculates from
// the informers' caches, which their event handlers, and so the ledger,
// follow. An object the cache holds and the ledger does not yet was
// counted as arrived twice: once by the recalculation's growth, and again
// when the ledger's count of arrivals caught up. The second time it took
// the place of a charge still in flight, and the controller wrote
// status.used one below what was admitted, which the plugin then admitted
// again.
//
// The test holds the ledger back by hand: the pod enters the cache before
// the handler has seen it, as it does for the moment between the two.
func TestResyncCountsAnArrivalOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		api := cachetest.New(cachetest.Options{})
		defer api.Close()
		pods := corev1.SchemeGroupVersion.WithResource("pods")
		quotas := corev1.SchemeGroupVersion.WithResource("resourcequotas")
		created, err := api.Create(ctx, quotas, &corev1.ResourceQuota{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "q"},
			Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"pods": resource.MustParse("10")}},
		})
		if err != nil {
			t.Fatal(err)
		}
		// Admission admitted two pods, x and y, and charged them.
		charged := created.(*corev1.ResourceQuota).DeepCopy()
		charged.Status = corev1.ResourceQuotaStatus{
			Hard: corev1.ResourceList{"pods": resource.MustParse("10")},
			Used: corev1.ResourceList{"pods": resource.MustParse("2")},
		}
		if _, err := api.UpdateStatus(ctx, quotas, charged); err != nil {
			t.Fatal(err)
		}
		c, err := NewController(api, Options{ResyncPeriod: -1})
		if err != nil {
			t.Fatal(err)
		}
		// The informers only: the test syncs the quota itself.
		var wg sync.WaitGroup
		defer wg.Wait()
		defer cancel()
		defer c.queues.shutDown()
		defer c.changes.ShutDown()
		var podMonitor *monitor
		for _, m := range c.static {
			wg.Go(func() { m.informer.Run(ctx) })
			if m.gvr == pods {
				podMonitor = m
			}
		}
		if !c.isStatic(c.quotaInformer) {
			wg.Go(func() { c.quotaInformer.Run(ctx) })
		}
		synctest.Wait()
		if !cache.WaitForCacheSync(ctx, c.quotaInformer.HasSynced, podMonitor.synced) {
			t.Fatal("informers did not sync")
		}
		used := func() int64 {
			t.Helper()
			obj, err := api.Get(ctx, quotas, "ns", "q")
			if err != nil {
				t.Fatal(err)
			}
			q := obj.(*corev1.ResourceQuota).Status.Used["pods"]
			return q.Value()
		}
		sync := func(what string) {
			t.Helper()
			if err := c.syncQuota(ctx, quotaRef{kind: c.resourceQuotas, key: "ns/q"}); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			synctest.Wait()
		}

		sync("first sync")
		if u := used(); u != 2 {
			t.Fatalf("after the first sync status.used pods = %d, want 2: both charges in flight", u)
		}

		// x is stored: the cache holds it, the ledger not yet.
		x := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x", ResourceVersion: "1000"}}
		if err := podMonitor.informer.GetIndexer().Add(x); err != nil {
			t.Fatal(err)
		}
		// A full resync recalculates the quota from the cache.
		if err := c.enqueueAll(); err != nil {
			t.Fatal(err)
		}
		sync("the resync's sync")
		// The handler catches up: the ledger counts x's arrival.
		podMonitor.kept.Observe("ns", "ns/x", x)
		sync("the sync after x's arrival")
		// y is still on its way: x and y are both admitted.
		if u := used(); u < 2 {
			t.Fatalf("status.used pods = %d while x is stored and y admitted on its way; want 2", u)
		}
	})
}
