package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/quotakit/quotakit/clusterquota"
)

// TestClusterQuotaInvalidStored: a ClusterQuota with an invalid selector
// stored through a CRD from before validation (here: the shipped CRD with
// its spec schema opened up), then the shipped CRD applied again, harms
// only itself. The quotakit-controller command with -cluster-quotas admits
// every pod of the namespaces the invalid quota would select, still
// enforces a valid quota beside it, writes Valid=False with the reason on
// the invalid one, and counts it in the controller's and admission's
// metrics. Before, every pod creation the webhook saw was denied with a
// 500.
func TestClusterQuotaInvalidStored(t *testing.T) {
	ctx := t.Context()
	cfg := env.api.Config()
	cs := clientset(t, cfg)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	installClusterQuotaCRD(t, dyn)
	home := namespace(t, cs)
	run := home // a label value unique to the test's pods

	invalid := &clusterquota.ClusterQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-invalid"},
		Spec: clusterquota.ClusterQuotaSpec{
			Selector: clusterquota.ClusterQuotaSelector{LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: tenantLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{"x", "b c"}},
			}}},
			Quota: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}},
		},
	}
	withOpenCRD(t, dyn, func() { createClusterQuota(t, dyn, invalid) })
	// The shipped CRD refuses such an object now; the stored one stays.
	again := invalid.DeepCopy()
	again.Name = "e2e-invalid-again"
	if _, err := dyn.Resource(clusterQuotasGVR).Create(ctx, unstructuredClusterQuota(t, again), metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("creating an invalid ClusterQuota through the shipped CRD: %v, want Invalid", err)
	}
	getClusterQuota(t, dyn, invalid.Name)

	nsX, nsV := namespace(t, cs), namespace(t, cs)
	labelNamespace(t, cs, nsX, tenantLabel, "x")
	labelNamespace(t, cs, nsV, tenantLabel, "v")
	t.Cleanup(func() {
		labelNamespace(t, cs, nsX, tenantLabel, "ended")
		labelNamespace(t, cs, nsV, tenantLabel, "ended")
	})
	createClusterQuota(t, dyn, &clusterquota.ClusterQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-valid"},
		Spec: clusterquota.ClusterQuotaSpec{
			Selector: clusterquota.ClusterQuotaSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{tenantLabel: "v"}}},
			Quota:    corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("2")}},
		},
	})

	in := newInstallation(t, env.api, home, "-namespace=", "-cluster-quotas", "-enforced-namespaces="+tenantLabel)
	r := in.start()
	register(t, cs, tenantWebhook(r.webhook.String()+"/validate"))

	var valid *metav1.Condition
	waitFor(t, 30*time.Second, "Valid=False on the invalid ClusterQuota", func() bool {
		valid = meta.FindStatusCondition(getClusterQuota(t, dyn, invalid.Name).Status.Conditions, clusterquota.ConditionValid)
		return valid != nil && valid.Status == metav1.ConditionFalse
	})
	if valid.Reason != clusterquota.ReasonInvalidSpec || !strings.Contains(valid.Message, "b c") {
		t.Errorf("Valid condition %s %q, want InvalidSpec naming the value", valid.Reason, valid.Message)
	}
	waitFor(t, 30*time.Second, "status.total.hard of the valid ClusterQuota", func() bool {
		return len(getClusterQuota(t, dyn, "e2e-valid").Status.Total.Hard) > 0
	})
	pod := func(name string) *corev1.Pod {
		p := simplePod(name)
		p.Labels = map[string]string{"e2e.quotakit.io/run": run}
		return p
	}
	waitFor(t, 30*time.Second, "reviews reaching the webhook", func() bool {
		if _, err := cs.CoreV1().Pods(nsX).Create(ctx, pod("probe"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Fatalf("a dry run in a namespace of the invalid quota: %v", err)
		}
		return r.webhookRequests(t) > 0
	})

	for i := range 3 {
		if _, err := cs.CoreV1().Pods(nsX).Create(ctx, pod(fmt.Sprintf("x-%d", i)), metav1.CreateOptions{}); err != nil {
			t.Errorf("creation %d in a namespace only the invalid quota selects: %v", i, err)
		}
	}
	admitted := 0
	for i := range 3 {
		_, err := cs.CoreV1().Pods(nsV).Create(ctx, pod(fmt.Sprintf("v-%d", i)), metav1.CreateOptions{})
		switch {
		case err == nil:
			admitted++
		case !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "exceeded quota: clusterquota/e2e-valid"):
			t.Errorf("creation %d under the valid quota: %v, want admission or its refusal", i, err)
		}
	}
	if admitted != 2 {
		t.Errorf("%d of 3 creations admitted under the valid quota of 2 pods, want 2", admitted)
	}
	for _, m := range []string{"quotakit_admission_clusterquotas_invalid", "quotakit_clusterquota_invalid"} {
		if got := r.metricSum(t, m); got != 1 {
			t.Errorf("%s = %v, want 1", m, got)
		}
	}
}

// withOpenCRD runs f while the ClusterQuota CRD accepts any spec, as a
// CRD from before validation did, and applies the shipped CRD again
// afterwards, waiting until it refuses an invalid spec.
func withOpenCRD(t *testing.T, dyn dynamic.Interface, f func()) {
	t.Helper()
	ctx := context.WithoutCancel(t.Context())
	crds := dyn.Resource(crdsGVR)
	const name = "clusterquotas.quota.quotakit.io"
	shipped, err := crds.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	open := shipped.DeepCopy()
	versions, _, _ := unstructured.NestedSlice(open.Object, "spec", "versions")
	for i := range versions {
		v := versions[i].(map[string]any)
		if err := unstructured.SetNestedMap(v, map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true},
			"schema", "openAPIV3Schema", "properties", "spec"); err != nil {
			t.Fatal(err)
		}
		dropValidations(v)
	}
	if err := unstructured.SetNestedSlice(open.Object, versions, "spec", "versions"); err != nil {
		t.Fatal(err)
	}
	if _, err := crds.Update(ctx, open, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("opening the CRD: %v", err)
	}
	restore := func() {
		cur, err := crds.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		spec, _, _ := unstructured.NestedMap(shipped.Object, "spec")
		if err := unstructured.SetNestedMap(cur.Object, spec, "spec"); err != nil {
			t.Fatal(err)
		}
		if _, err := crds.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("applying the shipped CRD again: %v", err)
		}
	}
	defer restore()
	// The API server serves a new schema a moment after the update.
	probe := &clusterquota.ClusterQuota{ObjectMeta: metav1.ObjectMeta{Name: "e2e-open-probe"}, Spec: clusterquota.ClusterQuotaSpec{
		Selector: clusterquota.ClusterQuotaSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"bad key!": "v"}}},
	}}
	waitFor(t, 30*time.Second, "the open CRD served", func() bool {
		_, err := dyn.Resource(clusterQuotasGVR).Create(ctx, unstructuredClusterQuota(t, probe), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil
	})
	f()
	restore()
	waitFor(t, 30*time.Second, "the shipped CRD served again", func() bool {
		_, err := dyn.Resource(clusterQuotasGVR).Create(ctx, unstructuredClusterQuota(t, probe), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return apierrors.IsInvalid(err)
	})
}

// dropValidations removes every CEL rule from a schema, at any depth.
func dropValidations(m map[string]any) {
	delete(m, "x-kubernetes-validations")
	for _, v := range m {
		switch v := v.(type) {
		case map[string]any:
			dropValidations(v)
		case []any:
			for _, e := range v {
				if em, ok := e.(map[string]any); ok {
					dropValidations(em)
				}
			}
		}
	}
}
