package kube_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	metadatafake "k8s.io/client-go/metadata/fake"

	"github.com/quotakit/quotakit"
	"github.com/quotakit/quotakit/clusterquota"
	"github.com/quotakit/quotakit/kube"
)

// appliedWorld is a fake API with ClusterQuotas, namespaces and
// AppliedClusterQuotas, and a writer over it.
type appliedWorld struct {
	dyn  *dynamicfake.FakeDynamicClient
	meta *metadatafake.FakeMetadataClient
	w    *kube.AppliedQuotaWriter
}

var namespacesGVR = corev1.SchemeGroupVersion.WithResource("namespaces")

func tenantQuota(name, tenant, usedPods string, perNS map[string]string) *clusterquota.ClusterQuota {
	cq := &clusterquota.ClusterQuota{
		TypeMeta:   metav1.TypeMeta{APIVersion: clusterquota.SchemeGroupVersion.String(), Kind: "ClusterQuota"},
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), ResourceVersion: "1", Generation: 1},
		Spec: clusterquota.ClusterQuotaSpec{
			Selector: clusterquota.ClusterQuotaSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tenant": tenant}}},
			Quota:    corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("5")}},
		},
		Status: clusterquota.ClusterQuotaStatus{Total: corev1.ResourceQuotaStatus{
			Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("5")},
			Used: corev1.ResourceList{corev1.ResourcePods: resource.MustParse(usedPods)},
		}},
	}
	names := make([]string, 0, len(perNS))
	for ns := range perNS {
		names = append(names, ns)
	}
	sort.Strings(names)
	for _, ns := range names {
		cq.Status.Namespaces = append(cq.Status.Namespaces, clusterquota.ResourceQuotaStatusByNamespace{
			Namespace: ns, Status: corev1.ResourceQuotaStatus{Used: corev1.ResourceList{corev1.ResourcePods: resource.MustParse(perNS[ns])}},
		})
	}
	return cq
}

func nsMeta(name string, labels map[string]string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, ResourceVersion: "1"}}
}

func toUnstructured(t testing.TB, obj runtime.Object) *unstructured.Unstructured {
	t.Helper()
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: content}
}

