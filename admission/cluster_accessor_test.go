package admission_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quotakit/quotakit/admission"
	"github.com/quotakit/quotakit/clusterquota"
)

// clusterAPI is an in-memory API of ClusterQuotas with resourceVersion
// preconditions, and of namespaces. Each replica's cache of it gets every
// write lag later.
type clusterAPI struct {
	mu sync.Mutex
	// guarded by mu
	quotas map[string]*clusterquota.ClusterQuota
	rv     int
	caches []*clusterCache
	// lists and gets count the live reads.
	lists, gets int
}

func newClusterAPI(cqs ...*clusterquota.ClusterQuota) *clusterAPI {
	api := &clusterAPI{quotas: map[string]*clusterquota.ClusterQuota{}}
	for _, cq := range cqs {
		api.rv++
		cq = cq.DeepCopy()
		cq.ResourceVersion = strconv.Itoa(api.rv)
		api.quotas[cq.Name] = cq
	}
	return api
}

func (api *clusterAPI) ListClusterQuotas(context.Context) ([]clusterquota.ClusterQuota, error) {
	api.mu.Lock()
	defer api.mu.Unlock()
	api.lists++
	var out []clusterquota.ClusterQuota
	for _, cq := range api.quotas {
		out = append(out, *cq.DeepCopy())
	}
	return out, nil
}

func (api *clusterAPI) GetClusterQuota(_ context.Context, name string) (*clusterquota.ClusterQuota, error) {
	api.mu.Lock()
	defer api.mu.Unlock()
	api.gets++
	cq := api.quotas[name]
	if cq == nil {
		return nil, apierrors.NewNotFound(clusterquota.Resource("clusterquotas"), name)
	}
	return cq.DeepCopy(), nil
}

// reads returns how many lists and gets were made.
func (api *clusterAPI) reads() (lists, gets int) {
	api.mu.Lock()
	defer api.mu.Unlock()
	return api.lists, api.gets
}

func (api *clusterAPI) UpdateClusterQuotaStatus(_ context.Context, cq *clusterquota.ClusterQuota) (*clusterquota.ClusterQuota, error) {
	time.Sleep(time.Millisecond) // the write's latency
	api.mu.Lock()
	defer api.mu.Unlock()
	cur := api.quotas[cq.Name]
	if cur == nil {
		return nil, apierrors.NewNotFound(clusterquota.Resource("clusterquotas"), cq.Name)
	}
	if cur.ResourceVersion != cq.ResourceVersion {
		return nil, apierrors.NewConflict(clusterquota.Resource("clusterquotas"), cq.Name, fmt.Errorf("stale"))
	}
	api.rv++
	next := cur.DeepCopy()
	next.Status = *cq.Status.DeepCopy()
	next.ResourceVersion = strconv.Itoa(api.rv)
	api.quotas[cq.Name] = next
	for _, c := range api.caches {
		c.apply(next.DeepCopy())
	}
	return next.DeepCopy(), nil
}

func (api *clusterAPI) used(name string) int64 {
	api.mu.Lock()
	defer api.mu.Unlock()
	q := api.quotas[name].Status.Total.Used["pods"]
	return q.Value()
}

// cache returns a replica's cache of the ClusterQuotas, lag behind: an
// Index fed as an informer's event handlers feed it.
func (api *clusterAPI) cache(lag time.Duration) *clusterCache {
	api.mu.Lock()
	defer api.mu.Unlock()
	c := newClusterCache(lag)
	for _, cq := range api.quotas {
		c.set(cq.DeepCopy())
	}
	api.caches = append(api.caches, c)
	return c
}

type clusterCache struct {
	lag   time.Duration
	index *clusterquota.Index
	mu    sync.Mutex
	// guarded by mu
	quotas map[string]*clusterquota.ClusterQuota
}

