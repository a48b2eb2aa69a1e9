package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/quotakit/quotakit"
	"github.com/quotakit/quotakit/admission"
	"github.com/quotakit/quotakit/cache"
	"github.com/quotakit/quotakit/evaluator"
	"github.com/quotakit/quotakit/generic"
	"github.com/quotakit/quotakit/kube"
	"github.com/quotakit/quotakit/quota"
)

// widgetSize is a resource name only quotakit charges: the sum of the
// spec.size of a namespace's widgets. kube-apiserver's own ResourceQuota
// admission has no evaluator that charges it, so any decision about it is
// the webhook's.
const widgetSize corev1.ResourceName = "e2e.quotakit.io/size"

// sizeEvaluator charges widgets their spec.size as widgetSize. It reads
// whole objects, so the controller lists widgets through the dynamic
// client (unstructured), and the webhook gets them decoded as
// unstructured. Scopes are not supported. Counting (Handles, Constraints,
// the scope methods) is the object-count evaluator's.
type sizeEvaluator struct {
	*generic.ObjectCountEvaluator
	list generic.ListFuncByNamespace
}

func newSizeEvaluator(list generic.ListFuncByNamespace) quota.Evaluator {
	return &sizeEvaluator{ObjectCountEvaluator: generic.NewObjectCountEvaluator(widgets.GroupResource(), list, ""), list: list}
}

func (e *sizeEvaluator) MatchingResources(input []corev1.ResourceName) []corev1.ResourceName {
	return quota.Intersection(input, []corev1.ResourceName{widgetSize})
}

func (e *sizeEvaluator) Matches(q *corev1.ResourceQuota, item runtime.Object) (bool, error) {
	return generic.Matches(q, item, e.MatchingResources, generic.MatchesNoScopeFunc)
}

func (e *sizeEvaluator) Usage(item runtime.Object) (corev1.ResourceList, error) {
	u, ok := item.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("size evaluator: %T is not unstructured", item)
	}
	size, _, err := unstructured.NestedInt64(u.Object, "spec", "size")
	if err != nil {
		return nil, fmt.Errorf("size evaluator: %w", err)
	}
	return corev1.ResourceList{widgetSize: *resource.NewQuantity(size, resource.DecimalSI)}, nil
}

func (e *sizeEvaluator) UsageStats(opts quota.UsageStatsOptions) (quota.UsageStats, error) {
	return generic.CalculateUsageStats(opts, e.list, generic.MatchesNoScopeFunc, e.Usage)
}

// quotaClient is admission.QuotaClient over a clientset.
type quotaClient struct{ cs kubernetes.Interface }

