package ledger

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quotakit/quotakit/evaluator"
	"github.com/quotakit/quotakit/generic"
	"github.com/quotakit/quotakit/quota"
)

// BenchmarkLedgerRelease measures what the controller does with its
// ledger when a pod of a namespace of 1k, 10k or 100k pods is deleted:
// release the pod's usage from the totals of the namespace's two quotas
// (one scoped by PriorityClass) and calculate both quotas' usage. A pod
// is added back, untimed, so the namespace keeps its size.
func BenchmarkLedgerRelease(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			l := New()
			pods := evaluator.NewPodEvaluator(nil, evaluator.PodOptions{})
			registry := generic.NewRegistry(pods)
			kept := l.Register(pods, nil)
			pod := func(i int) *corev1.Pod {
				return &corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("pod-%06d", i), ResourceVersion: "1"},
					Spec: corev1.PodSpec{
						PriorityClassName: []string{"", "high", "low"}[i%3],
						Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(int64(100+i%7*50), resource.DecimalSI), corev1.ResourceMemory: resource.MustParse("512Mi")},
							Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
						}}},
					},
					Status: corev1.PodStatus{Phase: corev1.PodRunning},
				}
			}
			for i := range n {
				p := pod(i)
				kept.Observe("ns", "ns/"+p.Name, p)
			}
			high := &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{{
				ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpIn, Values: []string{"high"},
			}}}
			quotas := []*corev1.ResourceQuota{
				ledgerQuota("ns", "compute", nil, nil, "pods", "count/pods", "requests.cpu", "requests.memory", "limits.memory"),
				ledgerQuota("ns", "high", nil, high, "pods", "requests.cpu"),
			}
			ledgered := func(quota.Evaluator) bool { return true }
			for _, q := range quotas {
				if _, _, err := l.Calculate(q, registry, ledgered); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				key := fmt.Sprintf("ns/pod-%06d", i%n)
				kept.Observe("ns", key, nil)
				for _, q := range quotas {
					if _, _, err := l.Calculate(q, registry, ledgered); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				p := pod(i % n)
				kept.Observe("ns", key, p)
				i++
				b.StartTimer()
			}
		})
	}
}
