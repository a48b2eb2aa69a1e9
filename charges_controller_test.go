package quotakit_test

import (
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quotakit/quotakit"
)

// TestControllerKeepsChargesInFlight charges a quota as admission does,
// ahead of the objects: a recount while they are on their way keeps the
// charges; the object that arrives accounts for one of them; the charge
// that no object follows (its creation failed after admission) is
// released one window after it was made, and counted.
func TestControllerKeepsChargesInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const window = 10 * time.Second
		client := newTestClient()
		defer client.Close()
		create(t, client, podsGVR, testPod("a", "1", corev1.PodRunning))
		create(t, client, quotasGVR, testQuota("q", rl("pods", "5", "requests.cpu", "10")))
		c, stop := start(t, client, quotakit.Options{ChargeWindow: window})
		defer stop()
		settle()
		checkUsed(t, client, "q", rl("pods", "1", "requests.cpu", "1"))

		// Admission admits two pods of 2 CPUs: it writes the charge.
		q := status(t, client, "q")
		charged := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "q"}, Status: q}
		charged.Status.Used = rl("pods", "3", "requests.cpu", "5")
		obj, err := client.Get(t.Context(), quotasGVR, "ns", "q")
		if err != nil {
			t.Fatal(err)
		}
		charged.ResourceVersion = obj.(*corev1.ResourceQuota).ResourceVersion
		if _, err := client.UpdateStatus(t.Context(), quotasGVR, charged); err != nil {
			t.Fatal(err)
		}
		settle()
		// A pod of the namespace is deleted meanwhile: the recount writes
		// its release, and keeps both charges.
		if err := client.Delete(t.Context(), podsGVR, "ns", "a", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		settle()
		checkUsed(t, client, "q", rl("pods", "2", "requests.cpu", "4"))

		// One of the two arrives; the other never will.
		create(t, client, podsGVR, testPod("b", "2", corev1.PodRunning))
		settle()
		checkUsed(t, client, "q", rl("pods", "2", "requests.cpu", "4"))
		if n := c.ReleasedCharges(); n != 0 {
			t.Fatalf("ReleasedCharges() = %d within the window, want 0", n)
		}

		time.Sleep(window)
		settle()
		checkUsed(t, client, "q", rl("pods", "1", "requests.cpu", "2"))
		if n := c.ReleasedCharges(); n != 1 {
			t.Errorf("ReleasedCharges() = %d, want 1", n)
		}
	})
}
