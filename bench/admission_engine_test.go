package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	upadmission "k8s.io/apiserver/pkg/admission"
	upresourcequota "k8s.io/apiserver/pkg/admission/plugin/resourcequota"
	upquota "k8s.io/apiserver/pkg/quota/v1"
	upgeneric "k8s.io/apiserver/pkg/quota/v1/generic"
	upcore "k8s.io/kubernetes/pkg/quota/v1/evaluator/core"
	"k8s.io/utils/clock"

	"github.com/quotakit/quotakit/admission"
	"github.com/quotakit/quotakit/evaluator"
	"github.com/quotakit/quotakit/quota"
)

// Side-by-side admission engines: kube-apiserver 1.37.1's ResourceQuota
// admission evaluator (k8s.io/apiserver's resourcequota.NewQuotaEvaluator,
// 5 workers as kube-apiserver registers it) and quotakit's
// admission.Evaluator, both with the pod evaluator of their own project and
// both over the same simulated API: quotas read from memory, as from an
// informer's lister, and status writes that take admissionWriteLatency and
// carry a resourceVersion precondition. 50 callers create pods in a closed
// loop for admissionRunTime, in one namespace or spread at random over 100,
// each namespace with one quota that never fills (or two, in one case).

const (
	admissionCallers      = 50
	admissionWriteLatency = 5 * time.Millisecond
	admissionRunTime      = 3 * time.Second
)

// simQuotas is the simulated API both engines read and write.
type simQuotas struct {
	latency time.Duration

	mu sync.Mutex
	// guarded by mu
	byNS map[string][]*corev1.ResourceQuota
	// guarded by mu
	rv uint64
	// guarded by mu
	writes int
	// followers receive every stored write (see follow).
	// guarded by mu
	followers []func(*corev1.ResourceQuota)
}

// newSimQuotas returns namespaces namespaces, each with a quota "compute"
// (pods and requests.cpu) and, with quotas=2, a quota "count" (count/pods).
func newSimQuotas(namespaces, quotas int, latency time.Duration) *simQuotas {
	s := &simQuotas{latency: latency, byNS: make(map[string][]*corev1.ResourceQuota)}
	kinds := []struct {
		name       string
		hard, used corev1.ResourceList
	}{
		{"compute", rl("pods", "1000000000", "requests.cpu", "1000000"), rl("pods", "0", "requests.cpu", "0")},
		{"count", rl("count/pods", "1000000000"), rl("count/pods", "0")},
	}
	for i := range namespaces {
		ns := "ns-" + strconv.Itoa(i)
		for _, k := range kinds[:quotas] {
			s.rv++
			s.byNS[ns] = append(s.byNS[ns], &corev1.ResourceQuota{
				ObjectMeta: metav1.ObjectMeta{Name: k.name, Namespace: ns, ResourceVersion: strconv.FormatUint(s.rv, 10)},
				Spec:       corev1.ResourceQuotaSpec{Hard: k.hard},
				Status:     corev1.ResourceQuotaStatus{Hard: k.hard, Used: k.used},
			})
		}
	}
	return s
}

func (s *simQuotas) get(namespace string) []corev1.ResourceQuota {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]corev1.ResourceQuota, len(s.byNS[namespace]))
	for i, q := range s.byNS[namespace] {
		q.DeepCopyInto(&out[i])
	}
	return out
}

func (s *simQuotas) update(q *corev1.ResourceQuota) (*corev1.ResourceQuota, error) {
	time.Sleep(s.latency)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes++
	i := slices.IndexFunc(s.byNS[q.Namespace], func(c *corev1.ResourceQuota) bool { return c.Name == q.Name })
	if i < 0 {
		return nil, apierrors.NewNotFound(corev1.Resource("resourcequotas"), q.Name)
	}
	cur := s.byNS[q.Namespace][i]
	if cur.ResourceVersion != q.ResourceVersion {
		return nil, apierrors.NewConflict(corev1.Resource("resourcequotas"), q.Name, fmt.Errorf("resourceVersion %s is stale", q.ResourceVersion))
	}
	s.rv++
	cur.Status = *q.Status.DeepCopy()
	cur.ResourceVersion = strconv.FormatUint(s.rv, 10)
	for _, f := range s.followers {
		f(cur.DeepCopy())
	}
	return cur.DeepCopy(), nil
}

// used sums name over every quota's status.used.
func (s *simQuotas) used(name corev1.ResourceName) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, qs := range s.byNS {
		for _, q := range qs {
			v := q.Status.Used[name]
			n += v.Value()
		}
	}
	return n
}

// upstreamAccessor is k8s.io/apiserver's QuotaAccessor over simQuotas.
type upstreamAccessor struct{ s *simQuotas }

func (a upstreamAccessor) UpdateQuotaStatus(q *corev1.ResourceQuota) error {
	_, err := a.s.update(q)
	return err
}

func (a upstreamAccessor) GetQuotas(namespace string) ([]corev1.ResourceQuota, error) {
	return a.s.get(namespace), nil
}

// oursAccessor is quotakit's QuotaAccessor over simQuotas.
type oursAccessor struct{ s *simQuotas }

func (a oursAccessor) UpdateQuotaStatus(ctx context.Context, q *corev1.ResourceQuota) (*corev1.ResourceQuota, error) {
	return a.s.update(q)
}

func (a oursAccessor) GetQuotas(ctx context.Context, namespace string) ([]corev1.ResourceQuota, error) {
	return a.s.get(namespace), nil
}

