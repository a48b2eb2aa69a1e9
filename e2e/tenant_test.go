package e2e_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/quotakit/quotakit"
	"github.com/quotakit/quotakit/clusterquota"
	"github.com/quotakit/quotakit/e2e/internal/cluster"
	"github.com/quotakit/quotakit/kube"
)

// The test of this file checks that tenants and operators can see quota
// across namespaces (issue 34): a tenant's user reads the cluster quotas
// that apply to its namespace through the AppliedClusterQuota copies and
// nothing else, the hard and used gauges follow creations, and a
// ClusterQuota gets Events when its spec turns invalid and valid again.
//
// The quotakit-controller command does not run the copies' writer or the
// gauges yet: the test runs the library's parts in this process against
// the shared kube-apiserver, as a program that embeds them would: the
// controller with Options.ClusterQuotas and an Event recorder (client-go's,
// as the command uses), and kube.AppliedQuotaWriter and
// kube.ClusterQuotaCollector over the kube bridge's informers.

var appliedQuotasGVR = clusterquota.AppliedClusterQuotas

// TestTenant: two tenants, a (two namespaces) and b (one), each with a
// ClusterQuota; a user of a's first namespace only, bound there to the
// built-in view ClusterRole, into which kube-controller-manager aggregates
// the shipped ClusterRole.
func TestTenant(t *testing.T) {
	ctx := t.Context()
	cfg := env.api.Config()
	cs := clientset(t, cfg)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	installClusterQuotaCRD(t, dyn)
	applyAppliedQuotas(t, dyn)
	aggregateView(t, cs)

	a1, a2, b1 := namespace(t, cs), namespace(t, cs), namespace(t, cs)
	tenantA, tenantB := a1+"-a", a1+"-b" // label values unique to the run
	for ns, v := range map[string]string{a1: tenantA, a2: tenantA, b1: tenantB} {
		labelNamespace(t, cs, ns, tenantLabel, v)
	}
	t.Cleanup(func() {
		for _, ns := range []string{a1, a2, b1} {
			labelNamespace(t, cs, ns, tenantLabel, "ended")
		}
	})
	quotaA, quotaB := "e2e-tenant-view-a", "e2e-tenant-view-b"
	for name, v := range map[string]string{quotaA: tenantA, quotaB: tenantB} {
		createClusterQuota(t, dyn, &clusterquota.ClusterQuota{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: clusterquota.ClusterQuotaSpec{
				Selector: clusterquota.ClusterQuotaSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{tenantLabel: v}}},
				Quota:    corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")}},
			},
		})
	}
	reg := runTenantView(t, cfg, cs)

	const user = "e2e-tenant-alice"
	if _, err := cs.RbacV1().RoleBindings(a1).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "alice-view"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tenantCfg := rest.CopyConfig(cfg)
	tenantCfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	tenant, err := dynamic.NewForConfig(tenantCfg)
	if err != nil {
		t.Fatal(err)
	}

	// The user reads the one copy in its namespace: its quota's.
	var copies []clusterquota.AppliedClusterQuota
	waitFor(t, 30*time.Second, "the tenant reading "+quotaA+"'s copy in "+a1, func() bool {
		copies = listApplied(t, tenant, a1)
		return len(copies) == 1 && len(copies[0].Status.Total.Hard) > 0
	})
	if got := copies[0]; got.Name != quotaA || got.Spec.Quota.Hard.Pods().Value() != 10 {
		t.Fatalf("the tenant reads %s with hard pods %v, want %s with 10", got.Name, got.Spec.Quota.Hard.Pods(), quotaA)
	}
	if _, err := tenant.Resource(appliedQuotasGVR).Namespace(a1).Get(ctx, quotaA, metav1.GetOptions{}); err != nil {
		t.Errorf("the tenant getting %s in %s: %v", quotaA, a1, err)
	}
	// And nothing else: no cluster quota, no copy elsewhere (its own
	// tenant's other namespace included, which it has no role in), no
	// write.
	refused := map[string]error{}
	_, refused["get clusterquota "+quotaA] = tenant.Resource(clusterQuotasGVR).Get(ctx, quotaA, metav1.GetOptions{})
	_, refused["list clusterquotas"] = tenant.Resource(clusterQuotasGVR).List(ctx, metav1.ListOptions{})
	_, refused["list appliedclusterquotas in "+a2] = tenant.Resource(appliedQuotasGVR).Namespace(a2).List(ctx, metav1.ListOptions{})
	_, refused["get appliedclusterquota "+quotaB+" in "+b1] = tenant.Resource(appliedQuotasGVR).Namespace(b1).Get(ctx, quotaB, metav1.GetOptions{})
	_, refused["list appliedclusterquotas in every namespace"] = tenant.Resource(appliedQuotasGVR).List(ctx, metav1.ListOptions{})
	refused["delete appliedclusterquota "+quotaA+" in "+a1] = tenant.Resource(appliedQuotasGVR).Namespace(a1).Delete(ctx, quotaA, metav1.DeleteOptions{})
	u := &unstructured.Unstructured{}
	u.SetUnstructuredContent(mustContent(t, &copies[0]))
	_, refused["update appliedclusterquota "+quotaA+" in "+a1] = tenant.Resource(appliedQuotasGVR).Namespace(a1).Update(ctx, u, metav1.UpdateOptions{})
	for what, err := range refused {
		if !apierrors.IsForbidden(err) {
			t.Errorf("the tenant's %s: %v, want Forbidden", what, err)
		}
	}
	waitFor(t, 30*time.Second, "copies of "+quotaA+" in "+a2+" and "+quotaB+" in "+b1, func() bool {
		return names(listApplied(t, dyn, a2)) == quotaA && names(listApplied(t, dyn, b1)) == quotaB
	})

	// The gauges, and the copy, follow creations.
	if got := gauge(t, reg, "quotakit_clusterquota_hard", quotaA); got != 10 {
		t.Errorf("quotakit_clusterquota_hard{%s, pods} = %v, want 10", quotaA, got)
	}
	waitFor(t, 30*time.Second, "quotakit_clusterquota_used of "+quotaA+" at 0", func() bool { return gauge(t, reg, "quotakit_clusterquota_used", quotaA) == 0 })
	for i, ns := range []string{a1, a1, a1, a2, a2} {
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, simplePod(fmt.Sprintf("p-%d", i)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	waitFor(t, 30*time.Second, "quotakit_clusterquota_used of "+quotaA+" at 5", func() bool { return gauge(t, reg, "quotakit_clusterquota_used", quotaA) == 5 })
	t.Logf("quotakit_clusterquota_used{%s, pods} at 5 %v after the fifth creation", quotaA, time.Since(start).Round(time.Millisecond))
	if got := gauge(t, reg, "quotakit_clusterquota_used", quotaB); got != 0 {
		t.Errorf("quotakit_clusterquota_used{%s, pods} = %v, want 0", quotaB, got)
	}
	waitFor(t, 30*time.Second, "the tenant's copy at 5 pods used in total, 3 in "+a1, func() bool {
		c := listApplied(t, tenant, a1)
		return len(c) == 1 && c[0].Status.Total.Used.Pods().Value() == 5 &&
			len(c[0].Status.Namespaces) == 1 && c[0].Status.Namespaces[0].Status.Used.Pods().Value() == 3
	})
	t.Logf("the tenant's copy at 5 pods %v after the fifth creation", time.Since(start).Round(time.Millisecond))

	// Invalid, then valid again: a Warning Event, then a Normal one; the
	// copies go while the quota selects nothing, and come back.
	withOpenCRD(t, dyn, func() {
		updateSelector(t, dyn, quotaA, &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: tenantLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{tenantA, "b c"}},
		}})
	})
	waitEvent(t, cs, quotaA, corev1.EventTypeWarning, clusterquota.ReasonInvalidSpec)
	waitFor(t, 30*time.Second, "the copies of the invalid quota deleted", func() bool { return len(listApplied(t, dyn, a1)) == 0 })
	updateSelector(t, dyn, quotaA, &metav1.LabelSelector{MatchLabels: map[string]string{tenantLabel: tenantA}})
	waitEvent(t, cs, quotaA, corev1.EventTypeNormal, clusterquota.ReasonValid)
	waitFor(t, 30*time.Second, "the tenant reading the copy again", func() bool { return names(listApplied(t, tenant, a1)) == quotaA })
}

