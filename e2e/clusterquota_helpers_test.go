package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/quotakit/quotakit/clusterquota"
	"github.com/quotakit/quotakit/quota"
)

// The helpers of clusterquota_test.go: the ClusterQuota CRD installed
// from kube/deploy/crd, ClusterQuotas read and written through the
// dynamic client, a watch that keeps the most pods a tenant ever had, and
// a recount of a ClusterQuota from fresh LISTs.

var (
	clusterQuotasGVR = clusterquota.SchemeGroupVersion.WithResource("clusterquotas")
	crdsGVR          = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
)

// clusterQuotaCRD is the ClusterQuota CRD, installed once per run.
var clusterQuotaCRD struct {
	once sync.Once
	err  error
}

// installClusterQuotaCRD renders kube/deploy/crd as `kubectl apply -k`
// would, creates what it renders (the ClusterQuota
// CustomResourceDefinition), waits until the CRD is Established and
// ClusterQuotas are served, and returns how long that took (0 when an
// earlier test of the run installed it). The checkout is only read.
func installClusterQuotaCRD(t *testing.T, dyn dynamic.Interface) time.Duration {
	t.Helper()
	start := time.Now()
	installed := false
	clusterQuotaCRD.once.Do(func() {
		installed = true
		clusterQuotaCRD.err = createFromKustomization(t.Context(), dyn, filepath.Join("..", "kube", "deploy", "crd"))
	})
	if clusterQuotaCRD.err != nil {
		t.Fatal(clusterQuotaCRD.err)
	}
	var last string
	if !poll(60*time.Second, func() bool {
		crd, err := dyn.Resource(crdsGVR).Get(t.Context(), "clusterquotas.quota.quotakit.io", metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false
		}
		conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				_, err := dyn.Resource(clusterQuotasGVR).List(t.Context(), metav1.ListOptions{})
				if err != nil {
					last = "established, not served: " + err.Error()
				}
				return err == nil
			}
		}
		last = fmt.Sprintf("conditions %v", conds)
		return false
	}) {
		t.Fatalf("the ClusterQuota CRD not established and served within 60s: %s", last)
	}
	if !installed {
		return 0
	}
	return time.Since(start)
}

// createFromKustomization creates every object that the kustomization in
// dir renders, through the dynamic client.
func createFromKustomization(ctx context.Context, dyn dynamic.Interface, dir string) error {
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	if len(m.Resources()) == 0 {
		return fmt.Errorf("kustomize build %s: nothing rendered", dir)
	}
	for _, r := range m.Resources() {
		obj, err := r.Map()
		if err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		}
		u := &unstructured.Unstructured{Object: obj}
		gvk := u.GroupVersionKind()
		if gvk != (schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}) {
			return fmt.Errorf("%s renders a %v, want only CustomResourceDefinitions", dir, gvk)
		}
		if _, err := dyn.Resource(crdsGVR).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create %s %s: %w", gvk.Kind, u.GetName(), err)
		}
	}
	return nil
}

// unstructuredClusterQuota returns cq as the dynamic client sends it.
func unstructuredClusterQuota(t *testing.T, cq *clusterquota.ClusterQuota) *unstructured.Unstructured {
	t.Helper()
	cq = cq.DeepCopy()
	cq.APIVersion, cq.Kind = clusterquota.SchemeGroupVersion.String(), "ClusterQuota"
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cq)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: obj}
}

func asTypedClusterQuota(t *testing.T, u *unstructured.Unstructured) *clusterquota.ClusterQuota {
	t.Helper()
	cq := &clusterquota.ClusterQuota{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, cq); err != nil {
		t.Fatalf("ClusterQuota %s: %v", u.GetName(), err)
	}
	return cq
}

// getClusterQuota reads the ClusterQuota name from the API server.
func getClusterQuota(t *testing.T, dyn dynamic.Interface, name string) *clusterquota.ClusterQuota {
	t.Helper()
	u, err := dyn.Resource(clusterQuotasGVR).Get(context.WithoutCancel(t.Context()), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return asTypedClusterQuota(t, u)
}

// createClusterQuota creates cq, and deletes it when the test ends.
func createClusterQuota(t *testing.T, dyn dynamic.Interface, cq *clusterquota.ClusterQuota) {
	t.Helper()
	if _, err := dyn.Resource(clusterQuotasGVR).Create(t.Context(), unstructuredClusterQuota(t, cq), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		err := dyn.Resource(clusterQuotasGVR).Delete(context.Background(), cq.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting ClusterQuota %s: %v", cq.Name, err)
		}
	})
}

// tenantLabel is the namespace label the ClusterQuotas of the tests
// select on, and the webhook of the tests is registered for.
const tenantLabel = "tenant"

