package quotakit_test

import (
	"fmt"
	"strings"
	"testing"
	"testing/synctest"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/quotakit/quotakit"
	"github.com/quotakit/quotakit/cache/cachetest"
	"github.com/quotakit/quotakit/clusterquota"
)

func tenantClusterQuota(name, tenant, pods string) *clusterquota.ClusterQuota {
	return &clusterquota.ClusterQuota{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: clusterquota.ClusterQuotaSpec{
		Selector: clusterquota.ClusterQuotaSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tenant": tenant}}},
		Quota:    corev1.ResourceQuotaSpec{Hard: rl("pods", pods)},
	}}
}

// condition returns the condition typ of the stored cluster quota name.
func condition(t *testing.T, api *cachetest.Server, name, typ string) metav1.Condition {
	t.Helper()
	s := clusterStatus(t, api, name)
	c := meta.FindStatusCondition(s.Conditions, typ)
	if c == nil {
		t.Fatalf("cluster quota %s has no %s condition: %+v", name, typ, s.Conditions)
	}
	return *c
}

// TestControllerInvalidClusterQuota: a stored cluster quota whose spec is
// invalid (a label value with a space, which a CRD from before validation
// let in) harms only itself: the controller keeps every other quota,
// writes Valid=False with the reason on it, does not recount it, and
// counts it; fixed, it is valid and recounted again.
func TestControllerInvalidClusterQuota(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := clusterAPI(t)
		defer api.Close()
		labelledNamespace(t, api, "a-1", "a")
		labelledNamespace(t, api, "b-1", "b")
		podIn(t, api, "a-1", "p0")
		podIn(t, api, "b-1", "p1")
		bad := tenantClusterQuota("team-b", "b", "10")
		bad.Spec.Selector.LabelSelector.MatchLabels = map[string]string{"tenant": "b c"}
		for _, q := range []*clusterquota.ClusterQuota{tenantClusterQuota("team-a", "a", "10"), bad} {
			if _, err := api.Create(t.Context(), clusterQuotasGVR, q); err != nil {
				t.Fatal(err)
			}
		}
		events := &eventLog{}
		c, stop := start(t, api, quotakit.Options{ClusterQuotas: true, Events: events})
		defer stop()
		settle()

		if got := clusterStatus(t, api, "team-a").Total.Used["pods"]; got.String() != "1" {
			t.Errorf("team-a used pods = %s, want 1: a bad neighbour must not stop it", got.String())
		}
		if got := condition(t, api, "team-a", clusterquota.ConditionValid); got.Status != metav1.ConditionTrue {
			t.Errorf("team-a Valid = %s, want True", got.Status)
		}
		got := condition(t, api, "team-b", clusterquota.ConditionValid)
		if got.Status != metav1.ConditionFalse || got.Reason != clusterquota.ReasonInvalidSpec || !strings.Contains(got.Message, "b c") {
			t.Errorf("team-b Valid = %s/%s %q, want False/InvalidSpec naming the value", got.Status, got.Reason, got.Message)
		}
		if s := clusterStatus(t, api, "team-b"); len(s.Total.Used) != 0 {
			t.Errorf("team-b was recounted while invalid: %v", s.Total.Used)
		}
		if n := c.InvalidClusterQuotas(); n != 1 {
			t.Errorf("InvalidClusterQuotas() = %d, want 1", n)
		}

		obj, err := api.Get(t.Context(), clusterQuotasGVR, "", "team-b")
		if err != nil {
			t.Fatal(err)
		}
		fixed := obj.(*clusterquota.ClusterQuota)
		fixed.Spec.Selector.LabelSelector.MatchLabels["tenant"] = "b"
		if _, err := api.Update(t.Context(), clusterQuotasGVR, fixed); err != nil {
			t.Fatal(err)
		}
		settle()
		if got := condition(t, api, "team-b", clusterquota.ConditionValid); got.Status != metav1.ConditionTrue {
			t.Errorf("team-b fixed: Valid = %s, want True", got.Status)
		}
		if got := clusterStatus(t, api, "team-b").Total.Used["pods"]; got.String() != "1" {
			t.Errorf("team-b fixed: used pods = %s, want 1", got.String())
		}
		if n := c.InvalidClusterQuotas(); n != 0 {
			t.Errorf("InvalidClusterQuotas() after the fix = %d, want 0", n)
		}
		// Events for the transitions: none for team-a, valid from the
		// start; a Warning for team-b turning invalid, a Normal one for
		// it turning valid.
		if got := events.about("team-a"); len(got) != 0 {
			t.Errorf("Events on team-a: %q, want none", got)
		}
		onB := events.about("team-b")
		if len(onB) != 2 || !strings.HasPrefix(onB[0], "team-b Warning InvalidSpec: ") || !strings.HasPrefix(onB[1], "team-b Normal Valid: ") {
			t.Errorf("Events on team-b: %q, want a Warning InvalidSpec then a Normal Valid", onB)
		}
	})
}