func newClusterCache(lag time.Duration) *clusterCache {
	return &clusterCache{lag: lag, index: &clusterquota.Index{}, quotas: map[string]*clusterquota.ClusterQuota{}}
}

func (c *clusterCache) apply(cq *clusterquota.ClusterQuota) {
	time.AfterFunc(c.lag, func() { c.set(cq) })
}

// set feeds cq to the index, unless it holds a newer version.
func (c *clusterCache) set(cq *clusterquota.ClusterQuota) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur := c.quotas[cq.Name]; cur != nil {
		a, _ := strconv.Atoi(cur.ResourceVersion)
		b, _ := strconv.Atoi(cq.ResourceVersion)
		if b <= a {
			return
		}
	}
	c.quotas[cq.Name] = cq
	c.index.SetClusterQuota(cq)
}

// namespaces is a NamespaceGetter over fixed namespaces.
func namespaces(nss ...*corev1.Namespace) admission.NamespaceGetter {
	return func(name string) (*corev1.Namespace, error) {
		for _, ns := range nss {
			if ns.Name == name {
				return ns, nil
			}
		}
		return nil, apierrors.NewNotFound(corev1.Resource("namespaces"), name)
	}
}

func tenantNamespace(name, tenant string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"tenant": tenant}}}
}

func tenantQuota(name, tenant string, pods int64) *clusterquota.ClusterQuota {
	hard := corev1.ResourceList{"pods": *resource.NewQuantity(pods, resource.DecimalSI)}
	return &clusterquota.ClusterQuota{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: clusterquota.ClusterQuotaSpec{
			Selector: clusterquota.ClusterQuotaSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tenant": tenant}}},
			Quota:    corev1.ResourceQuotaSpec{Hard: hard},
		},
		Status: clusterquota.ClusterQuotaStatus{Total: corev1.ResourceQuotaStatus{Hard: hard, Used: corev1.ResourceList{"pods": resource.MustParse("0")}}},
	}
}

// TestClusterQuotaExactAcrossReplicas: two Evaluators, each with a cache
// of its own that lags, three namespaces of one tenant under one cluster
// quota of pods: 50, 200 concurrent creations spread over the namespaces
// and the replicas: exactly 50 are admitted, and status.total.used is 50,
// for every seed.
func TestClusterQuotaExactAcrossReplicas(t *testing.T) {
	for seed := range uint64(20) {
		synctest.Test(t, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 3))
			api := newClusterAPI(tenantQuota("team-a", "a", 50))
			nss := namespaces(tenantNamespace("a-1", "a"), tenantNamespace("a-2", "a"), tenantNamespace("a-3", "a"))
			ctx, cancel := context.WithCancel(t.Context())
			var wg sync.WaitGroup
			var engines []*admission.Evaluator
			for range 2 {
				c := api.cache(time.Duration(rng.Int64N(int64(5 * time.Millisecond))))
				e, err := admission.NewEvaluator(admission.NewClusterAccessor(nil, c.index, nss, synced, api), admission.Options{})
				if err != nil {
					t.Fatal(err)
				}
				engines = append(engines, e)
				wg.Go(func() { _ = e.Run(ctx) })
			}
			admitted := burst(t, ctx, rng, engines, 200, 20*time.Millisecond, func() string { return fmt.Sprintf("a-%d", 1+rng.IntN(3)) }, "exceeded quota: clusterquota/team-a")
			cancel()
			wg.Wait()
			if n, used := admitted, api.used("team-a"); n != 50 || used != 50 {
				t.Errorf("seed %d: %d admitted, status.total.used pods %d; want 50 and 50", seed, n, used)
			}
		})
	}
}

