package cachetest_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/quotakit/quotakit/cache/cachetest"
)

// state maps "namespace/name" to resourceVersion.
type state map[string]string

// churner makes random creates, updates and deletes of pods.
type churner struct {
	s   *cachetest.Server
	rng *rand.Rand
	cur state
}

func newChurner(s *cachetest.Server, seed uint64) *churner {
	return &churner{s: s, rng: rand.New(rand.NewPCG(seed, 1)), cur: state{}}
}

// step makes one random write.
func (c *churner) step(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	ns := "ns" + strconv.Itoa(c.rng.IntN(3))
	name := "p" + strconv.Itoa(c.rng.IntN(8))
	key := ns + "/" + name
	labels := map[string]string{"v": strconv.Itoa(c.rng.IntN(1000))}
	var out runtime.Object
	var err error
	switch _, exists := c.cur[key]; {
	case !exists:
		out, err = c.s.Create(ctx, podsGVR, newPod(ns, name, labels))
	case c.rng.IntN(2) == 0:
		out, err = c.s.Update(ctx, podsGVR, newPod(ns, name, labels))
	default:
		err = c.s.Delete(ctx, podsGVR, ns, name, metav1.DeleteOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	if out != nil {
		c.cur[key] = rvOf(t, out)
	} else {
		delete(c.cur, key)
	}
}

// churn makes n random writes and returns the state after every write,
// indexed by resourceVersion.
func churn(t *testing.T, s *cachetest.Server, seed uint64, n int) map[int]state {
	t.Helper()
	c := newChurner(s, seed)
	states := map[int]state{1: {}}
	for range n {
		c.step(t)
		rv, _ := strconv.Atoi(s.ResourceVersion())
		states[rv] = maps.Clone(c.cur)
	}
	return states
}

func listState(t *testing.T, list runtime.Object) state {
	t.Helper()
	items, err := meta.ExtractList(list)
	if err != nil {
		t.Fatal(err)
	}
	st := state{}
	for _, it := range items {
		st[keyOf(t, it)] = rvOf(t, it)
	}
	return st
}

// TestExactListsAndWatchesMatchTheRecordedHistory checks, over random
// histories, that an exact list at every retained resourceVersion shows the
// state recorded at that time, that paging at it shows the same, and that a
// watch from it replays exactly the changes leading to the latest state.
func TestExactListsAndWatchesMatchTheRecordedHistory(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			checkHistory(t, seed, 40, 120, 3)
		})
	}
}

// FuzzHistory is TestExactListsAndWatchesMatchTheRecordedHistory with
// fuzzed seeds, history sizes, write counts and page sizes.
func FuzzHistory(f *testing.F) {
	f.Add(uint64(0), uint8(40), uint8(120), uint8(3))
	f.Add(uint64(7), uint8(1), uint8(30), uint8(1))
	f.Fuzz(func(t *testing.T, seed uint64, historySize, writes, pageSize uint8) {
		checkHistory(t, seed, int(historySize%64)+1, int(writes%160), int64(pageSize%8))
	})
}

func checkHistory(t *testing.T, seed uint64, historySize, writes int, pageSize int64) {
	synctest.Test(t, func(t *testing.T) {
		s := cachetest.New(cachetest.Options{HistorySize: historySize})
		defer s.Close()
		states := churn(t, s, seed, writes)
		// An update that changes nothing is not a write, so there may be
		// fewer resourceVersions than writes.
		last, _ := strconv.Atoi(s.ResourceVersion())
		oldest := last - historySize
		for rv := 1; rv <= last; rv++ {
			opts := metav1.ListOptions{ResourceVersion: strconv.Itoa(rv), ResourceVersionMatch: metav1.ResourceVersionMatchExact}
			list, err := s.List(t.Context(), podsGVR, "", opts)
			if rv < oldest {
				if !apierrors.IsResourceExpired(err) {
					t.Fatalf("List(exact %d) before the history (oldest %d) = %v, want 410", rv, oldest, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("List(exact %d): %v", rv, err)
			}
			if got, want := listState(t, list), states[rv]; !maps.Equal(got, want) {
				t.Fatalf("List(exact %d) = %v, want %v", rv, got, want)
			}
			paged := state{}
			popts := metav1.ListOptions{ResourceVersion: strconv.Itoa(rv), Limit: pageSize}
			if pageSize == 0 {
				popts.ResourceVersionMatch = metav1.ResourceVersionMatchExact
			}
			for {
				page, err := s.List(t.Context(), podsGVR, "", popts)
				if err != nil {
					t.Fatalf("paged List(%d): %v", rv, err)
				}
				for k, v := range listState(t, page) {
					if _, dup := paged[k]; dup {
						t.Fatalf("paged List(%d): %s twice", rv, k)
					}
					paged[k] = v
				}
				lm, _ := meta.ListAccessor(page)
				if lm.GetContinue() == "" {
					break
				}
				popts = metav1.ListOptions{Limit: pageSize, Continue: lm.GetContinue()}
			}
			if want := states[rv]; !maps.Equal(paged, want) {
				t.Fatalf("paged List(%d) = %v, want %v", rv, paged, want)
			}
			checkReplay(t, s, rv, states[rv], states[last])
		}
	})
}

// checkReplay watches from rv and applies the replayed events to from; the
// result must be to, with resourceVersions increasing.
func checkReplay(t *testing.T, s *cachetest.Server, rv int, from, to state) {
	t.Helper()
	w, err := s.Watch(t.Context(), podsGVR, "", metav1.ListOptions{ResourceVersion: strconv.Itoa(rv)})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	got := maps.Clone(from)
	prev := rv
	for {
		synctest.Wait()
		var ev watch.Event
		select {
		case ev = <-w.ResultChan():
		default:
			if !maps.Equal(got, to) {
				t.Fatalf("watch from %d ends at %v, want %v", rv, got, to)
			}
			return
		}
		key, evRV := keyOf(t, ev.Object), rvOf(t, ev.Object)
		n, _ := strconv.Atoi(evRV)
		if n <= prev {
			t.Fatalf("watch from %d: event at %d after %d", rv, n, prev)
		}
		prev = n
		_, known := got[key]
		switch ev.Type {
		case watch.Added:
			if known {
				t.Fatalf("watch from %d: ADDED %s, already present", rv, key)
			}
			got[key] = evRV
		case watch.Modified:
			if !known {
				t.Fatalf("watch from %d: MODIFIED %s, not present", rv, key)
			}
			got[key] = evRV
		case watch.Deleted:
			if !known {
				t.Fatalf("watch from %d: DELETED %s, not present", rv, key)
			}
			delete(got, key)
		default:
			t.Fatalf("watch from %d: unexpected %s", rv, ev.Type)
		}
	}
}

func TestBookmarkBeforeTheWatchTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := cachetest.New(cachetest.Options{})
		defer s.Close()
		timeout := int64(100)
		w, err := s.Watch(t.Context(), podsGVR, "", metav1.ListOptions{ResourceVersion: "1", AllowWatchBookmarks: true, TimeoutSeconds: &timeout})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		var got []string
		for ev := range w.ResultChan() {
			got = append(got, fmt.Sprintf("%s after %v", describe(t, ev), time.Since(start)))
		}
		got = append(got, fmt.Sprintf("closed after %v", time.Since(start)))
		want := []string{"BOOKMARK @1 after 1m0s", "BOOKMARK @1 after 1m38s", "closed after 1m40s"}
		if d := diffStrings(want, got); d != "" {
			t.Errorf("events:%s", d)
		}
	})
}
