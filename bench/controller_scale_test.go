package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	goruntime "runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
)

// Benchmarks of replenishment at scale: how the cost of releasing one pod's
// usage grows with the size of its namespace, and how soon many quotas
// converge after many events. kube-controller-manager sums the whole
// namespace on each replenishment; quotakit moves the totals it keeps by
// the released object's usage.

// BenchmarkControllerReplenishmentScale deletes one pod per iteration
// from a namespace of 1k, 10k or 100k pods and waits until both of its
// quotas show the usage without it. cpu-ns/op is the CPU of the whole
// process per deletion: the fake API, the informers and the controller.
func BenchmarkControllerReplenishmentScale(b *testing.B) {
	for _, pods := range []int{1000, 10000, 100000} {
		for _, im := range impls {
			b.Run(fmt.Sprintf("pods=%d/impl=%s", pods, im.name), func(b *testing.B) {
				c := population{namespaces: 1, pods: pods}.build()
				cs, log := c.clientset()
				log.expect(c.keys(nil), c.matches(c.expected(b)))
				ctx, cancel := context.WithCancel(b.Context())
				wait := im.start(ctx, b, cs)
				defer func() { cancel(); wait() }()
				log.wait(b, 10*time.Minute)
				var cpu float64
				for b.Loop() {
					b.StopTimer()
					left := c.objects["pods"]["ns-00"]
					if len(left) == 0 {
						b.Fatal("out of pods")
					}
					p := left[0].(*corev1.Pod)
					c.objects["pods"]["ns-00"] = left[1:]
					log.expect(c.keys(nil), c.matches(c.expected(b)))
					// The recount above allocates in proportion to the
					// namespace; collect its garbage before timing.
					goruntime.GC()
					cpu0 := processCPU(b)
					b.StartTimer()

					if err := cs.CoreV1().Pods(p.Namespace).Delete(b.Context(), p.Name, metav1.DeleteOptions{}); err != nil {
						b.Fatal(err)
					}
					log.wait(b, 5*time.Minute)

					b.StopTimer()
					cpu += float64(processCPU(b) - cpu0)
					b.StartTimer()
				}
				b.ReportMetric(cpu/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// convergence is the cluster of BenchmarkControllerConvergence: 1,000
// namespaces of 100 pods, two quotas each; 10,000 events.
var convergence = struct {
	population
	events int
}{population{namespaces: 1000, pods: 100}, 10000}

// BenchmarkControllerConvergence applies random events — deletions, pods
// turning Succeeded, in-place resizes, and activeDeadlineSeconds set or
// cleared (a Terminating scope flip) — to a running controller's cluster,
// and times from the first event until every quota's status equals a
// recount. Setting up the cluster and the controller's initial sync are
// not timed. events-ns/op is the time the events took to write, a floor
// under ns/op; status-writes/op counts the controller's status writes.
func BenchmarkControllerConvergence(b *testing.B) {
	// The fake clientset's watchers panic when their buffer is full; the
	// events here are written faster than informers take them.
	defer func(n int32) { watch.DefaultChanSize = n }(watch.DefaultChanSize)
	watch.DefaultChanSize = int32(2 * convergence.events)
	for _, im := range impls {
		b.Run("impl="+im.name, func(b *testing.B) {
			var cpu, writing, statuses float64
			for b.Loop() {
				b.StopTimer()
				c := convergence.build()
				cs, log := c.clientset()
				log.expect(c.keys(nil), c.matches(c.expected(b)))
				ctx, cancel := context.WithCancel(b.Context())
				wait := im.start(ctx, b, cs)
				log.wait(b, 10*time.Minute)
				events := c.randomEvents(rand.New(rand.NewPCG(1, 2)), convergence.events)
				log.expect(c.keys(nil), c.matches(c.expected(b)))
				goruntime.GC()
				cpu0 := processCPU(b)
				writes0 := log.count()
				t0 := time.Now()
				b.StartTimer()

				for _, ev := range events {
					ev(b, cs)
				}
				written := time.Since(t0)
				log.wait(b, 10*time.Minute)

				b.StopTimer()
				cpu += float64(processCPU(b) - cpu0)
				writing += float64(written)
				statuses += float64(log.count() - writes0)
				cancel()
				wait()
				b.StartTimer()
			}
			b.ReportMetric(cpu/float64(b.N), "cpu-ns/op")
			b.ReportMetric(writing/float64(b.N), "events-ns/op")
			b.ReportMetric(statuses/float64(b.N), "status-writes/op")
		})
	}
}

// podsResource is the resource of pods, for writes to an object tracker.
var podsResource = corev1.SchemeGroupVersion.WithResource("pods")

// randomEvents changes c's pods as n random events would and returns the
// writes that make the same changes to a clientset. They are written to
// its object tracker, the fake API server's storage, as an API server
// writes to etcd: the clientset's own methods would record a deep copy of
// every action and copy each 9 KB pod five times, which made the writes
// most of the benchmark's CPU and, for quotakit, of its time. Both
// controllers see the same watch events either way.
func (c *cluster) randomEvents(r *rand.Rand, n int) []func(testing.TB, *fake.Clientset) {
	var out []func(testing.TB, *fake.Clientset)
	version := 0
	for range n {
		ns := fmt.Sprintf("ns-%02d", r.IntN(len(c.objects["pods"])))
		pods := c.objects["pods"][ns]
		if len(pods) == 0 {
			continue
		}
		i := r.IntN(len(pods))
		pod := pods[i].(*corev1.Pod).DeepCopy()
		switch k := r.IntN(10); {
		case k < 4:
			c.objects["pods"][ns] = append(pods[:i:i], pods[i+1:]...)
			out = append(out, func(tb testing.TB, cs *fake.Clientset) {
				if err := cs.Tracker().Delete(podsResource, ns, pod.Name); err != nil {
					tb.Fatal(err)
				}
			})
			continue
		case k < 7:
			pod.Status.Phase = corev1.PodSucceeded
		case k < 9:
			cpu := *resource.NewMilliQuantity(int64(100*(1+r.IntN(20))), resource.DecimalSI)
			pod.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = cpu
			for j := range pod.Status.ContainerStatuses {
				if st := &pod.Status.ContainerStatuses[j]; st.Name == pod.Spec.Containers[0].Name && st.Resources != nil {
					st.Resources.Requests[corev1.ResourceCPU] = cpu
					st.AllocatedResources[corev1.ResourceCPU] = cpu
				}
			}
		default:
			if pod.Spec.ActiveDeadlineSeconds == nil {
				d := int64(3600)
				pod.Spec.ActiveDeadlineSeconds = &d
			} else {
				pod.Spec.ActiveDeadlineSeconds = nil
			}
		}
		// A new resourceVersion, as an API server writes: the fake
		// clientset keeps the one it is given.
		version++
		pod.ResourceVersion = fmt.Sprint(version)
		pods[i] = pod
		sent := pod.DeepCopy()
		out = append(out, func(tb testing.TB, cs *fake.Clientset) {
			if err := cs.Tracker().Update(podsResource, sent, ns); err != nil {
				tb.Fatal(err)
			}
		})
	}
	return out
}
