package quotakit_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit"
	"github.com/quotakit/quotakit/evaluator"
	"github.com/quotakit/quotakit/generic"
	"github.com/quotakit/quotakit/quota"
)

// TestControllerSoak churns pods, configmaps and quotas while the API
// breaks watches, compacts its history and fails lists, with the full
// resync turned off, and checks after every few rounds that every quota's
// status is what CalculateUsage computes from the API's current state: the
// controller must get there from events, relists and tombstones alone.
func TestControllerSoak(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		client := newTestClient()
		defer client.Close()
		rng := rand.New(rand.NewPCG(7, 11))
		namespaces := []string{"a", "b", "c"}
		classes := []string{"", "high", "low"}
		var pods []*corev1.Pod
		for _, ns := range namespaces {
			for i := range 20 {
				p := testPod(fmt.Sprintf("p%d", i), []string{"100m", "250m", "1", "2"}[rng.IntN(4)], corev1.PodRunning)
				p.Namespace = ns
				p.Spec.PriorityClassName = classes[rng.IntN(len(classes))]
				pods = append(pods, create(t, client, podsGVR, p).(*corev1.Pod))
			}
			for i := range 5 {
				create(t, client, configsGVR, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("cm%d", i)}})
			}
			compute := testQuota("compute", rl("pods", "100", "count/pods", "100", "requests.cpu", "100", "count/configmaps", "10"))
			compute.Namespace = ns
			create(t, client, quotasGVR, compute)
			high := testQuota("high", rl("pods", "100", "requests.cpu", "100"))
			high.Namespace = ns
			high.Spec.ScopeSelector = &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
				{ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpIn, Values: []string{"high"}},
			}}
			create(t, client, quotasGVR, high)
		}

		_, stop := start(t, client, quotakit.Options{ResyncPeriod: -1})
		defer stop()
		settle()
		checkAll(t, client, namespaces, "start")

		injected := errors.New("injected failure")
		for round := range 120 {
			switch op := rng.IntN(9); op {
			case 0, 1: // delete a pod
				if len(pods) == 0 {
					continue
				}
				i := rng.IntN(len(pods))
				p := pods[i]
				pods = append(pods[:i], pods[i+1:]...)
				if err := client.Delete(ctx, podsGVR, p.Namespace, p.Name, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			case 2: // a pod ends
				if len(pods) == 0 {
					continue
				}
				i := rng.IntN(len(pods))
				p := getPod(t, client, pods[i])
				p.Status.Phase = []corev1.PodPhase{corev1.PodSucceeded, corev1.PodFailed}[rng.IntN(2)]
				if _, err := client.Server.UpdateStatus(ctx, podsGVR, p); err != nil {
					t.Fatal(err)
				}
			case 3: // an update that changes no usage
				if len(pods) == 0 {
					continue
				}
				p := getPod(t, client, pods[rng.IntN(len(pods))])
				p.Labels = map[string]string{"round": fmt.Sprint(round)}
				if _, err := client.Update(ctx, podsGVR, p); err != nil {
					t.Fatal(err)
				}
			case 4: // delete a configmap, if any is left
				ns := namespaces[rng.IntN(len(namespaces))]
				name := fmt.Sprintf("cm%d", rng.IntN(5))
				if err := client.Delete(ctx, configsGVR, ns, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					t.Fatal(err)
				}
			case 5: // a quota gains or loses a limit
				mutateQuota(t, client, namespaces[rng.IntN(len(namespaces))], "compute", func(rq *corev1.ResourceQuota) {
					if _, ok := rq.Spec.Hard["limits.cpu"]; ok {
						delete(rq.Spec.Hard, "limits.cpu")
					} else {
						rq.Spec.Hard["limits.cpu"] = rl("limits.cpu", "50")["limits.cpu"]
					}
				})
			case 6: // a scoped quota changes the class it selects
				class := classes[1+rng.IntN(2)]
				mutateQuota(t, client, namespaces[rng.IntN(len(namespaces))], "high", func(rq *corev1.ResourceQuota) {
					rq.Spec.ScopeSelector.MatchExpressions[0].Values = []string{class}
				})
			case 7: // watches end, history is compacted: informers relist
				client.Compact()
				client.CloseAllWatches()
			case 8: // watches fail and the next lists fail too
				client.FailNextLists(3, injected)
				client.FailAllWatches(injected)
			}
			if round%10 == 9 {
				time.Sleep(3 * time.Minute) // past any relist backoff (at most 30s, jittered up to 60s)
				synctest.Wait()
				checkAll(t, client, namespaces, fmt.Sprintf("round %d", round))
			}
		}
	})
}

func getPod(t *testing.T, c *testClient, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	obj, err := c.Get(context.Background(), podsGVR, p.Namespace, p.Name)
	if err != nil {
		t.Fatal(err)
	}
	return obj.(*corev1.Pod)
}

// mutateQuota applies mutate to the quota and updates it, again on a
// conflict with the controller's status writes.
func mutateQuota(t *testing.T, c *testClient, ns, name string, mutate func(*corev1.ResourceQuota)) {
	t.Helper()
	for {
		rq := getNamedQuota(t, c, ns, name)
		mutate(rq)
		_, err := c.Update(context.Background(), quotasGVR, rq)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			t.Fatal(err)
		}
	}
}

func getNamedQuota(t *testing.T, c *testClient, ns, name string) *corev1.ResourceQuota {
	t.Helper()
	obj, err := c.Get(context.Background(), quotasGVR, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return obj.(*corev1.ResourceQuota)
}

// checkAll compares the status of every quota with the usage computed from
// the API's current state.
func checkAll(t *testing.T, c *testClient, namespaces []string, when string) {
	t.Helper()
	listers := func(gvr schema.GroupVersionResource) (generic.ListFuncByNamespace, error) {
		return func(ns string) ([]runtime.Object, error) {
			var err error
			for range 5 { // injected list failures may still be pending
				var list runtime.Object
				if list, err = c.Server.List(context.Background(), gvr, ns, metav1.ListOptions{}); err == nil {
					return meta.ExtractList(list)
				}
			}
			return nil, err
		}, nil
	}
	registry, err := evaluator.NewRegistry(listers, evaluator.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range namespaces {
		for _, name := range []string{"compute", "high"} {
			rq := getNamedQuota(t, c, ns, name)
			want, err := quota.CalculateUsage(ns, rq.Spec.Scopes, rq.Spec.Hard, registry, rq.Spec.ScopeSelector)
			if err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(rq.Spec.Hard, rq.Status.Hard) {
				t.Errorf("%s: %s/%s: status.hard %v, spec.hard %v", when, ns, name, rq.Status.Hard, rq.Spec.Hard)
			}
			if !quota.Equals(want, rq.Status.Used) {
				t.Errorf("%s: %s/%s: status.used %v, want %v", when, ns, name, rq.Status.Used, want)
			}
		}
	}
}
