package e2e_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/quotakit/quotakit"
	"github.com/quotakit/quotakit/e2e/internal/cluster"
	"github.com/quotakit/quotakit/kube"
)

// churnRounds and churnReferenceRounds are how many rounds of each burst
// TestExactUnderChurn runs with quotakit's controller and with
// kube-controller-manager's; CI runs the defaults, the soak of
// BENCHMARKS.md is made by hand:
//
//	cd e2e && go test -run TestExactUnderChurn -timeout 90m -churn.rounds=20 -churn.kcm-rounds=20 .
var (
	churnRounds          = flag.Int("churn.rounds", 2, "rounds of each burst of TestExactUnderChurn with quotakit's controller")
	churnReferenceRounds = flag.Int("churn.kcm-rounds", 1, "rounds of each burst of TestExactUnderChurn with kube-controller-manager's controller")
)

// TestExactUnderChurn runs kube-apiserver with its ResourceQuota plugin
// and a quota controller over a quota of pods: 50, and in each round
// creators (20, then 100) race a deleter that deletes a random pod every
// 0–30ms for 10 seconds, then go on alone for 5. Watches opened before
// the first creation, and opened again from the last resourceVersion
// whenever the server ends them, see every version of the pods and of the
// quota.
//
// With quotakit's controller, with its default charge window:
//
//   - no more than 50 pods are charged at any resourceVersion. The
//     deleter deletes with a grace period of 0, which kube-apiserver
//     stores as a deletionTimestamp a few milliseconds before it removes
//     the pod; the pod evaluator charges such a pod nothing from then on,
//     as Kubernetes' does, the controller releases it, and the plugin may
//     admit its room before the pod is gone: 51 pods stored, one of them
//     being deleted, is logged, not an error;
//   - 3 seconds after the burst, status.used holds the stored pods and no
//     more than the charges no object follows: the plugin's charges (what
//     status.used gained at the versions the controller did not write)
//     less the pods created. kube-apiserver's plugin makes such charges
//     itself, with no creation failing: a batch whose write conflicts is
//     checked again, and a request refused in the first round and charged
//     in the round that is written stays refused;
//   - those charges are released within one window of the last charge,
//     plus the time to write (2 seconds here).
//
// Then the same rounds run with kube-controller-manager, built from
// Kubernetes 1.37.1 by TestMain and started here with its ResourceQuota
// controller alone, at its defaults, in place of quotakit's (no quotakit
// controller runs then, and each round has a namespace and a quota of its
// own). Its figures are the reference the issue compares with: they are
// logged, not checked; it is expected to exceed 50 pods, since its
// recount writes away the plugin's charges of pods not yet stored. The
// test fails on its side only when the comparison cannot run. The last
// lines of the log set the two side by side: the most pods charged at
// once, status writes per deletion and creations answered 409 per round.
func TestExactUnderChurn(t *testing.T) {
	bursts := []int{20, 100}
	tallies := map[string]map[int]*churnTally{}
	tally := func(controller string, creators int) *churnTally {
		if tallies[controller] == nil {
			tallies[controller] = map[int]*churnTally{}
		}
		if tallies[controller][creators] == nil {
			tallies[controller][creators] = &churnTally{}
		}
		return tallies[controller][creators]
	}
	t.Run("quotakit", func(t *testing.T) {
		for _, creators := range bursts {
			t.Run(fmt.Sprintf("%d creators", creators), func(t *testing.T) {
				sum := tally("quotakit", creators)
				for round := range *churnRounds {
					r := churnRound(t, creators, uint64(round), nil)
					sum.add(r)
					logChurnRound(t, round, r)
					checkChurnRound(t, round, r)
				}
				t.Logf("%d creators, %d rounds: %v", creators, *churnRounds, sum)
			})
		}
	})
	t.Run("kube-controller-manager", func(t *testing.T) {
		cm, err := cluster.StartControllerManager(t.Context(), env.bins.ControllerManager, env.api, env.dir, cluster.ControllerManagerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer cm.Stop()
		for _, creators := range bursts {
			t.Run(fmt.Sprintf("%d creators", creators), func(t *testing.T) {
				sum := tally("kube-controller-manager", creators)
				for round := range *churnReferenceRounds {
					r := churnRound(t, creators, uint64(round), cm)
					if exited, err := cm.Exited(); exited {
						t.Fatalf("kube-controller-manager exited during round %d (%v):\n%s", round, err, cm.Log())
					}
					// Its first status of the quota is a write
					// at least: none counted means the count is
					// broken, and so the comparison.
					if r.writes == 0 {
						t.Fatalf("round %d: no status write of kube-controller-manager counted", round)
					}
					sum.add(r)
					logChurnRound(t, round, r)
				}
				t.Logf("%d creators, %d rounds: %v", creators, *churnReferenceRounds, sum)
			})
		}
	})
	for _, creators := range bursts {
		for _, controller := range []string{"quotakit", "kube-controller-manager"} {
			if sum := tallies[controller][creators]; sum != nil && sum.rounds > 0 {
				t.Logf("%d creators, %s: %v", creators, controller, sum)
			}
		}
	}
}

// logChurnRound logs what round r saw.
func logChurnRound(t *testing.T, round int, r churnResult) {
	t.Helper()
	released := "none held"
	switch {
	case r.used == r.pods:
	case r.reference:
		released = "not awaited (no window)"
	case r.settled:
		released = fmt.Sprintf("all released %v after the last charge", r.settledAfter.Round(100*time.Millisecond))
	default:
		released = "not all released"
	}
	t.Logf("round %d: most %d pods charged at once (hard 50), %d stored; 3 s after: %d pods, status.used %d, %d charges no object followed (plugin charged %d for %d creations), %s; %d creations answered 409, %d refused; %d deletions, %d controller status writes, %d of them conflicted",
		round, r.most, r.mostStored, r.pods, r.used, r.leaked, r.charged, r.created, released, r.answered409, r.refused, r.deleted, r.writes, r.conflicts)
}

// checkChurnRound fails the test where round r of quotakit's controller
// broke what TestExactUnderChurn promises.
func checkChurnRound(t *testing.T, round int, r churnResult) {
	t.Helper()
	const writeTime = 2 * time.Second
	if r.most > 50 {
		t.Errorf("round %d: %d pods charged at once; hard is 50", round, r.most)
	}
	if r.used < r.pods || r.used-r.pods > r.leaked {
		t.Errorf("round %d: 3 s after the burst status.used is %d for %d pods and %d charges no object followed: charges whose objects arrived are held", round, r.used, r.pods, r.leaked)
	}
	if !r.settled {
		t.Errorf("round %d: status.used did not equal the pods within one window and %v of the last charge", round, writeTime)
	} else if r.settledAfter > quotakit.DefaultChargeWindow+writeTime {
		t.Errorf("round %d: status.used equalled the pods %v after the last charge, more than one window and %v", round, r.settledAfter, writeTime)
	}
}

// churnTally sums the rounds of one controller and one burst.
type churnTally struct {
	rounds, over, most, mostStored            int
	writes, conflicts, deletions, answered409 int64
}

func (s *churnTally) add(r churnResult) {
	s.rounds++
	if r.most > 50 {
		s.over++
	}
	s.most, s.mostStored = max(s.most, r.most), max(s.mostStored, r.mostStored)
	s.writes, s.conflicts, s.deletions = s.writes+r.writes, s.conflicts+r.conflicts, s.deletions+r.deleted
	s.answered409 += r.answered409
}

func (s *churnTally) String() string {
	return fmt.Sprintf("over 50 charged pods in %d of %d rounds, most %d charged at once, %d stored; %.2f controller status writes per deletion, %d of them conflicted; %.2f creations answered 409 per round (%d)",
		s.over, s.rounds, s.most, s.mostStored, float64(s.writes)/float64(max(s.deletions, 1)), s.conflicts, float64(s.answered409)/float64(max(s.rounds, 1)), s.answered409)
}

// churnResult is what one round of TestExactUnderChurn saw.
type churnResult struct {
	// most is the most pods charged at one resourceVersion, mostStored
	// the most stored, counting those being deleted.
	most, mostStored int
	// pods and used are the pods stored and status.used 3 s after the
	// burst.
	pods, used int64
	// charged is what the plugin charged (status.used gained at versions
	// the controller did not write), created the pods created, leaked the
	// difference: charges no object follows.
	charged, created, leaked int64
	// answered409 and refused count the creations answered 409 and 403.
	answered409, refused int64
	deleted              int64
	// writes and conflicts count the controller's status writes.
	writes, conflicts int64
	// settled reports whether status.used equalled the pods within one
	// window and the write time of the last charge, and settledAfter
	// when, after the last charge. Only quotakit's rounds wait for it:
	// kube-controller-manager has no window, and writes away a charge
	// no object follows at its next recount of the quota.
	settled      bool
	settledAfter time.Duration
	// reference reports whether kube-controller-manager's controller
	// ran the round.
	reference bool
}

// churnRound runs one round in a namespace of its own, beside quotakit's
// controller, started for that namespace alone, or, when cm is not nil,
// beside cm's ResourceQuota controller, which runs for every namespace.
func churnRound(t *testing.T, creators int, seed uint64, cm *cluster.ControllerManager) churnResult {
	t.Helper()
	cfg := env.api.Config()
	cs := clientset(t, cfg)
	ns := namespace(t, cs)
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	defer cancel()
	var background sync.WaitGroup
	defer background.Wait()
	defer cancel()
	var w churnWrites
	if cm == nil {
		w = runChurnController(t, ctx, &background, ns)
	} else {
		w = referenceWrites(t, ctx, cm)
	}
	podQuota(t, cs, ns, 50)
	waitFor(t, 30*time.Second, "the controller's first status", func() bool { return podUsed(t, cs, ns) == 0 })

	v := watchVersions(t, ctx, cs, ns, w.wrote)
	var stopDeleter, stopCreators atomic.Bool
	res := churnResult{reference: cm != nil}
	var created, refused, answered409, deleted atomic.Int64
	var load sync.WaitGroup
	for i := range creators {
		load.Go(func() {
			for n := 0; !stopCreators.Load(); n++ {
				_, err := cs.CoreV1().Pods(ns).Create(ctx, simplePod(fmt.Sprintf("c%d-%d", i, n)), metav1.CreateOptions{})
				switch {
				case err == nil:
					created.Add(1)
				case apierrors.IsForbidden(err):
					refused.Add(1)
				case apierrors.IsConflict(err):
					answered409.Add(1)
				case ctx.Err() == nil:
					t.Errorf("creation: %v", err)
					return
				}
			}
		})
	}
	load.Go(func() {
		rng := rand.New(rand.NewPCG(seed, uint64(creators)))
		for !stopDeleter.Load() {
			time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond)
			pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil || len(pods.Items) == 0 {
				continue
			}
			victim := pods.Items[rng.IntN(len(pods.Items))].Name
			if cs.CoreV1().Pods(ns).Delete(ctx, victim, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}) == nil {
				deleted.Add(1)
			}
		}
	})
	time.Sleep(10 * time.Second)
	stopDeleter.Store(true)
	time.Sleep(5 * time.Second)
	stopCreators.Store(true)
	load.Wait()

	time.Sleep(3 * time.Second)
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res.pods, res.used = int64(len(pods.Items)), podUsed(t, cs, ns)
	if cm == nil {
		// The last charge was made before the creators stopped: one
		// window and the write time after it, every charge no object
		// followed is released.
		deadline := v.lastCharge().Add(quotakit.DefaultChargeWindow + 2*time.Second)
		for {
			if podUsed(t, cs, ns) == res.pods {
				res.settled, res.settledAfter = true, time.Since(v.lastCharge())
				break
			}
			if time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	v.stop()
	res.most, res.mostStored, res.charged = v.result()
	res.created, res.refused, res.answered409, res.deleted = created.Load(), refused.Load(), answered409.Load(), deleted.Load()
	res.leaked = res.charged - v.added()
	res.writes, res.conflicts = w.counts()
	return res
}

// churnWrites is what a round learns of its controller's status writes.
type churnWrites struct {
	// wrote reports whether the controller wrote a version of the
	// quota.
	wrote func(quotaVersion) bool
	// counts returns the controller's status writes of the round so
	// far, and how many of them conflicted.
	counts func() (writes, conflicts int64)
}

// runChurnController starts quotakit's controller for ns, with a full
// resync every 2 s: the recalculation from the caches, which run ahead
// of the ledger, goes on during the burst. It runs until ctx ends, in
// background.
func runChurnController(t *testing.T, ctx context.Context, background *sync.WaitGroup, ns string) churnWrites {
	t.Helper()
	client, err := kube.NewForConfig(env.api.Config(), quotakit.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordingClient{Client: client, written: map[uint64]bool{}}
	ctrl, err := quotakit.NewController(rec, quotakit.Options{Namespace: ns, ResyncPeriod: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	background.Go(func() { _ = ctrl.Run(ctx) })
	return churnWrites{
		wrote:  func(q quotaVersion) bool { return rec.wrote(q.rv) },
		counts: func() (int64, int64) { return rec.writes.Load(), ctrl.StatusConflicts() },
	}
}

// referenceWrites counts kube-controller-manager's status writes from
// now: its PUTs, the only writes of its ResourceQuota controller, as its
// client metrics count them, answered 200 or 409. A version of the quota
// is its write when it owns status.used.pods there.
func referenceWrites(t *testing.T, ctx context.Context, cm *cluster.ControllerManager) churnWrites {
	t.Helper()
	requests := func() map[cluster.Request]int64 {
		n, err := cm.Requests(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := requests()
	ok, conflict := cluster.Request{Method: "PUT", Code: "200"}, cluster.Request{Method: "PUT", Code: "409"}
	return churnWrites{
		wrote: func(q quotaVersion) bool { return q.owner == "kube-controller-manager" },
		counts: func() (int64, int64) {
			now := requests()
			return now[ok] - before[ok], now[conflict] - before[conflict]
		},
	}
}

// recordingClient is the kube bridge's Client, with the resourceVersions
// of the controller's status writes recorded.
type recordingClient struct {
	*kube.Client
	writes atomic.Int64

	mu sync.Mutex
	// guarded by mu
	written map[uint64]bool
}

func (c *recordingClient) UpdateStatus(ctx context.Context, gvr schema.GroupVersionResource, obj runtime.Object) (runtime.Object, error) {
	out, err := c.Client.UpdateStatus(ctx, gvr, obj)
	if err != nil {
		return out, err
	}
	c.writes.Add(1)
	if rq, ok := out.(*corev1.ResourceQuota); ok {
		rv, _ := strconv.ParseUint(rq.ResourceVersion, 10, 64)
		c.mu.Lock()
		c.written[rv] = true
		c.mu.Unlock()
	}
	return out, nil
}

func (c *recordingClient) wrote(rv uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.written[rv]
}

// TestLeakedChargesReleasedWithinOneWindow makes two charges that no
// object follows, 5 seconds apart, in a quiet namespace, with the default
// charge window: two creations of a name already taken, which
// kube-apiserver's plugin charges before the store refuses them. Each is
// held for one window after it was made (no sooner: its object could
// still be on its way) and released within one window and the time to
// write (2 seconds here). The second is not left for a recheck a window
// after the first's.
func TestLeakedChargesReleasedWithinOneWindow(t *testing.T) {
	const (
		window    = quotakit.DefaultChargeWindow
		writeTime = 2 * time.Second
		apart     = 5 * time.Second
	)
	cfg := env.api.Config()
	cs := clientset(t, cfg)
	ns := namespace(t, cs)
	podQuota(t, cs, ns, 50)
	runController(t, quotakit.Options{Namespace: ns})
	waitFor(t, 30*time.Second, "the controller's first status", func() bool { return podUsed(t, cs, ns) == 0 })
	ctx := t.Context()
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, simplePod("taken"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "status.used 1", func() bool { return podUsed(t, cs, ns) == 1 })
	leak := func() time.Time {
		t.Helper()
		at := time.Now()
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, simplePod("taken"), metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating a taken name: %v, want AlreadyExists", err)
		}
		return at
	}
	first := leak()
	time.Sleep(apart)
	second := leak()
	if u := podUsed(t, cs, ns); u != 3 {
		t.Fatalf("after two charges no object follows: status.used %d, want 3", u)
	}
	// until waits until status.used is want, and returns when it was
	// seen so.
	until := func(want int64, deadline time.Time) (time.Time, bool) {
		for time.Now().Before(deadline) {
			if podUsed(t, cs, ns) == want {
				return time.Now(), true
			}
			time.Sleep(20 * time.Millisecond)
		}
		return time.Time{}, false
	}
	time.Sleep(time.Until(first.Add(window - writeTime)))
	if u := podUsed(t, cs, ns); u != 3 {
		t.Fatalf("%v after the first charge: status.used %d, want 3: released before its window", window-writeTime, u)
	}
	at, ok := until(2, first.Add(window+writeTime))
	if !ok {
		t.Fatalf("the first charge was not released within %v of it", window+writeTime)
	}
	t.Logf("the first charge was released %v after it was made", at.Sub(first).Round(10*time.Millisecond))
	if u := podUsed(t, cs, ns); u != 2 {
		t.Fatalf("after the first release: status.used %d, want 2", u)
	}
	time.Sleep(time.Until(second.Add(window - writeTime)))
	if u := podUsed(t, cs, ns); u != 2 {
		t.Fatalf("%v after the second charge: status.used %d, want 2: released before its window", window-writeTime, u)
	}
	at, ok = until(1, second.Add(window+writeTime))
	if !ok {
		t.Fatalf("the second charge was not released within %v of it (status.used %d)", window+writeTime, podUsed(t, cs, ns))
	}
	t.Logf("the second charge was released %v after it was made", at.Sub(second).Round(10*time.Millisecond))
}
