package e2e_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/quotakit/quotakit/clusterquota"
)

// The tests of this file check quota across namespaces (issue 26) on the
// shared kube-apiserver, whose ResourceQuota plugin is on: the
// ClusterQuota CRD of kube/deploy/crd as the API server serves it, and
// the quotakit-controller command with -cluster-quotas, two processes
// behind one address, keeping a ClusterQuota's status and enforcing it
// from its webhook. kube-apiserver's plugin knows nothing of
// ClusterQuotas, so nothing is charged twice: the plugin charges
// namespaced quotas, the webhook the cluster quota.

// TestClusterQuotaCRD installs the CRD from kube/deploy/crd and checks
// its validation through the API server: a ClusterQuota without a
// selector, with a selector that restricts nothing, or with a negative
// quantity is refused; a valid one is accepted; and status is a
// subresource: a create or an update of the object leaves the status as
// it was, an update of /status leaves the spec.
func TestClusterQuotaCRD(t *testing.T) {
	ctx := t.Context()
	dyn, err := dynamic.NewForConfig(env.api.Config())
	if err != nil {
		t.Fatal(err)
	}
	if took := installClusterQuotaCRD(t, dyn); took > 0 {
		t.Logf("the ClusterQuota CRD established and served %v after its creation", took.Round(time.Millisecond))
	}
	client := dyn.Resource(clusterQuotasGVR)
	tenant := map[string]any{"labels": map[string]any{"matchLabels": map[string]any{"tenant": "crd"}}}
	pods := func(v any) map[string]any { return map[string]any{"hard": map[string]any{"pods": v}} }
	for _, tt := range []struct {
		name string
		spec map[string]any
		// field is where the API server must say the object is wrong.
		field string
	}{
		{"no selector", map[string]any{"quota": pods("10")}, "spec.selector"},
		{"an empty selector", map[string]any{"selector": map[string]any{}, "quota": pods("10")}, "spec.selector"},
		{"an empty label selector", map[string]any{"selector": map[string]any{"labels": map[string]any{}}, "quota": pods("10")}, "spec.selector.labels"},
		{"empty annotations", map[string]any{"selector": map[string]any{"annotations": map[string]any{}}, "quota": pods("10")}, "spec.selector"},
		{"a negative quantity", map[string]any{"selector": tenant, "quota": pods("-1")}, "spec.quota.hard.pods"},
		{"a negative integer", map[string]any{"selector": tenant, "quota": pods(int64(-3))}, "spec.quota.hard.pods"},
		{"a negative cpu", map[string]any{"selector": tenant, "quota": map[string]any{"hard": map[string]any{"requests.cpu": "-100m"}}}, "spec.quota.hard.requests.cpu"},
	} {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": clusterquota.SchemeGroupVersion.String(), "kind": "ClusterQuota",
			"metadata": map[string]any{"name": "e2e-invalid"},
			"spec":     tt.spec,
		}}
		_, err := client.Create(ctx, obj, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("creating a ClusterQuota with %s: %v, want Invalid naming %s", tt.name, err, tt.field)
			if err == nil {
				_ = client.Delete(context.WithoutCancel(ctx), "e2e-invalid", metav1.DeleteOptions{})
			}
			continue
		}
		t.Logf("with %s: refused: %v", tt.name, err)
	}

	// A valid one, written from the Go type with a status: the status is
	// dropped on creation, as the status subresource has it.
	valid := &clusterquota.ClusterQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-crd-valid"},
		Spec: clusterquota.ClusterQuotaSpec{
			Selector: clusterquota.ClusterQuotaSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tenant": "crd"}}},
			Quota: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
				corev1.ResourcePods:        resource.MustParse("10"),
				corev1.ResourceRequestsCPU: resource.MustParse("1500m"),
			}},
		},
		Status: clusterquota.ClusterQuotaStatus{Total: corev1.ResourceQuotaStatus{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("99")}}},
	}
	created, err := client.Create(ctx, unstructuredClusterQuota(t, valid), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating a valid ClusterQuota: %v", err)
	}
	t.Cleanup(func() { _ = client.Delete(context.Background(), valid.Name, metav1.DeleteOptions{}) })
	cq := asTypedClusterQuota(t, created)
	if len(cq.Status.Total.Hard) != 0 {
		t.Errorf("a ClusterQuota created with a status has status.total.hard %v, want none: status is a subresource", cq.Status.Total.Hard)
	}
	if got := cq.Spec.Quota.Hard[corev1.ResourceRequestsCPU]; got.Cmp(resource.MustParse("1.5")) != 0 {
		t.Errorf("stored spec.quota.hard requests.cpu = %v, want 1500m", &got)
	}

	// An update of the object changes the spec, not the status.
	cq.Spec.Quota.Hard[corev1.ResourcePods] = resource.MustParse("11")
	cq.Status.Total.Hard = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("99")}
	updated, err := client.Update(ctx, unstructuredClusterQuota(t, cq), metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("updating the ClusterQuota: %v", err)
	}
	cq = asTypedClusterQuota(t, updated)
	if got := cq.Spec.Quota.Hard[corev1.ResourcePods]; got.Value() != 11 || len(cq.Status.Total.Hard) != 0 {
		t.Errorf("after an update of the object: spec pods %v, status.total.hard %v; want 11 and none", &got, cq.Status.Total.Hard)
	}

	// An update of /status changes the status, not the spec.
	cq.Spec.Quota.Hard[corev1.ResourcePods] = resource.MustParse("12")
	cq.Status.Total = corev1.ResourceQuotaStatus{
		Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("11")},
		Used: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("3")},
	}
	updated, err = client.UpdateStatus(ctx, unstructuredClusterQuota(t, cq), metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("updating the ClusterQuota's status: %v", err)
	}
	cq = asTypedClusterQuota(t, updated)
	specPods, usedPods := cq.Spec.Quota.Hard[corev1.ResourcePods], cq.Status.Total.Used[corev1.ResourcePods]
	if specPods.Value() != 11 || usedPods.Value() != 3 {
		t.Errorf("after an update of /status: spec pods %v, status.total.used pods %v; want 11 and 3", &specPods, &usedPods)
	}

	// The status subresource validates too.
	cq.Status.Total.Used[corev1.ResourcePods] = resource.MustParse("-1")
	if _, err := client.UpdateStatus(ctx, unstructuredClusterQuota(t, cq), metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("a status with a negative used quantity: %v, want Invalid", err)
	}
	t.Logf("valid ClusterQuota accepted; a create and an update of the object keep the status, an update of /status keeps the spec")
}

