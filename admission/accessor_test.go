package admission_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/quotakit/quotakit/admission"
)

// fakeClient is a QuotaClient over a store that counts live lists and
// can hold them until released.
type fakeClient struct {
	s *store

	mu sync.Mutex
	// guarded by mu
	lists int
	// listDelay is slept before a list answers.
	listDelay time.Duration
}

func (c *fakeClient) ListQuotas(ctx context.Context, namespace string) ([]corev1.ResourceQuota, error) {
	c.mu.Lock()
	c.lists++
	c.mu.Unlock()
	time.Sleep(c.listDelay)
	return c.s.GetQuotas(ctx, namespace)
}

func (c *fakeClient) UpdateQuotaStatus(ctx context.Context, q *corev1.ResourceQuota) (*corev1.ResourceQuota, error) {
	return c.s.UpdateQuotaStatus(ctx, q)
}

func (c *fakeClient) listCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lists
}

// cacheOf is a QuotaLister over a fixed set of cached quotas.
type cacheOf struct {
	mu sync.Mutex
	// guarded by mu
	quotas []*corev1.ResourceQuota
}

func (c *cacheOf) list(namespace string) ([]*corev1.ResourceQuota, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*corev1.ResourceQuota
	for _, q := range c.quotas {
		if q.Namespace == namespace {
			out = append(out, q)
		}
	}
	return out, nil
}

func (c *cacheOf) set(quotas ...*corev1.ResourceQuota) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.quotas = quotas
}

func names(quotas []corev1.ResourceQuota) []string {
	var out []string
	for _, q := range quotas {
		out = append(out, q.Name+"@"+q.ResourceVersion)
	}
	return out
}

func TestAccessorReadsTheSyncedCache(t *testing.T) {
	s := newStore(rq("ns", "live", rl("pods", "1"), rl("pods", "0")))
	client := &fakeClient{s: s}
	cached := rq("ns", "cached", rl("pods", "1"), rl("pods", "0"))
	cached.ResourceVersion = "5"
	cache := &cacheOf{quotas: []*corev1.ResourceQuota{cached}}
	a := admission.NewAccessor(cache.list, func() bool { return true }, client, admission.AccessorOptions{})
	got, err := a.GetQuotas(t.Context(), "ns")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"cached@5"}, names(got)); diff != "" {
		t.Errorf("GetQuotas (-want +got):\n%s", diff)
	}
	if client.listCount() != 0 {
		t.Errorf("%d live lists for a namespace the cache has quotas of, want 0", client.listCount())
	}
	got[0].Status.Used = rl("pods", "1")
	if _, ok := cached.Status.Used["pods"]; !ok || quantity(cached.Status.Used, "pods") != 0 {
		t.Errorf("modifying GetQuotas' result changed the cache")
	}
}

// TestAccessorLiveRead: an unsynced cache with no quota for a namespace
// reads it live, once for concurrent callers, and reuses the answer for
// LiveTTL; a synced cache never reads live.
func TestAccessorLiveRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(rq("ns", "live", rl("pods", "1"), rl("pods", "0")))
		client := &fakeClient{s: s, listDelay: time.Second}
		var synced sync.Mutex
		isSynced := false
		hasSynced := func() bool { synced.Lock(); defer synced.Unlock(); return isSynced }
		a := admission.NewAccessor((&cacheOf{}).list, hasSynced, client, admission.AccessorOptions{LiveTTL: time.Minute})

		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() {
				got, err := a.GetQuotas(t.Context(), "ns")
				if err != nil || len(got) != 1 || got[0].Name != "live" {
					t.Errorf("GetQuotas = %v, %v; want the live quota", names(got), err)
				}
			})
		}
		wg.Wait()
		if n := client.listCount(); n != 1 {
			t.Errorf("%d live lists for 10 concurrent readers, want 1", n)
		}
		time.Sleep(30 * time.Second)
		if _, err := a.GetQuotas(t.Context(), "ns"); err != nil {
			t.Fatal(err)
		}
		if n := client.listCount(); n != 1 {
			t.Errorf("%d live lists within LiveTTL, want 1", n)
		}
		time.Sleep(31 * time.Second)
		if _, err := a.GetQuotas(t.Context(), "ns"); err != nil {
			t.Fatal(err)
		}
		if n := client.listCount(); n != 2 {
			t.Errorf("%d live lists after LiveTTL, want 2", n)
		}
		synced.Lock()
		isSynced = true
		synced.Unlock()
		time.Sleep(2 * time.Minute)
		got, err := a.GetQuotas(t.Context(), "ns")
		if err != nil || len(got) != 0 {
			t.Errorf("synced cache: GetQuotas = %v, %v; want none", names(got), err)
		}
		if n := client.listCount(); n != 2 {
			t.Errorf("%d live lists once synced, want 2", n)
		}
	})
}

