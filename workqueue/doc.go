// Package workqueue provides the work queues that controllers drain: a
// generic FIFO of distinct items ([Queue]), a queue that adds items after a
// delay ([DelayingQueue]), a queue that delays retries as a [RateLimiter]
// says ([RateLimitingQueue]), the rate limiters of client-go, metrics hooks,
// and [ParallelizeUntil].
//
// # Guarantees
//
// The queues keep every guarantee of k8s.io/client-go/util/workqueue, so
// code ports by changing the import path and the constructor:
//
//   - Fair FIFO: [Queue.Get] hands items out in the order they were added.
//   - An item is never handed to two workers at once.
//   - Adds of an item that is queued collapse into one.
//   - An add while a worker processes the item means exactly one more pass,
//     after [Queue.Done].
//   - After [Queue.ShutDown], Get keeps handing out queued items until none
//     is left and only then reports shutdown; adds are ignored.
//     [Queue.ShutDownWithDrain] also waits until no item is queued or in
//     flight, and a concurrent ShutDown releases it.
//   - The queue holds no reference to an item after Done, so the item can
//     be garbage-collected.
//   - [DelayingQueue.AddAfter] with d <= 0 adds at once; for an item that is
//     already waiting, the earlier ready time wins.
//
// Every queue is safe for concurrent use. Items are compared with ==; the
// queue never looks inside them, and callers must not mutate an item in a
// way that changes its identity while it is queued.
//
// # The worker loop
//
// A worker takes an item with Get, works on it, and then calls
// [RateLimitingQueue.Forget] on success or [RateLimitingQueue.AddRateLimited]
// on a retriable failure, and Done in both cases. Forget clears the
// limiter's failure count, Done releases the item in the queue; one does
// not replace the other. Workers keep calling Get until it reports shutdown.
// See the package example.
//
// # Goroutines
//
// Constructors start no goroutine. A [Queue] never has one. A
// [DelayingQueue] or [RateLimitingQueue] starts a single goroutine on its
// first AddAfter (or AddRateLimited) with a positive delay; it sleeps on one
// timer set for the earliest ready time, and ShutDown or ShutDownWithDrain
// stop it and wait for it to exit. There is no heartbeat, no metrics
// goroutine and no process-wide state.
//
// # Rate limiters
//
// [DefaultControllerRateLimiter] is client-go's default for controllers,
// the larger of a per-item exponential backoff from 5ms to 1000s and an
// overall token bucket of 10 qps with a burst of 100.
// [DefaultItemBasedRateLimiter] is the exponential backoff from 1ms to
// 1000s alone. The building blocks are
// [NewItemExponentialFailureRateLimiter], [NewItemFastSlowRateLimiter],
// [NewMaxOfRateLimiter], [NewWithMaxWaitRateLimiter] and
// [NewBucketRateLimiter]; any type with the three methods of [RateLimiter]
// works too.
//
// # Metrics
//
// A queue reports metrics only to the [MetricsProvider] in its [Options];
// there is no global provider to set before queues are created, and with
// none Add, Get and Done do not even read the clock. Unlike client-go, an
// unnamed queue reports too, under the name "".
//
// A Prometheus adapter should register these series, each with the label
// "name" set to [Options.Name], so that dashboards and alerts built for
// client-go (component-base registers the same names) keep working:
//
//	workqueue_depth                              gauge      NewDepthMetric
//	workqueue_adds_total                         counter    NewAddsMetric
//	workqueue_queue_duration_seconds             histogram  NewLatencyMetric
//	workqueue_work_duration_seconds              histogram  NewWorkDurationMetric
//	workqueue_unfinished_work_seconds            gauge      NewUnfinishedWorkSecondsMetric
//	workqueue_longest_running_processor_seconds  gauge      NewLongestRunningProcessorSecondsMetric
//	workqueue_retries_total                      counter    NewRetriesMetric
//
// client-go's histograms use the buckets prometheus.ExponentialBuckets(10e-9,
// 10, 10). The two "seconds" gauges are not pushed: the provider receives a
// function that computes the exact value when called, which maps directly
// onto a prometheus.GaugeFunc and needs no refresh goroutine (client-go
// refreshes them every 500ms). controller-runtime registers the same names
// with an extra "controller" label; an adapter for it can add that label
// from the queue name.
//
// # Differences from client-go
//
//   - Generic only: [Queue], [DelayingQueue] and [RateLimitingQueue] are
//     concrete types with useful zero values; there are no untyped twins and
//     no pluggable storage (client-go's Queue interface and its Touch hook).
//   - Metrics come from [Options] only, and unnamed queues report
//     (kubernetes-retired/kubefed#1371, kubernetes-sigs/controller-runtime#1969).
//   - ShutDownWithDrain on a delaying queue stops its goroutine; client-go's
//     keeps running until its next 10-second heartbeat.
//   - AddAfter never blocks: client-go hands items to its goroutine through a
//     channel of 1000 slots and blocks callers when it is full.
//   - ShutDownWithDrain waits until no item is queued either: client-go's
//     can return while an item added during its processing waits for its
//     extra pass (kubernetes/kubernetes#141079).
//   - Done for an item that is not being processed does nothing; client-go
//     queues a waiting item a second time in that case.
//   - [ParallelizeUntil] takes options by value, returns an error when ctx
//     ends the work early, and re-raises a panic of the work function in the
//     caller instead of crashing the process from a worker goroutine.
//
// # Performance
//
// Add and Done hash the item outside the lock and probe an open-addressing
// index under it, whose cells hold each item's full hash, so a lookup
// reads no other item's record and a delete or a resize reads nothing but
// the index; Get works on slot numbers and hashes nothing. Records live in
// fixed-size chunks and queued items wait in a ring buffer of slot numbers,
// so nothing large is copied under the lock and a steady queue does not
// allocate. The lock and the state every operation writes share two cache
// lines, apart from the fields that are only read, so that workers on
// different cores that take turns at the lock move few lines between them.
// A worker blocked in Get is handed the next item by the goroutine that
// adds it and woken after the lock is released, so it returns without
// taking the lock again, and only as many workers are woken as there are
// items for them. The delaying queue keeps its own state, a table of ready
// times and a heap of waiting items, and its goroutine adds up to 256 due
// items per lock acquisition. The per-item rate limiters count failures in
// the same kind of table. The nested bench module compares these queues
// with client-go's.
package workqueue
