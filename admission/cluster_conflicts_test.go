package admission_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/quotakit/quotakit/admission"
)

// TestClusterAccessorNeverGoesBackToAStaleCopy replays, step by step, two
// batches of one process that share a cluster quota:
//
//  1. batch B charges the quota: the API holds version 2, B's own copy
//     too, and the index still version 1;
//  2. batch A begins reading the quota;
//  3. the index catches up, and B reads again: the index now holds its
//     own version, so it needs its own copy no longer;
//  4. batch A goes on.
//
// A must check against version 2, known to the process before it began,
// and its charge must be written. The accessor used to read the cache
// before its own copies, and after step 3 had neither: A checked against
// version 1, and the accessor refused A's write itself with a conflict.
// Step 3 runs inside A's read, between its two reads.
func TestClusterAccessorNeverGoesBackToAStaleCopy(t *testing.T) {
	ctx := t.Context()
	api := newClusterAPI(tenantQuota("team-a", "a", 10))
	c := newClusterCache(0)
	catchUp := func() {
		items, _ := api.ListClusterQuotas(ctx)
		for i := range items {
			c.set(&items[i])
		}
	}
	catchUp()
	nss := namespaces(tenantNamespace("a-1", "a"), tenantNamespace("a-2", "a"))
	acc := admission.NewClusterAccessor(nil, c.index, nss, synced, api)

	charge := func(q corev1.ResourceQuota, pods int64) error {
		q.Status.Used = corev1.ResourceList{"pods": *resource.NewQuantity(pods, resource.DecimalSI)}
		_, err := acc.UpdateQuotaStatus(ctx, &q)
		return err
	}
	// 1.
	b, err := acc.GetQuotas(ctx, "a-1")
	if err != nil || len(b) != 1 {
		t.Fatalf("B: GetQuotas(a-1) = %d quotas, %v; want 1", len(b), err)
	}
	if err := charge(b[0], 1); err != nil {
		t.Fatalf("B: charging version %s: %v", b[0].ResourceVersion, err)
	}
	// 2.
	var stepped atomic.Bool
	admission.SetReadHook(acc, func() {
		if stepped.Swap(true) {
			return // B's read, below
		}
		// 3.
		catchUp()
		if _, err := acc.GetQuotas(ctx, "a-1"); err != nil {
			t.Errorf("B: GetQuotas(a-1) after the index caught up: %v", err)
		}
	})
	// 4.
	a, err := acc.GetQuotas(ctx, "a-2")
	if err != nil || len(a) != 1 {
		t.Fatalf("A: GetQuotas(a-2) = %d quotas, %v; want 1", len(a), err)
	}
	if got, want := a[0].ResourceVersion, "2"; got != want {
		t.Errorf("A checked against version %s, want %s: the newest the process knew when A began", got, want)
	}
	if err := charge(a[0], 2); err != nil {
		t.Errorf("A: charging version %s: %v, want it written", a[0].ResourceVersion, err)
	}
	if used := api.used("team-a"); used != 2 {
		t.Errorf("status.total.used pods = %d, want 2", used)
	}
}

// TestClusterQuotaConflictReadsOneQuota: one replica, its cache lagging,
// two cluster quotas and three namespaces, one of them in both, so that
// two batches of the process (the namespaces of team-a alone, and the
// one shared with extra) write team-a at once and conflict. Each conflict
// costs at most one get of the quota that conflicted and no list: the
// accessor lists only until its caches sync. Every admission is charged
// exactly once.
func TestClusterQuotaConflictReadsOneQuota(t *testing.T) {
	for seed := range uint64(10) {
		synctest.Test(t, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 31))
			extra := tenantQuota("extra", "a", 1000)
			extra.Spec.Selector.LabelSelector.MatchLabels = map[string]string{"extra": "yes"}
			api := newClusterAPI(tenantQuota("team-a", "a", 1000), extra)
			shared := tenantNamespace("a-shared", "a")
			shared.Labels["extra"] = "yes"
			nss := namespaces(tenantNamespace("a-1", "a"), tenantNamespace("a-2", "a"), shared)
			c := api.cache(time.Duration(rng.Int64N(int64(3 * time.Millisecond))))
			e, err := admission.NewEvaluator(admission.NewClusterAccessor(nil, c.index, nss, synced, api), admission.Options{})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- e.Run(ctx) }()
			var admitted, admittedShared atomic.Int64
			var requests sync.WaitGroup
			for i := range 200 {
				start := time.Duration(rng.Int64N(int64(20 * time.Millisecond)))
				ns := []string{"a-1", "a-2", "a-shared"}[rng.IntN(3)]
				requests.Go(func() {
					time.Sleep(start)
					if err := e.Evaluate(ctx, podCreate(ns, fmt.Sprintf("p-%d", i), "")); err != nil {
						t.Errorf("creation %d in %s: %v", i, ns, err)
						return
					}
					admitted.Add(1)
					if ns == "a-shared" {
						admittedShared.Add(1)
					}
				})
			}
			requests.Wait()
			cancel()
			<-done
			lists, gets := api.reads()
			conflicts := e.Stats().Conflicts
			t.Logf("seed %d: %d conflicts, %d gets, %d lists", seed, conflicts, gets, lists)
			if lists != 0 {
				t.Errorf("seed %d: %d lists of the cluster quotas after the caches synced, want 0", seed, lists)
			}
			if int64(gets) > conflicts {
				t.Errorf("seed %d: %d gets for %d conflicts, want at most one a conflict", seed, gets, conflicts)
			}
			if n, used := admitted.Load(), api.used("team-a"); used != n {
				t.Errorf("seed %d: team-a used %d pods, %d admitted", seed, used, n)
			}
			if n, used := admittedShared.Load(), api.used("extra"); used != n {
				t.Errorf("seed %d: extra used %d pods, %d admitted in a-shared", seed, used, n)
			}
		})
	}
}