// TestAccessorOwnWrites: a cache that lags behind the accessor's own write
// is overlaid by that write until it catches up.
func TestAccessorOwnWrites(t *testing.T) {
	s := newStore(rq("ns", "pods", rl("pods", "5"), rl("pods", "0")))
	stored, err := s.GetQuotas(t.Context(), "ns")
	if err != nil {
		t.Fatal(err)
	}
	cache := &cacheOf{quotas: []*corev1.ResourceQuota{&stored[0]}}
	a := admission.NewAccessor(cache.list, synced, &fakeClient{s: s}, admission.AccessorOptions{})

	q := stored[0].DeepCopy()
	q.Status.Used = rl("pods", "1")
	written, err := a.UpdateQuotaStatus(t.Context(), q)
	if err != nil {
		t.Fatal(err)
	}
	got, err := a.GetQuotas(t.Context(), "ns")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"pods@" + written.ResourceVersion}, names(got)); diff != "" {
		t.Errorf("GetQuotas with a lagging cache (-want +got):\n%s", diff)
	}
	// A second write from the overlaid version does not conflict.
	q = got[0].DeepCopy()
	q.Status.Used = rl("pods", "2")
	if _, err := a.UpdateQuotaStatus(t.Context(), q); err != nil {
		t.Errorf("write after own write: %v", err)
	}

	// The cache catches up, past the own write: the cache wins from now on.
	caughtUp := stored[0].DeepCopy()
	caughtUp.ResourceVersion = "100"
	cache.set(caughtUp)
	got, _ = a.GetQuotas(t.Context(), "ns")
	if diff := cmp.Diff([]string{"pods@100"}, names(got)); diff != "" {
		t.Errorf("GetQuotas after the cache caught up (-want +got):\n%s", diff)
	}

	// A resourceVersion that is not an integer: the cache is used, no panic.
	odd := stored[0].DeepCopy()
	odd.ResourceVersion = "not-a-number"
	cache.set(odd)
	got, _ = a.GetQuotas(t.Context(), "ns")
	if diff := cmp.Diff([]string{"pods@not-a-number"}, names(got)); diff != "" {
		t.Errorf("GetQuotas with a non-integer resourceVersion (-want +got):\n%s", diff)
	}
}

func TestAccessorErrors(t *testing.T) {
	s := newStore(rq("ns", "pods", rl("pods", "5"), rl("pods", "0")))
	a := admission.NewAccessor(nil, synced, &fakeClient{s: s}, admission.AccessorOptions{})
	if _, err := a.GetQuotas(t.Context(), "ns"); err == nil {
		t.Errorf("GetQuotas without a lister = nil error, want one")
	}
	cache := &cacheOf{}
	a = admission.NewAccessor(cache.list, synced, &fakeClient{s: s}, admission.AccessorOptions{})
	stale := rq("ns", "pods", rl("pods", "5"), rl("pods", "1"))
	stale.ResourceVersion = "0"
	if _, err := a.UpdateQuotaStatus(t.Context(), stale); !apierrors.IsConflict(err) {
		t.Errorf("stale write = %v, want a Conflict", err)
	}
}

// TestEvaluatorOverAccessor: the Evaluator over an Accessor whose cache
// never sees the writes still admits a stream of requests without
// conflicts, because the accessor overlays its own writes.
func TestEvaluatorOverAccessor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(rq("ns", "pods", rl("pods", "3"), rl("pods", "0")))
		stored, _ := s.GetQuotas(t.Context(), "ns")
		frozen := &cacheOf{quotas: []*corev1.ResourceQuota{&stored[0]}}
		e := newEvaluator(t, admission.NewAccessor(frozen.list, synced, &fakeClient{s: s}, admission.AccessorOptions{}), admission.Options{})
		run(t, e)
		for i := range 4 {
			err := e.Evaluate(t.Context(), podCreate("ns", "p", ""))
			if i < 3 && err != nil {
				t.Errorf("request %d: Evaluate = %v, want nil", i, err)
			}
			if i == 3 && !apierrors.IsForbidden(err) {
				t.Errorf("request 3: Evaluate = %v, want Forbidden", err)
			}
		}
		if got := quantity(s.used("ns", "pods"), "pods"); got != 3 {
			t.Errorf("status.used pods = %d, want 3", got)
		}
	})
}