// TestClusterAccessor checks what a ClusterAccessor gives the engine: the
// namespaced quotas with the cluster quotas that select the namespace,
// named for what they are, and errors for what it cannot decide.
func TestClusterAccessor(t *testing.T) {
	ctx := t.Context()
	api := newClusterAPI(tenantQuota("team-a", "a", 2), tenantQuota("team-b", "b", 1))
	nss := namespaces(tenantNamespace("a-1", "a"), tenantNamespace("b-1", "b"), tenantNamespace("c-1", "c"))
	local := newStore(rq("a-1", "compute", rl("pods", "10"), rl("pods", "0")))
	c := api.cache(0)
	acc := admission.NewClusterAccessor(local, c.index, nss, synced, api)

	quotas, err := acc.GetQuotas(ctx, "a-1")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, q := range quotas {
		names = append(names, q.Name)
	}
	if got, want := strings.Join(names, ","), "compute,clusterquota/team-a"; got != want {
		t.Errorf("GetQuotas(a-1) names = %s, want %s", got, want)
	}
	if quotas, err := acc.GetQuotas(ctx, "c-1"); err != nil || len(quotas) != 0 {
		t.Errorf("GetQuotas(c-1) = %d quotas, %v; want none", len(quotas), err)
	}
	// A namespace the cache does not hold yet is neither selected nor
	// unselected: the caller is asked to retry.
	if _, err := acc.GetQuotas(ctx, "unknown"); !apierrors.IsTooManyRequests(err) {
		t.Errorf("GetQuotas(unknown namespace) error = %v, want TooManyRequests", err)
	} else if s, ok := apierrors.SuggestsClientDelay(err); !ok || s != 1 {
		t.Errorf("GetQuotas(unknown namespace) suggests a delay of %d s (%v), want 1", s, ok)
	}

	e, err := admission.NewEvaluator(acc, admission.Options{})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- e.Run(runCtx) }()
	defer func() { cancel(); <-done }()
	for i := range 2 {
		if err := e.Evaluate(ctx, podCreate("a-1", fmt.Sprintf("p%d", i), "")); err != nil {
			t.Fatalf("creation %d within the cluster quota: %v", i, err)
		}
	}
	err = e.Evaluate(ctx, podCreate("a-1", "p3", ""))
	want := "exceeded quota: clusterquota/team-a, requested: pods=1, used: pods=2, limited: pods=2"
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
		t.Errorf("creation over the cluster quota: %v, want %q", err, want)
	}
	if used := api.used("team-a"); used != 2 {
		t.Errorf("team-a status.total.used pods = %d, want 2", used)
	}
	got, _ := local.GetQuotas(ctx, "a-1")
	if used := got[0].Status.Used["pods"]; used.Value() != 2 {
		t.Errorf("the namespaced quota's used pods = %s, want 2: both are charged", used.String())
	}

	var zero admission.ClusterAccessor
	if _, err := zero.GetQuotas(ctx, "a-1"); err == nil {
		t.Error("GetQuotas of a zero ClusterAccessor: no error")
	}
	if _, err := acc.UpdateQuotaStatus(ctx, nil); err == nil {
		t.Error("UpdateQuotaStatus(nil): no error")
	}
}