// clusterQuotaRun is what the phases of TestClusterQuota share.
type clusterQuotaRun struct {
	cs  kubernetes.Interface
	dyn dynamic.Interface
	rc  *recounter
	// name is the ClusterQuota's, pods: 20 over tenant=a.
	name string
	// podLabel selects the pods of the test, run their value.
	podLabel, run string
	serial        atomic.Int64
	replicas      []*replica
}

// clusterHard is the ClusterQuota's hard pods.
const clusterHard = 20

// TestClusterQuota runs the quotakit-controller command with
// -cluster-quotas, two processes behind a round-robin proxy, its webhook
// registered for pod creations in namespaces labelled tenant, and one
// ClusterQuota, pods: 20 over the namespaces labelled tenant=a. In turn:
//
//   - two scale-ups at once (Capsule's overflow, projectcapsule/capsule#1088):
//     two pods in a third namespace, then 15 concurrent creations in each of
//     two others: exactly 20 pods exist across the tenant, never more, and
//     status.total.used is 20, a recount;
//   - a namespace leaves the selection (HNC's leak,
//     kubernetes-sigs/hierarchical-namespaces#214): relabelled tenant=b,
//     its pods leave status.total within seconds and its entry
//     status.namespaces, and creations in the other namespaces are admitted
//     up to 20 again;
//   - relabelling under churn: pods created and deleted in four namespaces
//     while they are relabelled in and out of the tenant; once it stops,
//     status.total equals the sum of status.namespaces and a recount from
//     fresh LISTs within a few charge windows (-charge-window=2s).
func TestClusterQuota(t *testing.T) {
	ctx := t.Context()
	cfg := env.api.Config()
	cs := clientset(t, cfg)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	installClusterQuotaCRD(t, dyn)
	home := namespace(t, cs) // the replicas' Lease
	r := &clusterQuotaRun{cs: cs, dyn: dyn, rc: newRecounter(t, cfg),
		name: "e2e-tenant-a", podLabel: "e2e.quotakit.io/clusterquota", run: home}

	// Four namespaces, known to the webhook's cache before any creation
	// in them: three of tenant a, one of tenant b. When the test ends they
	// leave both tenants, so that a later run in the same cluster starts
	// with none.
	nss := make([]string, 4)
	for i := range nss {
		nss[i] = namespace(t, cs)
		tenant := "a"
		if i == 3 {
			tenant = "b"
		}
		labelNamespace(t, cs, nss[i], tenantLabel, tenant)
		t.Cleanup(func() { labelNamespace(t, cs, nss[i], tenantLabel, "ended") })
	}
	// A namespaced quota, kube-apiserver's plugin's to charge, beside the
	// cluster quota.
	podQuota(t, cs, nss[1], 100)
	createClusterQuota(t, dyn, &clusterquota.ClusterQuota{
		ObjectMeta: metav1.ObjectMeta{Name: r.name},
		Spec: clusterquota.ClusterQuotaSpec{
			Selector: clusterquota.ClusterQuotaSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{tenantLabel: "a"}}},
			Quota:    corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(clusterHard, resource.DecimalSI)}},
		},
	})

	// The binary keeps every namespace: a cluster quota counts pods in
	// namespaces anywhere, and the binary refuses -cluster-quotas with
	// -namespace, which "-namespace=" undoes.
	in := newInstallation(t, env.api, home, "-namespace=", "-cluster-quotas", "-charge-window="+exactWindow.String(), "-enforced-namespaces="+tenantLabel)
	r.replicas = []*replica{in.start(), in.start()}
	register(t, cs, tenantWebhook(roundRobin(t, []*url.URL{r.replicas[0].webhook, r.replicas[1].webhook})))
	start := time.Now()
	took, _ := r.rc.waitClusterQuotaRight(t, dyn, r.name, 30*time.Second, "the controller's first status")
	t.Logf("the controller's first status of ClusterQuota %s after %v", r.name, took.Round(time.Millisecond))
	// kube-apiserver reads webhook configurations from an informer: wait
	// until dry runs reach both replicas.
	waitFor(t, 30*time.Second, "reviews reaching both replicas", func() bool {
		if _, err := cs.CoreV1().Pods(nss[0]).Create(ctx, r.pod("probe"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Fatalf("dry run: %v", err)
		}
		return r.replicas[0].webhookRequests(t) > 0 && r.replicas[1].webhookRequests(t) > 0
	})
	t.Logf("the webhook called through both replicas %v after they were ready", time.Since(start).Round(time.Millisecond))

	counter := countTenantPods(t, cs, r.selector(), nss[0], nss[1], nss[2])
	if !t.Run("two scale-ups at once", func(t *testing.T) { r.scaleUps(t, counter, nss[:3]) }) {
		return
	}
	var leaving string
	if !t.Run("a namespace leaves the selection", func(t *testing.T) { leaving = r.leave(t, counter, nss[:3]) }) {
		return
	}
	t.Run("relabelling under churn", func(t *testing.T) { r.churn(t, nss, leaving) })
}

