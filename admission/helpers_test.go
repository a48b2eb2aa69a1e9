package admission_test

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit/admission"
	"github.com/quotakit/quotakit/quota"
)

// store is an in-memory QuotaAccessor with an API server's resourceVersion
// preconditions, a write latency, and hooks that inject another writer.
type store struct {
	mu sync.Mutex
	// guarded by mu
	quotas map[string]*corev1.ResourceQuota // by namespace/name
	rv     int
	writes int
	// writeDelay is slept (virtual time under synctest) before each write.
	writeDelay time.Duration
	// interfere, when set, is called under mu before write number n (from
	// 1) is applied with the stored quota; returning true makes another
	// writer's change land first: the stored quota gets a new
	// resourceVersion, so the write conflicts.
	interfere func(n int, stored *corev1.ResourceQuota) bool
	// getErr fails every read.
	getErr error
}

var _ admission.QuotaAccessor = (*store)(nil)

func newStore(quotas ...*corev1.ResourceQuota) *store {
	s := &store{quotas: make(map[string]*corev1.ResourceQuota)}
	for _, q := range quotas {
		s.rv++
		q = q.DeepCopy()
		q.ResourceVersion = strconv.Itoa(s.rv)
		s.quotas[q.Namespace+"/"+q.Name] = q
	}
	return s
}

func (s *store) GetQuotas(ctx context.Context, namespace string) ([]corev1.ResourceQuota, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.getErr != nil {
		return nil, s.getErr
	}
	var out []corev1.ResourceQuota
	for _, q := range s.quotas {
		if q.Namespace == namespace {
			out = append(out, *q.DeepCopy())
		}
	}
	slices.SortFunc(out, func(a, b corev1.ResourceQuota) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

func (s *store) UpdateQuotaStatus(ctx context.Context, q *corev1.ResourceQuota) (*corev1.ResourceQuota, error) {
	if s.writeDelay > 0 {
		select {
		case <-time.After(s.writeDelay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes++
	gr := schema.GroupResource{Resource: "resourcequotas"}
	cur, ok := s.quotas[q.Namespace+"/"+q.Name]
	if !ok {
		return nil, apierrors.NewNotFound(gr, q.Name)
	}
	if s.interfere != nil && s.interfere(s.writes, cur) {
		s.rv++
		cur.ResourceVersion = strconv.Itoa(s.rv)
	}
	if cur.ResourceVersion != q.ResourceVersion {
		return nil, apierrors.NewConflict(gr, q.Name, errString("the object has been modified; please apply your changes to the latest version and try again"))
	}
	s.rv++
	cur.Status = *q.Status.DeepCopy()
	cur.ResourceVersion = strconv.Itoa(s.rv)
	return cur.DeepCopy(), nil
}

// used returns the stored status.used of namespace/name.
func (s *store) used(namespace, name string) corev1.ResourceList {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.quotas[namespace+"/"+name].Status.Used.DeepCopy()
}

type errString string

func (e errString) Error() string { return string(e) }

// rl parses name, value pairs into a ResourceList.
func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

// rq returns a quota whose status holds hard and used.
func rq(namespace, name string, hard, used corev1.ResourceList) *corev1.ResourceQuota {
	return &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec:       corev1.ResourceQuotaSpec{Hard: hard},
		Status:     corev1.ResourceQuotaStatus{Hard: hard, Used: used},
	}
}

// podCreate is the creation of a pod with one container requesting cpu
// (none when cpu is "").
func podCreate(namespace, name, cpu string) *quota.AttributesRecord {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}}},
	}
	if cpu != "" {
		pod.Spec.Containers[0].Resources.Requests = rl("cpu", cpu)
	}
	return &quota.AttributesRecord{
		Operation: admissionv1.Create,
		Object:    pod,
		Resource:  corev1.SchemeGroupVersion.WithResource("pods"),
		Namespace: namespace,
		Name:      name,
	}
}

// run starts e.Run for the test and stops it, and waits for it, at the end.
func run(t *testing.T, e *admission.Evaluator) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

func newEvaluator(t *testing.T, a admission.QuotaAccessor, opts admission.Options) *admission.Evaluator {
	t.Helper()
	e, err := admission.NewEvaluator(a, opts)
	if err != nil {
		t.Fatalf("NewEvaluator: %v", err)
	}
	return e
}

// quantity returns the value of name in l as an int64.
func quantity(l corev1.ResourceList, name corev1.ResourceName) int64 {
	q := l[name]
	return q.Value()
}

// synced is the HasSynced of a cache that is complete from the start.
func synced() bool { return true }

// burst sends n pod creations at random moments within spread, each to a
// random engine of engines and to the namespace nsOf picks, and returns
// how many were admitted. Any answer other than admission or a refusal
// whose message holds refused fails t. rng is read by the caller's
// goroutine only.
func burst(t *testing.T, ctx context.Context, rng *rand.Rand, engines []*admission.Evaluator, n int, spread time.Duration, nsOf func() string, refused string) int64 {
	t.Helper()
	var admitted atomic.Int64
	var requests sync.WaitGroup
	for i := range n {
		start := time.Duration(rng.Int64N(int64(spread)))
		ns := nsOf()
		e := engines[rng.IntN(len(engines))]
		requests.Go(func() {
			time.Sleep(start)
			err := e.Evaluate(ctx, podCreate(ns, fmt.Sprintf("p-%d", i), ""))
			switch {
			case err == nil:
				admitted.Add(1)
			case !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), refused):
				t.Errorf("creation %d in %s: %v, want admission or a refusal with %q", i, ns, err, refused)
			}
		})
	}
	requests.Wait()
	return admitted.Load()
}
