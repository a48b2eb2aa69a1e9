package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/quotakit/quotakit/evaluator"
	"github.com/quotakit/quotakit/generic"
	"github.com/quotakit/quotakit/quota"
)

// quantities compares quantities by value: 100m and 0.1 are equal.
var quantities = cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })

// recounter computes what a quota's status.used must be, from scratch: the
// library's evaluators over a fresh LIST of every resource, made for the
// occasion with the typed clientset (for the resources whose evaluators
// read whole objects) or the metadata client (for counted ones), never
// through the controller's caches or the kube bridge.
type recounter struct {
	typed    kubernetes.Interface
	metadata metadata.Interface
	// counted are the resources outside the core table that quotas
	// charge as count/<resource>.<group>.
	counted []schema.GroupVersionResource
}

// newRecounter returns a recounter over fresh clients of the API server of
// cfg, for the core resources.
func newRecounter(t *testing.T, cfg *rest.Config) *recounter {
	t.Helper()
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &recounter{typed: clientset(t, cfg), metadata: md}
}

// registry returns a registry whose evaluators list from the API at the
// moment they are asked.
func (r *recounter) registry(ctx context.Context) (quota.Registry, error) {
	listers := func(gvr schema.GroupVersionResource) (generic.ListFuncByNamespace, error) {
		return func(ns string) ([]runtime.Object, error) { return r.list(ctx, gvr, ns) }, nil
	}
	evaluators, err := evaluator.NewEvaluators(listers, evaluator.Options{})
	if err != nil {
		return nil, err
	}
	for _, gvr := range r.counted {
		list, _ := listers(gvr)
		evaluators = append(evaluators, generic.NewObjectCountEvaluator(gvr.GroupResource(), list, ""))
	}
	return generic.NewRegistry(evaluators...), nil
}

func (r *recounter) list(ctx context.Context, gvr schema.GroupVersionResource, ns string) ([]runtime.Object, error) {
	var (
		obj runtime.Object
		err error
	)
	opts := metav1.ListOptions{}
	switch gvr.GroupResource().String() {
	case "pods":
		obj, err = r.typed.CoreV1().Pods(ns).List(ctx, opts)
	case "services":
		obj, err = r.typed.CoreV1().Services(ns).List(ctx, opts)
	case "persistentvolumeclaims":
		obj, err = r.typed.CoreV1().PersistentVolumeClaims(ns).List(ctx, opts)
	case "resourceclaims.resource.k8s.io":
		obj, err = r.typed.ResourceV1().ResourceClaims(ns).List(ctx, opts)
	case "deviceclasses.resource.k8s.io":
		obj, err = r.typed.ResourceV1().DeviceClasses().List(ctx, opts)
	default:
		obj, err = r.metadata.Resource(gvr).Namespace(ns).List(ctx, opts)
	}
	if err != nil {
		return nil, fmt.Errorf("list %s in %q: %w", gvr, ns, err)
	}
	items, err := meta.ExtractList(obj)
	if err != nil {
		return nil, err
	}
	// ExtractList returns pointers into the list's items for typed
	// lists; the list is not kept, so they are the caller's.
	return items, nil
}

// quotaMismatches returns, for every quota in ns whose status is not what
// a recount says, the difference; an empty result means every status is
// right: status.hard equals spec.hard and status.used equals the usage
// of every hard resource.
func (r *recounter) quotaMismatches(ctx context.Context, ns string) ([]string, error) {
	quotas, err := r.typed.CoreV1().ResourceQuotas(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	reg, err := r.registry(ctx)
	if err != nil {
		return nil, err
	}
	var diffs []string
	for _, q := range quotas.Items {
		used, err := quota.CalculateUsage(ns, q.Spec.Scopes, q.Spec.Hard, reg, q.Spec.ScopeSelector)
		if err != nil {
			return nil, fmt.Errorf("recount of %s: %w", q.Name, err)
		}
		want := corev1.ResourceQuotaStatus{Hard: q.Spec.Hard, Used: quota.Mask(used, quota.ResourceNames(q.Spec.Hard))}
		if d := cmp.Diff(want, q.Status, quantities); d != "" {
			diffs = append(diffs, fmt.Sprintf("%s (-recount +status):\n%s", q.Name, d))
		}
	}
	return diffs, nil
}

// waitQuotasRight waits until every quota of ns has the status a recount
// gives, and fails the test with the differences if they do not within
// timeout.
func (r *recounter) waitQuotasRight(t *testing.T, ns string, timeout time.Duration, what string) {
	t.Helper()
	var last []string
	var lastErr error
	ok := poll(timeout, func() bool {
		last, lastErr = r.quotaMismatches(t.Context(), ns)
		return lastErr == nil && len(last) == 0
	})
	if !ok {
		t.Fatalf("%s: quota statuses differ from a recount after %v (error %v):\n%s", what, timeout, lastErr, strings.Join(last, "\n"))
	}
}
