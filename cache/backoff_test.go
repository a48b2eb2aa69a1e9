package cache_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"

	"github.com/quotakit/quotakit/cache"
	"github.com/quotakit/quotakit/cache/cachetest"
)

// timedLW records the virtual time of each List call.
type timedLW struct {
	cache.ListerWatcher
	mu    sync.Mutex
	times []time.Time
}

func (l *timedLW) List(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	l.mu.Lock()
	l.times = append(l.times, time.Now())
	l.mu.Unlock()
	return l.ListerWatcher.List(ctx, opts)
}

func (l *timedLW) gaps() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []time.Duration
	for i := 1; i < len(l.times); i++ {
		out = append(out, l.times[i].Sub(l.times[i-1]))
	}
	return out
}

func TestReflectorBackoffSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := cachetest.New(cachetest.Options{})
		defer srv.Close()
		srv.FailNextLists(9, nil)
		lw := &timedLW{ListerWatcher: srv.ListerWatcher(podsGVR, "")}
		r := cache.NewReflector(lw, &corev1.Pod{}, cache.NewStore(cache.MetaNamespaceKeyFunc), cache.ReflectorOptions{
			Backoff:           cache.Backoff{Jitter: -1},
			WatchErrorHandler: func(context.Context, *cache.Reflector, error) {},
		})
		stop := startReflector(t.Context(), r)
		defer stop()
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		ms := time.Millisecond
		want := []time.Duration{800 * ms, 1600 * ms, 3200 * ms, 6400 * ms, 12800 * ms, 25600 * ms, 30 * time.Second, 30 * time.Second, 30 * time.Second}
		if diff := cmp.Diff(want, lw.gaps()); diff != "" {
			t.Errorf("delays between lists (-want +got):\n%s", diff)
		}
	})
}

func TestReflectorBackoffJitterAndReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := cachetest.New(cachetest.Options{})
		defer srv.Close()
		srv.FailNextLists(4, nil)
		lw := &timedLW{ListerWatcher: srv.ListerWatcher(podsGVR, "")}
		r := cache.NewReflector(lw, &corev1.Pod{}, cache.NewStore(cache.MetaNamespaceKeyFunc), cache.ReflectorOptions{
			WatchErrorHandler: func(context.Context, *cache.Reflector, error) {},
		})
		stop := startReflector(t.Context(), r)
		defer stop()
		time.Sleep(time.Minute)
		synctest.Wait()
		base := []time.Duration{800 * time.Millisecond, 1600 * time.Millisecond, 3200 * time.Millisecond, 6400 * time.Millisecond}
		gaps := lw.gaps()
		if len(gaps) != len(base) {
			t.Fatalf("gaps = %v, want %d", gaps, len(base))
		}
		for i, g := range gaps {
			if g < base[i] || g >= 2*base[i] {
				t.Errorf("delay %d = %v, want in [%v, %v)", i, g, base[i], 2*base[i])
			}
		}

		// After more than two quiet minutes the delay starts over.
		time.Sleep(3 * time.Minute)
		srv.FailNextLists(1, nil)
		srv.FailAllWatches(nil)
		time.Sleep(time.Minute)
		synctest.Wait()
		gaps = lw.gaps()
		// The watch failure is followed by a delay, the failing list by
		// another: both restart at 800ms.
		last := gaps[len(gaps)-1]
		if last < 1600*time.Millisecond || last >= 3200*time.Millisecond {
			t.Errorf("delay after reset = %v, want the second step, in [1.6s, 3.2s)", last)
		}
	})
}

func TestReflectorBackoffRestartsEveryTwoMinutesDuringFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := cachetest.New(cachetest.Options{})
		defer srv.Close()
		srv.FailNextLists(13, nil)
		lw := &timedLW{ListerWatcher: srv.ListerWatcher(podsGVR, "")}
		r := cache.NewReflector(lw, &corev1.Pod{}, cache.NewStore(cache.MetaNamespaceKeyFunc), cache.ReflectorOptions{
			Backoff:           cache.Backoff{Jitter: -1},
			WatchErrorHandler: func(context.Context, *cache.Reflector, error) {},
		})
		stop := startReflector(t.Context(), r)
		defer stop()
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		ms := time.Millisecond
		// Lists at 0, 0.8s, ... 110.4s, 140.4s: the delay asked for at
		// 140.4s comes more than two minutes after the sequence started,
		// so it restarts at 800ms although every list failed.
		want := []time.Duration{800 * ms, 1600 * ms, 3200 * ms, 6400 * ms, 12800 * ms, 25600 * ms, 30 * time.Second, 30 * time.Second, 30 * time.Second,
			800 * ms, 1600 * ms, 3200 * ms, 6400 * ms}
		if diff := cmp.Diff(want, lw.gaps()); diff != "" {
			t.Errorf("delays between lists (-want +got):\n%s", diff)
		}
	})
}