// TestAccessorRereadsLiveAfterConflict pins the cause of conflict storms
// with several replicas: after another writer changed a quota, the cache
// still shows the old version, and a retry from it conflicts again. The
// accessor reads the namespace live after a conflict, once, and the
// retry's write succeeds.
func TestAccessorRereadsLiveAfterConflict(t *testing.T) {
	s := newStore(rq("ns", "pods", rl("pods", "5"), rl("pods", "0")))
	stored, err := s.GetQuotas(t.Context(), "ns")
	if err != nil {
		t.Fatal(err)
	}
	cache := &cacheOf{quotas: []*corev1.ResourceQuota{&stored[0]}}
	client := &fakeClient{s: s}
	a := admission.NewAccessor(cache.list, synced, client, admission.AccessorOptions{})

	// Another replica charges the quota; this replica's cache lags.
	other := stored[0].DeepCopy()
	other.Status.Used = rl("pods", "1")
	if _, err := s.UpdateQuotaStatus(t.Context(), other); err != nil {
		t.Fatal(err)
	}
	q := stored[0].DeepCopy()
	q.Status.Used = rl("pods", "1")
	if _, err := a.UpdateQuotaStatus(t.Context(), q); !apierrors.IsConflict(err) {
		t.Fatalf("write over the stale version: error %v, want a conflict", err)
	}
	got, err := a.GetQuotas(t.Context(), "ns")
	if err != nil {
		t.Fatal(err)
	}
	if n := client.listCount(); n != 1 {
		t.Errorf("live reads after a conflict = %d, want 1", n)
	}
	if used := got[0].Status.Used["pods"]; used.String() != "1" {
		t.Fatalf("re-read pods used = %s, want the other replica's 1", used.String())
	}
	retry := got[0].DeepCopy()
	retry.Status.Used = rl("pods", "2")
	if _, err := a.UpdateQuotaStatus(t.Context(), retry); err != nil {
		t.Fatalf("retry from the live read: %v", err)
	}
	// The next read, with the cache still lagging, is the accessor's own
	// write, not a live read and not the stale cache.
	got, err = a.GetQuotas(t.Context(), "ns")
	if err != nil {
		t.Fatal(err)
	}
	if used := got[0].Status.Used["pods"]; used.String() != "2" || client.listCount() != 1 {
		t.Errorf("read after the retry: pods used %s after %d live reads, want 2 after 1", used.String(), client.listCount())
	}
	// A failed live read leaves the namespace to be read live again.
	if _, err := s.UpdateQuotaStatus(t.Context(), stored[0].DeepCopy()); !apierrors.IsConflict(err) {
		t.Fatalf("stale write: %v", err)
	}
	if _, err := a.UpdateQuotaStatus(t.Context(), stored[0].DeepCopy()); !apierrors.IsConflict(err) {
		t.Fatalf("stale write through the accessor: %v", err)
	}
	s.mu.Lock()
	s.getErr = errors.New("unreachable")
	s.mu.Unlock()
	if _, err := a.GetQuotas(t.Context(), "ns"); err == nil {
		t.Fatal("GetQuotas with the server unreachable after a conflict: no error")
	}
	s.mu.Lock()
	s.getErr = nil
	s.mu.Unlock()
	if _, err := a.GetQuotas(t.Context(), "ns"); err != nil || client.listCount() != 3 {
		t.Errorf("GetQuotas after the failed live read: %v after %d live reads, want none after 3", err, client.listCount())
	}
}

// syncingCache is an informer's cache whose first list lands at a chosen
// moment: the lister call that sees fill set fills it and marks it
// synced, so the call finds it empty but any later HasSynced says true.
type syncingCache struct {
	mu sync.Mutex
	// guarded by mu
	synced bool
	// guarded by mu
	quotas []*corev1.ResourceQuota
	// fill is what the first list brings.
	fill []*corev1.ResourceQuota
}

func (c *syncingCache) hasSynced() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.synced
}

func (c *syncingCache) list(namespace string) ([]*corev1.ResourceQuota, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*corev1.ResourceQuota
	for _, q := range c.quotas {
		if q.Namespace == namespace {
			out = append(out, q)
		}
	}
	// The informer's first list lands after this read.
	c.quotas, c.synced = c.fill, true
	return out, nil
}

// TestAccessorSyncBetweenTheCalls: a cache whose first list lands between
// the lister call and the HasSynced call must not make a namespace with a
// quota read as quota-less. Asking the lister first, then HasSynced, took
// the empty answer for a synced one, and the batch was admitted
// uncharged.
func TestAccessorSyncBetweenTheCalls(t *testing.T) {
	q := rq("ns", "pods", rl("pods", "1"), rl("pods", "0"))
	s := newStore(q)
	stored, _ := s.GetQuotas(t.Context(), "ns")
	c := &syncingCache{fill: []*corev1.ResourceQuota{&stored[0]}}
	a := admission.NewAccessor(c.list, c.hasSynced, &fakeClient{s: s}, admission.AccessorOptions{})
	got, err := a.GetQuotas(t.Context(), "ns")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"pods@1"}, names(got)); diff != "" {
		t.Errorf("GetQuotas while the cache syncs (-want +got):\n%s", diff)
	}
}

