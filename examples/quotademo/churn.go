package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit/evaluator"
	"github.com/quotakit/quotakit/generic"
	"github.com/quotakit/quotakit/quota"
)

// gracePeriod is the grace period of graceful deletions. The API server
// sets deletionTimestamp to now plus the grace period, and quota charges
// the pod until deletionTimestamp plus the grace period again
// (kubernetes#113292), so a pod whose kubelet never confirms stops
// charging compute resources two grace periods after the deletion.
const gracePeriod = time.Second

// churn makes cfg.Events events, paced at cfg.Rate, for at most
// cfg.Duration, and returns how many it made.
func (w *world) churn(ctx context.Context) (int, error) {
	start := time.Now()
	w.bump(func(s *stats) { s.churnStart = start })
	defer func() { w.bump(func(s *stats) { s.churnEnd = time.Now() }) }()
	var interval time.Duration
	if w.cfg.Rate > 0 {
		interval = time.Second / time.Duration(w.cfg.Rate)
	}
	for i := range w.cfg.Events {
		if time.Since(start) > w.cfg.Duration {
			return i, nil
		}
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			select {
			case <-ctx.Done():
				return i, ctx.Err()
			case <-time.After(d):
			}
		}
		if err := w.due(ctx, time.Now()); err != nil {
			return i, err
		}
		if err := w.step(ctx); err != nil {
			return i, err
		}
		w.bump(func(s *stats) { s.events++ })
	}
	return w.cfg.Events, nil
}

// step makes one random event in a random namespace.
func (w *world) step(ctx context.Context) error {
	ns := w.namespaces[w.rng.IntN(len(w.namespaces))]
	switch r := w.rng.IntN(100); {
	case r < 30:
		return w.create(ctx, podsGVR, w.newPod(ns))
	case r < 45:
		if name, ok := w.pick(podsGVR, ns, nil); ok {
			return w.delete(ctx, podsGVR, ns, name)
		}
	case r < 60:
		if name, ok := w.pick(podsGVR, ns, running); ok {
			return w.finish(ctx, ns, name)
		}
	case r < 72:
		if name, ok := w.pick(podsGVR, ns, running); ok {
			return w.deleteGracefully(ctx, ns, name)
		}
	case r < 80:
		return w.create(ctx, servicesGVR, w.newService(ns, w.rng.IntN(3) == 0))
	case r < 86:
		if name, ok := w.pick(servicesGVR, ns, nil); ok {
			return w.delete(ctx, servicesGVR, ns, name)
		}
	case r < 94:
		return w.create(ctx, configmapsGVR, w.newConfigMap(ns))
	default:
		if name, ok := w.pick(configmapsGVR, ns, nil); ok {
			return w.delete(ctx, configmapsGVR, ns, name)
		}
	}
	return nil
}

// delete deletes an object, as a user does.
func (w *world) delete(ctx context.Context, gvr schema.GroupVersionResource, ns, name string) error {
	w.bump(func(s *stats) { s.deletes++ })
	return w.remove(ctx, gvr, ns, name)
}

// running reports whether a pod is running and not being deleted.
func running(obj runtime.Object) bool {
	p := obj.(*corev1.Pod)
	return p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil
}