// outageLW fails every List and Watch while the API is down, and records
// when the first list after it came back succeeded.
type outageLW struct {
	cache.ListerWatcher
	mu             sync.Mutex
	downAt, backAt time.Time
	firstOK        time.Time
}

// outage makes the API unavailable from now for d.
func (l *outageLW) outage(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.downAt, l.backAt = time.Now(), time.Now().Add(d)
	l.firstOK = time.Time{}
}

func (l *outageLW) down() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	return !now.Before(l.downAt) && now.Before(l.backAt)
}

func (l *outageLW) List(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	if l.down() {
		return nil, apierrors.NewServiceUnavailable("outage")
	}
	obj, err := l.ListerWatcher.List(ctx, opts)
	l.mu.Lock()
	if err == nil && l.firstOK.IsZero() {
		l.firstOK = time.Now()
	}
	l.mu.Unlock()
	return obj, err
}

func (l *outageLW) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	if l.down() {
		return nil, apierrors.NewServiceUnavailable("outage")
	}
	return l.ListerWatcher.Watch(ctx, opts)
}

// upstreamRecovery returns how long after the API returns client-go 1.37's
// reflector backoff makes its first attempt, for a reflector created now
// whose attempt at downAfter fails and that keeps failing for outage. It
// runs client-go's own delay function (wait.Backoff.DelayWithReset with the
// parameters its Reflector uses, without jitter) in the bubble's virtual
// time.
func upstreamRecovery(downAfter, outage time.Duration) time.Duration {
	delay := wait.Backoff{
		Duration: 800 * time.Millisecond,
		Cap:      30 * time.Second,
		Steps:    38, // ceil(30s / 800ms), as client-go computes it
		Factor:   2,
	}.DelayWithReset(clock.RealClock{}, 2*time.Minute)
	start := time.Now()
	time.Sleep(downAfter)
	for time.Since(start) < downAfter+outage {
		time.Sleep(delay())
	}
	return time.Since(start) - downAfter - outage
}

// TestInformerRecoversFromOutageNoSlowerThanClientGo measures, for outages
// of several lengths, the time from the API's return to the informer's
// store being current again (its first successful list), both for an
// informer that starts during the outage (the time to HasSynced) and for
// one that had synced and run for a while, and checks it against what
// client-go's rule gives.
func TestInformerRecoversFromOutageNoSlowerThanClientGo(t *testing.T) {
	outages := []time.Duration{
		10 * time.Second, time.Minute, 2*time.Minute + 30*time.Second, 4 * time.Minute,
		7 * time.Minute, 10*time.Minute + 5*time.Second, 17 * time.Minute, 45 * time.Minute,
	}
	for _, downAfter := range []time.Duration{0, 5*time.Minute + 13*time.Second} {
		for _, outage := range outages {
			t.Run(fmt.Sprintf("down after %v for %v", downAfter, outage), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					want := upstreamRecovery(downAfter, outage)

					srv := cachetest.New(cachetest.Options{})
					defer srv.Close()
					mustCreate(t, srv, podsGVR, testPod("ns", "a"))
					lw := &outageLW{ListerWatcher: srv.ListerWatcher(podsGVR, "")}
					if downAfter == 0 {
						lw.outage(outage)
					}
					inf := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, cache.SharedIndexInformerOptions{
						Reflector: cache.ReflectorOptions{Backoff: cache.Backoff{Jitter: -1}},
					})
					inf.SetWatchErrorHandler(func(context.Context, *cache.Reflector, error) {})
					stop := startInformer(t.Context(), inf)
					defer stop()
					if downAfter > 0 {
						time.Sleep(downAfter)
						synctest.Wait()
						if !inf.HasSynced() {
							t.Fatal("not synced before the outage")
						}
						lw.outage(outage)
						srv.FailAllWatches(apierrors.NewServiceUnavailable("outage"))
						mustCreate(t, srv, podsGVR, testPod("ns", "b"))
					}

					time.Sleep(outage + time.Minute)
					synctest.Wait()
					wantObjects := 1
					if downAfter > 0 {
						wantObjects = 2
					}
					if !inf.HasSynced() || len(inf.GetStore().List()) != wantObjects {
						t.Fatalf("a minute after an outage of %v: HasSynced() = %v, store holds %d objects", outage, inf.HasSynced(), len(inf.GetStore().List()))
					}
					lw.mu.Lock()
					got := lw.firstOK.Sub(lw.backAt)
					lw.mu.Unlock()
					if got > want {
						t.Errorf("store current %v after the API returned, client-go's rule gives %v", got, want)
					}
					t.Logf("store current %v after the API returned (client-go's rule: %v)", got, want)
				})
			})
		}
	}
}
