package bench

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/quotakit/quotakit/admission"
	"github.com/quotakit/quotakit/evaluator"
	"github.com/quotakit/quotakit/quota"
)

// Admission replicas: quotakit's engine as one webhook replica, and as two
// behind one address (requests alternate between them), over the same
// simulated API as BenchmarkAdmissionEngine. Each replica reads quotas
// from a cache of its own that receives every write replicaCacheLag after
// it is made, as an informer's watch does, through admission.NewAccessor:
// its own writes overlay the cache, and a conflict (the other replica
// wrote first) is re-read live.

const replicaCacheLag = 2 * time.Millisecond

// laggingCache is one replica's cache of a simQuotas.
type laggingCache struct {
	mu sync.Mutex
	// guarded by mu
	byNS map[string][]*corev1.ResourceQuota
}

// follow returns a cache of s that receives each write lag after it.
func (s *simQuotas) follow(lag time.Duration) *laggingCache {
	c := &laggingCache{byNS: map[string][]*corev1.ResourceQuota{}}
	s.mu.Lock()
	defer s.mu.Unlock()
	for ns, qs := range s.byNS {
		for _, q := range qs {
			c.byNS[ns] = append(c.byNS[ns], q.DeepCopy())
		}
	}
	s.followers = append(s.followers, func(q *corev1.ResourceQuota) {
		time.AfterFunc(lag, func() { c.apply(q) })
	})
	return c
}

// apply stores q unless the cache holds a newer version.
func (c *laggingCache) apply(q *corev1.ResourceQuota) {
	c.mu.Lock()
	defer c.mu.Unlock()
	qs := c.byNS[q.Namespace]
	for i, cur := range qs {
		if cur.Name == q.Name {
			a, _ := strconv.ParseUint(cur.ResourceVersion, 10, 64)
			b, _ := strconv.ParseUint(q.ResourceVersion, 10, 64)
			if b > a {
				qs[i] = q
			}
			return
		}
	}
}

// synced reports that the cache has synced: follow copies everything
// before it returns.
func (c *laggingCache) synced() bool { return true }

func (c *laggingCache) list(namespace string) ([]*corev1.ResourceQuota, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*corev1.ResourceQuota(nil), c.byNS[namespace]...), nil
}

// simClient is admission.QuotaClient over simQuotas.
type simClient struct{ s *simQuotas }

func (c simClient) ListQuotas(ctx context.Context, namespace string) ([]corev1.ResourceQuota, error) {
	return c.s.get(namespace), nil
}

func (c simClient) UpdateQuotaStatus(ctx context.Context, q *corev1.ResourceQuota) (*corev1.ResourceQuota, error) {
	return c.s.update(q)
}

// replicaEngines starts n replicas over s; admit sends each request to
// the next replica, stop ends them, and stats sums their counters.
func replicaEngines(s *simQuotas, n int, opts admission.Options) (admit admitFunc, stats func() admission.Stats, stop func()) {
	registry, err := evaluator.NewRegistry(nil, evaluator.Options{})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	engines := make([]*admission.Evaluator, n)
	for i := range engines {
		c := s.follow(replicaCacheLag)
		opts.Registry = registry
		e, err := admission.NewEvaluator(admission.NewAccessor(c.list, c.synced, simClient{s}, admission.AccessorOptions{}), opts)
		if err != nil {
			panic(err)
		}
		engines[i] = e
		wg.Go(func() { _ = e.Run(ctx) })
	}
	podGVR := corev1.SchemeGroupVersion.WithResource("pods")
	var next atomic.Uint64
	admit = func(ctx context.Context, pod *corev1.Pod) error {
		e := engines[next.Add(1)%uint64(n)]
		return e.Evaluate(ctx, &quota.AttributesRecord{
			Operation: admissionv1.Create, Object: pod, Resource: podGVR, Namespace: pod.Namespace, Name: pod.Name,
		})
	}
	stats = func() admission.Stats {
		var sum admission.Stats
		for _, e := range engines {
			st := e.Stats()
			sum.Writes += st.Writes
			sum.Conflicts += st.Conflicts
			sum.Retries += st.Retries
			sum.Exhausted += st.Exhausted
		}
		return sum
	}
	return admit, stats, func() { cancel(); wg.Wait() }
}

// BenchmarkAdmissionReplicas runs one replica, then two, for
// admissionRunTime per iteration; run it with -benchtime=1x, alternating
// the cases with -run and repeated -count=1 invocations. It reports
// admitted requests per second, the p50 and p99 latency in milliseconds,
// and status-write conflicts and retries per admitted request, and fails
// when status.used is not exactly what was admitted.
func BenchmarkAdmissionReplicas(b *testing.B) {
	for _, namespaces := range []int{1, 100} {
		for _, replicas := range []int{1, 2} {
			b.Run("namespaces="+strconv.Itoa(namespaces)+"/replicas="+strconv.Itoa(replicas), func(b *testing.B) {
				var last loadResult
				var st admission.Stats
				for b.Loop() {
					s := newSimQuotas(namespaces, 1, admissionWriteLatency)
					admit, stats, stop := replicaEngines(s, replicas, admission.Options{})
					last = runLoad(admit, namespaces, admissionRunTime)
					stop()
					st = stats()
					if last.failed > 0 {
						b.Fatalf("%d requests failed (%d retries exhausted)", last.failed, st.Exhausted)
					}
					if got := s.used(corev1.ResourcePods); got != int64(last.admitted) {
						b.Fatalf("stored status.used pods = %d, admitted %d", got, last.admitted)
					}
				}
				b.ReportMetric(last.perSecond(), "admitted/s")
				b.ReportMetric(float64(last.percentile(0.50).Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(last.percentile(0.99).Microseconds())/1000, "p99-ms")
				b.ReportMetric(float64(st.Conflicts)/float64(max(last.admitted, 1)), "conflicts/req")
				b.ReportMetric(float64(st.Retries)/float64(max(last.admitted, 1)), "retries/req")
			})
		}
	}
}
