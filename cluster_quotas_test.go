package quotakit_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/quotakit/quotakit"
	"github.com/quotakit/quotakit/cache/cachetest"
	"github.com/quotakit/quotakit/clusterquota"
	"github.com/quotakit/quotakit/internal/qcmp"
)

var (
	clusterQuotasGVR = clusterquota.SchemeGroupVersion.WithResource("clusterquotas")
	namespacesGVR    = corev1.SchemeGroupVersion.WithResource("namespaces")
)

func clusterAPI(t testing.TB) *cachetest.Server {
	t.Helper()
	api := cachetest.New(cachetest.Options{})
	if err := api.Register(cachetest.Resource{GVR: clusterQuotasGVR, NewList: func() runtime.Object { return &clusterquota.ClusterQuotaList{} }}); err != nil {
		t.Fatal(err)
	}
	return api
}

func labelledNamespace(t testing.TB, api *cachetest.Server, name, tenant string) {
	t.Helper()
	if _, err := api.Create(t.Context(), namespacesGVR, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"tenant": tenant}}}); err != nil {
		t.Fatal(err)
	}
}

func relabel(t testing.TB, api *cachetest.Server, name, tenant string) {
	t.Helper()
	obj, err := api.Get(t.Context(), namespacesGVR, "", name)
	if err != nil {
		t.Fatal(err)
	}
	ns := obj.(*corev1.Namespace)
	ns.Labels["tenant"] = tenant
	if _, err := api.Update(t.Context(), namespacesGVR, ns); err != nil {
		t.Fatal(err)
	}
}

func podIn(t testing.TB, api *cachetest.Server, ns, name string) {
	t.Helper()
	if _, err := api.Create(t.Context(), podsGVR, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
		t.Fatal(err)
	}
}

func clusterStatus(t testing.TB, api *cachetest.Server, name string) clusterquota.ClusterQuotaStatus {
	t.Helper()
	obj, err := api.Get(t.Context(), clusterQuotasGVR, "", name)
	if err != nil {
		t.Fatal(err)
	}
	return obj.(*clusterquota.ClusterQuota).Status
}

// perNamespace returns the pods used of each namespace listed in s.
func perNamespace(s clusterquota.ClusterQuotaStatus) map[string]string {
	out := map[string]string{}
	for _, e := range s.Namespaces {
		q := e.Status.Used["pods"]
		out[e.Namespace] = q.String()
	}
	return out
}

// TestControllerClusterQuotas keeps a ClusterQuota's total equal to the
// sum over the namespaces it selects while namespaces are relabelled into
// and out of its selection (the leak HNC has when a namespace leaves a
// subtree) and objects come and go; a namespace in two cluster quotas
// counts in both.
func TestControllerClusterQuotas(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := clusterAPI(t)
		defer api.Close()
		for _, ns := range []struct{ name, tenant string }{{"a-1", "a"}, {"a-2", "a"}, {"a-3", "a"}, {"b-1", "b"}} {
			labelledNamespace(t, api, ns.name, ns.tenant)
		}
		for i, ns := range []string{"a-1", "a-1", "a-2", "b-1", "b-1", "b-1"} {
			podIn(t, api, ns, fmt.Sprintf("p%d", i))
		}
		hard := rl("pods", "10")
		for _, q := range []*clusterquota.ClusterQuota{
			{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}, Spec: clusterquota.ClusterQuotaSpec{
				Selector: clusterquota.ClusterQuotaSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tenant": "a"}}},
				Quota:    corev1.ResourceQuotaSpec{Hard: hard},
			}},
			{ObjectMeta: metav1.ObjectMeta{Name: "everyone"}, Spec: clusterquota.ClusterQuotaSpec{
				Selector: clusterquota.ClusterQuotaSelector{LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tenant", Operator: metav1.LabelSelectorOpExists}}}},
				Quota:    corev1.ResourceQuotaSpec{Hard: rl("pods", "100")},
			}},
		} {
			if _, err := api.Create(t.Context(), clusterQuotasGVR, q); err != nil {
				t.Fatal(err)
			}
		}
		_, stop := start(t, api, quotakit.Options{ClusterQuotas: true})
		defer stop()
		check := func(what, total string, namespaces map[string]string, everyone string) {
			t.Helper()
			settle()
			s := clusterStatus(t, api, "team-a")
			if diff := cmp.Diff(corev1.ResourceQuotaStatus{Hard: hard, Used: rl("pods", total)}, s.Total, qcmp.Quantities()); diff != "" {
				t.Errorf("%s: team-a status.total (-want +got):\n%s", what, diff)
			}
			if diff := cmp.Diff(namespaces, perNamespace(s)); diff != "" {
				t.Errorf("%s: team-a status.namespaces (-want +got):\n%s", what, diff)
			}
			if got := clusterStatus(t, api, "everyone").Total.Used["pods"]; got.String() != everyone {
				t.Errorf("%s: everyone's total used pods = %s, want %s", what, got.String(), everyone)
			}
		}
		check("at start", "3", map[string]string{"a-1": "2", "a-2": "1"}, "6")

		relabel(t, api, "b-1", "a")
		check("b-1 joined", "6", map[string]string{"a-1": "2", "a-2": "1", "b-1": "3"}, "6")

		relabel(t, api, "a-1", "c")
		check("a-1 left", "4", map[string]string{"a-2": "1", "b-1": "3"}, "6")

		podIn(t, api, "a-3", "late")
		podIn(t, api, "a-1", "outside")
		check("pods created", "5", map[string]string{"a-2": "1", "a-3": "1", "b-1": "3"}, "8")

		if err := api.Delete(t.Context(), podsGVR, "b-1", "p3", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		check("a pod deleted", "4", map[string]string{"a-2": "1", "a-3": "1", "b-1": "2"}, "7")
	})
}