// labelNamespace sets ns's label key to value.
func labelNamespace(t *testing.T, cs kubernetes.Interface, ns, key, value string) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{key: value}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Patch(context.WithoutCancel(t.Context()), ns, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// tenantCounter watches the pods of the whole cluster that carry a label
// of the test's own, and keeps, for a set of namespaces that the test
// can change, the most pods that ever existed in them at once, as the
// watch reports them.
type tenantCounter struct {
	mu sync.Mutex
	// guarded by mu
	live    map[string]map[string]bool // namespace → pod names
	tracked map[string]bool
	max     int
}

// countTenantPods starts a tenantCounter over the pods labelled selector
// (key=value), tracking namespaces.
func countTenantPods(t *testing.T, cs kubernetes.Interface, selector string, namespaces ...string) *tenantCounter {
	t.Helper()
	w, err := cs.CoreV1().Pods("").Watch(t.Context(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	c := &tenantCounter{live: map[string]map[string]bool{}}
	c.track(namespaces...)
	var wg sync.WaitGroup
	wg.Go(func() {
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			c.mu.Lock()
			switch ev.Type {
			case watch.Added:
				if c.live[pod.Namespace] == nil {
					c.live[pod.Namespace] = map[string]bool{}
				}
				c.live[pod.Namespace][pod.Name] = true
			case watch.Deleted:
				delete(c.live[pod.Namespace], pod.Name)
			}
			c.max = max(c.max, c.totalLocked())
			c.mu.Unlock()
		}
	})
	t.Cleanup(func() {
		w.Stop()
		wg.Wait()
	})
	return c
}

// track makes namespaces the tracked set, and starts the maximum afresh
// from what they hold now.
func (c *tenantCounter) track(namespaces ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tracked = map[string]bool{}
	for _, ns := range namespaces {
		c.tracked[ns] = true
	}
	c.max = c.totalLocked()
}

func (c *tenantCounter) totalLocked() int {
	n := 0
	for ns := range c.tracked {
		n += len(c.live[ns])
	}
	return n
}

// now returns the pods in the tracked namespaces, and the most there
// ever were at once since the last track.
func (c *tenantCounter) now() (current, most int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.totalLocked(), c.max
}

// settle waits until the watch has reported what a LIST of the tracked
// namespaces holds, and returns the pods there and the most there ever
// were at once.
func (c *tenantCounter) settle(t *testing.T, cs kubernetes.Interface, selector string) (current, most int) {
	t.Helper()
	c.mu.Lock()
	var namespaces []string
	for ns := range c.tracked {
		namespaces = append(namespaces, ns)
	}
	c.mu.Unlock()
	listed := 0
	waitFor(t, 10*time.Second, "the pod watch to catch up with a LIST", func() bool {
		listed = 0
		for _, ns := range namespaces {
			pods, err := cs.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: selector})
			if err != nil {
				t.Fatal(err)
			}
			listed += len(pods.Items)
		}
		current, _ := c.now()
		return current == listed
	})
	return c.now()
}

// clusterQuotaRecount is what a ClusterQuota's status must be, from
// scratch: the namespaces it selects from a fresh LIST of namespaces, and
// the usage of each from the recounter's fresh LISTs of what they hold.
type clusterQuotaRecount struct {
	selected []string
	// perNamespace is the usage of every selected namespace that uses
	// something, without zero quantities, as status.namespaces lists it.
	perNamespace map[string]corev1.ResourceList
	total        corev1.ResourceList
}

func (r *recounter) clusterQuota(ctx context.Context, cq *clusterquota.ClusterQuota) (*clusterQuotaRecount, error) {
	nss, err := r.typed.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	reg, err := r.registry(ctx)
	if err != nil {
		return nil, err
	}
	rc := &clusterQuotaRecount{perNamespace: map[string]corev1.ResourceList{}, total: corev1.ResourceList{}}
	hard := cq.Spec.Quota.Hard
	for i := range nss.Items {
		ns := &nss.Items[i]
		ok, err := cq.Selects(ns)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		rc.selected = append(rc.selected, ns.Name)
		used, err := quota.CalculateUsage(ns.Name, cq.Spec.Quota.Scopes, hard, reg, cq.Spec.Quota.ScopeSelector)
		if err != nil {
			return nil, fmt.Errorf("recount of %s in %s: %w", cq.Name, ns.Name, err)
		}
		used = quota.RemoveZeros(quota.Mask(used, quota.ResourceNames(hard)))
		if len(used) > 0 {
			rc.perNamespace[ns.Name] = used
		}
		rc.total = quota.Add(rc.total, used)
	}
	sort.Strings(rc.selected)
	return rc, nil
}

