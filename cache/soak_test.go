package cache_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quotakit/quotakit/cache"
	"github.com/quotakit/quotakit/cache/cachetest"
)

// historyChecker is a handler that keeps its own view of the world from the
// notifications it gets and records every notification that contradicts
// that view: an update or delete of an object it was never told of, an add
// of one it already has, an update whose old object is not the one it
// holds.
type historyChecker struct {
	mu         sync.Mutex
	view       map[string]string // key → resourceVersion
	violations []string
	tombstones int
}

func newHistoryChecker() *historyChecker {
	return &historyChecker{view: map[string]string{}}
}

func (h *historyChecker) violate(format string, args ...any) {
	if len(h.violations) < 20 {
		h.violations = append(h.violations, fmt.Sprintf(format, args...))
	}
}

func (h *historyChecker) OnAdd(obj any, _ bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := obj.(*corev1.Pod)
	k := p.Namespace + "/" + p.Name
	if rv, ok := h.view[k]; ok {
		h.violate("add of %s at %s, already seen at %s", k, p.ResourceVersion, rv)
	}
	h.view[k] = p.ResourceVersion
}

func (h *historyChecker) OnUpdate(oldObj, newObj any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	o, n := oldObj.(*corev1.Pod), newObj.(*corev1.Pod)
	k := n.Namespace + "/" + n.Name
	rv, ok := h.view[k]
	switch {
	case !ok:
		h.violate("update of %s, never added", k)
	case rv != o.ResourceVersion:
		h.violate("update of %s from %s, but the handler holds %s", k, o.ResourceVersion, rv)
	}
	h.view[k] = n.ResourceVersion
}

func (h *historyChecker) OnDelete(obj any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var k string
	switch o := obj.(type) {
	case cache.DeletedFinalStateUnknown:
		k = o.Key
		h.tombstones++
	case *corev1.Pod:
		k = o.Namespace + "/" + o.Name
	default:
		h.violate("delete of %T", obj)
		return
	}
	if _, ok := h.view[k]; !ok {
		h.violate("delete of %s, never added", k)
	}
	delete(h.view, k)
}

func (h *historyChecker) snapshot() (map[string]string, []string, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.view), append([]string(nil), h.violations...), h.tombstones
}

// TestInformerSoak churns pods at random while injecting every fault
// cachetest has, then checks that the informer's store equals the source
// and that every handler's history is consistent and ends at the source.
func TestInformerSoak(t *testing.T) {
	rounds := 3000
	if testing.Short() {
		rounds = 500
	}
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		srv := cachetest.New(cachetest.Options{HistorySize: 50, BookmarkInterval: 5 * time.Second})
		defer srv.Close()
		inf := newPodInformer(srv, cache.SharedIndexInformerOptions{ResyncPeriod: 30 * time.Second})
		inf.SetWatchErrorHandler(func(context.Context, *cache.Reflector, error) {})
		early, resyncing := newHistoryChecker(), newHistoryChecker()
		inf.AddEventHandler(early)
		stop := startInformer(ctx, inf)
		defer stop()

		rng := rand.New(rand.NewPCG(1, 2))
		var late *historyChecker
		names := make([]string, 40)
		for i := range names {
			names[i] = fmt.Sprintf("p%02d", i)
		}
		faults := 0
		for round := range rounds {
			name := names[rng.IntN(len(names))]
			ns := []string{"a", "b"}[rng.IntN(2)]
			switch op := rng.IntN(100); {
			case op < 40:
				srv.Create(ctx, podsGVR, testPod(ns, name)) // may already exist
			case op < 75:
				if obj, err := srv.Get(ctx, podsGVR, ns, name); err == nil {
					p := obj.(*corev1.Pod)
					p.Labels = map[string]string{"round": fmt.Sprint(round)}
					srv.Update(ctx, podsGVR, p)
				}
			case op < 92:
				srv.Delete(ctx, podsGVR, ns, name, metav1.DeleteOptions{})
			default:
				faults++
				switch rng.IntN(5) {
				case 0:
					srv.CloseAllWatches()
				case 1:
					srv.FailAllWatches(apierrors.NewInternalError(fmt.Errorf("round %d", round)))
				case 2:
					srv.Compact()
					srv.FailAllWatches(apierrors.NewResourceExpired("compacted"))
				case 3:
					srv.FailNextLists(rng.IntN(3)+1, nil)
					srv.FailAllWatches(nil)
				case 4:
					srv.FailNextWatches(rng.IntN(3)+1, apierrors.NewTooManyRequests("busy", 1))
					srv.CloseAllWatches()
				}
			}
			if round == rounds/2 {
				late = newHistoryChecker()
				inf.AddEventHandler(late)
				thirty := 30 * time.Second
				inf.AddEventHandlerWithOptions(resyncing, cache.HandlerOptions{ResyncPeriod: &thirty})
			}
			// Let time pass at random, so that some changes are seen by
			// the watch and others only by relists.
			if rng.IntN(4) == 0 {
				time.Sleep(time.Duration(rng.IntN(3000)) * time.Millisecond)
			}
		}
		// Let the informer catch up with everything.
		srv.FailNextLists(0, nil)
		srv.FailNextWatches(0, nil)
		time.Sleep(5 * time.Minute)
		synctest.Wait()

		list, err := srv.List(ctx, podsGVR, "", metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{}
		for _, p := range list.(*corev1.PodList).Items {
			want[p.Namespace+"/"+p.Name] = p.ResourceVersion
		}
		got := map[string]string{}
		for _, obj := range inf.GetStore().List() {
			p := obj.(*corev1.Pod)
			got[p.Namespace+"/"+p.Name] = p.ResourceVersion
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("informer store differs from the source (-source +store):\n%s", diff)
		}
		totalTombstones := 0
		for name, h := range map[string]*historyChecker{"early": early, "late": late, "resyncing": resyncing} {
			view, violations, tombstones := h.snapshot()
			totalTombstones += tombstones
			if len(violations) > 0 {
				t.Errorf("%s handler saw an inconsistent history:\n%v", name, violations)
			}
			if diff := cmp.Diff(want, view); diff != "" {
				t.Errorf("%s handler's view differs from the source (-source +view):\n%s", name, diff)
			}
		}
		if faults < rounds/20 || totalTombstones == 0 {
			t.Errorf("the soak injected %d faults and produced %d tombstones; it should exercise both", faults, totalTombstones)
		}
		t.Logf("%d rounds, %d faults, %d tombstones, %d pods at the end", rounds, faults, totalTombstones, len(want))
	})
}
