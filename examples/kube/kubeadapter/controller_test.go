package kubeadapter_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/quotakit/quotakit"
	"github.com/quotakit/quotakit/examples/kube/kubeadapter"
)

// TestController runs quotakit's controller over the adapter and client-go's
// fake clientset: the quota's status must come to count the namespace's
// pods, and follow a pod created while it runs.
func TestController(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cs := fake.NewClientset(
			&corev1.ResourceQuota{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "q"},
				Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")}},
			},
			&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}},
			&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "b"}},
		)
		ctrl, err := quotakit.NewController(kubeadapter.New(cs, newDynamic()), quotakit.Options{})
		if err != nil {
			t.Fatalf("NewController: %v", err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- ctrl.Run(ctx) }()

		used := func() map[string]string {
			t.Helper()
			synctest.Wait()
			rq, err := cs.CoreV1().ResourceQuotas("ns").Get(t.Context(), "q", metav1.GetOptions{})
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			out := map[string]string{}
			for k, v := range rq.Status.Used {
				out[string(k)] = v.String()
			}
			return out
		}
		time.Sleep(time.Second) // past the informers' first list
		if diff := cmp.Diff(map[string]string{"pods": "1"}, used()); diff != "" {
			t.Errorf("status.used after start (-want +got):\n%s", diff)
		}

		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}
		if _, err := cs.CoreV1().Pods("ns").Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
			t.Fatalf("Create: %v", err)
		}
		// Creations are charged by admission, not replenished; the next
		// resync counts the pod.
		time.Sleep(6 * time.Minute)
		if diff := cmp.Diff(map[string]string{"pods": "2"}, used()); diff != "" {
			t.Errorf("status.used after a resync (-want +got):\n%s", diff)
		}

		if err := cs.CoreV1().Pods("ns").Delete(t.Context(), "a", metav1.DeleteOptions{}); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		time.Sleep(time.Second)
		if diff := cmp.Diff(map[string]string{"pods": "1"}, used()); diff != "" {
			t.Errorf("status.used after a deletion (-want +got):\n%s", diff)
		}

		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
	})
}
