package kube_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/quotakit/quotakit"
	"github.com/quotakit/quotakit/evaluator"
	"github.com/quotakit/quotakit/kube"
)

var widgets = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}

// cluster is one fake API server seen through client-go's four fake
// clients. Every object is in each fake that could serve it, so that which
// client the Client picked shows in the fakes' recorded actions, not in
// missing objects.
type cluster struct {
	typed    *fake.Clientset
	metadata *metadatafake.FakeMetadataClient
	dynamic  *dynamicfake.FakeDynamicClient
}

func (c *cluster) clients() kube.Clients {
	return kube.Clients{Typed: c.typed, Metadata: c.metadata, Dynamic: c.dynamic, Discovery: c.typed.Discovery()}
}

// newCluster returns a cluster holding namespace ns with a quota q of
// hard, two pods and two secrets of ns, one widget (a custom resource the
// discovery serves) of ns, and one object of each in namespace other.
func newCluster(t *testing.T, hard corev1.ResourceList) *cluster {
	t.Helper()
	var typed, metaObjs, dynObjs []runtime.Object
	typed = append(typed, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "q"}, Spec: corev1.ResourceQuotaSpec{Hard: hard}})
	for _, o := range []struct{ ns, name string }{{"ns", "a"}, {"ns", "b"}, {"other", "c"}} {
		om := metav1.ObjectMeta{Namespace: o.ns, Name: o.name}
		typed = append(typed,
			&corev1.Pod{ObjectMeta: om, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}},
			&corev1.Secret{ObjectMeta: om, Data: map[string][]byte{"k": []byte("v")}})
		metaObjs = append(metaObjs,
			&metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, ObjectMeta: om})
	}
	for _, o := range []struct{ ns, name string }{{"ns", "w"}, {"other", "w"}} {
		om := metav1.ObjectMeta{Namespace: o.ns, Name: o.name}
		metaObjs = append(metaObjs, &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "example.com/v1", Kind: "Widget"}, ObjectMeta: om})
		w := &unstructured.Unstructured{}
		w.SetAPIVersion("example.com/v1")
		w.SetKind("Widget")
		w.SetNamespace(o.ns)
		w.SetName(o.name)
		dynObjs = append(dynObjs, w)
	}
	metaScheme := metadatafake.NewTestScheme()
	for _, gvk := range []schema.GroupVersionKind{corev1.SchemeGroupVersion.WithKind("Secret"), {Group: "example.com", Version: "v1", Kind: "Widget"}} {
		metaScheme.AddKnownTypeWithName(gvk, &metav1.PartialObjectMetadata{})
	}
	c := &cluster{
		typed:    fake.NewClientset(typed...),
		metadata: metadatafake.NewSimpleMetadataClient(metaScheme, metaObjs...),
		dynamic:  dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{widgets: "WidgetList"}, dynObjs...),
	}
	all := []string{"create", "delete", "get", "list", "patch", "update", "watch"}
	c.typed.Resources = []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "pods", Namespaced: true, Kind: "Pod", Verbs: all},
			{Name: "pods/status", Namespaced: true, Kind: "Pod", Verbs: []string{"get", "patch", "update"}},
			{Name: "secrets", Namespaced: true, Kind: "Secret", Verbs: all},
			{Name: "resourcequotas", Namespaced: true, Kind: "ResourceQuota", Verbs: all},
			{Name: "namespaces", Namespaced: false, Kind: "Namespace", Verbs: all},
		}},
		{GroupVersion: "example.com/v1", APIResources: []metav1.APIResource{
			{Name: "widgets", Namespaced: true, Kind: "Widget", Verbs: all},
		}},
	}
	return c
}

// clientOf returns which client should serve a resource, from the table:
// typed for rows whose evaluators read whole objects and resourcequotas,
// metadata for counted rows and resources outside the table; with whole
// objects, typed for every row and dynamic outside the table.
func clientOf(whole bool) func(resource string) string {
	return func(resource string) string {
		for _, row := range evaluator.Resources(evaluator.Options{}) {
			if row.Resource.Resource != resource {
				continue
			}
			if whole || !row.MetadataOnly || resource == "resourcequotas" {
				return "typed"
			}
			return "metadata"
		}
		if whole {
			return "dynamic"
		}
		return "metadata"
	}
}

// listed returns the resources the fake listed, sorted.
func listed(f interface{ Actions() []clienttesting.Action }) []string {
	var out []string
	for _, a := range f.Actions() {
		if a.GetVerb() == "list" && !slices.Contains(out, a.GetResource().Resource) {
			out = append(out, a.GetResource().Resource)
		}
	}
	slices.Sort(out)
	return out
}