// TestControllerClusterQuotaChargesInFlight: a charge admission made to a
// ClusterQuota's total is kept while no object accounts for it, and
// released a window later.
func TestControllerClusterQuotaChargesInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const window = 5 * time.Second
		api := clusterAPI(t)
		defer api.Close()
		labelledNamespace(t, api, "a-1", "a")
		podIn(t, api, "a-1", "p0")
		if _, err := api.Create(t.Context(), clusterQuotasGVR, &clusterquota.ClusterQuota{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}, Spec: clusterquota.ClusterQuotaSpec{
			Selector: clusterquota.ClusterQuotaSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tenant": "a"}}},
			Quota:    corev1.ResourceQuotaSpec{Hard: rl("pods", "10")},
		}}); err != nil {
			t.Fatal(err)
		}
		_, stop := start(t, api, quotakit.Options{ClusterQuotas: true, ChargeWindow: window})
		defer stop()
		settle()
		// Admission charges two pods.
		obj, err := api.Get(t.Context(), clusterQuotasGVR, "", "team-a")
		if err != nil {
			t.Fatal(err)
		}
		q := obj.(*clusterquota.ClusterQuota)
		q.Status.Total.Used = rl("pods", "3")
		if _, err := api.UpdateStatus(context.WithoutCancel(t.Context()), clusterQuotasGVR, q); err != nil {
			t.Fatal(err)
		}
		settle()
		podIn(t, api, "a-1", "p1")
		settle()
		if got := clusterStatus(t, api, "team-a").Total.Used["pods"]; got.String() != "3" {
			t.Fatalf("within the window: used pods = %s, want 3", got.String())
		}
		time.Sleep(2 * window)
		settle()
		if got := clusterStatus(t, api, "team-a").Total.Used["pods"]; got.String() != "2" {
			t.Errorf("after the window: used pods = %s, want 2", got.String())
		}
	})
}