// tenantWebhook returns a webhook configuration of the test's own for
// pod creations in namespaces labelled tenant, sent to hookURL.
func tenantWebhook(hookURL string) *admissionregistrationv1.ValidatingWebhookConfiguration {
	name := "clusterquota.e2e.quotakit.io"
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:         name,
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &hookURL, CABundle: env.api.CA.PEM},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{
					APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"},
					Scope: ptr.To(admissionregistrationv1.NamespacedScope),
				},
			}},
			NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: tenantLabel, Operator: metav1.LabelSelectorOpExists},
			}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNoneOnDryRun),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](10),
		}},
	}
}

func (r *clusterQuotaRun) selector() string { return r.podLabel + "=" + r.run }

// pod returns a pod of the test, labelled as its pod watch selects.
func (r *clusterQuotaRun) pod(prefix string) *corev1.Pod {
	p := simplePod(fmt.Sprintf("%s-%d", prefix, r.serial.Add(1)))
	p.Labels = map[string]string{r.podLabel: r.run}
	return p
}

// create creates a pod in ns and reports whether it was admitted; a
// refusal for anything but the cluster quota fails the test.
func (r *clusterQuotaRun) create(t *testing.T, ns, prefix string) bool {
	_, err := r.cs.CoreV1().Pods(ns).Create(context.WithoutCancel(t.Context()), r.pod(prefix), metav1.CreateOptions{})
	switch {
	case err == nil:
		return true
	case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "exceeded quota: clusterquota/"+r.name):
		return false
	default:
		t.Errorf("creating a pod in %s: %v", ns, err)
		return false
	}
}

