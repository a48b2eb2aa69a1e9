package quotakit

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit/cache/cachetest"
	"github.com/quotakit/quotakit/internal/ledger"
)

// TestLedgerDriftIsCorrected corrupts the ledger's totals of a quota and
// checks that the next full resync finds it, counts it, and writes the
// truth, and that the ledger is right afterwards.
func TestLedgerDriftIsCorrected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		api := cachetest.New(cachetest.Options{})
		defer api.Close()
		pods := corev1.SchemeGroupVersion.WithResource("pods")
		quotas := corev1.SchemeGroupVersion.WithResource("resourcequotas")
		for _, name := range []string{"a", "b", "c"} {
			if _, err := api.Create(ctx, pods, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
				}}}},
			}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := api.Create(ctx, quotas, &corev1.ResourceQuota{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "q"},
			Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"pods": resource.MustParse("10"), "requests.cpu": resource.MustParse("10")}},
		}); err != nil {
			t.Fatal(err)
		}
		c, err := NewController(api, Options{ResyncPeriod: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- c.Run(runCtx) }()
		defer func() {
			cancel()
			<-done
		}()
		used := func() corev1.ResourceList {
			t.Helper()
			obj, err := api.Get(ctx, quotas, "ns", "q")
			if err != nil {
				t.Fatal(err)
			}
			return obj.(*corev1.ResourceQuota).Status.Used
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if got := used()["requests.cpu"]; got.String() != "3" {
			t.Fatalf("requests.cpu = %s, want 3", got.String())
		}

		// Corrupt the totals, then release a pod: the ledger now says 5.
		ledger.Corrupt(c.ledger, "ns", "q", schema.GroupResource{Resource: "pods"}, "requests.cpu", resource.MustParse("6"))
		if err := api.Delete(ctx, pods, "ns", "a", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if got := used()["requests.cpu"]; got.String() != "5" {
			t.Fatalf("requests.cpu after the corruption = %s, want the corrupted 5", got.String())
		}
		if n := c.Drifts(); n != 0 {
			t.Fatalf("Drifts() = %d before a resync, want 0", n)
		}

		// The full resync finds and corrects it.
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := used()["requests.cpu"]; got.String() != "2" {
			t.Errorf("requests.cpu after the resync = %s, want 2", got.String())
		}
		if n := c.Drifts(); n != 1 {
			t.Errorf("Drifts() = %d, want 1", n)
		}
		// The ledger is right again: the next release is counted from 2.
		if err := api.Delete(ctx, pods, "ns", "b", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if got := used()["requests.cpu"]; got.String() != "1" {
			t.Errorf("requests.cpu after another release = %s, want 1", got.String())
		}
		// A resync with nothing wrong finds no drift.
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := c.Drifts(); n != 1 {
			t.Errorf("Drifts() = %d after a clean resync, want 1", n)
		}
	})
}