// newAppliedWorld builds the fakes with objs (ClusterQuotas and
// AppliedClusterQuotas) and namespaces, and a writer with opts.
func newAppliedWorld(t testing.TB, opts kube.AppliedQuotaWriterOptions, namespaces []*metav1.PartialObjectMetadata, objs ...runtime.Object) *appliedWorld {
	var content []runtime.Object
	for _, o := range objs {
		content = append(content, toUnstructured(t, o))
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		clusterquota.ClusterQuotas:        "ClusterQuotaList",
		clusterquota.AppliedClusterQuotas: "AppliedClusterQuotaList",
	}, content...)
	scheme := metadatafake.NewTestScheme()
	scheme.AddKnownTypeWithName(corev1.SchemeGroupVersion.WithKind("Namespace"), &metav1.PartialObjectMetadata{})
	var nss []runtime.Object
	for _, ns := range namespaces {
		nss = append(nss, ns)
	}
	meta := metadatafake.NewSimpleMetadataClient(scheme, nss...)
	client := kube.New(kube.Clients{Dynamic: dyn, Metadata: meta}, quotakit.Options{})
	quotas, nsInf := client.ClusterQuotaInformer(), client.NamespaceInformer()
	x, err := kube.ClusterQuotaIndex(quotas, nsInf)
	if err != nil {
		t.Fatal(err)
	}
	w, err := kube.NewAppliedQuotaWriter(dyn, quotas, nsInf, x, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(logr.NewContext(context.Background(), funcr.New(func(prefix, args string) { t.Log(prefix, args) }, funcr.Options{})))
	var wg sync.WaitGroup
	wg.Go(func() { quotas.Run(ctx) })
	wg.Go(func() { nsInf.Run(ctx) })
	wg.Go(func() {
		if err := w.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	return &appliedWorld{dyn: dyn, meta: meta, w: w}
}

// copies returns the AppliedClusterQuotas the fake holds, by
// "namespace/name".
func (aw *appliedWorld) copies(t testing.TB) map[string]*clusterquota.AppliedClusterQuota {
	t.Helper()
	list, err := aw.dyn.Resource(clusterquota.AppliedClusterQuotas).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*clusterquota.AppliedClusterQuota{}
	for _, u := range list.Items {
		a := &clusterquota.AppliedClusterQuota{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, a); err != nil {
			t.Fatal(err)
		}
		out[a.Namespace+"/"+a.Name] = a
	}
	return out
}

func (aw *appliedWorld) keys(t testing.TB) []string {
	var keys []string
	for k := range aw.copies(t) {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func eventually(t testing.TB, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
	}
}

func (aw *appliedWorld) updateQuota(t testing.TB, cq *clusterquota.ClusterQuota) {
	t.Helper()
	if _, err := aw.dyn.Resource(clusterquota.ClusterQuotas).Update(context.Background(), toUnstructured(t, cq), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestAppliedQuotaWriter follows a tenant's quota through its life: the
// copies appear in its namespaces and only there, a stale copy goes and
// an object the writer did not write stays, a status change reaches
// every copy, a namespace that leaves loses its copy, and the quota's
// deletion takes the rest.
func TestAppliedQuotaWriter(t *testing.T) {
	teamA := tenantQuota("team-a", "a", "2", map[string]string{"a-1": "2"})
	invalid := tenantQuota("team-b", "b", "0", nil)
	invalid.Spec.Selector.LabelSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "tenant", Operator: metav1.LabelSelectorOpIn, Values: []string{"b c"}},
	}}
	gone, err := clusterquota.Applied(tenantQuota("gone", "a", "0", nil), "a-1")
	if err != nil {
		t.Fatal(err)
	}
	foreign := &clusterquota.AppliedClusterQuota{
		TypeMeta:   metav1.TypeMeta{APIVersion: clusterquota.SchemeGroupVersion.String(), Kind: "AppliedClusterQuota"},
		ObjectMeta: metav1.ObjectMeta{Name: "mine", Namespace: "c-1"},
	}
	aw := newAppliedWorld(t, kube.AppliedQuotaWriterOptions{Interval: 20 * time.Millisecond},
		[]*metav1.PartialObjectMetadata{
			nsMeta("a-1", map[string]string{"tenant": "a"}), nsMeta("a-2", map[string]string{"tenant": "a"}),
			nsMeta("b-1", map[string]string{"tenant": "b c"}), nsMeta("c-1", nil),
		},
		teamA, invalid, gone, foreign)

	want := []string{"a-1/team-a", "a-2/team-a", "c-1/mine"}
	eventually(t, "one copy of team-a in each of its namespaces", func() bool { return slices.Equal(aw.keys(t), want) })
	copies := aw.copies(t)
	if got := copies["a-1/team-a"]; len(got.Status.Namespaces) != 1 || got.Status.Namespaces[0].Namespace != "a-1" || got.OwnerReferences[0].UID != "uid-team-a" {
		t.Errorf("the copy in a-1: namespaces %v, owners %v; want a-1's entry, owned by team-a", got.Status.Namespaces, got.OwnerReferences)
	}
	if got := copies["a-2/team-a"]; len(got.Status.Namespaces) != 0 {
		t.Errorf("the copy in a-2 lists %v, want nothing: a-2 uses nothing", got.Status.Namespaces)
	}

	// A status change reaches both copies.
	teamA = tenantQuota("team-a", "a", "4", map[string]string{"a-1": "2", "a-2": "2"})
	teamA.ResourceVersion = "2"
	aw.updateQuota(t, teamA)
	eventually(t, "the new status in both copies", func() bool {
		c := aw.copies(t)
		for _, k := range []string{"a-1/team-a", "a-2/team-a"} {
			if used := c[k].Status.Total.Used[corev1.ResourcePods]; used.Value() != 4 || len(c[k].Status.Namespaces) != 1 {
				return false
			}
		}
		return true
	})

	// a-2 leaves the tenant; team-a goes.
	relabelled := nsMeta("a-2", map[string]string{"tenant": "z"})
	relabelled.ResourceVersion = "2" // the fake keeps what it is given; the index trusts a version it has seen
	if _, err := aw.meta.Resource(namespacesGVR).(metadatafake.MetadataClient).UpdateFake(relabelled, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a-2's copy deleted", func() bool { return slices.Equal(aw.keys(t), []string{"a-1/team-a", "c-1/mine"}) })
	if err := aw.dyn.Resource(clusterquota.ClusterQuotas).Delete(context.Background(), "team-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "team-a's copies deleted", func() bool { return slices.Equal(aw.keys(t), []string{"c-1/mine"}) })
	if s := aw.w.Stats(); s.Creates != 2 || s.Deletes != 3 || s.Failures != 0 {
		t.Errorf("Stats() = %+v, want 2 creates, 3 deletes, no failure", s)
	}
}

// TestAppliedQuotaWriterCoalesces changes a quota's status ten times
// within one interval: its two copies are written once more, not ten
// times.
func TestAppliedQuotaWriterCoalesces(t *testing.T) {
	teamA := tenantQuota("team-a", "a", "0", nil)
	aw := newAppliedWorld(t, kube.AppliedQuotaWriterOptions{Interval: 500 * time.Millisecond},
		[]*metav1.PartialObjectMetadata{nsMeta("a-1", map[string]string{"tenant": "a"}), nsMeta("a-2", map[string]string{"tenant": "a"})},
		teamA)
	eventually(t, "the two copies", func() bool { return len(aw.copies(t)) == 2 })
	for i := range 10 {
		cq := tenantQuota("team-a", "a", fmt.Sprint(i+1), nil)
		cq.ResourceVersion = fmt.Sprint(i + 2)
		aw.updateQuota(t, cq)
		time.Sleep(10 * time.Millisecond)
	}
	eventually(t, "the last status in both copies", func() bool {
		for _, a := range aw.copies(t) {
			if used := a.Status.Total.Used[corev1.ResourcePods]; used.Value() != 10 {
				return false
			}
		}
		return true
	})
	// The ten changes fall into at most two intervals.
	if s := aw.w.Stats(); s.Updates > 4 {
		t.Errorf("Stats() = %+v: %d updates for 10 changes of a quota over 2 namespaces within 0.5s, want at most 4", s, s.Updates)
	}
}

func TestNewAppliedQuotaWriterErrors(t *testing.T) {
	dyn := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
	client := kube.New(kube.Clients{Dynamic: dyn}, quotakit.Options{})
	x := &clusterquota.Index{}
	if _, err := kube.NewAppliedQuotaWriter(nil, client.ClusterQuotaInformer(), client.NamespaceInformer(), x, kube.AppliedQuotaWriterOptions{}); err == nil {
		t.Error("a nil client: no error")
	}
	if _, err := kube.NewAppliedQuotaWriter(dyn, client.ClusterQuotaInformer(), client.NamespaceInformer(), nil, kube.AppliedQuotaWriterOptions{}); err == nil {
		t.Error("a nil index: no error")
	}
	if _, err := kube.NewAppliedQuotaWriter(dyn, client.ClusterQuotaInformer(), client.NamespaceInformer(), x, kube.AppliedQuotaWriterOptions{Interval: -1}); err == nil {
		t.Error("a negative interval: no error")
	}
}

// Keep a copy of each ClusterQuota in the namespaces it selects, so that
// their users can read it: here over fake clients, with one quota over
// the namespaces labelled tenant=a.
func ExampleNewAppliedQuotaWriter() {
	cq := tenantQuota("team-a", "a", "3", map[string]string{"a-1": "3"})
	content, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(cq)
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		clusterquota.ClusterQuotas:        "ClusterQuotaList",
		clusterquota.AppliedClusterQuotas: "AppliedClusterQuotaList",
	}, &unstructured.Unstructured{Object: content})
	scheme := metadatafake.NewTestScheme()
	scheme.AddKnownTypeWithName(corev1.SchemeGroupVersion.WithKind("Namespace"), &metav1.PartialObjectMetadata{})
	meta := metadatafake.NewSimpleMetadataClient(scheme, nsMeta("a-1", map[string]string{"tenant": "a"}), nsMeta("b-1", nil))

	// The informers and index a webhook or controller already has.
	client := kube.New(kube.Clients{Dynamic: dyn, Metadata: meta}, quotakit.Options{})
	quotas, namespaces := client.ClusterQuotaInformer(), client.NamespaceInformer()
	index, err := kube.ClusterQuotaIndex(quotas, namespaces)
	if err != nil {
		fmt.Println(err)
		return
	}
	w, err := kube.NewAppliedQuotaWriter(dyn, quotas, namespaces, index, kube.AppliedQuotaWriterOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { quotas.Run(ctx) })
	wg.Go(func() { namespaces.Run(ctx) })
	wg.Go(func() { _ = w.Run(ctx) })
	defer wg.Wait()
	defer cancel()

	copies := dyn.Resource(clusterquota.AppliedClusterQuotas)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		list, err := copies.List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) == 0 {
			continue
		}
		a := &clusterquota.AppliedClusterQuota{}
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(list.Items[0].Object, a)
		used := a.Status.Total.Used[corev1.ResourcePods]
		fmt.Printf("%s/%s: pods %s used of %s\n", a.Namespace, a.Name, used.String(), a.Spec.Quota.Hard.Pods().String())
		return
	}
	// Output: a-1/team-a: pods 3 used of 5
}
