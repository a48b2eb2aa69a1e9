package bench

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quotakit/quotakit/admission"
	"github.com/quotakit/quotakit/clusterquota"
	"github.com/quotakit/quotakit/evaluator"
	"github.com/quotakit/quotakit/quota"
)

// simClusterQuotas is one ClusterQuota over the simulated API: status
// writes take latency and carry a resourceVersion precondition. Its
// index is fed each version as it is stored, a cache that never lags.
type simClusterQuotas struct {
	latency time.Duration
	index   *clusterquota.Index

	mu sync.Mutex
	// guarded by mu
	cq *clusterquota.ClusterQuota
	rv uint64
}

func newSimClusterQuota(latency time.Duration) *simClusterQuotas {
	hard := rl("pods", "1000000000", "requests.cpu", "1000000")
	s := &simClusterQuotas{latency: latency, index: &clusterquota.Index{}, rv: 1, cq: &clusterquota.ClusterQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "tenant", ResourceVersion: "1"},
		Spec: clusterquota.ClusterQuotaSpec{
			Selector: clusterquota.ClusterQuotaSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tenant": "a"}}},
			Quota:    corev1.ResourceQuotaSpec{Hard: hard},
		},
		Status: clusterquota.ClusterQuotaStatus{Total: corev1.ResourceQuotaStatus{Hard: hard, Used: rl("pods", "0", "requests.cpu", "0")}},
	}}
	s.index.SetClusterQuota(s.cq.DeepCopy())
	return s
}

// synced reports that the index has synced: it is fed by the simulated
// API itself.
func (s *simClusterQuotas) synced() bool { return true }

func (s *simClusterQuotas) ListClusterQuotas(context.Context) ([]clusterquota.ClusterQuota, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return []clusterquota.ClusterQuota{*s.cq.DeepCopy()}, nil
}

func (s *simClusterQuotas) GetClusterQuota(_ context.Context, name string) (*clusterquota.ClusterQuota, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if name != s.cq.Name {
		return nil, apierrors.NewNotFound(clusterquota.Resource("clusterquotas"), name)
	}
	return s.cq.DeepCopy(), nil
}

func (s *simClusterQuotas) UpdateClusterQuotaStatus(_ context.Context, cq *clusterquota.ClusterQuota) (*clusterquota.ClusterQuota, error) {
	time.Sleep(s.latency)
	s.mu.Lock()
	defer s.mu.Unlock()
	if cq.ResourceVersion != s.cq.ResourceVersion {
		return nil, apierrors.NewConflict(clusterquota.Resource("clusterquotas"), cq.Name, fmt.Errorf("resourceVersion %s is stale", cq.ResourceVersion))
	}
	s.rv++
	s.cq = cq.DeepCopy()
	s.cq.ResourceVersion = strconv.FormatUint(s.rv, 10)
	s.index.SetClusterQuota(s.cq.DeepCopy())
	return s.cq.DeepCopy(), nil
}

func (s *simClusterQuotas) used() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.cq.Status.Total.Used["pods"]
	return q.Value()
}

// tenantNamespaces is a NamespaceGetter of namespaces ns-0 … ns-(n-1),
// all of tenant a.
func tenantNamespaces(name string) (*corev1.Namespace, error) {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"tenant": "a"}}}, nil
}

// BenchmarkAdmissionClusterQuota runs the same load as
// BenchmarkAdmissionEngine over 100 namespaces (50 callers in a closed
// loop, 5 ms status writes) against one ClusterQuota that selects all of
// them, and against a ResourceQuota in each; run it with -benchtime=1x,
// alternating the cases. It fails when the stored usage is not exactly
// what was admitted.
func BenchmarkAdmissionClusterQuota(b *testing.B) {
	registry, err := evaluator.NewRegistry(nil, evaluator.Options{})
	if err != nil {
		b.Fatal(err)
	}
	podGVR := corev1.SchemeGroupVersion.WithResource("pods")
	for _, kind := range []string{"namespaced", "cluster"} {
		b.Run("namespaces=100/"+kind, func(b *testing.B) {
			var last loadResult
			for b.Loop() {
				var accessor admission.QuotaAccessor
				var used func() int64
				if kind == "namespaced" {
					s := newSimQuotas(100, 1, admissionWriteLatency)
					accessor, used = oursAccessor{s}, func() int64 { return s.used(corev1.ResourcePods) }
				} else {
					s := newSimClusterQuota(admissionWriteLatency)
					accessor, used = admission.NewClusterAccessor(nil, s.index, tenantNamespaces, s.synced, s), s.used
				}
				e, err := admission.NewEvaluator(accessor, admission.Options{Registry: registry})
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- e.Run(ctx) }()
				last = runLoad(func(ctx context.Context, pod *corev1.Pod) error {
					return e.Evaluate(ctx, &quota.AttributesRecord{Operation: admissionv1.Create, Object: pod, Resource: podGVR, Namespace: pod.Namespace, Name: pod.Name})
				}, 100, admissionRunTime)
				cancel()
				<-done
				if last.failed > 0 {
					b.Fatalf("%d requests failed", last.failed)
				}
				if got := used(); got != int64(last.admitted) {
					b.Fatalf("stored used pods = %d, admitted %d", got, last.admitted)
				}
			}
			b.ReportMetric(last.perSecond(), "admitted/s")
			b.ReportMetric(float64(last.percentile(0.50).Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(last.percentile(0.99).Microseconds())/1000, "p99-ms")
		})
	}
}