// admissionPod is a pod with one container requesting cpu.
func admissionPod(name, namespace, cpu string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: "nginx", Resources: corev1.ResourceRequirements{Requests: rl("cpu", cpu)},
		}}},
	}
}

// admitFunc admits the creation of pod.
type admitFunc func(ctx context.Context, pod *corev1.Pod) error

// upstreamEngine starts kube-apiserver's evaluator over s; stop ends it.
func upstreamEngine(s *simQuotas) (admit admitFunc, stop func()) {
	registry := upgeneric.NewRegistry([]upquota.Evaluator{upcore.NewPodEvaluator(nil, clock.RealClock{})})
	stopCh := make(chan struct{})
	e := upresourcequota.NewQuotaEvaluator(upstreamAccessor{s}, nil, registry, nil, nil, 5, stopCh)
	podGVK, podGVR := corev1.SchemeGroupVersion.WithKind("Pod"), corev1.SchemeGroupVersion.WithResource("pods")
	admit = func(ctx context.Context, pod *corev1.Pod) error {
		a := upadmission.NewAttributesRecord(pod, nil, podGVK, pod.Namespace, pod.Name, podGVR, "", upadmission.Create, &metav1.CreateOptions{}, false, nil)
		return e.Evaluate(a)
	}
	return admit, func() { close(stopCh) }
}

// oursEngine starts quotakit's Evaluator over s; stop ends it and waits.
func oursEngine(s *simQuotas) (admit admitFunc, stop func()) {
	registry, err := evaluator.NewRegistry(nil, evaluator.Options{})
	if err != nil {
		panic(err)
	}
	e, err := admission.NewEvaluator(oursAccessor{s}, admission.Options{Registry: registry})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	podGVR := corev1.SchemeGroupVersion.WithResource("pods")
	admit = func(ctx context.Context, pod *corev1.Pod) error {
		return e.Evaluate(ctx, &quota.AttributesRecord{
			Operation: admissionv1.Create, Object: pod, Resource: podGVR, Namespace: pod.Namespace, Name: pod.Name,
		})
	}
	return admit, func() { cancel(); <-done }
}

// loadResult is one closed-loop run.
type loadResult struct {
	admitted, failed int
	elapsed          time.Duration
	latencies        []time.Duration
}

func (r loadResult) perSecond() float64 { return float64(r.admitted) / r.elapsed.Seconds() }

func (r loadResult) percentile(p float64) time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	return r.latencies[min(len(r.latencies)-1, int(p*float64(len(r.latencies))))]
}

// runLoad has admissionCallers goroutines create pods in a closed loop for
// d, each in a namespace picked at random among namespaces.
func runLoad(admit admitFunc, namespaces int, d time.Duration) loadResult {
	var (
		mu  sync.Mutex
		res loadResult
		wg  sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(d)
	for g := range admissionCallers {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(g), 1))
			var lat []time.Duration
			admitted, failed := 0, 0
			for i := 0; time.Now().Before(deadline); i++ {
				ns := "ns-" + strconv.Itoa(rnd.IntN(namespaces))
				t0 := time.Now()
				err := admit(context.Background(), admissionPod("p-"+strconv.Itoa(g)+"-"+strconv.Itoa(i), ns, "100m"))
				lat = append(lat, time.Since(t0))
				if err != nil {
					failed++
				} else {
					admitted++
				}
			}
			mu.Lock()
			res.latencies = append(res.latencies, lat...)
			res.admitted += admitted
			res.failed += failed
			mu.Unlock()
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	slices.Sort(res.latencies)
	return res
}

// BenchmarkAdmissionEngine runs each engine for admissionRunTime per
// iteration; run it with -benchtime=1x, alternating the engines with -run
// and repeated -count=1 invocations. It reports admitted requests per
// second and the p50 and p99 latency of a request in milliseconds.
func BenchmarkAdmissionEngine(b *testing.B) {
	engines := []struct {
		name  string
		start func(*simQuotas) (admitFunc, func())
	}{
		{"upstream", upstreamEngine},
		{"quotakit", oursEngine},
	}
	cases := []struct {
		name               string
		namespaces, quotas int
	}{
		{"namespaces=1", 1, 1},
		{"namespaces=100", 100, 1},
		{"namespaces=1,quotas=2", 1, 2},
	}
	for _, c := range cases {
		namespaces := c.namespaces
		for _, eng := range engines {
			b.Run(c.name+"/"+eng.name, func(b *testing.B) {
				var last loadResult
				var writes int
				for b.Loop() {
					s := newSimQuotas(namespaces, c.quotas, admissionWriteLatency)
					admit, stop := eng.start(s)
					last = runLoad(admit, namespaces, admissionRunTime)
					stop()
					s.mu.Lock()
					writes = s.writes
					s.mu.Unlock()
					if last.failed > 0 {
						b.Fatalf("%d requests failed", last.failed)
					}
					if got := s.used(corev1.ResourcePods); got != int64(last.admitted) {
						b.Fatalf("stored status.used pods = %d, admitted %d", got, last.admitted)
					}
					if got := s.used("count/pods"); c.quotas == 2 && got != int64(last.admitted) {
						b.Fatalf("stored status.used count/pods = %d, admitted %d", got, last.admitted)
					}
				}
				b.ReportMetric(last.perSecond(), "admitted/s")
				b.ReportMetric(float64(last.percentile(0.50).Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(last.percentile(0.99).Microseconds())/1000, "p99-ms")
				b.ReportMetric(float64(last.admitted)/float64(max(writes, 1)), "admitted/write")
			})
		}
	}
}
