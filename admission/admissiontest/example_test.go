package admissiontest_test

import (
	"context"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quotakit/quotakit/admission"
	"github.com/quotakit/quotakit/admission/admissiontest"
	"github.com/quotakit/quotakit/cache"
	"github.com/quotakit/quotakit/cache/cachetest"
	"github.com/quotakit/quotakit/quota"
)

// An admission Evaluator over the in-memory API, with no adapter: the
// accessor reads the quotas through an informer of the API and charges
// them through the same API.
func Example() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	api := cachetest.New(cachetest.Options{})
	defer api.Close()
	hard := corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}
	if _, err := api.Create(ctx, corev1.SchemeGroupVersion.WithResource("resourcequotas"), &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "pods"},
		Spec:       corev1.ResourceQuotaSpec{Hard: hard},
		Status:     corev1.ResourceQuotaStatus{Hard: hard, Used: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}},
	}); err != nil {
		fmt.Println(err)
		return
	}

	client := admissiontest.New(api)
	informer, lister := client.QuotaInformer()
	go informer.Run(ctx)
	engine, err := admission.NewEvaluator(admission.NewAccessor(lister, informer.HasSynced, client, admission.AccessorOptions{}), admission.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	go func() { _ = engine.Run(ctx) }()
	cache.WaitForCacheSync(ctx, informer.HasSynced)

	for _, name := range []string{"web", "db"} {
		err := engine.Evaluate(ctx, &quota.AttributesRecord{
			Operation: admissionv1.Create,
			Resource:  corev1.SchemeGroupVersion.WithResource("pods"),
			Namespace: "team-a",
			Name:      name,
			Object:    &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name}},
		})
		fmt.Printf("%s: %v\n", name, err)
	}
	quotas, _ := client.ListQuotas(ctx, "team-a")
	fmt.Println("used:", quotas[0].Status.Used.Pods())
	// Output:
	// web: <nil>
	// db: pods "db" is forbidden: exceeded quota: pods, requested: pods=1, used: pods=1, limited: pods=1
	// used: 1
}
