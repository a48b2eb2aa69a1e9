package evaluator

import (
	"testing"
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
