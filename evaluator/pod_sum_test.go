package evaluator

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"unsafe"

	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestSumRaisesSharePanicOnCaller checks that a panic in a share summed on
// another goroutine reaches the caller's goroutine, where the caller can
// recover it, rather than ending the process.
func TestSumRaisesSharePanicOnCaller(t *testing.T) {
	pods := make([]*corev1.Pod, 2*minPodsPerShare)
	for i := range pods {
		pods[i] = &corev1.Pod{}
	}
	pods[len(pods)-1] = nil // sum's callers never pass one: this one panics
	e := NewPodEvaluator(nil, PodOptions{Parallelism: 2})
	defer func() {
		if recover() == nil {
			t.Error("sum over a nil pod did not panic on the caller's goroutine")
		}
	}()
	_, _ = e.sum(pods, nil, time.Now())
}

func TestSortByAddress(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 100, 5000} {
		pods := make([]*corev1.Pod, n)
		for i := range pods {
			pods[i] = &corev1.Pod{}
			if i%97 == 5 {
				pods[i] = pods[i/2] // the same pod listed twice stays twice
			}
		}
		rand.Shuffle(len(pods), func(i, j int) { pods[i], pods[j] = pods[j], pods[i] })
		want := slices.Clone(pods)
		slices.SortFunc(want, func(a, b *corev1.Pod) int {
			return cmp.Compare(uintptr(unsafe.Pointer(a)), uintptr(unsafe.Pointer(b)))
		})
		sortByAddress(pods, make([]*corev1.Pod, n))
		if !slices.Equal(pods, want) {
			t.Errorf("sortByAddress of %d pods is not in address order", n)
		}
	}
}

// TestSumJoinsHelpers checks, in a synctest bubble that fails on a
// goroutine left running, that a parallel sum returns only after its
// helper goroutines have exited, also when a chunk fails.
func TestSumJoinsHelpers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pods := make([]*corev1.Pod, 8*minPodsPerShare)
		for i := range pods {
			pods[i] = &corev1.Pod{}
		}
		e := NewPodEvaluator(nil, PodOptions{Parallelism: 4})
		total, err := e.sum(pods, nil, time.Now())
		if err != nil || total.count != int64(len(pods)) {
			t.Errorf("sum() = %d pods, %v; want %d, nil", total.count, err, len(pods))
		}
		bad := podScopes{compilePodScope(corev1.ScopedResourceSelectorRequirement{ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: "Bogus"})}
		if _, err := e.sum(pods, bad, time.Now()); err == nil {
			t.Error("sum() with an invalid scope returned no error")
		}
	})
}