// TestAccessorUnsyncedCacheIsNeverUsed: an informer fills its cache one
// object at a time before it reports synced, so an unsynced cache can
// hold some of a namespace's quotas and not others. kube-apiserver uses
// such a cache as it is; the Accessor reads live until it has synced.
func TestAccessorUnsyncedCacheIsNeverUsed(t *testing.T) {
	s := newStore(rq("ns", "cpu", rl("requests.cpu", "1"), rl("requests.cpu", "0")), rq("ns", "pods", rl("pods", "1"), rl("pods", "0")))
	stored, _ := s.GetQuotas(t.Context(), "ns")
	partial := &cacheOf{quotas: []*corev1.ResourceQuota{&stored[0]}}
	client := &fakeClient{s: s}
	a := admission.NewAccessor(partial.list, func() bool { return false }, client, admission.AccessorOptions{})
	got, err := a.GetQuotas(t.Context(), "ns")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"cpu@1", "pods@2"}, names(got)); diff != "" {
		t.Errorf("GetQuotas over a partly filled cache (-want +got):\n%s", diff)
	}
	if n := client.listCount(); n != 1 {
		t.Errorf("%d live lists, want 1", n)
	}
}

// TestAccessorNeedsHasSynced: without HasSynced an Accessor cannot tell
// an empty namespace from an unlisted one; it refuses to guess.
func TestAccessorNeedsHasSynced(t *testing.T) {
	s := newStore()
	a := admission.NewAccessor((&cacheOf{}).list, nil, &fakeClient{s: s}, admission.AccessorOptions{})
	if _, err := a.GetQuotas(t.Context(), "ns"); err == nil || !strings.Contains(err.Error(), "HasSynced") {
		t.Errorf("GetQuotas without HasSynced = %v, want an error naming HasSynced", err)
	}
}

// startingQuotaCache is a replica's quota cache that lists at syncAt: empty
// and unsynced before, a snapshot of the store that has synced after (it
// never sees a later write: every write the replica makes over it is
// checked by the store's precondition).
type startingQuotaCache struct {
	s      *store
	syncAt time.Time
	mu     sync.Mutex
	// guarded by mu
	snapshot map[string][]*corev1.ResourceQuota
}

func (c *startingQuotaCache) hasSynced() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.snapshot == nil && !time.Now().Before(c.syncAt) {
		c.snapshot = map[string][]*corev1.ResourceQuota{}
		c.s.mu.Lock()
		for _, q := range c.s.quotas {
			c.snapshot[q.Namespace] = append(c.snapshot[q.Namespace], q.DeepCopy())
		}
		c.s.mu.Unlock()
	}
	return c.snapshot != nil
}

func (c *startingQuotaCache) list(ns string) ([]*corev1.ResourceQuota, error) {
	c.hasSynced()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.snapshot[ns], nil
}

// TestExactFromTheFirstRequest: two replicas whose quota caches list at
// a random moment after the requests begin, as Evaluators created with
// their informers, admit exactly the hard limit, over 200 seeds.
func TestExactFromTheFirstRequest(t *testing.T) {
	for seed := range uint64(200) {
		synctest.Test(t, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 29))
			s := newStore(rq("ns", "pods", rl("pods", "20"), rl("pods", "0")))
			s.writeDelay = time.Millisecond
			ctx, cancel := context.WithCancel(t.Context())
			var wg sync.WaitGroup
			var engines []*admission.Evaluator
			for range 2 {
				c := &startingQuotaCache{s: s, syncAt: time.Now().Add(time.Duration(rng.Int64N(int64(10 * time.Millisecond))))}
				e := newEvaluator(t, admission.NewAccessor(c.list, c.hasSynced, &fakeClient{s: s}, admission.AccessorOptions{}), admission.Options{})
				engines = append(engines, e)
				wg.Go(func() { _ = e.Run(ctx) })
			}
			admitted := burst(t, ctx, rng, engines, 60, 15*time.Millisecond, func() string { return "ns" }, "exceeded quota: pods")
			cancel()
			wg.Wait()
			if n, used := admitted, s.used("ns", "pods")["pods"]; n != 20 || used.Value() != 20 {
				t.Errorf("seed %d: %d admitted, status.used pods %s; want 20 and 20", seed, n, used.String())
			}
		})
	}
}
