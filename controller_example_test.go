package quotakit_test

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quotakit/quotakit"
	"github.com/quotakit/quotakit/cache/cachetest"
)

// The controller keeps a quota's status up to date. Here it runs against
// cachetest's in-memory API, which satisfies quotakit.Client; a real
// program passes the client-go Client of the module
// github.com/quotakit/quotakit/kube.
func ExampleController() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	api := cachetest.New(cachetest.Options{})
	defer api.Close()
	pods := corev1.SchemeGroupVersion.WithResource("pods")
	quotas := corev1.SchemeGroupVersion.WithResource("resourcequotas")

	for _, name := range []string{"web-0", "web-1"} {
		_, _ = api.Create(ctx, pods, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")},
			}}}},
		})
	}
	_, _ = api.Create(ctx, quotas, &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "compute"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
			corev1.ResourcePods:        resource.MustParse("10"),
			corev1.ResourceRequestsCPU: resource.MustParse("2"),
		}},
	})

	controller, err := quotakit.NewController(api, quotakit.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	done := make(chan error)
	go func() { done <- controller.Run(ctx) }()

	// Wait for the controller to fill in a used value for every limit.
	var rq *corev1.ResourceQuota
	for rq == nil || len(rq.Status.Used) < len(rq.Spec.Hard) {
		time.Sleep(10 * time.Millisecond)
		obj, err := api.Get(ctx, quotas, "team-a", "compute")
		if err != nil {
			fmt.Println(err)
			return
		}
		rq = obj.(*corev1.ResourceQuota)
	}
	used := rq.Status.Used[corev1.ResourcePods]
	cpu := rq.Status.Used[corev1.ResourceRequestsCPU]
	fmt.Printf("pods: %s of %s\n", used.String(), rq.Status.Hard.Pods().String())
	fmt.Printf("requests.cpu: %s of %s\n", cpu.String(), rq.Status.Hard.Name(corev1.ResourceRequestsCPU, resource.DecimalSI).String())

	cancel()
	fmt.Println("Run returned", <-done)
	// Output:
	// pods: 2 of 10
	// requests.cpu: 500m of 2
	// Run returned <nil>
}
