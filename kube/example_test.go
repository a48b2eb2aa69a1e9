package kube_test

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"

	"github.com/quotakit/quotakit"
	"github.com/quotakit/quotakit/admission"
	"github.com/quotakit/quotakit/cache"
	"github.com/quotakit/quotakit/kube"
	"github.com/quotakit/quotakit/workqueue"
)

// Build a Client over explicit clients (fakes here) and list through it:
// pods come typed, secrets, which are only counted, as metadata.
func ExampleNew() {
	secret := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}}
	scheme := metadatafake.NewTestScheme()
	scheme.AddKnownTypeWithName(corev1.SchemeGroupVersion.WithKind("Secret"), &metav1.PartialObjectMetadata{})
	client := kube.New(kube.Clients{
		Typed:    fake.NewClientset(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}),
		Metadata: metadatafake.NewSimpleMetadataClient(scheme, secret),
	}, quotakit.Options{})
	for _, r := range []string{"pods", "secrets"} {
		list, err := client.ListerWatcher(corev1.SchemeGroupVersion.WithResource(r), "ns").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Printf("%s: %T\n", r, list)
	}
	// Output:
	// pods: *v1.PodList
	// secrets: *v1.PartialObjectMetadataList
}

// Register the queue metrics in a Prometheus registry and hand the
// provider to the controller (here, to a queue of the same name).
func ExampleNewMetricsProvider() {
	reg := prometheus.NewRegistry()
	metrics, err := kube.NewMetricsProvider(reg)
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = quotakit.Options{MetricsProvider: metrics}

	q := workqueue.New[string](workqueue.Options{Name: "resourcequota_primary", MetricsProvider: metrics})
	q.Add("ns/q")
	families, _ := reg.Gather()
	for _, f := range families {
		if f.GetName() == "workqueue_depth" {
			m := f.GetMetric()[0]
			fmt.Printf("%s{%s=%q} %v\n", f.GetName(), m.GetLabel()[0].GetName(), m.GetLabel()[0].GetValue(), m.GetGauge().GetValue())
		}
	}
	q.ShutDown()
	// Output:
	// workqueue_depth{name="resourcequota_primary"} 1
}

// Build the quota cache of a validating webhook on the admission
// package: a Client without controller options (no controller runs),
// an informer of the ResourceQuotas, and the accessor the admission
// Evaluator reads and charges them through. Fake clients stand in for the
// API server here; in a cluster the client comes from
// kube.NewForConfig(cfg).
func ExampleClient_QuotaInformer() {
	client := kube.New(kube.Clients{Typed: fake.NewClientset(
		&corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "compute"}},
		&corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "objects"}},
	)}, quotakit.Options{})
	quotas := client.QuotaInformer("")
	accessor := admission.NewAccessor(kube.QuotaLister(quotas), quotas.HasSynced, client, admission.AccessorOptions{})

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); quotas.Run(ctx) }()
	// A readiness check of the webhook is quotas.HasSynced.
	if !cache.WaitForCacheSync(ctx, quotas.HasSynced) {
		fmt.Println("not synced")
	}
	got, err := accessor.GetQuotas(ctx, "team-a")
	if err != nil {
		fmt.Println(err)
	}
	for _, q := range got {
		fmt.Println(q.Namespace + "/" + q.Name)
	}
	cancel()
	<-done
	// Output:
	// team-a/compute
}