// createAtOnce makes n concurrent creations, the i-th in nss[i%len(nss)],
// and returns how many were admitted.
func (r *clusterQuotaRun) createAtOnce(t *testing.T, n int, prefix string, nss ...string) int {
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if r.create(t, nss[i%len(nss)], prefix) {
				admitted.Add(1)
			}
		})
	}
	wg.Wait()
	return int(admitted.Load())
}

// admissionStats sums the admission counters of the replicas.
func (r *clusterQuotaRun) admissionStats(t *testing.T) string {
	var b strings.Builder
	for _, name := range []string{"status_writes_total", "conflicts_total", "retries_total", "retries_exhausted_total"} {
		var sum float64
		for _, rep := range r.replicas {
			sum += rep.metricSum(t, "quotakit_admission_"+name)
		}
		fmt.Fprintf(&b, " %s %v", strings.TrimSuffix(name, "_total"), sum)
	}
	return strings.TrimSpace(b.String())
}

// scaleUps is the Capsule overflow: two scale-ups at once in two
// namespaces of a tenant whose third namespace already runs two pods.
func (r *clusterQuotaRun) scaleUps(t *testing.T, counter *tenantCounter, nss []string) {
	for range 2 {
		if !r.create(t, nss[2], "before") {
			t.Fatalf("a creation in %s refused with 0 of %d used", nss[2], clusterHard)
		}
	}
	before := r.admissionStats(t)
	begin := make(chan struct{})
	admitted := make([]int, 2)
	took := make([]time.Duration, 2)
	var wg sync.WaitGroup
	for i, ns := range nss[:2] {
		wg.Go(func() {
			<-begin
			start := time.Now()
			admitted[i] = r.createAtOnce(t, 15, "scale-up", ns)
			took[i] = time.Since(start)
		})
	}
	close(begin)
	wg.Wait()
	current, most := counter.settle(t, r.cs, r.selector())
	t.Logf("two scale-ups of 15 at once over %s (2 pods): %s admitted %d in %v, %s admitted %d in %v; %d pods across the tenant, at most %d at once (hard %d); admission before: %s; after: %s",
		nss[2], nss[0], admitted[0], took[0].Round(time.Millisecond), nss[1], admitted[1], took[1].Round(time.Millisecond),
		current, most, clusterHard, before, r.admissionStats(t))
	if got := admitted[0] + admitted[1]; got != clusterHard-2 {
		t.Errorf("the scale-ups admitted %d pods, want exactly %d", got, clusterHard-2)
	}
	if current != clusterHard || most > clusterHard {
		t.Errorf("%d pods across the tenant, at most %d at once; want exactly %d, never more", current, most, clusterHard)
	}
	took2, rc := r.rc.waitClusterQuotaRight(t, r.dyn, r.name, 4*exactWindow, "after the scale-ups")
	if used := rc.total[corev1.ResourcePods]; used.Value() != clusterHard {
		t.Errorf("a recount finds %v pods across the tenant, want %d", &used, clusterHard)
	}
	// The namespaced quota was charged by the plugin alone, once a pod.
	r.rc.waitQuotasRight(t, nss[1], 4*exactWindow, "the namespaced quota beside the cluster quota")
	t.Logf("status.total.used pods = %d = the sum of status.namespaces = a recount %v after the scale-ups; per namespace %v; the namespaced quota of %s = a recount (%d)",
		clusterHard, took2.Round(time.Millisecond), podsByNamespace(rc), nss[1], podUsed(t, r.cs, nss[1]))
}

func podsByNamespace(rc *clusterQuotaRecount) map[string]int64 {
	m := map[string]int64{}
	for ns, used := range rc.perNamespace {
		m[ns] = used.Pods().Value()
	}
	return m
}

