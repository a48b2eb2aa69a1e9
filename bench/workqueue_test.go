package bench

// Side-by-side benchmarks of quotakit's workqueue and client-go's typed
// workqueue. Each benchmark runs the same workload against both, as the
// sub-benchmarks "quotakit" and "client-go", so one `go test -bench`
// invocation compares them on the same machine at the same time. Neither
// queue has metrics attached.
//
// Besides wall time per item (ns/item), the benchmarks that move 100k items
// report the process's CPU time per item (cpu-ns/item, user plus system,
// all goroutines and the garbage collector included). On a shared machine
// wall time also counts the time other jobs hold the cores; CPU time does
// not, so it shows the work each queue does when wall times are noisy. It
// does not show time lost to waiting, which is what contention costs, so
// the parallel benchmark is judged by wall time.

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/quotakit/quotakit/workqueue"
	kworkqueue "k8s.io/client-go/util/workqueue"
)

const wqItems = 100_000

// wqKeys returns n distinct keys shaped like the namespace/name keys of
// a controller.
func wqKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("namespace-%d/object-%d", i%97, i)
	}
	return keys
}

// wqQueue is the part of both queues the benchmarks drive.
type wqQueue interface {
	Add(string)
	Get() (string, bool)
	Done(string)
	ShutDown()
}

// wqDelayingQueue adds AddAfter.
type wqDelayingQueue interface {
	wqQueue
	AddAfter(string, time.Duration)
}

var wqQueues = []struct {
	name string
	make func() wqQueue
}{
	{"quotakit", func() wqQueue { return workqueue.New[string](workqueue.Options{}) }},
	{"client-go", func() wqQueue { return kworkqueue.NewTyped[string]() }},
}

var wqDelayingQueues = []struct {
	name string
	make func() wqDelayingQueue
}{
	{"quotakit", func() wqDelayingQueue { return workqueue.NewDelaying[string](workqueue.Options{}) }},
	{"client-go", func() wqDelayingQueue {
		return kworkqueue.NewTypedDelayingQueueWithConfig(kworkqueue.TypedDelayingQueueConfig[string]{})
	}},
}

// wqReportPerItem adds the wall time and the CPU time (since cpu0, a
// wqCPU reading) per item to the benchmark's output.
func wqReportPerItem(b *testing.B, cpu0 time.Duration, items int) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(items), "ns/item")
	b.ReportMetric(float64(wqCPU()-cpu0)/float64(b.N)/float64(items), "cpu-ns/item")
}

// wqCPU returns the CPU time the process has used so far.
func wqCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkWorkqueueSerial adds 100k distinct keys to one long-lived
// queue, then takes each with Get and releases it with Done, all on one
// goroutine.
func BenchmarkWorkqueueSerial(b *testing.B) {
	keys := wqKeys(wqItems)
	for _, tc := range wqQueues {
		b.Run(tc.name, func(b *testing.B) {
			q := tc.make()
			defer q.ShutDown()
			b.ReportAllocs()
			cpu0 := wqCPU()
			for b.Loop() {
				for _, k := range keys {
					q.Add(k)
				}
				for range keys {
					k, _ := q.Get()
					q.Done(k)
				}
			}
			wqReportPerItem(b, cpu0, wqItems)
		})
	}
}

// BenchmarkWorkqueueItem is one Add, Get and Done on a long-lived queue
// per operation: allocs/op is the steady-state allocations per item.
func BenchmarkWorkqueueItem(b *testing.B) {
	keys := wqKeys(1024)
	for _, tc := range wqQueues {
		b.Run(tc.name, func(b *testing.B) {
			q := tc.make()
			defer q.ShutDown()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				k := keys[i&1023]
				i++
				q.Add(k)
				k, _ = q.Get()
				q.Done(k)
			}
		})
	}
}

// BenchmarkWorkqueueParallel runs 4 producers and 4 consumers over a fresh
// queue per operation. Producers add 100k keys in all, 10% of them repeats
// of a key added shortly before; consumers Get and Done until the queue is
// shut down and empty.
func BenchmarkWorkqueueParallel(b *testing.B) {
	wqParallel(b, 4, 4, 0)
}

// BenchmarkWorkqueueParallel8 is BenchmarkWorkqueueParallel with 8
// producers and 8 consumers: more goroutines than cores wait for the lock
// and in Get.
func BenchmarkWorkqueueParallel8(b *testing.B) {
	wqParallel(b, 8, 8, 0)
}

// BenchmarkWorkqueueParallelWork is BenchmarkWorkqueueParallel with
// consumers that work about 1µs on each item before Done, as a controller
// that reads a cache and computes does: the queue must not get in the way
// of work that takes the cores.
func BenchmarkWorkqueueParallelWork(b *testing.B) {
	wqParallel(b, 4, 4, time.Microsecond)
}