func (c quotaClient) ListQuotas(ctx context.Context, ns string) ([]corev1.ResourceQuota, error) {
	l, err := c.cs.CoreV1().ResourceQuotas(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

func (c quotaClient) UpdateQuotaStatus(ctx context.Context, q *corev1.ResourceQuota) (*corev1.ResourceQuota, error) {
	return c.cs.CoreV1().ResourceQuotas(q.Namespace).UpdateStatus(ctx, q, metav1.UpdateOptions{})
}

// startWebhook serves admission.Handler over TLS on loopback, with quotas
// read through a quotakit informer and written through the clientset, and
// returns its URL. It stops when the test ends.
func startWebhook(t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	client, err := kube.NewForConfig(env.api.Config(), quotakit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	quotas := cache.NewSharedIndexInformer(client.ListerWatcher(corev1.SchemeGroupVersion.WithResource("resourcequotas"), ""), &corev1.ResourceQuota{}, cache.SharedIndexInformerOptions{})
	lister := func(ns string) ([]*corev1.ResourceQuota, error) {
		objs, err := quotas.GetIndexer().ByIndex(cache.NamespaceIndex, ns)
		if err != nil {
			return nil, err
		}
		out := make([]*corev1.ResourceQuota, 0, len(objs))
		for _, o := range objs {
			out = append(out, o.(*corev1.ResourceQuota))
		}
		return out, nil
	}
	core, err := evaluator.NewEvaluators(nil, evaluator.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := admission.NewEvaluator(
		admission.NewAccessor(lister, quotas.HasSynced, quotaClient{cs}, admission.AccessorOptions{}),
		admission.Options{
			Registry: generic.NewRegistry(append(core, newSizeEvaluator(nil))...),
			// Like kube-apiserver's ResourceQuotaConfiguration: a widget
			// that would be charged a size needs a quota that covers it.
			LimitedResources: []quota.LimitedResource{{
				APIGroup: widgets.Group, Resource: widgets.Resource, MatchContains: []string{string(widgetSize)},
			}},
		})
	if err != nil {
		t.Fatal(err)
	}
	return serveEvaluator(t, quotas, e).String() + "/validate"
}

// serveEvaluator serves admission.Handler over e on /validate, over TLS
// on loopback, runs e and its quota informer, waits for the informer to
// sync, and returns the server's base URL. Everything stops when the
// test ends.
func serveEvaluator(t *testing.T, quotas *cache.SharedIndexInformer, e *admission.Evaluator) *url.URL {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("POST /validate", &admission.Handler{Evaluator: e})
	u := serveTLS(t, mux)
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	var wg sync.WaitGroup
	wg.Go(func() { quotas.Run(ctx) })
	wg.Go(func() {
		if err := e.Run(ctx); err != nil && ctx.Err() == nil {
			t.Errorf("admission evaluator: %v", err)
		}
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	if !cache.WaitForCacheSync(t.Context(), quotas.HasSynced) {
		t.Fatal("quota informer did not sync")
	}
	return u
}

// TestWebhook registers admission.Handler with kube-apiserver through a
// ValidatingWebhookConfiguration, served over TLS on loopback, for widgets
// in namespaces labelled for it. Its quotas name widgetSize only, which
// kube-apiserver's own ResourceQuota admission does not charge, so every
// denial here is the webhook's (kube-apiserver says whose); the quota
// controller, with the same evaluator, keeps the status right after the
// webhook's charges and a deletion.
func TestWebhook(t *testing.T) {
	ctx := t.Context()
	cfg := env.api.Config()
	cs := clientset(t, cfg)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ensureClusterObjects(t, cs, dyn)
	const label = "quotakit-e2e-webhook"
	limitedNS, quotaNS, offNS := namespace(t, cs), namespace(t, cs), namespace(t, cs)
	for _, ns := range []string{limitedNS, quotaNS} {
		n, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Labels[label] = "on"
		if _, err := cs.CoreV1().Namespaces().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	q := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{widgetSize: resource.MustParse("10")}},
	}
	if _, err := cs.CoreV1().ResourceQuotas(quotaNS).Create(ctx, q, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	runController(t, quotakit.Options{
		Namespace: quotaNS,
		Resources: []quotakit.Resource{{Resource: widgets, Evaluator: newSizeEvaluator}},
		// The size evaluator is the caller's, whose arrivals the ledger
		// does not count: a widget that arrives in the sync that sees
		// another deleted is taken for one still on its way, and held
		// for one window.
		ChargeWindow: exactWindow,
	})
	usedSize := func() (status, recount int64) {
		q, err := cs.CoreV1().ResourceQuotas(quotaNS).Get(ctx, "widgets", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		l, err := dyn.Resource(widgets).Namespace(quotaNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range l.Items {
			size, _, _ := unstructured.NestedInt64(w.Object, "spec", "size")
			recount += size
		}
		used, ok := q.Status.Used[widgetSize]
		if !ok {
			return -1, recount
		}
		return used.Value(), recount
	}
	waitUsed := func(want int64) {
		t.Helper()
		waitFor(t, 30*time.Second, fmt.Sprintf("status.used %s = %d = the recount", widgetSize, want), func() bool {
			status, recount := usedSize()
			return status == want && recount == want
		})
	}
	waitUsed(0)

	url := startWebhook(t, cs)
	hook := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "quota.e2e.quotakit.io"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:         "quota.e2e.quotakit.io",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: env.api.CA.PEM},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{
					APIGroups: []string{widgets.Group}, APIVersions: []string{widgets.Version}, Resources: []string{widgets.Resource},
					Scope: ptr.To(admissionregistrationv1.NamespacedScope),
				},
			}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{label: "on"}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNoneOnDryRun),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](10),
		}},
	}
	register(t, cs, hook)

	create := func(ns, name string, size int64, dryRun bool) error {
		opts := metav1.CreateOptions{}
		if dryRun {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		_, err := dyn.Resource(widgets).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "e2e.quotakit.io/v1", "kind": "Widget",
			"metadata": map[string]any{"name": name},
			"spec":     map[string]any{"size": size},
		}}, opts)
		return err
	}
	const byWebhook = `admission webhook "quota.e2e.quotakit.io" denied the request: `
	deniedWith := func(err error, msg string) bool {
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), byWebhook) && strings.Contains(err.Error(), msg)
	}
	// kube-apiserver reads webhook configurations from an informer; a
	// dry run shows when it calls this one, and changes nothing.
	limitedMsg := "insufficient quota to consume: " + string(widgetSize)
	var probe error
	if !poll(30*time.Second, func() bool {
		probe = create(limitedNS, "probe", 1, true)
		return deniedWith(probe, limitedMsg)
	}) {
		t.Fatalf("kube-apiserver did not call the webhook within 30s: a dry run in a namespace without quota got %v", probe)
	}

	if err := create(limitedNS, "w", 1, false); !deniedWith(err, limitedMsg) {
		t.Errorf("widget in a namespace without a covering quota: got %v, want the webhook's %q", err, limitedMsg)
	}
	if err := create(offNS, "w", 100, false); err != nil {
		t.Errorf("widget in a namespace the webhook does not serve: %v; kube-apiserver alone admits it", err)
	}
	for i, size := range []int64{4, 5} {
		if err := create(quotaNS, fmt.Sprintf("w%d", i), size, false); err != nil {
			t.Fatalf("widget of size %d within quota: %v", size, err)
		}
	}
	waitUsed(9)
	over := fmt.Sprintf("exceeded quota: widgets, requested: %s=2, used: %s=9, limited: %s=10", widgetSize, widgetSize, widgetSize)
	if err := create(quotaNS, "too-big", 2, false); !deniedWith(err, over) {
		t.Fatalf("widget over quota: got %v, want the webhook's %q", err, over)
	}
	if err := create(quotaNS, "fits", 1, false); err != nil {
		t.Fatalf("widget that fills the quota: %v", err)
	}
	waitUsed(10)
	if err := dyn.Resource(widgets).Namespace(quotaNS).Delete(ctx, "w0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The controller gives the deleted widget's 4 back; only then does
	// the webhook admit another.
	waitUsed(6)
	if err := create(quotaNS, "after-delete", 4, false); err != nil {
		t.Fatalf("widget after a deletion freed its size: %v", err)
	}
	waitUsed(10)
}
