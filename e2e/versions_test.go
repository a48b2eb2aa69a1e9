package e2e_test

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// versions follows every version of the pods and of the quota pods of a
// namespace, from the moment it is made.
type versions struct {
	stop func()

	mu sync.Mutex
	// live holds the pods stored, with whether the quota charges them;
	// most is the most charged at one resourceVersion, mostStored the
	// most stored.
	// guarded by mu
	live             map[string]bool
	most, mostStored int
	created          int64
	// quota holds status.used at each version of the quota, in order,
	// from the one listed; which the controller wrote may be known only
	// once its write has returned, so what the plugin charged is worked
	// out when asked (see charges), with wrote.
	quota []quotaVersion
	wrote func(quotaVersion) bool
}

// quotaVersion is status.used at a resourceVersion of the quota, and
// when the watch delivered it.
type quotaVersion struct {
	rv   uint64
	used int64
	at   time.Time
	// owner is the field manager that owns status.used.pods at this
	// version (see usedOwner).
	owner string
}

// watchVersions starts following the pods and the quota of ns in
// background, until the function stop it sets returns. Each watch the
// server ends is opened again from the last resourceVersion seen; a
// version lost (410 Gone) fails the test. wrote reports whether the
// controller wrote a version of the quota; it is asked when the round's
// writes have returned.
func watchVersions(t *testing.T, ctx context.Context, cs kubernetes.Interface, ns string, wrote func(quotaVersion) bool) *versions {
	t.Helper()
	v := &versions{live: map[string]bool{}, wrote: wrote}
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		v.live[p.Name] = charged(&p)
	}
	q, err := cs.CoreV1().ResourceQuotas(ns).Get(ctx, "pods", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	used := q.Status.Used[corev1.ResourcePods]
	v.quota = append(v.quota, quotaVersion{used: used.Value(), at: time.Now(), owner: usedOwner(q)})
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	v.stop = func() {
		cancel()
		wg.Wait()
	}
	wg.Go(func() {
		follow(t, wctx, pods.ResourceVersion, func(rv string) (watch.Interface, error) {
			return cs.CoreV1().Pods(ns).Watch(wctx, metav1.ListOptions{ResourceVersion: rv})
		}, func(ev watch.Event) string {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				return ""
			}
			v.mu.Lock()
			defer v.mu.Unlock()
			switch ev.Type {
			case watch.Added:
				v.live[p.Name] = charged(p)
				v.created++
			case watch.Modified:
				v.live[p.Name] = charged(p)
			case watch.Deleted:
				delete(v.live, p.Name)
			}
			n := 0
			for _, c := range v.live {
				if c {
					n++
				}
			}
			v.most, v.mostStored = max(v.most, n), max(v.mostStored, len(v.live))
			return p.ResourceVersion
		})
	})
	wg.Go(func() {
		follow(t, wctx, q.ResourceVersion, func(rv string) (watch.Interface, error) {
			return cs.CoreV1().ResourceQuotas(ns).Watch(wctx, metav1.ListOptions{ResourceVersion: rv, FieldSelector: "metadata.name=pods"})
		}, func(ev watch.Event) string {
			q, ok := ev.Object.(*corev1.ResourceQuota)
			if !ok {
				return ""
			}
			rv, _ := strconv.ParseUint(q.ResourceVersion, 10, 64)
			u := q.Status.Used[corev1.ResourcePods]
			v.mu.Lock()
			defer v.mu.Unlock()
			v.quota = append(v.quota, quotaVersion{rv: rv, used: u.Value(), at: time.Now(), owner: usedOwner(q)})
			return q.ResourceVersion
		})
	})
	return v
}

// follow passes every event of the watches open returns to handle, which
// returns the event's resourceVersion, opening the watch again from the
// last one whenever the server ends it, until ctx is done. An error event
// (410 Gone: versions were lost) fails the test and ends it.
func follow(t *testing.T, ctx context.Context, rv string, open func(rv string) (watch.Interface, error), handle func(watch.Event) string) {
	for ctx.Err() == nil {
		w, err := open(rv)
		if err != nil {
			if ctx.Err() == nil {
				t.Errorf("watching from resourceVersion %s: %v", rv, err)
			}
			return
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				if ctx.Err() == nil {
					t.Errorf("watching from resourceVersion %s: %v", rv, apierrors.FromObject(ev.Object))
				}
				w.Stop()
				return
			}
			if next := handle(ev); next != "" {
				rv = next
			}
		}
		w.Stop()
	}
}

// charges returns what status.used gained at the versions of the quota
// the controller did not write, and when the last such gain was seen.
func (v *versions) charges() (charged int64, last time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	last = v.quota[0].at
	for i := 1; i < len(v.quota); i++ {
		if gain := v.quota[i].used - v.quota[i-1].used; gain > 0 && !v.wrote(v.quota[i]) {
			charged += gain
			last = v.quota[i].at
		}
	}
	return charged, last
}

func (v *versions) lastCharge() time.Time {
	_, last := v.charges()
	return last
}

func (v *versions) added() int64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.created
}

func (v *versions) result() (most, mostStored int, charged int64) {
	charged, _ = v.charges()
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.most, v.mostStored, charged
}

// charged reports whether a ResourceQuota charges the stored pod p, as
// the pod evaluator decides for these pods, which no kubelet runs: not
// once its deletion's grace period has passed. A pod deleted with a grace
// period of 0 is first written with its deletionTimestamp, and only then
// removed, a few milliseconds later; in between it is stored and charged
// nothing, and its room may already be admitted again.
func charged(p *corev1.Pod) bool {
	if p.DeletionTimestamp == nil || p.DeletionGracePeriodSeconds == nil {
		return true
	}
	return time.Now().Before(p.DeletionTimestamp.Add(time.Duration(*p.DeletionGracePeriodSeconds) * time.Second))
}

// usedOwner returns the field manager that owns status.used.pods of q: the
// last writer that changed it, since an update gives the fields it
// changes to its manager and takes them from the others. A version whose
// status.used differs from the one before was therefore written by its
// owner. kube-apiserver's plugin writes as kube-apiserver,
// kube-controller-manager as itself.
func usedOwner(q *corev1.ResourceQuota) string {
	for _, m := range q.ManagedFields {
		if m.FieldsV1 == nil {
			continue
		}
		var f struct {
			Status struct {
				Used map[string]json.RawMessage `json:"f:used"`
			} `json:"f:status"`
		}
		if json.Unmarshal(m.FieldsV1.Raw, &f) != nil {
			continue
		}
		if _, ok := f.Status.Used["f:pods"]; ok {
			return m.Manager
		}
	}
	return ""
}
