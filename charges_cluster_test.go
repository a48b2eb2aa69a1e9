package quotakit_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

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

// TestControllerClusterQuotaConflictsAreNotErrors makes the controller's
// writes of a ClusterQuota's status conflict, as they do while admission
// charges it: each is retried and counted, and logged below error level.
func TestControllerClusterQuotaConflictsAreNotErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := clusterAPI(t)
		client := &testClient{Server: api, broken: map[schema.GroupVersionResource]bool{}, held: map[schema.GroupVersionResource]chan struct{}{}}
		defer client.Close()
		labelledNamespace(t, api, "a-1", "a")
		podIn(t, api, "a-1", "p0")
		if _, err := api.Create(t.Context(), clusterQuotasGVR, &clusterquota.ClusterQuota{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}, Spec: clusterquota.ClusterQuotaSpec{
			Selector: clusterquota.ClusterQuotaSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tenant": "a"}}},
			Quota:    corev1.ResourceQuotaSpec{Hard: rl("pods", "10")},
		}}); err != nil {
			t.Fatal(err)
		}
		conflict := apierrors.NewConflict(clusterQuotasGVR.GroupResource(), "team-a", fmt.Errorf("the object has been modified"))
		client.statusErrs = []error{conflict, conflict}
		sink, verbose := &logSink{}, &logSink{}
		c, err := quotakit.NewController(client, quotakit.Options{ClusterQuotas: true, Logger: logr.New(teeSink{
			LogSink: sink.logger().GetSink(),
			v1:      verbose.logger().GetSink(),
		})})
		if err != nil {
			t.Fatal(err)
		}
		stop := run(t, c)
		defer stop()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if got := clusterStatus(t, api, "team-a").Total.Used["pods"]; got.String() != "1" {
			t.Errorf("used pods = %s, want 1", got.String())
		}
		if n := sink.count("the object has been modified"); n != 0 {
			t.Errorf("%d conflicts logged at error level, want none", n)
		}
		if n := verbose.countInfo("status write conflicted"); n != 2 {
			t.Errorf("%d conflicts logged at V(1), want 2", n)
		}
		if n := c.StatusConflicts(); n != 2 {
			t.Errorf("StatusConflicts() = %d, want 2", n)
		}
	})
}