// clusterQuotaMismatches returns how the status of the ClusterQuota name
// differs from a recount: status.total.hard from spec.quota.hard,
// status.total.used from the sum of the recount over the selected
// namespaces, the sum of status.namespaces from status.total.used, and
// status.namespaces from the recount's namespaces that use something.
// Zero quantities are compared as absent. An empty result means the
// status is right; the recount and the status are returned for logs.
func (r *recounter) clusterQuotaMismatches(t *testing.T, dyn dynamic.Interface, name string) ([]string, *clusterQuotaRecount, *clusterquota.ClusterQuota) {
	t.Helper()
	cq := getClusterQuota(t, dyn, name)
	rc, err := r.clusterQuota(t.Context(), cq)
	if err != nil {
		return []string{err.Error()}, nil, cq
	}
	var diffs []string
	diff := func(what string, want, got any) {
		if d := cmp.Diff(want, got, quantities); d != "" {
			diffs = append(diffs, fmt.Sprintf("%s (-want +got):\n%s", what, d))
		}
	}
	diff("status.total.hard against spec.quota.hard", quota.RemoveZeros(cq.Spec.Quota.Hard), quota.RemoveZeros(cq.Status.Total.Hard))
	diff("status.total.used against a recount", rc.total, quota.RemoveZeros(cq.Status.Total.Used))
	listed := map[string]corev1.ResourceList{}
	sum := corev1.ResourceList{}
	for _, e := range cq.Status.Namespaces {
		listed[e.Namespace] = quota.RemoveZeros(e.Status.Used)
		sum = quota.Add(sum, e.Status.Used)
	}
	if cq.Status.NamespacesOmitted != 0 {
		diffs = append(diffs, fmt.Sprintf("status.namespacesOmitted %d, want 0 for %d namespaces", cq.Status.NamespacesOmitted, len(rc.selected)))
	}
	diff("the sum of status.namespaces against status.total.used", quota.RemoveZeros(cq.Status.Total.Used), quota.RemoveZeros(sum))
	diff("status.namespaces against a recount", rc.perNamespace, listed)
	return diffs, rc, cq
}

// waitClusterQuotaRight waits until the status of the ClusterQuota name
// is what a recount gives (see clusterQuotaMismatches), fails the test
// with the differences if it is not within timeout, and returns how long
// it took and the recount.
func (r *recounter) waitClusterQuotaRight(t *testing.T, dyn dynamic.Interface, name string, timeout time.Duration, what string) (time.Duration, *clusterQuotaRecount) {
	t.Helper()
	start := time.Now()
	var last []string
	var rc *clusterQuotaRecount
	var cq *clusterquota.ClusterQuota
	if !poll(timeout, func() bool {
		last, rc, cq = r.clusterQuotaMismatches(t, dyn, name)
		return len(last) == 0
	}) {
		t.Fatalf("%s: the status of ClusterQuota %s differs from a recount after %v:\n%s\nstatus: %s", what, name, timeout, strings.Join(last, "\n"), statusJSON(cq))
	}
	return time.Since(start), rc
}

// stayClusterQuotaRight checks, for d, that the status of the
// ClusterQuota name stays what a recount gives, fails the test at the
// first difference, and returns how many recounts it made.
func (r *recounter) stayClusterQuotaRight(t *testing.T, dyn dynamic.Interface, name string, d time.Duration, what string) int {
	t.Helper()
	n := 0
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		n++
		if diffs, _, cq := r.clusterQuotaMismatches(t, dyn, name); len(diffs) > 0 {
			t.Fatalf("%s: the status of ClusterQuota %s was right, then differed from a recount:\n%s\nstatus: %s", what, name, strings.Join(diffs, "\n"), statusJSON(cq))
		}
	}
	return n
}

func statusJSON(cq *clusterquota.ClusterQuota) string {
	if cq == nil {
		return "none"
	}
	b, err := json.Marshal(cq.Status)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// usedPods returns the ClusterQuota's status.total.used pods (0 when it
// has none) and whether status.namespaces lists ns.
func usedPods(cq *clusterquota.ClusterQuota, ns string) (int64, bool) {
	listed := false
	for _, e := range cq.Status.Namespaces {
		listed = listed || e.Namespace == ns
	}
	used := cq.Status.Total.Used[corev1.ResourcePods]
	return used.Value(), listed
}

// metricSum returns the sum of the replica's metric name over every
// label set, as its /metrics shows them.
func (r *replica) metricSum(t *testing.T, name string) float64 {
	t.Helper()
	resp, err := probeClient.Get(r.metrics + "/metrics")
	if err != nil {
		t.Fatalf("%s metrics: %v", r.name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s metrics: %v", r.name, err)
	}
	var total float64
	for line := range strings.Lines(string(body)) {
		if !strings.HasPrefix(line, name+" ") && !strings.HasPrefix(line, name+"{") {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(line[strings.LastIndexByte(line, ' ')+1:]), 64)
		if err != nil {
			t.Fatalf("%s metrics: %q: %v", r.name, line, err)
		}
		total += v
	}
	return total
}