// TestControllerUnenforcedNamespaces: with Options.EnforcedNamespaces, a
// cluster quota that selects a namespace admission does not enforce says
// so on its NamespacesEnforced condition and in the count, and stops
// saying so once the namespace is enforced; without the option the
// condition is Unknown.
func TestControllerUnenforcedNamespaces(t *testing.T) {
	for _, known := range []bool{true, false} {
		t.Run(fmt.Sprintf("known=%v", known), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := clusterAPI(t)
				defer api.Close()
				for _, ns := range []string{"a-1", "a-2"} {
					labels := map[string]string{"tenant": "a"}
					if ns == "a-1" {
						labels["quotakit.io/enforce"] = "true"
					}
					if _, err := api.Create(t.Context(), namespacesGVR, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := api.Create(t.Context(), clusterQuotasGVR, tenantClusterQuota("team-a", "a", "10")); err != nil {
					t.Fatal(err)
				}
				opts := quotakit.Options{ClusterQuotas: true}
				if known {
					opts.EnforcedNamespaces = labels.SelectorFromSet(labels.Set{"quotakit.io/enforce": "true"})
				}
				c, stop := start(t, api, opts)
				defer stop()
				settle()
				got := condition(t, api, "team-a", clusterquota.ConditionNamespacesEnforced)
				if !known {
					if got.Status != metav1.ConditionUnknown || got.Reason != clusterquota.ReasonEnforcementUnknown {
						t.Errorf("NamespacesEnforced = %s/%s, want Unknown/EnforcementUnknown", got.Status, got.Reason)
					}
					return
				}
				if got.Status != metav1.ConditionFalse || got.Reason != clusterquota.ReasonNamespacesNotEnforced || !strings.Contains(got.Message, "a-2") {
					t.Errorf("NamespacesEnforced = %s/%s %q, want False/NamespacesNotEnforced naming a-2", got.Status, got.Reason, got.Message)
				}
				if n := c.UnenforcedClusterQuotas(); n != 1 {
					t.Errorf("UnenforcedClusterQuotas() = %d, want 1", n)
				}
				obj, err := api.Get(t.Context(), namespacesGVR, "", "a-2")
				if err != nil {
					t.Fatal(err)
				}
				ns := obj.(*corev1.Namespace)
				ns.Labels["quotakit.io/enforce"] = "true"
				if _, err := api.Update(t.Context(), namespacesGVR, ns); err != nil {
					t.Fatal(err)
				}
				settle()
				if got := condition(t, api, "team-a", clusterquota.ConditionNamespacesEnforced); got.Status != metav1.ConditionTrue {
					t.Errorf("a-2 enforced: NamespacesEnforced = %s, want True", got.Status)
				}
				if n := c.UnenforcedClusterQuotas(); n != 0 {
					t.Errorf("UnenforcedClusterQuotas() = %d, want 0", n)
				}
			})
		})
	}
}

// TestControllerNotReadyWithoutTheCRD: configured to keep ClusterQuotas
// over an API that does not serve them (the CRD not installed), the
// controller is not ready, and says why, rather than ready with an
// informer that fails every second; ResourceQuotas are still kept.
func TestControllerNotReadyWithoutTheCRD(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := cachetest.New(cachetest.Options{})
		defer api.Close()
		c, stop := start(t, api, quotakit.Options{ClusterQuotas: true})
		defer stop()
		settle()
		err := c.Ready(nil)
		if err == nil || !strings.Contains(err.Error(), "clusterquotas.quota.quotakit.io") || !strings.Contains(err.Error(), "last error") {
			t.Errorf("Ready() = %v, want an error naming clusterquotas and its last error", err)
		}
		if c.HasSynced() {
			t.Error("HasSynced() = true with the ClusterQuota informer failing")
		}
	})
}
