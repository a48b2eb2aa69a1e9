//go:build unix

package quotakit_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit"
	"github.com/quotakit/quotakit/cache"
	"github.com/quotakit/quotakit/cache/cachetest"
)

// BenchmarkControllerExternalCharges measures what charges made by
// admission cost the controller: 1,000 charges a second, spread over 100
// namespaces of one quota each, each charge a status write of +1 pod
// followed 5 ms later by the pod (one in a hundred by nothing: its
// creation failed after admission), for chargeRunTime of wall time. The
// controller runs with the charge window (syncing each quota whose
// status.used someone else changed) and without it
// (kube-controller-manager's rule), and not at all, for the load's own
// CPU. It reports the process CPU per charge and the controller's status
// writes per charge; run it with -benchtime=1x, alternating the cases.
func BenchmarkControllerExternalCharges(b *testing.B) {
	for _, tt := range []struct {
		name       string
		controller bool
		window     time.Duration
	}{
		{"load-only", false, 0},
		{"charge-window", true, 2 * time.Second},
		{"no-window", true, -1},
	} {
		b.Run(tt.name, func(b *testing.B) {
			var cpuPerCharge, writesPerCharge float64
			for b.Loop() {
				cpuPerCharge, writesPerCharge = externalCharges(b, tt.controller, tt.window)
			}
			b.ReportMetric(cpuPerCharge, "cpu-µs/charge")
			b.ReportMetric(writesPerCharge, "ctrl-writes/charge")
		})
	}
}

const (
	chargeRunTime    = 5 * time.Second
	chargeNamespaces = 100
	chargesPerSecond = 1000
)

func externalCharges(b *testing.B, controller bool, window time.Duration) (cpuPerCharge, writesPerCharge float64) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	api := cachetest.New(cachetest.Options{})
	defer api.Close()
	hard := corev1.ResourceList{"pods": resource.MustParse("1000000")}
	for i := range chargeNamespaces {
		if _, err := api.Create(ctx, quotasGVR, &corev1.ResourceQuota{
			ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns-%d", i), Name: "q"},
			Spec:       corev1.ResourceQuotaSpec{Hard: hard},
			Status:     corev1.ResourceQuotaStatus{Hard: hard, Used: corev1.ResourceList{"pods": resource.MustParse("0")}},
		}); err != nil {
			b.Fatal(err)
		}
	}
	client := &countingClient{api: api}
	var wg sync.WaitGroup
	if controller {
		c, err := quotakit.NewController(client, quotakit.Options{ChargeWindow: window})
		if err != nil {
			b.Fatal(err)
		}
		wg.Go(func() { _ = c.Run(ctx) })
		time.Sleep(6 * time.Second) // start grace
	}
	client.writes.Store(0)
	before := cpuTime()
	rng := rand.New(rand.NewPCG(1, 2))
	tick := time.NewTicker(time.Second / chargesPerSecond)
	deadline := time.Now().Add(chargeRunTime)
	var charges int
	var stores sync.WaitGroup
	for time.Now().Before(deadline) {
		<-tick.C
		ns := fmt.Sprintf("ns-%d", rng.IntN(chargeNamespaces))
		if err := chargeOne(ctx, api, ns); err != nil {
			b.Fatal(err)
		}
		charges++
		name := fmt.Sprintf("p-%d", charges)
		if rng.IntN(100) == 0 {
			continue
		}
		stores.Go(func() {
			time.Sleep(5 * time.Millisecond)
			_, _ = api.Create(ctx, podsGVR, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
		})
	}
	tick.Stop()
	stores.Wait()
	used := cpuTime() - before
	writes := client.writes.Load()
	cancel()
	wg.Wait()
	return float64(used.Microseconds()) / float64(charges), float64(writes) / float64(charges)
}

// chargeOne adds a pod to the status.used of ns's quota, as admission
// does, retrying conflicts.
func chargeOne(ctx context.Context, api *cachetest.Server, ns string) error {
	for {
		obj, err := api.Get(ctx, quotasGVR, ns, "q")
		if err != nil {
			return err
		}
		q := obj.(*corev1.ResourceQuota)
		used := q.Status.Used["pods"]
		used.Add(resource.MustParse("1"))
		q.Status.Used["pods"] = used
		if _, err := api.UpdateStatus(ctx, quotasGVR, q); !apierrors.IsConflict(err) {
			return err
		}
	}
}

// countingClient is the API, counting the controller's status writes.
type countingClient struct {
	api    *cachetest.Server
	writes atomic.Int64
}

func (c *countingClient) ListerWatcher(gvr schema.GroupVersionResource, namespace string) cache.ListerWatcher {
	return c.api.ListerWatcher(gvr, namespace)
}

func (c *countingClient) UpdateStatus(ctx context.Context, gvr schema.GroupVersionResource, obj runtime.Object) (runtime.Object, error) {
	out, err := c.api.UpdateStatus(ctx, gvr, obj)
	if err == nil {
		c.writes.Add(1)
	}
	return out, err
}

// cpuTime returns the user and system CPU time of the process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