// wqParallel runs the given number of producers and consumers over a fresh
// queue per operation. Producers add 100k keys in all, 10% of them repeats
// of a key added shortly before; consumers Get, spin for work, and Done
// until the queue is shut down and empty.
func wqParallel(b *testing.B, producers, consumers int, work time.Duration) {
	keys := wqKeys(wqItems)
	per := wqItems / producers
	lists := make([][]string, producers)
	for p := range lists {
		own := keys[p*per : (p+1)*per]
		list := make([]string, per)
		for i := range list {
			if i%10 == 9 {
				list[i] = list[i-5] // a duplicate, likely still queued
			} else {
				list[i] = own[i]
			}
		}
		lists[p] = list
	}
	items := per * producers
	for _, tc := range wqQueues {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := wqCPU()
			for b.Loop() {
				q := tc.make()
				var prod, cons sync.WaitGroup
				for range consumers {
					cons.Go(func() {
						for {
							k, shutdown := q.Get()
							if shutdown {
								return
							}
							if work > 0 {
								wqSpin(work)
							}
							q.Done(k)
						}
					})
				}
				for _, list := range lists {
					prod.Go(func() {
						for _, k := range list {
							q.Add(k)
						}
					})
				}
				prod.Wait()
				q.ShutDown() // consumers drain what is left, then exit
				cons.Wait()
			}
			wqReportPerItem(b, cpu0, items)
		})
	}
}

// wqSpin keeps the CPU busy for d of wall time without yielding it, as
// work on an item does.
func wqSpin(d time.Duration) {
	for start := time.Now(); time.Since(start) < d; {
	}
}

// BenchmarkWorkqueueAddAfter adds 100k distinct keys to a long-lived
// delaying queue per operation, with delays drawn uniformly from [0, 10ms),
// and waits until one long-lived consumer has taken and released all of
// them.
func BenchmarkWorkqueueAddAfter(b *testing.B) {
	keys := wqKeys(wqItems)
	rnd := rand.New(rand.NewPCG(1, 2))
	delays := make([]time.Duration, wqItems)
	for i := range delays {
		delays[i] = time.Duration(rnd.Int64N(int64(10 * time.Millisecond)))
	}
	for _, tc := range wqDelayingQueues {
		b.Run(tc.name, func(b *testing.B) {
			q := tc.make()
			drained, stop := wqConsume(q, q.Done)
			b.ReportAllocs()
			cpu0 := wqCPU()
			for b.Loop() {
				for i, k := range keys {
					q.AddAfter(k, delays[i])
				}
				<-drained
			}
			wqReportPerItem(b, cpu0, wqItems)
			stop()
		})
	}
}

// wqConsume starts one long-lived consumer of q, which passes each item it
// gets to release (Done, or Forget and Done) and signals drained after
// every wqItems items. stop shuts q down and waits for the consumer.
func wqConsume(q wqQueue, release func(string)) (drained <-chan struct{}, stop func()) {
	ch := make(chan struct{})
	var cons sync.WaitGroup
	cons.Go(func() {
		for n := 1; ; n++ {
			k, shutdown := q.Get()
			if shutdown {
				return
			}
			release(k)
			if n%wqItems == 0 {
				ch <- struct{}{}
			}
		}
	})
	return ch, func() {
		q.ShutDown()
		cons.Wait()
	}
}

// BenchmarkWorkqueueRateLimited is the retry path of a controller: 100k
// distinct keys fail once each (AddRateLimited, with a per-item exponential
// limiter whose first delay is 1ms), and one long-lived consumer takes each
// key when its delay has passed, calls Forget and Done.
func BenchmarkWorkqueueRateLimited(b *testing.B) {
	keys := wqKeys(wqItems)
	queues := []struct {
		name string
		make func() wqRateLimitingQueue
	}{
		{"quotakit", func() wqRateLimitingQueue {
			return workqueue.NewRateLimiting(workqueue.NewItemExponentialFailureRateLimiter[string](time.Millisecond, time.Second), workqueue.Options{})
		}},
		{"client-go", func() wqRateLimitingQueue {
			return kworkqueue.NewTypedRateLimitingQueueWithConfig(kworkqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, time.Second), kworkqueue.TypedRateLimitingQueueConfig[string]{})
		}},
	}
	for _, tc := range queues {
		b.Run(tc.name, func(b *testing.B) {
			q := tc.make()
			drained, stop := wqConsume(q, func(k string) {
				q.Forget(k)
				q.Done(k)
			})
			b.ReportAllocs()
			cpu0 := wqCPU()
			for b.Loop() {
				for _, k := range keys {
					q.AddRateLimited(k)
				}
				<-drained
			}
			wqReportPerItem(b, cpu0, wqItems)
			stop()
		})
	}
}

// wqRateLimitingQueue adds the rate-limited retry methods.
type wqRateLimitingQueue interface {
	wqQueue
	AddRateLimited(string)
	Forget(string)
}
