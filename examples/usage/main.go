// Command usage computes ResourceQuota usage the way the quota controller
// does, from informers, against quotakit's in-memory API: it creates pods,
// services and configmaps, starts one informer per resource, builds the
// Kubernetes evaluators over the informers' indexers, and prints the usage
// of a quota before and after some churn.
package main

import (
	"context"
	"fmt"
	"log"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit/cache"
	"github.com/quotakit/quotakit/cache/cachetest"
	"github.com/quotakit/quotakit/evaluator"
	"github.com/quotakit/quotakit/generic"
	"github.com/quotakit/quotakit/quota"
)

var (
	pods       = corev1.SchemeGroupVersion.WithResource("pods")
	services   = corev1.SchemeGroupVersion.WithResource("services")
	configMaps = corev1.SchemeGroupVersion.WithResource("configmaps")
)

func main() {
	if err := run(context.Background()); err != nil {
		log.Print(err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	api := cachetest.New(cachetest.Options{})
	defer api.Close()

	for i, cpu := range []string{"250m", "500m", "1"} {
		if _, err := api.Create(ctx, pods, pod(fmt.Sprintf("web-%d", i), cpu)); err != nil {
			return err
		}
	}
	if _, err := api.Create(ctx, services, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Port: 80}, {Port: 443}}},
	}); err != nil {
		return err
	}
	if _, err := api.Create(ctx, configMaps, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "settings"}}); err != nil {
		return err
	}

	// One informer per resource the evaluators list.
	informers := map[schema.GroupVersionResource]*cache.SharedIndexInformer{
		pods:       cache.NewSharedIndexInformer(api.ListerWatcher(pods, ""), &corev1.Pod{}, cache.SharedIndexInformerOptions{}),
		services:   cache.NewSharedIndexInformer(api.ListerWatcher(services, ""), &corev1.Service{}, cache.SharedIndexInformerOptions{}),
		configMaps: cache.NewSharedIndexInformer(api.ListerWatcher(configMaps, ""), &corev1.ConfigMap{}, cache.SharedIndexInformerOptions{}),
	}
	done := make(chan struct{}, len(informers))
	var synced []cache.InformerSynced
	for _, inf := range informers {
		go func() {
			inf.Run(ctx)
			done <- struct{}{}
		}()
		synced = append(synced, inf.HasSynced)
	}
	defer func() {
		cancel()
		for range informers {
			<-done
		}
	}()
	if !cache.WaitForCacheSync(ctx, synced...) {
		return fmt.Errorf("informers did not sync")
	}

	// The evaluators list through the informers' indexers: one line per
	// resource adapts a lister to generic.ListFuncByNamespace.
	listers := func(gvr schema.GroupVersionResource) (generic.ListFuncByNamespace, error) {
		inf, ok := informers[gvr]
		if !ok {
			return nil, nil // admission-only evaluator for resources without an informer
		}
		lister := cache.NewGenericLister(inf.GetIndexer(), gvr.GroupResource())
		return func(ns string) ([]runtime.Object, error) { return lister.ByNamespace(ns).List(labels.Everything()) }, nil
	}
	registry, err := evaluator.NewRegistry(listers, evaluator.Options{})
	if err != nil {
		return err
	}

	hard := corev1.ResourceList{
		corev1.ResourcePods:              resource.MustParse("10"),
		corev1.ResourceRequestsCPU:       resource.MustParse("4"),
		corev1.ResourceServicesNodePorts: resource.MustParse("5"),
		"count/configmaps":               resource.MustParse("20"),
	}
	if err := printUsage(registry, hard, "initial state"); err != nil {
		return err
	}

	// Churn: a pod finishes, another is deleted, a configmap is added.
	p, err := api.Get(ctx, pods, "team-a", "web-2")
	if err != nil {
		return err
	}
	finished := p.(*corev1.Pod)
	finished.Status.Phase = corev1.PodSucceeded
	last, err := api.UpdateStatus(ctx, pods, finished)
	if err != nil {
		return err
	}
	if err := api.Delete(ctx, pods, "team-a", "web-0", metav1.DeleteOptions{}); err != nil {
		return err
	}
	cm, err := api.Create(ctx, configMaps, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "flags"}})
	if err != nil {
		return err
	}
	// Wait until the informers have seen the last writes.
	for _, w := range []struct {
		inf *cache.SharedIndexInformer
		rv  string
	}{{informers[pods], last.(*corev1.Pod).ResourceVersion}, {informers[configMaps], cm.(*corev1.ConfigMap).ResourceVersion}} {
		caughtUp := func() bool { return atLeast(w.inf.LastSyncResourceVersion(), w.rv) }
		if !cache.WaitForCacheSync(ctx, caughtUp) {
			return ctx.Err()
		}
	}
	return printUsage(registry, hard, "after churn")
}

func pod(name, cpu string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: "nginx",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}},
		}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

func printUsage(registry quota.Registry, hard corev1.ResourceList, when string) error {
	used, err := quota.CalculateUsage("team-a", nil, hard, registry, nil)
	if err != nil {
		return err
	}
	fmt.Printf("%s:\n", when)
	for _, name := range quota.ResourceNames(hard) {
		u, h := used[name], hard[name]
		fmt.Printf("  %-20s %6s / %s\n", name, u.String(), h.String())
	}
	return nil
}

// atLeast compares two resourceVersions, which cachetest issues as
// increasing integers.
func atLeast(rv, want string) bool {
	return len(rv) > len(want) || len(rv) == len(want) && rv >= want
}
