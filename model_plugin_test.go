package quotakit_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit"
	"github.com/quotakit/quotakit/cache"
	"github.com/quotakit/quotakit/cache/cachetest"
)

// pluginSeeds is how many seeds TestModelWithThePlugin runs; CI runs the
// default, longer runs are made by hand:
//
//	go test -race -run TestModelWithThePlugin -plugin.seeds=2000 .
var (
	pluginSeeds = flag.Int("plugin.seeds", 100, "seeds of TestModelWithThePlugin")
	pluginSeed  = flag.Int("plugin.seed", -1, "the one seed of TestModelWithThePlugin to run, for a failure found")
)

// TestModelWithThePlugin runs the controller beside a model of
// kube-apiserver's ResourceQuota admission plugin (see [plugin]): creators
// race a random deleter against one quota of pods, then creators run
// alone, and the checks are those of issue 30:
//
//   - at every write of the controller's, status.used holds the pods
//     stored and every charge whose object may still arrive (admitted and
//     not yet stored or failed); no more pods are ever stored than hard;
//   - once every object is stored or failed, and the caches and a write
//     have caught up, status.used holds the pods stored and no more than
//     the charges no object follows (stores that failed, requests the
//     plugin refused and charged): no charge of an object that arrived;
//   - once the last charge was made, status.used equals the pods stored
//     no later than one charge window later, plus the time to write:
//     the charges of objects that arrived are not held, and a charge no
//     object followed (a store that failed after admission) is released
//     one window after it was made, even when charges followed it.
func TestModelWithThePlugin(t *testing.T) {
	for seed := range uint64(*pluginSeeds) {
		if *pluginSeed >= 0 && seed != uint64(*pluginSeed) {
			continue
		}
		if v := runPluginModel(t, seed); v != "" {
			t.Fatalf("seed %d: %s", seed, v)
		}
	}
}

// pluginHard is the hard limit of pods of TestModelWithThePlugin's quota.
const pluginHard = 10

func runPluginModel(t *testing.T, seed uint64) (violation string) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(seed, 0x51f15e))
		ctx, cancel := context.WithCancel(t.Context())
		m := &model{api: cachetest.New(cachetest.Options{}), stored: map[string]bool{}}
		defer m.api.Close()
		if _, err := m.api.Create(ctx, quotasGVR, &corev1.ResourceQuota{
			ObjectMeta: metav1.ObjectMeta{Namespace: modelNamespace, Name: "q"},
			Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"pods": *resource.NewQuantity(pluginHard, resource.DecimalSI)}},
		}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		lags := map[schema.GroupVersionResource]lag{quotasGVR: lagOf2(rng), podsGVR: lagOf2(rng)}
		client := &modelClient{m: m, lags: func(gvr schema.GroupVersionResource) lag { return lags[gvr] }, seed: seed,
			rtt: time.Duration(rng.Int64N(int64(10 * time.Millisecond)))}
		c, err := quotakit.NewController(client, quotakit.Options{ChargeWindow: modelWindow, ResyncPeriod: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { c.Run(ctx) })
		servers := make([]*plugin, 1+rng.IntN(2))
		for i := range servers {
			servers[i] = newPlugin(m, lagging{lw: m.api.ListerWatcher(quotasGVR, ""), lag: lagOf2(rng), seed: seed<<8 | uint64(i), watches: &client.watches})
			servers[i].run(ctx, &wg)
		}
		time.Sleep(6 * time.Second) // the controller's start grace
		synctest.Wait()

		creators := 4 + rng.IntN(20)
		churn := time.Duration(1+rng.IntN(4)) * time.Second
		alone := time.Duration(rng.Int64N(int64(2 * time.Second)))
		deleteEvery := time.Duration(1+rng.IntN(50)) * time.Millisecond
		failOneIn := 2 + rng.IntN(20)
		start := time.Now()
		var runners sync.WaitGroup
		for i := range creators {
			crng := rand.New(rand.NewPCG(seed, uint64(i)+1))
			runners.Go(func() {
				for n := 0; time.Since(start) < churn+alone; n++ {
					name := fmt.Sprintf("c%d-%d", i, n)
					s := servers[crng.IntN(len(servers))]
					delay := time.Duration(crng.Int64N(int64(100 * time.Millisecond)))
					m.pluginRequest(ctx, s, name, delay, crng.IntN(failOneIn) == 0)
					time.Sleep(time.Duration(crng.Int64N(int64(20 * time.Millisecond))))
				}
			})
		}
		runners.Go(func() {
			drng := rand.New(rand.NewPCG(seed, 0))
			for time.Since(start) < churn {
				time.Sleep(deleteEvery)
				m.deleteSome(ctx, drng, 1)
			}
		})
		runners.Wait()
		// Every request answered and every object stored or failed: once
		// the caches and a write have caught up, status.used holds no
		// charge of an object that arrived.
		time.Sleep(500 * time.Millisecond)
		synctest.Wait()
		m.mu.Lock()
		last := m.lastCharge
		if used, leaked := m.used(ctx), int64(m.failedStores+m.pluginLeaks); m.violation == "" && used-int64(len(m.stored)) > leaked {
			m.violation = fmt.Sprintf("500ms after the last object: status.used pods = %d, %d stored, %d charges no object followed", used, len(m.stored), leaked)
		}
		m.mu.Unlock()
		// One window after the last charge, plus the time to write.
		time.Sleep(time.Until(last.Add(modelWindow + 200*time.Millisecond)))
		synctest.Wait()
		m.mu.Lock()
		m.checkLocked(ctx)
		if used := m.used(ctx); m.violation == "" && used != int64(len(m.stored)) {
			m.violation = fmt.Sprintf("one window after the last charge status.used pods = %d, %d stored", used, len(m.stored))
		}
		violation = m.violation
		if testing.Verbose() {
			t.Logf("seed %d: %d creators, %v churn, %v alone, delete every %v: %d stored, used %d, admitted %d, stores failed %d, plugin leaks %d, deleted %d, controller writes %d, plugin writes %d, plugin conflicts %d, creations refused 409 %d",
				seed, creators, churn, alone, deleteEvery, len(m.stored), m.used(ctx), m.admitted, m.failedStores, m.pluginLeaks, m.deleted, m.ctrlWrites, m.replicaWrites, m.conflicts, m.refused409)
		}
		m.mu.Unlock()
		cancel()
		wg.Wait()
	})
	return violation
}

