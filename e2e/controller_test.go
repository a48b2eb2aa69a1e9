package e2e_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/quotakit/quotakit"
)

// testQuotas are the quotas of the controller tests: every kind of
// resource the library charges, every scope the pods use, a scope
// selector, and the two counted resources it must find by discovery.
func testQuotas() []*corev1.ResourceQuota {
	rl := func(kv ...string) corev1.ResourceList {
		l := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return l
	}
	return []*corev1.ResourceQuota{
		{
			ObjectMeta: metav1.ObjectMeta{Name: "objects"},
			Spec: corev1.ResourceQuotaSpec{Hard: rl(
				"pods", "25", "services", "8", "services.nodeports", "4", "services.loadbalancers", "2",
				"persistentvolumeclaims", "6", "requests.storage", "12Gi",
				"configmaps", "12", "secrets", "8", "count/secrets", "8",
				"count/widgets.e2e.quotakit.io", "7", "count/jobs.batch", "4",
			)},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "compute"},
			Spec: corev1.ResourceQuotaSpec{
				Scopes: []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeNotBestEffort},
				Hard:   rl("pods", "15", "requests.cpu", "2", "requests.memory", "2Gi", "limits.cpu", "3", "limits.memory", "3Gi", "cpu", "2", "memory", "2Gi"),
			},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "best-effort"},
			Spec: corev1.ResourceQuotaSpec{
				Scopes: []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort},
				Hard:   rl("pods", "10"),
			},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "terminating"},
			Spec: corev1.ResourceQuotaSpec{
				Scopes: []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeTerminating},
				Hard:   rl("pods", "5"),
			},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "priority"},
			Spec: corev1.ResourceQuotaSpec{
				ScopeSelector: &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{{
					ScopeName: corev1.ResourceQuotaScopePriorityClass,
					Operator:  corev1.ScopeSelectorOpIn,
					Values:    []string{"e2e-high"},
				}}},
				Hard: rl("pods", "4"),
			},
		},
	}
}

// controllerEnv is one controller under test and the clients around it.
type controllerEnv struct {
	ns  string
	cs  *kubernetes.Clientset
	dyn dynamic.Interface
	rc  *recounter
}

func newControllerEnv(t *testing.T) *controllerEnv {
	t.Helper()
	cfg := env.api.Config()
	cs := clientset(t, cfg)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ensureClusterObjects(t, cs, dyn)
	e := &controllerEnv{ns: namespace(t, cs), cs: cs, dyn: dyn, rc: &recounter{typed: cs, metadata: md, counted: []schema.GroupVersionResource{widgets, jobs}}}
	for _, q := range testQuotas() {
		if _, err := cs.CoreV1().ResourceQuotas(e.ns).Create(t.Context(), q, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// runController runs a controller built with opts over the kube bridge's
// Client of the shared API server until the test ends.
func runController(t *testing.T, opts quotakit.Options) {
	t.Helper()
	runControllerAt(t, env.api.Config(), opts)
}

// TestController runs the quota controller against kube-apiserver through
// the kube bridge, once counting from metadata (the default) and once from
// whole objects (typed where client-go has a typed client, dynamic where
// not), each in a namespace of its own (Options.Namespace). After seeded
// churn of every kind the quotas charge (creations, deletions, pods turned
// terminal through the status subresource, graceful deletions that no
// kubelet finishes, service type changes, quota spec and scope selector
// edits), every quota's status must equal a recount from scratch; then
// kube-apiserver's own ResourceQuota admission, which trusts the statuses
// the controller wrote, must accept and refuse accordingly.
func TestController(t *testing.T) {
	for _, tt := range []struct {
		name  string
		whole bool
		seed  uint64
	}{
		{"metadata", false, 1},
		{"whole objects", true, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newControllerEnv(t)
			runController(t, quotakit.Options{Namespace: e.ns, WholeObjects: tt.whole, ResyncPeriod: -1})
			e.rc.waitQuotasRight(t, e.ns, 30*time.Second, "before any change")
			w := newWorld(t, e.ns, e.cs, e.dyn, tt.seed)
			for round := range 3 {
				for range 60 {
					w.step()
				}
				e.editQuotas(t, round)
				e.rc.waitQuotasRight(t, e.ns, 60*time.Second, fmt.Sprintf("after churn round %d", round))
			}
			t.Logf("%d creations admitted, %d refused by quota", w.created, w.refused)
			w.checkCoverage()
			if w.refused == 0 {
				t.Errorf("no creation was refused: the quotas are too loose to test admission")
			}
			e.checkAdmission(t)
		})
	}
}

// editQuotas edits quota specs: a hard limit, and the scope selector.
func (e *controllerEnv) editQuotas(t *testing.T, round int) {
	t.Helper()
	ctx := t.Context()
	update := func(name string, edit func(q *corev1.ResourceQuota)) {
		for {
			q, err := e.cs.CoreV1().ResourceQuotas(e.ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			edit(q)
			_, err = e.cs.CoreV1().ResourceQuotas(e.ns).Update(ctx, q, metav1.UpdateOptions{})
			if apierrors.IsConflict(err) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	update("objects", func(q *corev1.ResourceQuota) {
		q.Spec.Hard[corev1.ResourceConfigMaps] = *resource.NewQuantity(int64(10+round*3), resource.DecimalSI)
		if round == 1 {
			q.Spec.Hard["count/persistentvolumeclaims"] = resource.MustParse("6")
		}
	})
	update("priority", func(q *corev1.ResourceQuota) {
		values := []string{"e2e-low", "e2e-high"}[round%2 : round%2+1]
		if round == 2 {
			values = []string{"e2e-high", "e2e-low"}
		}
		q.Spec.ScopeSelector.MatchExpressions[0].Values = values
	})
}

// checkAdmission sets a quota's configmaps limit to what the controller
// says is used plus one, and expects kube-apiserver to admit one more
// configmap and refuse the next with its own "exceeded quota" message;
// then deletes one, and expects the controller's recount to let
// kube-apiserver admit one again.
func (e *controllerEnv) checkAdmission(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	qs := e.cs.CoreV1().ResourceQuotas(e.ns)
	q, err := qs.Get(ctx, "objects", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	used := q.Status.Used[corev1.ResourceConfigMaps]
	limit := used.DeepCopy()
	limit.Add(resource.MustParse("1"))
	q.Spec.Hard[corev1.ResourceConfigMaps] = limit
	if _, err := qs.Update(ctx, q, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.rc.waitQuotasRight(t, e.ns, 30*time.Second, "after setting the configmaps limit")

	cms := e.cs.CoreV1().ConfigMaps(e.ns)
	create := func(name string) error {
		_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		return err
	}
	if err := create("admission-fits"); err != nil {
		t.Fatalf("kube-apiserver refused a configmap within the quota the controller wrote: %v", err)
	}
	err = create("admission-exceeds")
	wantMsg := fmt.Sprintf("exceeded quota: objects, requested: configmaps=1, used: configmaps=%s, limited: configmaps=%s", limit.String(), limit.String())
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), wantMsg) {
		t.Fatalf("creating a configmap over quota: got %v, want Forbidden with %q", err, wantMsg)
	}
	if err := cms.Delete(ctx, "admission-fits", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Admission charged only what it admitted: the controller's recount
	// must give the slot back for the next creation to pass.
	e.rc.waitQuotasRight(t, e.ns, 30*time.Second, "after a deletion")
	if err := create("admission-fits-again"); err != nil {
		t.Fatalf("kube-apiserver refused a configmap after the controller recounted a deletion: %v", err)
	}
}
