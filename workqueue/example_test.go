package workqueue_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quotakit/quotakit/workqueue"
)

// The standard worker loop: take an item, work on it, then Forget it on
// success or AddRateLimited it on failure, and Done in both cases.
func Example() {
	q := workqueue.NewRateLimiting(workqueue.DefaultItemBasedRateLimiter[string](), workqueue.Options{Name: "example"})

	failuresLeft := map[string]int{"ns/flaky": 2}
	syncKey := func(key string) error {
		if failuresLeft[key] > 0 {
			failuresLeft[key]--
			return errors.New("conflict")
		}
		return nil
	}

	var synced sync.WaitGroup
	synced.Add(2) // ns/ok and ns/flaky must both succeed once
	var workers sync.WaitGroup
	workers.Go(func() {
		for {
			key, shutdown := q.Get()
			if shutdown {
				return
			}
			if err := syncKey(key); err != nil {
				fmt.Printf("%s: %v, retry #%d\n", key, err, q.NumRequeues(key)+1)
				q.AddRateLimited(key)
			} else {
				fmt.Printf("%s: synced\n", key)
				q.Forget(key)
				synced.Done()
			}
			q.Done(key)
		}
	})

	q.Add("ns/flaky")
	q.Add("ns/ok")
	synced.Wait()
	q.ShutDown()
	workers.Wait()
	// Output:
	// ns/flaky: conflict, retry #1
	// ns/ok: synced
	// ns/flaky: conflict, retry #2
	// ns/flaky: synced
}

func ExampleQueue() {
	var q workqueue.Queue[string] // the zero value is ready to use
	q.Add("a")
	q.Add("b")
	q.Add("a") // already queued: collapses
	fmt.Println("len:", q.Len())

	item, _ := q.Get()
	q.Add(item) // added while processed: one more pass after Done
	fmt.Println("got:", item, "len:", q.Len())
	q.Done(item)

	q.ShutDown()
	for {
		item, shutdown := q.Get()
		if shutdown {
			break
		}
		fmt.Println("got:", item)
		q.Done(item)
	}
	// Output:
	// len: 2
	// got: a len: 1
	// got: b
	// got: a
}

func ExampleDelayingQueue_AddAfter() {
	q := workqueue.NewDelaying[string](workqueue.Options{})
	defer q.ShutDown() // stops the queue's goroutine

	start := time.Now()
	q.AddAfter("b", 20*time.Millisecond)
	q.AddAfter("a", 50*time.Millisecond)
	q.AddAfter("a", 10*time.Millisecond) // the earlier time wins
	q.AddAfter("now", 0)
	for range 3 {
		item, _ := q.Get()
		fmt.Println(item)
		q.Done(item)
	}
	fmt.Println("waited at least 20ms:", time.Since(start) >= 20*time.Millisecond)
	// Output:
	// now
	// a
	// b
	// waited at least 20ms: true
}

func ExampleNewItemExponentialFailureRateLimiter() {
	r := workqueue.NewItemExponentialFailureRateLimiter[string](time.Millisecond, 10*time.Millisecond)
	for range 6 {
		fmt.Print(r.When("key"), " ")
	}
	fmt.Println("requeues:", r.NumRequeues("key"))
	r.Forget("key")
	fmt.Println("after Forget:", r.When("key"))
	// Output:
	// 1ms 2ms 4ms 8ms 10ms 10ms requeues: 6
	// after Forget: 1ms
}

func ExampleDefaultControllerRateLimiter() {
	r := workqueue.DefaultControllerRateLimiter[string]()
	// Per item, exponential from 5ms; the overall bucket has 100 tokens to
	// spare, so it does not delay yet.
	fmt.Println(r.When("a"), r.When("a"), r.When("a"), r.When("b"))
	// Output:
	// 5ms 10ms 20ms 5ms
}

func ExampleNewBucketRateLimiter() {
	r := workqueue.NewBucketRateLimiter[string](10, 2) // 10 per second, burst 2
	for range 4 {
		fmt.Print(r.When("any").Round(10*time.Millisecond), " ")
	}
	fmt.Println()
	// Output:
	// 0s 0s 100ms 200ms
}

func ExampleNewMaxOfRateLimiter() {
	r := workqueue.NewMaxOfRateLimiter(
		workqueue.NewItemFastSlowRateLimiter[string](time.Millisecond, time.Second, 2),
		workqueue.NewItemExponentialFailureRateLimiter[string](time.Millisecond, time.Minute),
	)
	capped := workqueue.NewWithMaxWaitRateLimiter[string](r, 500*time.Millisecond)
	for range 4 {
		fmt.Print(capped.When("key"), " ")
	}
	fmt.Println()
	// Output:
	// 1ms 2ms 500ms 500ms
}

func ExampleParallelizeUntil() {
	squares := make([]int, 10)
	var calls atomic.Int32
	err := workqueue.ParallelizeUntil(context.Background(), 4, len(squares), func(i int) {
		calls.Add(1)
		squares[i] = i * i
	}, workqueue.ParallelizeOptions{ChunkSize: 3})
	fmt.Println(squares, calls.Load(), err)
	// Output:
	// [0 1 4 9 16 25 36 49 64 81] 10 <nil>
}