// lagOf2 returns how long one cache lags behind the API: a base lag of up
// to 50ms and a jitter of up to 20ms per event, in order.
func lagOf2(rng *rand.Rand) lag {
	return lag{base: time.Duration(rng.Int64N(int64(50 * time.Millisecond))), jitter: time.Duration(rng.Int64N(int64(20 * time.Millisecond)))}
}

// pluginRequest asks s to admit the creation of pod name, and stores it
// after delay unless the store fails. The plugin counts the request as
// pending when its charge is written.
func (m *model) pluginRequest(ctx context.Context, s *plugin, name string, delay time.Duration, fails bool) {
	err := s.admit(ctx)
	if err != nil {
		if apierrors.IsConflict(err) {
			m.mu.Lock()
			m.refused409++
			m.mu.Unlock()
		}
		return
	}
	time.Sleep(delay)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pending--
	if fails {
		m.failedStores++
		return
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: modelNamespace, Name: name}}
	if _, err := m.api.Create(ctx, podsGVR, pod); err != nil {
		m.fail("storing %s: %v", name, err)
		return
	}
	m.stored[name] = true
	if len(m.stored) > pluginHard {
		m.fail("%d pods stored, hard %d", len(m.stored), pluginHard)
	}
	m.checkLocked(ctx)
}

// plugin is a model of kube-apiserver's ResourceQuota admission for one
// quota of pods in one namespace, as it behaves (see the reference notes
// on the plugin), written for this test:
//
//   - requests wait in a batch; one worker takes every waiting request
//     and checks them in order against the quota it reads from its own
//     informer's cache, which lags, or from its own last write when that
//     has a newer resourceVersion;
//   - a request that fits is charged on top of the batch's running total,
//     one that does not is refused, and the new status.used is written
//     over the resourceVersion read;
//   - on a conflict it reads the quota again, the same way (so, while its
//     cache lags, the same stale version again), and checks every request
//     of the batch again; after three retries the requests still waiting
//     are answered with the conflict (a 409 to the creator);
//   - a request refused in one round and charged in a later round that is
//     written stays refused: its charge is one no object follows.
//
// It never lowers status.used.
type plugin struct {
	m      *model
	lister cache.Lister[*corev1.ResourceQuota]
	inf    *cache.SharedIndexInformer
	wake   chan struct{}

	mu sync.Mutex
	// guarded by mu
	waiting []*waiter
	// own is the plugin's last successful write.
	// guarded by mu
	own *corev1.ResourceQuota
}

