package ledger

import (
	"fmt"
	"math/rand/v2"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/quotakit/quotakit/evaluator"
	"github.com/quotakit/quotakit/generic"
	"github.com/quotakit/quotakit/internal/reslist"
	"github.com/quotakit/quotakit/quota"
)

// ledgerModel drives a ledger with pod events and knows what the informer
// would hold: the last version delivered of each pod.
type ledgerModel struct {
	l      *Ledger
	pods   *evaluator.PodEvaluator
	state  map[string]*corev1.Pod // by key
	quotas []*corev1.ResourceQuota
}

func newLedgerModel() *ledgerModel {
	m := &ledgerModel{l: New(), state: map[string]*corev1.Pod{}}
	m.pods = evaluator.NewPodEvaluator(func(ns string) ([]runtime.Object, error) {
		var out []runtime.Object
		for _, p := range m.state {
			if p.Namespace == ns {
				out = append(out, p)
			}
		}
		return out, nil
	}, evaluator.PodOptions{})
	high := &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{{
		ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpIn, Values: []string{"high"},
	}}}
	for _, ns := range []string{"a", "b"} {
		m.quotas = append(m.quotas,
			ledgerQuota(ns, "all", nil, nil, "pods", "count/pods", "requests.cpu", "limits.memory"),
			ledgerQuota(ns, "terminating", []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeTerminating}, nil, "pods", "requests.cpu"),
			ledgerQuota(ns, "besteffort", []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort}, nil, "pods"),
			ledgerQuota(ns, "high", nil, high, "pods", "requests.cpu", "requests.memory"))
	}
	return m
}

func ledgerQuota(ns, name string, scopes []corev1.ResourceQuotaScope, sel *corev1.ScopeSelector, names ...string) *corev1.ResourceQuota {
	hard := corev1.ResourceList{}
	for _, n := range names {
		hard[corev1.ResourceName(n)] = resource.MustParse("100")
	}
	return &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ResourceQuotaSpec{Hard: hard, Scopes: scopes, ScopeSelector: sel}}
}

// randomPod returns a pod of key's namespace and name in a random state.
func randomPod(r *rand.Rand, ns, name string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: fmt.Sprint(r.Int())}}
	c := corev1.Container{Name: "c"}
	if r.IntN(4) > 0 {
		c.Resources.Requests = corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewMilliQuantity(int64(1+r.IntN(4000)), resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(int64(1+r.IntN(8))<<28, resource.BinarySI),
		}
		if r.IntN(2) == 0 {
			c.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: *resource.NewQuantity(int64(1+r.IntN(8))<<29, resource.BinarySI)}
		}
	}
	p.Spec.Containers = []corev1.Container{c}
	if r.IntN(3) == 0 {
		d := int64(60)
		p.Spec.ActiveDeadlineSeconds = &d
	}
	p.Spec.PriorityClassName = []string{"", "high", "low"}[r.IntN(3)]
	p.Status.Phase = []corev1.PodPhase{corev1.PodRunning, corev1.PodPending, corev1.PodSucceeded, corev1.PodFailed}[r.IntN(4)]
	return p
}

