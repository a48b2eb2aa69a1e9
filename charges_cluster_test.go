package quotakit_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quotakit/quotakit"
	"github.com/quotakit/quotakit/clusterquota"
)

// TestControllerClusterQuotaJoinIsNoArrival keeps a charge in flight of a
// ClusterQuota while a namespace joins its selection: the joining
// namespace's pods were never charged to the quota and are not arrivals,
// so they account for no charge. Counted as arrivals, they took the place
// of the charge in flight, and the controller wrote the total one below
// what admission had admitted.
func TestControllerClusterQuotaJoinIsNoArrival(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := clusterAPI(t)
		defer api.Close()
		labelledNamespace(t, api, "a-1", "a")
		labelledNamespace(t, api, "b-1", "b")
		podIn(t, api, "a-1", "p0")
		podIn(t, api, "b-1", "q0")
		podIn(t, api, "b-1", "q1")
		if _, err := api.Create(t.Context(), clusterQuotasGVR, &clusterquota.ClusterQuota{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}, Spec: clusterquota.ClusterQuotaSpec{
			Selector: clusterquota.ClusterQuotaSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tenant": "a"}}},
			Quota:    corev1.ResourceQuotaSpec{Hard: rl("pods", "10")},
		}}); err != nil {
			t.Fatal(err)
		}
		_, stop := start(t, api, quotakit.Options{ClusterQuotas: true, ChargeWindow: time.Minute})
		defer stop()
		settle()
		used := func() string {
			t.Helper()
			q := clusterStatus(t, api, "team-a").Total.Used["pods"]
			return q.String()
		}
		if u := used(); u != "1" {
			t.Fatalf("at start: used pods = %s, want 1", u)
		}
		// Admission charges a pod of a-1, on its way.
		obj, err := api.Get(t.Context(), clusterQuotasGVR, "", "team-a")
		if err != nil {
			t.Fatal(err)
		}
		q := obj.(*clusterquota.ClusterQuota)
		q.Status.Total.Used = rl("pods", "2")
		if _, err := api.UpdateStatus(context.WithoutCancel(t.Context()), clusterQuotasGVR, q); err != nil {
			t.Fatal(err)
		}
		settle()
		relabel(t, api, "b-1", "a")
		settle()
		if u := used(); u != "4" {
			t.Errorf("after b-1 joined with two pods: used pods = %s, want 4 (three pods and the charge in flight)", u)
		}
	})
}
