// Command quotademo runs quotakit's ResourceQuota controller against the
// in-memory API of cache/cachetest and shows a quota's status following
// the namespace: pods are created, one finishes, one is deleted, and the
// quota's limits change.
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quotakit/quotakit"
	"github.com/quotakit/quotakit/cache/cachetest"
	"github.com/quotakit/quotakit/quota"
)

var (
	pods   = corev1.SchemeGroupVersion.WithResource("pods")
	quotas = corev1.SchemeGroupVersion.WithResource("resourcequotas")
)

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		log.Print(err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	api := cachetest.New(cachetest.Options{})
	defer api.Close()

	for i, cpu := range []string{"250m", "500m", "1"} {
		if _, err := api.Create(ctx, pods, pod(fmt.Sprintf("web-%d", i), cpu)); err != nil {
			return err
		}
	}
	if _, err := api.Create(ctx, quotas, &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "compute"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
			corev1.ResourcePods:        resource.MustParse("10"),
			corev1.ResourceRequestsCPU: resource.MustParse("4"),
		}},
	}); err != nil {
		return err
	}

	controller, err := quotakit.NewController(api, quotakit.Options{})
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- controller.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()

	last, err := waitForStatus(ctx, api, "")
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "initial state: ", describe(last))

	// A pod finishes: the controller releases what it charged.
	obj, err := api.Get(ctx, pods, "team-a", "web-2")
	if err != nil {
		return err
	}
	finished := obj.(*corev1.Pod)
	finished.Status.Phase = corev1.PodSucceeded
	if _, err := api.UpdateStatus(ctx, pods, finished); err != nil {
		return err
	}
	if last, err = waitForStatus(ctx, api, last.ResourceVersion); err != nil {
		return err
	}
	fmt.Fprintln(out, "web-2 finished:", describe(last))

	// A pod is deleted.
	if err := api.Delete(ctx, pods, "team-a", "web-0", metav1.DeleteOptions{}); err != nil {
		return err
	}
	if last, err = waitForStatus(ctx, api, last.ResourceVersion); err != nil {
		return err
	}
	fmt.Fprintln(out, "web-0 deleted: ", describe(last))

	// The quota gains a limit: status.hard follows spec.hard, and the new
	// resource is computed at once.
	last.Spec.Hard[corev1.ResourceLimitsMemory] = resource.MustParse("8Gi")
	if _, err := api.Update(ctx, quotas, last); err != nil {
		return err
	}
	if last, err = waitForStatus(ctx, api, last.ResourceVersion); err != nil {
		return err
	}
	fmt.Fprintln(out, "limit added:   ", describe(last))
	return nil
}

// waitForStatus returns the quota once its resourceVersion is no longer
// after and its status is complete: status.hard is spec.hard and every
// hard limit has a used value. (While the controller starts, a quota's
// status may be written before every informer has synced, without the
// used values of the resources not synced yet.)
func waitForStatus(ctx context.Context, api *cachetest.Server, after string) (*corev1.ResourceQuota, error) {
	for {
		obj, err := api.Get(ctx, quotas, "team-a", "compute")
		if err != nil {
			return nil, err
		}
		rq := obj.(*corev1.ResourceQuota)
		if rq.ResourceVersion != after && quota.Equals(rq.Spec.Hard, rq.Status.Hard) &&
			len(quota.Difference(quota.ResourceNames(rq.Status.Hard), quota.ResourceNames(rq.Status.Used))) == 0 {
			return rq, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func describe(rq *corev1.ResourceQuota) string {
	var parts []string
	for _, name := range quota.ResourceNames(rq.Status.Hard) {
		used := rq.Status.Used[name]
		hard := rq.Status.Hard[name]
		parts = append(parts, fmt.Sprintf("%s %s/%s", name, used.String(), hard.String()))
	}
	return strings.Join(parts, ", ")
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