// TestControllerClusterQuotaRelabelChurn relabels namespaces into and out
// of a ClusterQuota's selection while pods come and go, over seeds, and
// checks after each step that status.total equals the sum of
// status.namespaces and a recount of the pods in the selected namespaces.
func TestControllerClusterQuotaRelabelChurn(t *testing.T) {
	for seed := range uint64(20) {
		synctest.Test(t, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 5))
			api := clusterAPI(t)
			defer api.Close()
			tenants := map[string]string{}
			for i := range 5 {
				name, tenant := fmt.Sprintf("ns-%d", i), []string{"a", "b"}[rng.IntN(2)]
				labelledNamespace(t, api, name, tenant)
				tenants[name] = tenant
			}
			if _, err := api.Create(t.Context(), clusterQuotasGVR, &clusterquota.ClusterQuota{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}, Spec: clusterquota.ClusterQuotaSpec{
				Selector: clusterquota.ClusterQuotaSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tenant": "a"}}},
				Quota:    corev1.ResourceQuotaSpec{Hard: rl("pods", "1000")},
			}}); err != nil {
				t.Fatal(err)
			}
			_, stop := start(t, api, quotakit.Options{ClusterQuotas: true})
			defer stop()
			pods := map[string]string{} // name → namespace
			next := 0
			for step := range 30 {
				for range 1 + rng.IntN(4) {
					switch rng.IntN(3) {
					case 0, 1:
						ns := fmt.Sprintf("ns-%d", rng.IntN(5))
						name := fmt.Sprintf("p%d", next)
						next++
						podIn(t, api, ns, name)
						pods[name] = ns
					case 2:
						for name, ns := range pods {
							if err := api.Delete(t.Context(), podsGVR, ns, name, metav1.DeleteOptions{}); err != nil {
								t.Fatal(err)
							}
							delete(pods, name)
							break
						}
					}
				}
				if rng.IntN(2) == 0 {
					ns := fmt.Sprintf("ns-%d", rng.IntN(5))
					tenants[ns] = map[string]string{"a": "b", "b": "a"}[tenants[ns]]
					relabel(t, api, ns, tenants[ns])
				}
				settle()
				want := map[string]int{}
				recount := 0
				for _, ns := range pods {
					if tenants[ns] == "a" {
						want[ns]++
						recount++
					}
				}
				s := clusterStatus(t, api, "team-a")
				sum := int64(0)
				got := map[string]int{}
				for _, e := range s.Namespaces {
					q := e.Status.Used["pods"]
					got[e.Namespace] = int(q.Value())
					sum += q.Value()
				}
				total := s.Total.Used["pods"]
				if total.Value() != int64(recount) || sum != int64(recount) || !cmp.Equal(want, got) {
					t.Fatalf("seed %d, step %d: total %d, sum of namespaces %d %v; recount %d %v", seed, step, total.Value(), sum, got, recount, want)
				}
			}
		})
	}
}

// TestControllerClusterQuotaCaches: the caches the controller shares fill
// once it runs, and a controller without ClusterQuotas has none.
func TestControllerClusterQuotaCaches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := clusterAPI(t)
		defer api.Close()
		labelledNamespace(t, api, "a-1", "a")
		q := &clusterquota.ClusterQuota{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}, Spec: clusterquota.ClusterQuotaSpec{
			Selector: clusterquota.ClusterQuotaSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tenant": "a"}}},
			Quota:    corev1.ResourceQuotaSpec{Hard: rl("pods", "10")},
		}}
		if _, err := api.Create(t.Context(), clusterQuotasGVR, q); err != nil {
			t.Fatal(err)
		}
		plain, err := quotakit.NewController(api, quotakit.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := plain.ClusterQuotaCaches(); ok {
			t.Error("ClusterQuotaCaches of a controller without ClusterQuotas: ok")
		}
		c, stop := start(t, api, quotakit.Options{ClusterQuotas: true})
		defer stop()
		caches, ok := c.ClusterQuotaCaches()
		if !ok || caches.Quotas == nil || caches.Namespaces == nil || caches.Index == nil {
			t.Fatalf("ClusterQuotaCaches() = %+v, %v", caches, ok)
		}
		settle()
		if _, found, err := caches.Quotas.GetStore().GetByKey("team-a"); !found || err != nil {
			t.Errorf("the quotas' store lacks team-a: %v, %v", found, err)
		}
		ns, found, err := caches.Namespaces.GetStore().GetByKey("a-1")
		if !found || err != nil {
			t.Fatalf("the namespaces' store lacks a-1: %v, %v", found, err)
		}
		if got := caches.Index.Lookup(ns.(*metav1.PartialObjectMetadata)).Names; len(got) != 1 || got[0] != "team-a" {
			t.Errorf("the index says a-1 is selected by %v, want [team-a]", got)
		}
	})
}
