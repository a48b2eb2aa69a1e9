package quotakit_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/quotakit/quotakit"
	"github.com/quotakit/quotakit/cache"
	"github.com/quotakit/quotakit/cache/cachetest"
)

// forbiddingClient is a discoveringClient whose server refuses, with 403
// Forbidden, to list or watch some resources, as kube-apiserver refuses an
// identity whose RBAC lacks them.
type forbiddingClient struct {
	*discoveringClient
	mu sync.Mutex
	// guarded by mu
	forbidden map[schema.GroupVersionResource]bool
}

func (c *forbiddingClient) forbid(gvr schema.GroupVersionResource, forbid bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forbidden[gvr] = forbid
}

func (c *forbiddingClient) refusal(gvr schema.GroupVersionResource) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.forbidden[gvr] {
		return nil
	}
	return apierrors.NewForbidden(gvr.GroupResource(), "", fmt.Errorf(`User "system:serviceaccount:quotakit-system:quotakit-controller" cannot list resource %q`, gvr.Resource))
}

func (c *forbiddingClient) ListerWatcher(gvr schema.GroupVersionResource, namespace string) cache.ListerWatcher {
	lw := c.discoveringClient.ListerWatcher(gvr, namespace)
	return &cache.ListWatch{
		ListFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			if err := c.refusal(gvr); err != nil {
				return nil, err
			}
			return lw.List(ctx, opts)
		},
		WatchFunc: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			if err := c.refusal(gvr); err != nil {
				return nil, err
			}
			return lw.Watch(ctx, opts)
		},
	}
}

// eventLog records the Events the controller asks for.
type eventLog struct {
	mu sync.Mutex
	// guarded by mu
	events []string
}

func (l *eventLog) Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	name := "?"
	if m, ok := obj.(metav1.Object); ok {
		name = m.GetName()
	}
	l.events = append(l.events, fmt.Sprintf("%s %s %s: %s", name, eventtype, reason, fmt.Sprintf(messageFmt, args...)))
}

// about returns the events recorded about the quota name.
func (l *eventLog) about(name string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, e := range l.events {
		if strings.HasPrefix(e, name+" ") {
			out = append(out, e)
		}
	}
	return out
}

// TestControllerForbiddenResource runs the controller under an identity
// that may not list secrets (counted from the start) nor jobs
// (discovered once a quota names them), as with a least-privilege role:
// the controller is ready, a quota naming neither is counted as usual, a
// quota naming one gets no used value for it (never a zero), every such
// quota is reported once (error log, UncountedQuotas, a Warning Event
// naming the refusal) and ForbiddenResources counts the two resources.
// Once the permission is granted, both are counted and nothing is
// reported any more (kubernetes#133737: upstream's controller waits for
// every informer and never reports which quota is stuck).
func TestControllerForbiddenResource(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := &forbiddingClient{
			discoveringClient: &discoveringClient{testClient: newTestClient(), served: []schema.GroupVersionResource{podsGVR, secretsGVR, jobsGVR}, watches: map[schema.GroupVersionResource]int{}},
			forbidden:         map[schema.GroupVersionResource]bool{secretsGVR: true, jobsGVR: true},
		}
		defer client.Close()
		if err := client.Register(cachetest.Resource{GVR: jobsGVR, Namespaced: true, NewList: func() runtime.Object { return &batchv1.JobList{} }}); err != nil {
			t.Fatal(err)
		}
		create(t, client.testClient, podsGVR, testPod("a", "1", corev1.PodRunning))
		create(t, client.testClient, jobsGVR, job("j"))
		create(t, client.testClient, secretsGVR, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}})
		create(t, client.testClient, quotasGVR, testQuota("pods", rl("pods", "5")))
		create(t, client.testClient, quotasGVR, testQuota("jobs", rl("pods", "5", "count/jobs.batch", "5")))
		create(t, client.testClient, quotasGVR, testQuota("secrets", rl("secrets", "5")))
		logs := &logSink{}
		events := &eventLog{}
		c, stop := start(t, client, quotakit.Options{Logger: logs.logger(), Events: events})
		defer stop()
		time.Sleep(time.Minute)
		synctest.Wait()

		if err := c.Ready(nil); err != nil {
			t.Errorf("Ready() = %v, want nil: a resource the controller may not list holds up only its quotas", err)
		}
		checkUsed(t, client.testClient, "pods", rl("pods", "1"))
		checkUsed(t, client.testClient, "jobs", rl("pods", "1"))
		checkUsed(t, client.testClient, "secrets", rl())
		if n := c.UncountedQuotas(); n != 2 {
			t.Errorf("UncountedQuotas() = %d, want 2", n)
		}
		if n := c.ForbiddenResources(); n != 2 {
			t.Errorf("ForbiddenResources() = %d, want 2", n)
		}
		for _, tt := range []struct{ quota, name, resource string }{
			{"jobs", "count/jobs.batch", "jobs.batch"},
			{"secrets", "secrets", "secrets"},
		} {
			got := events.about(tt.quota)
			if len(got) != 1 || !strings.Contains(got[0], "Warning ResourcesNotCounted") || !strings.Contains(got[0], tt.name+": the controller may not list "+tt.resource) {
				t.Errorf("events about quota %s = %q, want one Warning saying the controller may not list %s", tt.quota, got, tt.resource)
			}
			if n := logs.count("resource quota ns/" + tt.quota + " limits"); n != 1 {
				t.Errorf("%d error logs report quota %s, want 1", n, tt.quota)
			}
		}
		if got := events.about("pods"); len(got) != 0 {
			t.Errorf("events about quota pods = %q, want none", got)
		}

		client.forbid(secretsGVR, false)
		client.forbid(jobsGVR, false)
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		// A quota event makes the controller look again at what quotas
		// name; the resync would, later.
		rq := getQuota(t, client.testClient, "pods")
		rq.Spec.Hard = rl("pods", "6")
		update(t, client.testClient, rq)
		settle()
		checkUsed(t, client.testClient, "jobs", rl("pods", "1", "count/jobs.batch", "1"))
		checkUsed(t, client.testClient, "secrets", rl("secrets", "1"))
		if n := c.UncountedQuotas(); n != 0 {
			t.Errorf("UncountedQuotas() = %d once permitted, want 0", n)
		}
		if n := c.ForbiddenResources(); n != 0 {
			t.Errorf("ForbiddenResources() = %d once permitted, want 0", n)
		}
		if err := c.Ready(nil); err != nil {
			t.Errorf("Ready() once permitted = %v", err)
		}
	})
}
