package cachetest_test

import (
	"context"
	"maps"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/quotakit/quotakit/cache"
	"github.com/quotakit/quotakit/cache/cachetest"
)

// mirror is a minimal list-and-watch client following the Reflector's
// rules (list at "0", then at the last resourceVersion, at "" after a 410
// or a too-large error; paginated lists falling back to a full list when a
// continue token expires; re-watch from the last resourceVersion when a
// watch closes; relist after a watch error). It keeps key → resourceVersion.
type mirror struct {
	lw cache.ListerWatcher

	mu    sync.Mutex
	items state // guarded by mu
}

func (m *mirror) snapshot() state {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.items)
}

func (m *mirror) run(ctx context.Context, t *testing.T) {
	rv, relist := "", true
	unavailable := false
	for ctx.Err() == nil {
		if relist {
			opts := metav1.ListOptions{ResourceVersion: rv, Limit: 3}
			if unavailable {
				opts.ResourceVersion = ""
			} else if rv == "" {
				opts.ResourceVersion = "0"
			}
			items, listRV, err := m.list(ctx, opts)
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) || isTooLarge(err) {
				unavailable = true
				continue
			}
			if err != nil {
				time.Sleep(time.Second)
				continue
			}
			m.mu.Lock()
			m.items = items
			m.mu.Unlock()
			rv, relist, unavailable = listRV, false, false
		}
		timeout := int64(30)
		w, err := m.lw.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true, TimeoutSeconds: &timeout})
		if err != nil {
			time.Sleep(time.Second)
			relist = true
			continue
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				relist = true
				break
			}
			obj, err := meta.Accessor(ev.Object)
			if err != nil {
				t.Errorf("event object %T: %v", ev.Object, err)
				continue
			}
			key := obj.GetNamespace() + "/" + obj.GetName()
			m.mu.Lock()
			switch ev.Type {
			case watch.Added, watch.Modified:
				m.items[key] = obj.GetResourceVersion()
			case watch.Deleted:
				delete(m.items, key)
			}
			m.mu.Unlock()
			rv = obj.GetResourceVersion()
		}
		w.Stop()
	}
}

// list pages through a list; an expired continue token makes it list
// everything at once at the same resourceVersion, as client-go's pager.
func (m *mirror) list(ctx context.Context, opts metav1.ListOptions) (state, string, error) {
	items := state{}
	first := opts
	for {
		obj, err := m.lw.List(ctx, opts)
		if apierrors.IsResourceExpired(err) && opts.Continue != "" {
			full := first
			full.Limit = 0
			obj, err = m.lw.List(ctx, full)
			if err != nil {
				return nil, "", err
			}
			items = state{}
			opts = full
		}
		if err != nil {
			return nil, "", err
		}
		objs, err := meta.ExtractList(obj)
		if err != nil {
			return nil, "", err
		}
		for _, o := range objs {
			a, _ := meta.Accessor(o)
			items[a.GetNamespace()+"/"+a.GetName()] = a.GetResourceVersion()
		}
		lm, _ := meta.ListAccessor(obj)
		if lm.GetContinue() == "" {
			return items, lm.GetResourceVersion(), nil
		}
		opts = metav1.ListOptions{Limit: opts.Limit, Continue: lm.GetContinue()}
	}
}

// TestListWatchClientConvergesUnderFaults runs a Reflector-like client
// against random churn and every kind of injected fault; once the churn
// stops, the client's copy equals the server's state.
func TestListWatchClientConvergesUnderFaults(t *testing.T) {
	for seed := range uint64(3) {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := cachetest.New(cachetest.Options{HistorySize: 20, BookmarkInterval: 10 * time.Second})
				defer s.Close()
				ctx, cancel := context.WithCancel(t.Context())
				m := &mirror{lw: s.ListerWatcher(podsGVR, ""), items: state{}}
				done := make(chan struct{})
				go func() {
					defer close(done)
					m.run(ctx, t)
				}()

				c := newChurner(s, seed)
				rng := rand.New(rand.NewPCG(seed, 2))
				// converged lets the client catch up and compares.
				converged := func(when string) {
					s.FailNextLists(0, nil)
					s.FailNextWatches(0, nil)
					time.Sleep(time.Minute)
					synctest.Wait()
					list, err := s.List(t.Context(), podsGVR, "", metav1.ListOptions{})
					if err != nil {
						t.Error(err)
					} else if got, want := m.snapshot(), listState(t, list); !maps.Equal(got, want) {
						t.Errorf("%s: client has %v\nserver has %v", when, got, want)
					}
				}
				for i := range 400 {
					c.step(t)
					fault := rng.IntN(40)
					switch fault {
					case 0:
						s.CloseAllWatches()
					case 1:
						s.Compact()
					case 2:
						s.FailNextLists(1, nil)
					case 3:
						s.FailNextWatches(1, nil)
					case 4:
						s.FailAllWatches(apierrors.NewResourceExpired("injected"))
					case 5:
						s.Compact()
						s.CloseAllWatches()
					}
					if i%10 == 0 {
						time.Sleep(time.Duration(rng.IntN(3000)) * time.Millisecond)
					}
					if fault <= 5 {
						// A write right after the fault must not be lost.
						c.step(t)
						converged("after fault " + strconv.Itoa(fault) + " at step " + strconv.Itoa(i))
					}
				}
				converged("at the end")
				cancel()
				<-done
				lists, watches := 0, 0
				for _, r := range s.Requests() {
					if r.Verb == "list" {
						lists++
					} else {
						watches++
					}
				}
				t.Logf("%d lists, %d watches", lists, watches)
			})
		})
	}
}