// pick returns a random object of gvr in ns that ok accepts (any when nil),
// in name order so that a seed replays the same run.
func (w *world) pick(gvr schema.GroupVersionResource, ns string, ok func(runtime.Object) bool) (string, bool) {
	var names []string
	for name, obj := range w.model[gvr][ns] {
		if ok == nil || ok(obj) {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return "", false
	}
	slices.Sort(names)
	return names[w.rng.IntN(len(names))], true
}

// finish makes a pod Succeeded, through the status subresource as its
// kubelet does.
func (w *world) finish(ctx context.Context, ns, name string) error {
	p := w.model[podsGVR][ns][name].(*corev1.Pod).DeepCopy()
	p.Status.Phase = corev1.PodSucceeded
	w.bump(func(s *stats) { s.succeeded++ })
	return w.change("pod Succeeded", ns, func() { w.put(podsGVR, p) }, func() error {
		_, err := w.api.UpdateStatus(ctx, podsGVR, p)
		return err
	})
}

// deleteGracefully writes what a graceful deletion writes: the pod gains
// deletionTimestamp and deletionGracePeriodSeconds. Its kubelet confirms
// the deletion later: half the time within the grace period, as a healthy
// node does, half the time only after the pod stopped charging, as when
// its node is gone.
func (w *world) deleteGracefully(ctx context.Context, ns, name string) error {
	p := w.model[podsGVR][ns][name].(*corev1.Pod).DeepCopy()
	now := time.Now()
	ts := metav1.NewTime(now.Add(gracePeriod))
	grace := int64(gracePeriod / time.Second)
	p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &ts, &grace
	end := ts.Add(gracePeriod)
	confirm := now.Add(time.Duration(w.rng.Int64N(int64(gracePeriod))))
	if w.rng.IntN(2) == 0 {
		confirm = end.Add(time.Duration(w.rng.Int64N(int64(gracePeriod))))
	}
	w.terminating = append(w.terminating, terminating{namespace: ns, name: name, end: end, confirm: confirm})
	w.bump(func(s *stats) { s.graceful++ })
	return w.change("graceful deletion", ns, func() { w.put(podsGVR, p) }, func() error {
		_, err := w.api.Update(ctx, podsGVR, p)
		return err
	})
}

// due handles what time brought by now: grace periods that ended (the
// pod's usage changes with no write; the tracker expects it from the
// moment it ends) and deletions that kubelets confirm.
func (w *world) due(ctx context.Context, now time.Time) error {
	slices.SortFunc(w.terminating, func(a, b terminating) int { return a.end.Compare(b.end) })
	for i := range w.terminating {
		t := &w.terminating[i]
		if t.ended || !now.After(t.end) || w.model[podsGVR][t.namespace][t.name] == nil {
			continue
		}
		t.ended = true
		w.evalAt = t.end.Add(-time.Nanosecond)
		before, err := w.namespaceUsage(t.namespace)
		if err != nil {
			return err
		}
		w.evalAt = t.end.Add(time.Nanosecond)
		after, err := w.namespaceUsage(t.namespace)
		w.evalAt = time.Time{}
		if err != nil {
			return err
		}
		for key, u := range after {
			if !sameUsage(before[key], u, w.track.hard[key]) {
				w.track.expectSince("grace period over", key, t.end, u)
			}
		}
		w.bump(func(s *stats) { s.graceEnds++ })
	}
	kept := w.terminating[:0]
	for _, t := range w.terminating {
		if !now.After(t.confirm) {
			kept = append(kept, t)
			continue
		}
		if w.model[podsGVR][t.namespace][t.name] != nil {
			if err := w.remove(ctx, podsGVR, t.namespace, t.name); err != nil {
				return err
			}
			w.bump(func(s *stats) { s.confirmed++ })
		}
	}
	w.terminating = kept
	return nil
}

// confirmAllDeletions has every kubelet confirm its pending deletion now.
func (w *world) confirmAllDeletions(ctx context.Context) error {
	now := time.Now()
	for i := range w.terminating {
		w.terminating[i].confirm = now
	}
	return w.due(ctx, now.Add(time.Nanosecond))
}

// sameUsage reports whether a and b hold equal amounts of every name, a
// missing amount being zero.
func sameUsage(a, b corev1.ResourceList, names []corev1.ResourceName) bool {
	for _, n := range names {
		x, y := a[n], b[n]
		if x.Cmp(y) != 0 {
			return false
		}
	}
	return true
}

// waitConverged waits until every quota's status matches a recount.
func (w *world) waitConverged(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		wrong, err := w.recountFromScratch(ctx)
		if err != nil || len(wrong) == 0 {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d quotas still wrong after %v, first: %s", len(wrong), timeout, wrong[0])
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// recountFromScratch recounts every quota with quota.CalculateUsage and
// the evaluator registry over the API's current objects (listed afresh,
// not the model), and describes each quota whose status differs: whose
// status.hard is not its spec.hard or whose status.used is not the count.
func (w *world) recountFromScratch(ctx context.Context) ([]string, error) {
	listers := func(gvr schema.GroupVersionResource) (generic.ListFuncByNamespace, error) {
		return func(ns string) ([]runtime.Object, error) {
			l, err := w.api.List(ctx, gvr, ns, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			return meta.ExtractList(l)
		}, nil
	}
	registry, err := evaluator.NewRegistry(listers, evaluator.Options{})
	if err != nil {
		return nil, err
	}
	list, err := w.api.List(ctx, quotasGVR, "", metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var wrong []string
	for _, q := range list.(*corev1.ResourceQuotaList).Items {
		names := quota.ResourceNames(q.Spec.Hard)
		want, err := quota.CalculateUsage(q.Namespace, q.Spec.Scopes, q.Spec.Hard, registry, q.Spec.ScopeSelector)
		if err != nil {
			return nil, err
		}
		if !quota.Equals(q.Spec.Hard, q.Status.Hard) || !sameUsage(want, q.Status.Used, names) || len(q.Status.Used) < len(names) {
			wrong = append(wrong, fmt.Sprintf("%s/%s: used %s, recount %s", q.Namespace, q.Name, describe(q.Status.Used, names), describe(want, names)))
		}
	}
	return wrong, nil
}

// describe prints the amounts of names in rl.
func describe(rl corev1.ResourceList, names []corev1.ResourceName) string {
	parts := make([]string, len(names))
	for i, n := range names {
		q := rl[n]
		parts[i] = fmt.Sprintf("%s=%s", n, q.String())
	}
	return strings.Join(parts, ",")
}

// printSummary prints what the churn did and how fast the controller
// followed.
func (w *world) printSummary(out io.Writer, churned int, total time.Duration) {
	s := w.snapshot()
	d := s.churnEnd.Sub(s.churnStart)
	writes := s.events + s.confirmed
	fmt.Fprintf(out, "churn: %d events in %v (%.0f/s), plus %d deletions confirmed by kubelets: %d creates (%d denied by quota), %d deletes, %d pods Succeeded, %d graceful deletions (%d grace periods ran out)\n",
		churned, d.Round(time.Millisecond), float64(writes)/d.Seconds(), s.confirmed, s.creates, s.denied, s.deletes, s.succeeded, s.graceful, s.graceEnds)
	n, p50, p99, maxL, pending, cw := w.track.summary()
	fmt.Fprintf(out, "controller: %d status writes over %v\n", cw, total.Round(time.Millisecond))
	fmt.Fprintf(out, "convergence latency over %d events that change a quota's usage without admission: p50 %v, p99 %v, max %v; %d not reflected on their own\n",
		n, p50.Round(time.Microsecond), p99.Round(time.Microsecond), maxL.Round(time.Microsecond), pending)
	for _, k := range w.track.kinds() {
		n, p50, p99, maxL := w.track.summaryOf(k)
		fmt.Fprintf(out, "  %-18s %5d  p50 %v, p99 %v, max %v\n", k+":", n, p50.Round(time.Microsecond), p99.Round(time.Microsecond), maxL.Round(time.Microsecond))
	}
	fmt.Fprintln(out, "  latency: from just before the event's write to the API (or the end of the grace period) until the first status")
	fmt.Fprintln(out, "  write by the controller of each quota the event changes whose status.used equals the recount just after")
	fmt.Fprintln(out, "  that event, or after a later one (a write that reflects a later state reflects the earlier events too)")
}