// runTenantView runs, until the test ends, the controller with
// ClusterQuotas and its Events recorded through client-go's broadcaster,
// the copies' writer (interval 1s) and the gauges, registered in the
// registry it returns.
func runTenantView(t *testing.T, cfg *rest.Config, cs kubernetes.Interface) *prometheus.Registry {
	t.Helper()
	events := record.NewBroadcaster()
	events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	t.Cleanup(events.Shutdown)
	runController(t, quotakit.Options{
		ClusterQuotas: true,
		Events:        events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "quotakit-e2e"}),
	})

	client, err := kube.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	quotas, namespaces := client.ClusterQuotaInformer(), client.NamespaceInformer()
	index, err := kube.ClusterQuotaIndex(quotas, namespaces)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w, err := kube.NewAppliedQuotaWriter(dyn, quotas, namespaces, index, kube.AppliedQuotaWriterOptions{Interval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	collector, err := kube.NewClusterQuotaCollector(quotas.GetStore(), kube.ClusterQuotaCollectorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(collector)

	// The writer's errors go to the test's log.
	log := funcr.New(func(prefix, args string) { t.Log(prefix, args) }, funcr.Options{})
	ctx, cancel := context.WithCancel(logr.NewContext(context.WithoutCancel(t.Context()), log))
	var wg sync.WaitGroup
	wg.Go(func() { quotas.Run(ctx) })
	wg.Go(func() { namespaces.Run(ctx) })
	wg.Go(func() {
		if err := w.Run(ctx); err != nil {
			t.Errorf("AppliedQuotaWriter: %v", err)
		}
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		t.Logf("AppliedQuotaWriter: %+v", w.Stats())
	})
	return reg
}

// applyAppliedQuotas creates what kube/deploy/applied-cluster-quotas
// renders (the AppliedClusterQuota CRD and the ClusterRole aggregated to
// view), or updates it, and waits until the copies are served.
func applyAppliedQuotas(t *testing.T, dyn dynamic.Interface) {
	t.Helper()
	ctx := t.Context()
	dir := filepath.Join("..", "kube", "deploy", "applied-cluster-quotas")
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	for _, r := range m.Resources() {
		obj, err := r.Map()
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: obj}
		gvk := u.GroupVersionKind()
		var rc dynamic.ResourceInterface
		switch gvk.Kind {
		case "CustomResourceDefinition":
			rc = dyn.Resource(crdsGVR)
		case "ClusterRole":
			rc = dyn.Resource(rbacv1.SchemeGroupVersion.WithResource("clusterroles"))
		default:
			t.Fatalf("%s renders a %v, want only a CRD and ClusterRoles", dir, gvk)
		}
		_, err = rc.Create(ctx, u, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			cur, gerr := rc.Get(ctx, u.GetName(), metav1.GetOptions{})
			if gerr != nil {
				t.Fatal(gerr)
			}
			u.SetResourceVersion(cur.GetResourceVersion())
			_, err = rc.Update(ctx, u, metav1.UpdateOptions{})
		}
		if err != nil {
			t.Fatalf("applying %s %s: %v", gvk.Kind, u.GetName(), err)
		}
	}
	waitFor(t, 60*time.Second, "appliedclusterquotas served", func() bool {
		_, err := dyn.Resource(appliedQuotasGVR).List(ctx, metav1.ListOptions{})
		return err == nil
	})
}

// shippedViewRole is the ClusterRole of kube/deploy/applied-cluster-quotas
// that grants reading the copies, labelled to be aggregated into view.
const shippedViewRole = "quotakit-applied-cluster-quotas-view"

// aggregateView starts kube-controller-manager with its ClusterRole
// aggregation controller alone, which stops when the test ends, and waits
// until the built-in view ClusterRole holds every rule of the shipped
// ClusterRole, as it does in a cluster that runs the controller manager.
//
// The controller keeps view (and admin, edit and the other aggregated
// roles) in step with the roles its selectors pick, and nothing puts the
// rules back when it stops: the aggregated view is what any cluster has,
// and the shared one keeps it for the tests that follow.
func aggregateView(t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	ctx := t.Context()
	roles := cs.RbacV1().ClusterRoles()
	view, err := roles.Get(ctx, "view", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if view.AggregationRule == nil || len(view.AggregationRule.ClusterRoleSelectors) == 0 {
		t.Fatalf("the view ClusterRole has no aggregation rule: %+v", view.AggregationRule)
	}
	shipped, err := roles.Get(ctx, shippedViewRole, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	selected := false
	for _, sel := range view.AggregationRule.ClusterRoleSelectors {
		s, err := metav1.LabelSelectorAsSelector(&sel)
		if err != nil {
			t.Fatal(err)
		}
		selected = selected || s.Matches(labels.Set(shipped.Labels))
	}
	if !selected {
		t.Fatalf("the view ClusterRole's aggregation rule does not select %s (labels %v)", shippedViewRole, shipped.Labels)
	}

	// A directory of the test's own: the churn test's controller manager
	// writes its files and appends its log under env.dir.
	cm, err := cluster.StartControllerManager(ctx, env.bins.ControllerManager, env.api, filepath.Join(env.dir, "tenant"), cluster.ControllerManagerOptions{
		Controllers: []string{"clusterrole-aggregation-controller"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cm.Stop)

	const timeout = 60 * time.Second
	start := time.Now()
	var missing []rbacv1.PolicyRule
	aggregated := poll(timeout, func() bool {
		cur, err := roles.Get(ctx, "view", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// The controller copies each selected rule as it is, dropping
		// only exact duplicates, so every rule of the shipped role shows
		// up unchanged.
		missing = missing[:0]
		for _, r := range shipped.Rules {
			if !slices.ContainsFunc(cur.Rules, func(v rbacv1.PolicyRule) bool { return equality.Semantic.DeepEqual(v, r) }) {
				missing = append(missing, r)
			}
		}
		return len(missing) == 0
	})
	if !aggregated {
		exited, exitErr := cm.Exited()
		t.Fatalf("timed out after %v waiting for kube-controller-manager (pid %d, exited %v %v) to aggregate %s into the view ClusterRole; view lacks its rules %+v\n%s",
			timeout, cm.Pid(), exited, exitErr, shippedViewRole, missing, cm.Log())
	}
	t.Logf("view aggregated %v after kube-controller-manager started (pid %d)", time.Since(start).Round(time.Millisecond), cm.Pid())
}

// listApplied lists the AppliedClusterQuotas of ns through dyn, failing
// the test on error.
func listApplied(t *testing.T, dyn dynamic.Interface, ns string) []clusterquota.AppliedClusterQuota {
	t.Helper()
	list, err := dyn.Resource(appliedQuotasGVR).Namespace(ns).List(context.WithoutCancel(t.Context()), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing appliedclusterquotas in %s: %v", ns, err)
	}
	out := make([]clusterquota.AppliedClusterQuota, len(list.Items))
	for i := range list.Items {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(list.Items[i].Object, &out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// names joins the names of copies with commas.
func names(copies []clusterquota.AppliedClusterQuota) string {
	var out []string
	for _, c := range copies {
		out = append(out, c.Name)
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

func mustContent(t *testing.T, obj any) map[string]any {
	t.Helper()
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return content
}

// gauge returns the value of the series of family for the pods of
// quota in reg, or -1 when there is none.
func gauge(t *testing.T, reg *prometheus.Registry, family, quota string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != family {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["clusterquota"] == quota && labels["resource"] == "pods" {
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}

// updateSelector sets the label selector of the ClusterQuota name.
func updateSelector(t *testing.T, dyn dynamic.Interface, name string, sel *metav1.LabelSelector) {
	t.Helper()
	for {
		cq := getClusterQuota(t, dyn, name)
		cq.Spec.Selector.LabelSelector = sel
		_, err := dyn.Resource(clusterQuotasGVR).Update(t.Context(), unstructuredClusterQuota(t, cq), metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			t.Fatalf("updating the selector of %s: %v", name, err)
		}
		return
	}
}

// waitEvent waits for an Event of type and reason on the ClusterQuota
// name, which client-go's recorder puts in namespace default, as for any
// object without a namespace.
func waitEvent(t *testing.T, cs kubernetes.Interface, name, eventType, reason string) {
	t.Helper()
	selector := fields.Set{"involvedObject.kind": "ClusterQuota", "involvedObject.name": name, "type": eventType, "reason": reason}.String()
	var last *corev1.Event
	waitFor(t, 30*time.Second, fmt.Sprintf("a %s Event %s on ClusterQuota %s", eventType, reason, name), func() bool {
		list, err := cs.CoreV1().Events(metav1.NamespaceDefault).List(t.Context(), metav1.ListOptions{FieldSelector: selector})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) > 0 {
			last = &list.Items[len(list.Items)-1]
		}
		return last != nil
	})
	t.Logf("%s Event %s on %s: %q", eventType, reason, name, last.Message)
}
