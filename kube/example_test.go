package kube_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	ctrl "sigs.k8s.io/controller-runtime"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/quotakit/quotakit"
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

// Run the controller in a controller-runtime manager: the manager's
// logger, its metrics registry (the queue series join controller-runtime's
// own), its leader election, and a readiness check that passes on
// standbys. It needs a cluster, so it is compiled, not run; TestManager
// runs the same wiring over fake clients.
func Example_controllerRuntime() {
	cfg := ctrl.GetConfigOrDie()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		LeaderElection:          true,
		LeaderElectionID:        "quotakit-controller",
		LeaderElectionNamespace: "quotakit-system",
		HealthProbeBindAddress:  ":8081",
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	metrics, err := kube.NewMetricsProvider(crmetrics.Registry)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	opts := quotakit.Options{Logger: mgr.GetLogger(), MetricsProvider: metrics}
	client, err := kube.NewForConfig(cfg, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	controller, err := quotakit.NewController(client, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := mgr.Add(controller); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	_ = mgr.AddReadyzCheck("resourcequota", func(r *http.Request) error {
		if err := controller.Ready(r); !errors.Is(err, quotakit.ErrNotRunning) {
			return err
		}
		return nil
	})
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