// step applies one random event: a new version, a delete, a duplicate
// delivery, a delete or an update of a key the ledger does not know, a
// relist, or a change of a quota's spec.
func (m *ledgerModel) step(r *rand.Rand) {
	ns := []string{"a", "b"}[r.IntN(2)]
	name := fmt.Sprintf("p%d", r.IntN(12))
	key := ns + "/" + name
	switch op := r.IntN(20); {
	case op < 10: // add or update
		p := randomPod(r, ns, name)
		m.state[key] = p
		m.l.Register(m.pods, nil).Observe(ns, key, p)
	case op < 14: // delete, also of an unknown key
		delete(m.state, key)
		m.l.Register(m.pods, nil).Observe(ns, key, nil)
	case op < 16: // the same version delivered again
		if p := m.state[key]; p != nil {
			m.l.Register(m.pods, nil).Observe(ns, key, p)
		}
	case op < 17: // a relist: every object again as a new version, deletes for the gone
		for k, p := range m.state {
			fresh := p.DeepCopy()
			m.state[k] = fresh
			m.l.Register(m.pods, nil).Observe(fresh.Namespace, k, fresh)
		}
	case op < 19: // an object of another resource, which nothing here charges
		m.l.Register(generic.NewObjectCountEvaluator(configmaps, nil, ""), nil).Observe(ns, key, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
	default: // a quota's spec changes: its limits, its scopes or its selector
		q := m.quotas[r.IntN(len(m.quotas))]
		switch {
		case len(q.Spec.Scopes) == 1 && r.IntN(2) == 0:
			flip := map[corev1.ResourceQuotaScope]corev1.ResourceQuotaScope{
				corev1.ResourceQuotaScopeTerminating:    corev1.ResourceQuotaScopeNotTerminating,
				corev1.ResourceQuotaScopeNotTerminating: corev1.ResourceQuotaScopeTerminating,
				corev1.ResourceQuotaScopeBestEffort:     corev1.ResourceQuotaScopeNotBestEffort,
				corev1.ResourceQuotaScopeNotBestEffort:  corev1.ResourceQuotaScopeBestEffort,
			}
			q.Spec.Scopes = []corev1.ResourceQuotaScope{flip[q.Spec.Scopes[0]]}
		case q.Spec.ScopeSelector != nil && r.IntN(2) == 0:
			sel := q.Spec.ScopeSelector.DeepCopy()
			sel.MatchExpressions[0].Values = []string{[]string{"high", "low"}[r.IntN(2)]}
			q.Spec.ScopeSelector = sel
		default:
			if _, ok := q.Spec.Hard["limits.cpu"]; ok {
				delete(q.Spec.Hard, "limits.cpu")
			} else {
				q.Spec.Hard["limits.cpu"] = resource.MustParse("10")
			}
		}
	}
}

var configmaps = corev1.SchemeGroupVersion.WithResource("configmaps").GroupResource()

// check compares every quota's usage from the ledger with a recount, and
// checks that the shared usage lists are held by exactly their entries.
func (m *ledgerModel) check(t testing.TB, step int) {
	t.Helper()
	m.l.mu.Lock()
	refs := map[*sharedUsage]int{}
	for _, s := range m.l.spaces {
		for _, b := range s.books {
			for key, en := range b.entries {
				if en.usage != nil {
					refs[en.usage]++
				}
				if _, timed := b.timed[key]; timed != !en.until.IsZero() {
					t.Fatalf("step %d: %s is timed %v, until %v", step, key, timed, en.until)
				}
			}
			for key := range b.timed {
				if b.entries[key] == nil {
					t.Fatalf("step %d: timed key %s has no entry", step, key)
				}
			}
		}
	}
	held := 0
	for h, chain := range m.l.usages {
		if len(chain) == 0 {
			t.Fatalf("step %d: empty chain for hash %x", step, h)
		}
		for i, u := range chain {
			held++
			if refs[u] != u.refs || u.refs == 0 || u.hash != h {
				t.Fatalf("step %d: usage %v has %d references, counts %d", step, u.list, refs[u], u.refs)
			}
			for _, v := range chain[:i] {
				if reslist.Same(u.list, v.list) {
					t.Fatalf("step %d: usage %v is held twice", step, u.list)
				}
			}
		}
	}
	if len(refs) != held {
		t.Fatalf("step %d: entries share %d usage lists, the ledger holds %d", step, len(refs), held)
	}
	m.l.mu.Unlock()
	registry := generic.NewRegistry(m.pods)
	for _, q := range m.quotas {
		got, _, err := m.l.Calculate(q, registry, func(quota.Evaluator) bool { return true })
		if err != nil {
			t.Fatalf("step %d: calculate(%s/%s): %v", step, q.Namespace, q.Name, err)
		}
		want, err := quota.CalculateUsage(q.Namespace, q.Spec.Scopes, q.Spec.Hard, registry, q.Spec.ScopeSelector)
		if err != nil {
			t.Fatal(err)
		}
		if !quota.Equals(want, got) {
			t.Fatalf("step %d: quota %s/%s: ledger %v, recount %v", step, q.Namespace, q.Name, got, want)
		}
	}
}

// TestLedgerMatchesRecount drives the ledger with random event sequences
// and checks after every event that each quota's totals equal a recount
// over what the informer holds.
func TestLedgerMatchesRecount(t *testing.T) {
	for seed := range uint64(10) {
		r := rand.New(rand.NewPCG(seed, 7))
		m := newLedgerModel()
		for i := range 300 {
			m.step(r)
			m.check(t, i)
		}
	}
}

// FuzzLedger drives the ledger with event sequences chosen by the fuzzer.
func FuzzLedger(f *testing.F) {
	f.Add(uint64(1), uint16(50))
	f.Add(uint64(42), uint16(300))
	f.Fuzz(func(t *testing.T, seed uint64, steps uint16) {
		r := rand.New(rand.NewPCG(seed, uint64(steps)))
		m := newLedgerModel()
		for i := range int(steps % 500) {
			m.step(r)
			if i%10 == 0 {
				m.check(t, i)
			}
		}
		m.check(t, int(steps))
	})
}

// TestArrivalsResourceVersion: an account's arrivals carry the latest
// resourceVersion of the objects they count, which the charge book
// compares with the quota's; one that is not an integer makes it unknown
// until the account is built again.
func TestArrivalsResourceVersion(t *testing.T) {
	l := New()
	e := evaluator.NewPodEvaluator(func(string) ([]runtime.Object, error) { return nil, nil }, evaluator.PodOptions{})
	registry := generic.NewRegistry(e)
	q := ledgerQuota("ns", "q", nil, nil, "pods")
	arrivals := func() Arrivals {
		t.Helper()
		_, arr, err := l.Calculate(q, registry, func(quota.Evaluator) bool { return true })
		if err != nil {
			t.Fatal(err)
		}
		return arr
	}
	pod := func(name, rv string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv}}
	}
	if rv := arrivals().RV; rv != 0 {
		t.Fatalf("RV before any arrival = %d, want 0", rv)
	}
	for _, tt := range []struct {
		name, rv string
		want     uint64
	}{
		{"a", "12", 12},
		{"b", "9", 12}, // an older version, delivered later: the latest stays
		{"c", "30", 30},
	} {
		l.Register(e, nil).Observe("ns", "ns/"+tt.name, pod(tt.name, tt.rv))
		if rv := arrivals().RV; rv != tt.want {
			t.Errorf("after %s at %s: RV = %d, want %d", tt.name, tt.rv, rv, tt.want)
		}
	}
	// A deletion is no arrival.
	l.Register(e, nil).Observe("ns", "ns/c", nil)
	if rv := arrivals().RV; rv != 30 {
		t.Errorf("after a deletion: RV = %d, want 30", rv)
	}
	l.Register(e, nil).Observe("ns", "ns/d", pod("d", "not-a-number"))
	if rv := arrivals().RV; rv != 0 {
		t.Errorf("after a resourceVersion that is not an integer: RV = %d, want 0", rv)
	}
	l.Register(e, nil).Observe("ns", "ns/e", pod("e", "40"))
	if rv := arrivals().RV; rv != 0 {
		t.Errorf("after that, RV = %d, want 0 until the account is built again", rv)
	}
	l.Reset("ns", "q")
	arrivals()
	l.Register(e, nil).Observe("ns", "ns/f", pod("f", "41"))
	if rv := arrivals().RV; rv != 41 {
		t.Errorf("after a rebuild: RV = %d, want 41", rv)
	}
}