// TestClusterAccessorSkipsInvalidQuotas: a cluster quota that fails
// validation (stored before the CRD rejected it) harms only itself. The
// requests of every other namespace, and of its own, are checked against
// the valid quotas; it is listed by Invalid, and its tenant is not
// limited by it while it is invalid.
func TestClusterAccessorSkipsInvalidQuotas(t *testing.T) {
	ctx := t.Context()
	badSelector := tenantQuota("bad-selector", "a", 1)
	badSelector.Spec.Selector.LabelSelector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "tenant", Operator: "Sometimes"}}
	badValue := tenantQuota("bad-value", "a", 1)
	badValue.Spec.Selector.LabelSelector.MatchLabels = map[string]string{"tenant": "b c"}
	badKey := tenantQuota("bad-key", "a", 1)
	badKey.Spec.Selector.LabelSelector.MatchLabels = map[string]string{"bad key!": "a"}
	api := newClusterAPI(tenantQuota("team-a", "a", 2), badSelector, badValue, badKey)
	nss := namespaces(tenantNamespace("a-1", "a"), tenantNamespace("b-1", "b"))
	acc := admission.NewClusterAccessor(nil, api.cache(0).index, nss, synced, api)

	for _, ns := range []string{"a-1", "b-1"} {
		quotas, err := acc.GetQuotas(ctx, ns)
		if err != nil {
			t.Fatalf("GetQuotas(%s) with invalid cluster quotas stored: %v", ns, err)
		}
		var names []string
		for _, q := range quotas {
			names = append(names, q.Name)
		}
		want := map[string]string{"a-1": "clusterquota/team-a", "b-1": ""}[ns]
		if got := strings.Join(names, ","); got != want {
			t.Errorf("GetQuotas(%s) = %q, want %q", ns, got, want)
		}
	}
	if diff := cmp.Diff([]string{"bad-key", "bad-selector", "bad-value"}, acc.Invalid()); diff != "" {
		t.Errorf("Invalid() (-want +got):\n%s", diff)
	}

	e, err := admission.NewEvaluator(acc, admission.Options{})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- e.Run(runCtx) }()
	defer func() { cancel(); <-done }()
	if err := e.Evaluate(ctx, podCreate("b-1", "p", "")); err != nil {
		t.Errorf("a creation in a namespace no valid quota selects: %v", err)
	}
	for i := range 2 {
		if err := e.Evaluate(ctx, podCreate("a-1", fmt.Sprintf("p%d", i), "")); err != nil {
			t.Errorf("creation %d within the valid cluster quota: %v", i, err)
		}
	}
	if err := e.Evaluate(ctx, podCreate("a-1", "p3", "")); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "clusterquota/team-a") {
		t.Errorf("creation over the valid cluster quota: %v, want its refusal", err)
	}
}

// startingCache is a replica's cache of a clusterAPI that has not listed
// yet: empty and unsynced until syncAt, then a lagging copy that has
// synced, as an informer started with its replica.
type startingCache struct {
	c      *clusterCache
	api    *clusterAPI
	syncAt time.Time
	mu     sync.Mutex
	// guarded by mu
	filled bool
}

func (api *clusterAPI) startingCache(lag, after time.Duration) *startingCache {
	return &startingCache{c: newClusterCache(lag), api: api, syncAt: time.Now().Add(after)}
}

// fill lists the API into the cache once syncAt has passed.
func (s *startingCache) fill() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.filled {
		return true
	}
	if time.Now().Before(s.syncAt) {
		return false
	}
	s.api.mu.Lock()
	for _, cq := range s.api.quotas {
		s.c.set(cq.DeepCopy())
	}
	s.api.caches = append(s.api.caches, s.c)
	s.api.mu.Unlock()
	s.filled = true
	return true
}

func (s *startingCache) hasSynced() bool { return s.fill() }

// TestClusterQuotaExactFromTheFirstRequest: two replicas whose caches
// list the cluster quotas at a random moment after the requests begin
// admit exactly the limit. Before the accessor asked HasSynced, an empty
// cache read as "no cluster quota" and requests were admitted uncharged.
func TestClusterQuotaExactFromTheFirstRequest(t *testing.T) {
	for seed := range uint64(200) {
		synctest.Test(t, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 29))
			api := newClusterAPI(tenantQuota("team-a", "a", 20))
			nss := namespaces(tenantNamespace("a-1", "a"), tenantNamespace("a-2", "a"))
			ctx, cancel := context.WithCancel(t.Context())
			var wg sync.WaitGroup
			var engines []*admission.Evaluator
			for range 2 {
				c := api.startingCache(time.Duration(rng.Int64N(int64(3*time.Millisecond))), time.Duration(rng.Int64N(int64(10*time.Millisecond))))
				e, err := admission.NewEvaluator(admission.NewClusterAccessor(nil, c.c.index, nss, c.hasSynced, api), admission.Options{})
				if err != nil {
					t.Fatal(err)
				}
				engines = append(engines, e)
				wg.Go(func() { _ = e.Run(ctx) })
			}
			admitted := burst(t, ctx, rng, engines, 60, 15*time.Millisecond, func() string { return fmt.Sprintf("a-%d", 1+rng.IntN(2)) }, "exceeded quota: clusterquota/team-a")
			cancel()
			wg.Wait()
			if n, used := admitted, api.used("team-a"); n != 20 || used != 20 {
				t.Errorf("seed %d: %d admitted, status.total.used pods %d; want 20 and 20", seed, n, used)
			}
		})
	}
}