// leave is the HNC leak: the namespace of nss[:2] with more pods is
// relabelled tenant=b; its pods leave status.total at once and its entry
// status.namespaces, and the other namespaces can use the room again. It
// returns the namespace that left.
func (r *clusterQuotaRun) leave(t *testing.T, counter *tenantCounter, nss []string) string {
	_, rc, _ := r.rc.clusterQuotaMismatches(t, r.dyn, r.name)
	if rc == nil {
		t.Fatal("no recount")
	}
	perNS := podsByNamespace(rc)
	leaving, staying := nss[0], nss[1]
	if perNS[nss[1]] > perNS[nss[0]] {
		leaving, staying = nss[1], nss[0]
	}
	k := perNS[leaving]
	remaining := []string{staying, nss[2]}
	if used, listed := usedPods(getClusterQuota(t, r.dyn, r.name), leaving); used != clusterHard || !listed {
		t.Fatalf("before the relabel: status.total.used pods %d, %s listed %v; want %d and listed", used, leaving, listed, clusterHard)
	}
	want := clusterHard - k
	followed := r.relabel(t, leaving, "b", want, false)
	t.Logf("%s (%d pods) relabelled tenant=b: status.total.used pods %d -> %d and its entry gone from status.namespaces %v later",
		leaving, k, clusterHard, want, followed.Round(time.Millisecond))
	if followed > 5*time.Second {
		t.Errorf("status.total took %v to follow the relabel, want a few seconds at most", followed)
	}
	r.rc.waitClusterQuotaRight(t, r.dyn, r.name, 4*exactWindow, "after the relabel")

	counter.track(remaining...)
	extra := int(k) + 5
	admitted := r.createAtOnce(t, extra, "refill", remaining...)
	// The namespace that left is in no cluster quota: its creations are
	// admitted, whatever the tenant's quota says.
	outside := 0
	for range 3 {
		if r.create(t, leaving, "outside") {
			outside++
		}
	}
	current, most := counter.settle(t, r.cs, r.selector())
	t.Logf("%d concurrent creations in %v: %d admitted (room for %d); %d of 3 in %s admitted; %d pods in the tenant, at most %d at once",
		extra, remaining, admitted, k, outside, leaving, current, most)
	if admitted != int(k) {
		t.Errorf("%d creations admitted in the remaining namespaces, want exactly %d", admitted, k)
	}
	if outside != 3 {
		t.Errorf("%d of 3 creations admitted in %s, which no cluster quota selects any more", outside, leaving)
	}
	if current != clusterHard || most > clusterHard {
		t.Errorf("%d pods in the tenant, at most %d at once; want exactly %d, never more", current, most, clusterHard)
	}
	took, rc := r.rc.waitClusterQuotaRight(t, r.dyn, r.name, 4*exactWindow, "after the refill")
	if used := rc.total[corev1.ResourcePods]; used.Value() != clusterHard {
		t.Errorf("a recount finds %v pods in the tenant, want %d", &used, clusterHard)
	}
	t.Logf("status.total.used pods = %d = the sum of status.namespaces = a recount %v after the refill; per namespace %v",
		clusterHard, took.Round(time.Millisecond), podsByNamespace(rc))
	return leaving
}

// relabel sets ns's tenant label to value and returns how long it took
// status.total.used pods to become want, and the entry of ns to be listed
// in status.namespaces (or not) as listed says.
func (r *clusterQuotaRun) relabel(t *testing.T, ns, value string, want int64, listed bool) time.Duration {
	t.Helper()
	start := time.Now()
	labelNamespace(t, r.cs, ns, tenantLabel, value)
	var used int64
	var isListed bool
	if !poll(30*time.Second, func() bool {
		used, isListed = usedPods(getClusterQuota(t, r.dyn, r.name), ns)
		return used == want && isListed == listed
	}) {
		t.Fatalf("%s relabelled tenant=%s: status.total.used pods %d, %s listed %v after 30s; want %d, listed %v", ns, value, used, ns, isListed, want, listed)
	}
	return time.Since(start)
}