type waiter struct {
	result error
	done   chan struct{}
}

// errDefaultDeny is the result of a request no round has decided yet.
var errDefaultDeny = errors.New("default deny")

func newPlugin(m *model, lw cache.ListerWatcher) *plugin {
	inf := cache.NewSharedIndexInformer(lw, &corev1.ResourceQuota{},
		cache.SharedIndexInformerOptions{Indexers: cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}})
	return &plugin{m: m, inf: inf, wake: make(chan struct{}, 1),
		lister: cache.NewLister[*corev1.ResourceQuota](inf.GetIndexer(), quotasGVR.GroupResource())}
}

func (p *plugin) run(ctx context.Context, wg *sync.WaitGroup) {
	wg.Go(func() { p.inf.Run(ctx) })
	wg.Go(func() {
		if !cache.WaitForCacheSync(ctx, p.inf.HasSynced) {
			return
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-p.wake:
			}
			p.mu.Lock()
			batch := p.waiting
			p.waiting = nil
			p.mu.Unlock()
			if len(batch) > 0 {
				p.check(ctx, batch)
			}
		}
	})
}

// admit waits for the answer to one creation.
func (p *plugin) admit(ctx context.Context) error {
	w := &waiter{result: errDefaultDeny, done: make(chan struct{})}
	p.mu.Lock()
	p.waiting = append(p.waiting, w)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
	select {
	case <-w.done:
		return w.result
	case <-ctx.Done():
		return ctx.Err()
	}
}

// check decides batch, in rounds.
func (p *plugin) check(ctx context.Context, batch []*waiter) {
	defer func() {
		for _, w := range batch {
			close(w.done)
		}
	}()
	for retries := 3; ; retries-- {
		q := p.read()
		if q == nil {
			for _, w := range batch {
				w.result = errors.New("no quota")
			}
			return
		}
		hard, used := q.Status.Hard["pods"], q.Status.Used["pods"]
		if _, ok := q.Status.Used["pods"]; !ok {
			for _, w := range batch {
				w.result = errors.New("status unknown")
			}
			return
		}
		n, limit := used.Value(), hard.Value()
		var charged []*waiter
		for _, w := range batch {
			if n+1 > limit {
				w.result = apierrors.NewForbidden(quotasGVR.GroupResource(), "q", errors.New("exceeded quota"))
				continue
			}
			n++
			charged = append(charged, w)
		}
		if len(charged) == 0 {
			return
		}
		updated := q.DeepCopy()
		updated.Status.Used = corev1.ResourceList{"pods": *resource.NewQuantity(n, resource.DecimalSI)}
		out, err := p.m.pluginWrite(ctx, updated, charged)
		if err == nil {
			p.mu.Lock()
			p.own = out
			p.mu.Unlock()
			for _, w := range batch {
				if w.result == errDefaultDeny {
					w.result = nil
				}
			}
			return
		}
		if retries == 0 {
			for _, w := range batch {
				if w.result == errDefaultDeny {
					w.result = err
				}
			}
			return
		}
	}
}

// read returns the quota from the cache, or the plugin's own last write
// when that is newer.
func (p *plugin) read() *corev1.ResourceQuota {
	q, err := p.lister.ByNamespace(modelNamespace).Get("q")
	if err != nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.own != nil && rvOf(p.own) > rvOf(q) {
		return p.own.DeepCopy()
	}
	return q.DeepCopy()
}

func rvOf(q *corev1.ResourceQuota) uint64 {
	n, _ := strconv.ParseUint(q.ResourceVersion, 10, 64)
	return n
}

// pluginWrite writes q's status for a round of the plugin that charged
// charged; on success the requests of charged still undecided are
// pending: admitted, their objects on their way.
func (m *model) pluginWrite(ctx context.Context, q *corev1.ResourceQuota, charged []*waiter) (*corev1.ResourceQuota, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out, err := m.api.UpdateStatus(ctx, quotasGVR, q)
	if apierrors.IsConflict(err) {
		m.conflicts++
	}

	if err != nil {
		return nil, err
	}
	m.replicaWrites++
	for _, w := range charged {
		if w.result == errDefaultDeny {
			m.pending++
			m.admitted++
		} else {
			// Refused in an earlier round, charged in this one.
			m.pluginLeaks++
		}
	}
	m.lastCharge = time.Now()
	m.checkLocked(ctx)
	return out.(*corev1.ResourceQuota), nil
}