// TestClusterAccessorAnswersForTheNamespaceItReads: the index was fed a
// namespace of tenant a; the getter already holds it relabelled to
// tenant b. The batch key and the quotas are those of tenant b, never
// those of the mapping the index holds for the older version.
func TestClusterAccessorAnswersForTheNamespaceItReads(t *testing.T) {
	ctx := t.Context()
	api := newClusterAPI(tenantQuota("team-a", "a", 5), tenantQuota("team-b", "b", 5))
	c := api.cache(0)
	before := tenantNamespace("n", "a")
	before.ResourceVersion = "10"
	c.index.SetNamespace(before)
	after := tenantNamespace("n", "b")
	after.ResourceVersion = "11"
	acc := admission.NewClusterAccessor(nil, c.index, namespaces(after), synced, api)
	if got, want := acc.SharedKey("n"), "team-b"; got != want {
		t.Errorf("SharedKey(n) = %q, want %q", got, want)
	}
	quotas, err := acc.GetQuotas(ctx, "n")
	if err != nil || len(quotas) != 1 || quotas[0].Name != "clusterquota/team-b" {
		t.Errorf("GetQuotas(n) = %+v, %v; want clusterquota/team-b alone", quotas, err)
	}
	// Once fed the new version, the index answers from its entry.
	c.index.SetNamespace(after)
	if got := c.index.Lookup(after).Key; got != "team-b" {
		t.Errorf("index Lookup(n) after its event = %q, want team-b", got)
	}
}

// TestClusterAccessorLogsEachInvalidVersionOnce: a cluster quota whose
// spec is invalid is logged at error level once per version, however
// many requests read past it and however often its status is written.
func TestClusterAccessorLogsEachInvalidVersionOnce(t *testing.T) {
	var logged []string
	var mu sync.Mutex
	ctx := logr.NewContext(t.Context(), funcr.New(func(prefix, args string) {
		mu.Lock()
		logged = append(logged, args)
		mu.Unlock()
	}, funcr.Options{}))
	bad := tenantQuota("bad", "a", 1)
	bad.Spec.Selector.LabelSelector.MatchLabels = map[string]string{"tenant": "b c"}
	api := newClusterAPI(tenantQuota("team-a", "a", 2), bad)
	c := api.cache(0)
	acc := admission.NewClusterAccessor(nil, c.index, namespaces(tenantNamespace("a-1", "a")), synced, api)
	read := func() {
		for range 3 {
			if _, err := acc.GetQuotas(ctx, "a-1"); err != nil {
				t.Fatal(err)
			}
		}
	}
	read()
	status := c.index.Get("bad").DeepCopy()
	status.ResourceVersion = "100"
	c.set(status)
	read()
	next := status.DeepCopy()
	next.ResourceVersion = "101"
	next.Spec.Quota.Hard["pods"] = resource.MustParse("2")
	c.set(next)
	read()
	mu.Lock()
	defer mu.Unlock()
	if len(logged) != 2 {
		t.Errorf("logged %d lines, want 2 (one a version of the spec):\n%s", len(logged), strings.Join(logged, "\n"))
	}
	for _, l := range logged {
		if !strings.Contains(l, `"clusterQuota"="bad"`) {
			t.Errorf("logged %s, want it to name the quota", l)
		}
	}
}