// TestControllerOverFakeClients runs the controller over the Client and
// client-go's fake typed, metadata, dynamic and discovery clients. The
// quota must come to count the pods of its namespace (typed), its secrets
// (from metadata only, unless whole objects are asked for) and its
// widgets, a custom resource found by discovery (metadata, or the dynamic
// client for whole objects); and a pod deletion must be replenished.
func TestControllerOverFakeClients(t *testing.T) {
	tests := []struct {
		whole bool
		// must are resources each client must have listed.
		typed, metadata, dynamic []string
	}{
		{whole: false, typed: []string{"pods", "resourcequotas"}, metadata: []string{"secrets", "widgets"}},
		{whole: true, typed: []string{"pods", "resourcequotas", "secrets"}, dynamic: []string{"widgets"}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("WholeObjects=%v", tt.whole), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				hard := corev1.ResourceList{
					corev1.ResourcePods:                   resource.MustParse("10"),
					corev1.ResourceSecrets:                resource.MustParse("10"),
					"count/secrets":                       resource.MustParse("10"),
					"count/widgets.example.com":           resource.MustParse("10"),
					corev1.ResourceRequestsCPU:            resource.MustParse("1"),
					corev1.ResourceConfigMaps:             resource.MustParse("3"),
					corev1.ResourcePersistentVolumeClaims: resource.MustParse("3"),
				}
				cl := newCluster(t, hard)
				opts := quotakit.Options{WholeObjects: tt.whole}
				ctrl, err := quotakit.NewController(kube.New(cl.clients(), opts), opts)
				if err != nil {
					t.Fatalf("NewController: %v", err)
				}
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan error, 1)
				go func() { done <- ctrl.Run(ctx) }()

				used := func() map[string]string {
					t.Helper()
					synctest.Wait()
					rq, err := cl.typed.CoreV1().ResourceQuotas("ns").Get(t.Context(), "q", metav1.GetOptions{})
					if err != nil {
						t.Fatalf("Get: %v", err)
					}
					out := map[string]string{}
					for k, v := range rq.Status.Used {
						out[string(k)] = v.String()
					}
					return out
				}
				time.Sleep(time.Second)
				want := map[string]string{
					"pods": "2", "secrets": "2", "count/secrets": "2", "count/widgets.example.com": "1",
					"requests.cpu": "0", "configmaps": "0", "persistentvolumeclaims": "0",
				}
				if diff := cmp.Diff(want, used()); diff != "" {
					t.Errorf("status.used after start (-want +got):\n%s", diff)
				}
				if err := ctrl.Ready(nil); err != nil {
					t.Errorf("Ready = %v, want nil", err)
				}

				if err := cl.typed.CoreV1().Pods("ns").Delete(t.Context(), "a", metav1.DeleteOptions{}); err != nil {
					t.Fatalf("Delete: %v", err)
				}
				time.Sleep(time.Second)
				want["pods"] = "1"
				if diff := cmp.Diff(want, used()); diff != "" {
					t.Errorf("status.used after a pod deletion (-want +got):\n%s", diff)
				}

				cancel()
				if err := <-done; err != nil {
					t.Errorf("Run = %v, want nil", err)
				}
				// Every resource went through the client the table says,
				// and those the quota counts were listed.
				clientFor := clientOf(tt.whole)
				for _, f := range []struct {
					name string
					got  []string
					must []string
				}{
					{"typed", listed(cl.typed), tt.typed},
					{"metadata", listed(cl.metadata), tt.metadata},
					{"dynamic", listed(cl.dynamic), tt.dynamic},
				} {
					for _, r := range f.got {
						if clientFor(r) != f.name {
							t.Errorf("%s listed through the %s client, want the %s client", r, f.name, clientFor(r))
						}
					}
					for _, r := range f.must {
						if !slices.Contains(f.got, r) {
							t.Errorf("%s not listed through the %s client; it listed %v", r, f.name, f.got)
						}
					}
				}
				var statusWrites int
				for _, a := range cl.typed.Actions() {
					if a.GetVerb() == "update" && a.GetSubresource() == "status" && a.GetResource().Resource == "resourcequotas" {
						statusWrites++
					}
				}
				if statusWrites == 0 {
					t.Error("no status write of resourcequotas through the typed client")
				}
			})
		})
	}
}