// churn relabels the namespaces in and out of the tenant while pods are
// created and deleted in them, then checks the status at quiescence, and
// times two relabels of namespaces with pods, one out and one in.
func (r *clusterQuotaRun) churn(t *testing.T, nss []string, left string) {
	ctx := context.WithoutCancel(t.Context())
	tenant := map[string]string{}
	for _, ns := range nss {
		tenant[ns] = "a"
	}
	tenant[nss[3]], tenant[left] = "b", "b"

	type tally struct{ admitted, refused, deleted int }
	tallies := make([]tally, len(nss))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, ns := range nss {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 26))
			for {
				select {
				case <-stop:
					return
				case <-time.After(time.Duration(10+rng.IntN(30)) * time.Millisecond):
				}
				if rng.IntN(10) < 6 {
					if r.create(t, ns, "churn") {
						tallies[i].admitted++
					} else {
						tallies[i].refused++
					}
					continue
				}
				pods, err := r.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: r.selector()})
				if err != nil {
					t.Errorf("listing the pods of %s: %v", ns, err)
					return
				}
				if len(pods.Items) == 0 {
					continue
				}
				victim := pods.Items[rng.IntN(len(pods.Items))].Name
				err = r.cs.CoreV1().Pods(ns).Delete(ctx, victim, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
				switch {
				case err == nil:
					tallies[i].deleted++
				case !apierrors.IsNotFound(err):
					t.Errorf("deleting %s/%s: %v", ns, victim, err)
				}
			}
		})
	}
	rng := rand.New(rand.NewPCG(26, 5))
	var relabels []string
	start := time.Now()
	for range 14 {
		time.Sleep(time.Duration(200+rng.IntN(400)) * time.Millisecond)
		ns := nss[rng.IntN(len(nss))]
		tenant[ns] = map[string]string{"a": "b", "b": "a"}[tenant[ns]]
		labelNamespace(t, r.cs, ns, tenantLabel, tenant[ns])
		relabels = append(relabels, fmt.Sprintf("%s→%s", ns[strings.LastIndexByte(ns, '-')+1:], tenant[ns]))
	}
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()
	churned := time.Since(start)
	var admitted, refused, deleted int
	for _, tl := range tallies {
		admitted, refused, deleted = admitted+tl.admitted, refused+tl.refused, deleted+tl.deleted
	}
	t.Logf("churn for %v over %d namespaces: %d creations admitted, %d refused for the cluster quota, %d deletions; %d relabels (namespace suffix→tenant): %s",
		churned.Round(time.Millisecond), len(nss), admitted, refused, deleted, len(relabels), strings.Join(relabels, " "))

	took, rc := r.rc.waitClusterQuotaRight(t, r.dyn, r.name, 6*exactWindow, "at quiescence after the churn")
	total := rc.total[corev1.ResourcePods]
	t.Logf("at quiescence: status.total.used pods = the sum of status.namespaces = a recount = %d, %v after the churn stopped; selected %v; per namespace %v; admission: %s",
		total.Value(), took.Round(time.Millisecond), rc.selected, podsByNamespace(rc), r.admissionStats(t))
	// And it stays so: no charge of the churn is released later, and no
	// recount takes anything back.
	checks := r.rc.stayClusterQuotaRight(t, r.dyn, r.name, 2*exactWindow, "at quiescence after the churn")
	t.Logf("the status stayed right for two more charge windows (%d recounts)", checks)

	// Two relabels at rest, timed: a selected namespace with pods out,
	// an unselected one with pods in.
	perNS := podsByNamespace(rc)
	var out, into string
	for _, ns := range nss {
		switch {
		case tenant[ns] == "a" && perNS[ns] > 0 && out == "":
			out = ns
		case tenant[ns] == "b" && into == "":
			into = ns
		}
	}
	used := total.Value()
	if out != "" {
		used -= perNS[out]
		d := r.relabel(t, out, "b", used, false)
		tenant[out] = "b"
		t.Logf("%s (%d pods) relabelled out of the tenant: status.total.used pods %d and its entry gone %v later", out, perNS[out], used, d.Round(time.Millisecond))
	}
	if into != "" {
		pods, err := r.cs.CoreV1().Pods(into).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n := int64(len(pods.Items))
		used += n
		d := r.relabel(t, into, "a", used, n > 0)
		t.Logf("%s (%d pods) relabelled into the tenant: status.total.used pods %d (hard %d) %v later", into, n, used, clusterHard, d.Round(time.Millisecond))
	}
	r.rc.waitClusterQuotaRight(t, r.dyn, r.name, 4*exactWindow, "after the relabels at rest")
}
