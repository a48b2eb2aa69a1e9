package kube_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"

	"github.com/quotakit/quotakit"
	"github.com/quotakit/quotakit/clusterquota"
	"github.com/quotakit/quotakit/kube"
)

// TestClusterQuotaClient reads and writes a ClusterQuota through the
// dynamic client as admission.NewClusterAccessor does, and gets a
// namespace the cache does not hold yet live.
func TestClusterQuotaClient(t *testing.T) {
	ctx := t.Context()
	cq := &clusterquota.ClusterQuota{
		TypeMeta:   metav1.TypeMeta{APIVersion: clusterquota.SchemeGroupVersion.String(), Kind: "ClusterQuota"},
		ObjectMeta: metav1.ObjectMeta{Name: "team-a", ResourceVersion: "1"},
		Spec: clusterquota.ClusterQuotaSpec{
			Selector: clusterquota.ClusterQuotaSelector{AnnotationSelector: map[string]string{"team": "a"}},
			Quota:    corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"pods": resource.MustParse("5")}},
		},
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cq)
	if err != nil {
		t.Fatal(err)
	}
	gvr := clusterquota.SchemeGroupVersion.WithResource("clusterquotas")
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{gvr: "ClusterQuotaList"}, &unstructured.Unstructured{Object: content})
	typed := fake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a-1", Annotations: map[string]string{"team": "a"}}})
	client := kube.New(kube.Clients{Typed: typed, Dynamic: dyn}, quotakit.Options{})

	got, err := client.ListClusterQuotas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Name != "team-a" || got[0].Spec.Selector.AnnotationSelector["team"] != "a" {
		t.Fatalf("ListClusterQuotas = %+v, want team-a", got)
	}
	one, err := client.GetClusterQuota(ctx, "team-a")
	if err != nil || one.Name != "team-a" || one.Spec.Selector.AnnotationSelector["team"] != "a" {
		t.Fatalf("GetClusterQuota(team-a) = %+v, %v; want team-a", one, err)
	}
	if _, err := client.GetClusterQuota(ctx, "missing"); !apierrors.IsNotFound(err) {
		t.Errorf("GetClusterQuota(missing) error = %v, want NotFound", err)
	}
	update := got[0].DeepCopy()
	update.Status.Total.Used = corev1.ResourceList{"pods": resource.MustParse("2")}
	out, err := client.UpdateClusterQuotaStatus(ctx, update)
	if err != nil {
		t.Fatal(err)
	}
	if used := out.Status.Total.Used["pods"]; used.String() != "2" {
		t.Errorf("UpdateClusterQuotaStatus returned used pods %s, want 2", used.String())
	}
	if _, err := client.UpdateClusterQuotaStatus(ctx, nil); err == nil {
		t.Error("UpdateClusterQuotaStatus(nil): no error")
	}

	// The informer has not run: its cache is empty, and the getter reads
	// the namespace live.
	get := client.NamespaceGetter(client.NamespaceInformer())
	ns, err := get("a-1")
	if err != nil || ns.Annotations["team"] != "a" {
		t.Errorf("NamespaceGetter(a-1) = %v, %v; want the live namespace", ns, err)
	}
	if _, err := get("missing"); !apierrors.IsNotFound(err) {
		t.Errorf("NamespaceGetter(missing) error = %v, want NotFound", err)
	}
	if _, err := client.NamespaceGetter(nil)("a-1"); err == nil {
		t.Error("NamespaceGetter(nil informer): no error")
	}
	if _, err := kube.ClusterQuotaIndex(nil, client.NamespaceInformer()); err == nil {
		t.Error("ClusterQuotaIndex(nil informer): no error")
	}
	x, err := kube.ClusterQuotaIndex(client.ClusterQuotaInformer(), client.NamespaceInformer())
	if err != nil {
		t.Fatal(err)
	}
	if x.HasSynced() {
		t.Error("ClusterQuotaIndex of informers not run has synced")
	}
}

// TestClusterQuotaIndex runs the two informers over fake clients: the
// index they feed syncs with them, answers a namespace's cluster quotas
// and follows a namespace that leaves the tenant.
func TestClusterQuotaIndex(t *testing.T) {
	ctx := t.Context()
	cq := &clusterquota.ClusterQuota{
		TypeMeta:   metav1.TypeMeta{APIVersion: clusterquota.SchemeGroupVersion.String(), Kind: "ClusterQuota"},
		ObjectMeta: metav1.ObjectMeta{Name: "team-a", ResourceVersion: "1", Generation: 1},
		Spec: clusterquota.ClusterQuotaSpec{
			Selector: clusterquota.ClusterQuotaSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tenant": "a"}}},
			Quota:    corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"pods": resource.MustParse("5")}},
		},
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cq)
	if err != nil {
		t.Fatal(err)
	}
	gvr := clusterquota.SchemeGroupVersion.WithResource("clusterquotas")
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{gvr: "ClusterQuotaList"}, &unstructured.Unstructured{Object: content})
	nsMeta := func(name, tenant string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"tenant": tenant}}}
	}
	metaScheme := metadatafake.NewTestScheme()
	metaScheme.AddKnownTypeWithName(corev1.SchemeGroupVersion.WithKind("Namespace"), &metav1.PartialObjectMetadata{})
	meta := metadatafake.NewSimpleMetadataClient(metaScheme, nsMeta("a-1", "a"), nsMeta("a-2", "a"), nsMeta("b-1", "b"))
	client := kube.New(kube.Clients{Dynamic: dyn, Metadata: meta}, quotakit.Options{})
	cqs, nss := client.ClusterQuotaInformer(), client.NamespaceInformer()
	x, err := kube.ClusterQuotaIndex(cqs, nss)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { cqs.Run(runCtx) })
	wg.Go(func() { nss.Run(runCtx) })
	defer func() { cancel(); wg.Wait() }()
	wait := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 10s", what)
			}
		}
	}
	wait("the index syncs", x.HasSynced)
	get := client.NamespaceGetter(nss)
	for name, want := range map[string]string{"a-1": "team-a", "a-2": "team-a", "b-1": ""} {
		ns, err := get(name)
		if err != nil {
			t.Fatal(err)
		}
		if got := x.Lookup(ns).Key; got != want {
			t.Errorf("Lookup(%s) = %q, want %q", name, got, want)
		}
	}
	if _, err := meta.Resource(corev1.SchemeGroupVersion.WithResource("namespaces")).(metadatafake.MetadataClient).UpdateFake(nsMeta("a-2", "b"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wait("a-2 leaves team-a", func() bool {
		got, ok := x.Namespaces(x.Get("team-a"))
		return ok && slices.Equal(got, []string{"a-1"})
	})
}
