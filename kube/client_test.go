package kube_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"

	"github.com/quotakit/quotakit"
	"github.com/quotakit/quotakit/evaluator"
	"github.com/quotakit/quotakit/generic"
	"github.com/quotakit/quotakit/kube"
	"github.com/quotakit/quotakit/quota"
)

// TestListerWatcherTable checks, for every row of the controller's resource
// table, that the Client serves the form the controller wants: typed lists
// for rows whose evaluators read whole objects and for resourcequotas,
// metadata for counted rows, typed again for counted rows with
// WholeObjects. A row added to the table without a typed client here
// fails, rather than going through the dynamic client unnoticed.
func TestListerWatcherTable(t *testing.T) {
	for _, whole := range []bool{false, true} {
		opts := quotakit.Options{WholeObjects: whole}
		c := kube.New(newCluster(t, nil).clients(), opts)
		for _, row := range evaluator.Resources(opts.Evaluator) {
			t.Run(fmt.Sprintf("%s/whole=%v", row.Resource.Resource, whole), func(t *testing.T) {
				list, err := c.ListerWatcher(row.Resource, "ns").List(t.Context(), metav1.ListOptions{})
				if err != nil {
					t.Fatalf("List: %v", err)
				}
				want := fmt.Sprintf("%TList", row.Object)
				if row.MetadataOnly && !whole && row.Resource.Resource != "resourcequotas" {
					want = "*v1.PartialObjectMetadataList"
				}
				if got := fmt.Sprintf("%T", list); got != want {
					t.Errorf("List(%v) = %s, want %s", row.Resource, got, want)
				}
				w, err := c.ListerWatcher(row.Resource, "ns").Watch(t.Context(), metav1.ListOptions{})
				if err != nil {
					t.Fatalf("Watch: %v", err)
				}
				w.Stop()
			})
		}
	}
}

// TestListerWatcherOtherResources checks resources outside the table: a
// counted one through the metadata client, or the dynamic client with
// WholeObjects or an Evaluator of its own.
func TestListerWatcherOtherResources(t *testing.T) {
	withEvaluator := quotakit.Options{Resources: []quotakit.Resource{{
		Resource: widgets,
		Evaluator: func(list generic.ListFuncByNamespace) quota.Evaluator {
			return generic.NewObjectCountEvaluator(widgets.GroupResource(), list, "")
		},
	}}}
	tests := []struct {
		name string
		opts quotakit.Options
		want string
	}{
		{"counted", quotakit.Options{}, "*v1.PartialObjectMetadataList"},
		{"counted, listed in Resources", quotakit.Options{Resources: []quotakit.Resource{{Resource: widgets}}}, "*v1.PartialObjectMetadataList"},
		{"whole objects", quotakit.Options{WholeObjects: true}, "*unstructured.UnstructuredList"},
		{"with an evaluator", withEvaluator, "*unstructured.UnstructuredList"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := kube.New(newCluster(t, nil).clients(), tt.opts)
			list, err := c.ListerWatcher(widgets, "ns").List(t.Context(), metav1.ListOptions{})
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			if got := fmt.Sprintf("%T", list); got != tt.want {
				t.Errorf("List(widgets) = %s, want %s", got, tt.want)
			}
		})
	}
}

// TestListerWatcherMissingClient checks that a nil client fails the calls
// it would have served with an error naming it, and never panics.
func TestListerWatcherMissingClient(t *testing.T) {
	pods := corev1.SchemeGroupVersion.WithResource("pods")
	secrets := corev1.SchemeGroupVersion.WithResource("secrets")
	tests := []struct {
		name    string
		clients func(kube.Clients) kube.Clients
		gvr     schema.GroupVersionResource
		want    string
	}{
		{"no metadata client", func(c kube.Clients) kube.Clients { c.Metadata = nil; return c }, secrets, "metadata client is nil"},
		{"no typed or dynamic client", func(c kube.Clients) kube.Clients { c.Typed, c.Dynamic = nil, nil; return c }, pods, "dynamic client is nil"},
		{"no dynamic client", func(c kube.Clients) kube.Clients { c.Dynamic = nil; return c }, widgets, "dynamic client is nil"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := quotakit.Options{WholeObjects: tt.gvr == widgets}
			c := kube.New(tt.clients(newCluster(t, nil).clients()), opts)
			lw := c.ListerWatcher(tt.gvr, "")
			if _, err := lw.List(t.Context(), metav1.ListOptions{}); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("List = %v, want an error containing %q", err, tt.want)
			}
			if _, err := lw.Watch(t.Context(), metav1.ListOptions{}); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Watch = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestListerWatcherWrapsErrors checks that an API error keeps its status
// through the wrapping, so that the informer can recognise 410 Gone.
func TestListerWatcherWrapsErrors(t *testing.T) {
	cl := newCluster(t, nil)
	cl.typed.PrependReactor("list", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewResourceExpired("too old")
	})
	_, err := kube.New(cl.clients(), quotakit.Options{}).ListerWatcher(corev1.SchemeGroupVersion.WithResource("pods"), "").List(t.Context(), metav1.ListOptions{})
	if !apierrors.IsResourceExpired(err) || !strings.Contains(err.Error(), "kube: list pods") {
		t.Errorf("List = %v, want a wrapped 410 Expired", err)
	}
}

func TestUpdateStatus(t *testing.T) {
	rqs := corev1.SchemeGroupVersion.WithResource("resourcequotas")
	t.Run("resourcequota", func(t *testing.T) {
		cl := newCluster(t, corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")})
		c := kube.New(cl.clients(), quotakit.Options{})
		rq, err := cl.typed.CoreV1().ResourceQuotas("ns").Get(t.Context(), "q", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rq.Status.Used = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}
		out, err := c.UpdateStatus(t.Context(), rqs, rq)
		if err != nil {
			t.Fatalf("UpdateStatus: %v", err)
		}
		if got := out.(*corev1.ResourceQuota).Status.Used.Pods().String(); got != "1" {
			t.Errorf("UpdateStatus returned used pods %s, want 1", got)
		}
		var sawStatus bool
		for _, a := range cl.typed.Actions() {
			sawStatus = sawStatus || (a.GetVerb() == "update" && a.GetSubresource() == "status")
		}
		if !sawStatus {
			t.Error("no update of the status subresource recorded")
		}
	})
	t.Run("other resource through the dynamic client", func(t *testing.T) {
		cl := newCluster(t, nil)
		c := kube.New(cl.clients(), quotakit.Options{})
		w, err := cl.dynamic.Resource(widgets).Namespace("ns").Get(t.Context(), "w", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := unstructured.SetNestedField(w.Object, "ok", "status", "phase"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.UpdateStatus(t.Context(), widgets, w); err != nil {
			t.Fatalf("UpdateStatus: %v", err)
		}
	})
	errorCases := []struct {
		name    string
		clients func(kube.Clients) kube.Clients
		gvr     schema.GroupVersionResource
		obj     runtime.Object
		want    string
	}{
		{"nil object", nil, rqs, nil, "want *v1.ResourceQuota"},
		{"typed nil quota", nil, rqs, (*corev1.ResourceQuota)(nil), "want *v1.ResourceQuota"},
		{"wrong type", nil, rqs, &corev1.Pod{}, "want *v1.ResourceQuota"},
		{"no typed client", func(c kube.Clients) kube.Clients { c.Typed = nil; return c }, rqs, &corev1.ResourceQuota{}, "typed client is nil"},
		{"nil object, other resource", nil, widgets, nil, "nil object"},
		{"no dynamic client", func(c kube.Clients) kube.Clients { c.Dynamic = nil; return c }, widgets, &unstructured.Unstructured{}, "dynamic client is nil"},
		{"conflict", nil, rqs, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "missing"}}, "not found"},
	}
	for _, tt := range errorCases {
		t.Run(tt.name, func(t *testing.T) {
			clients := newCluster(t, nil).clients()
			if tt.clients != nil {
				clients = tt.clients(clients)
			}
			out, err := kube.New(clients, quotakit.Options{}).UpdateStatus(t.Context(), tt.gvr, tt.obj)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("UpdateStatus = %v, %v; want an error containing %q", out, err, tt.want)
			}
		})
	}
}

func TestNamespacedResources(t *testing.T) {
	cl := newCluster(t, nil)
	c := kube.New(cl.clients(), quotakit.Options{})
	got, err := c.NamespacedResources(t.Context())
	if err != nil {
		t.Fatalf("NamespacedResources: %v", err)
	}
	// pods/status lacks verbs and namespaces is cluster-scoped.
	want := []schema.GroupVersionResource{
		corev1.SchemeGroupVersion.WithResource("pods"),
		corev1.SchemeGroupVersion.WithResource("resourcequotas"),
		corev1.SchemeGroupVersion.WithResource("secrets"),
		widgets,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("NamespacedResources (-want +got):\n%s", diff)
	}

	// A resource without watch is not quotable, as in kube-controller-manager.
	cl.typed.Resources[1].APIResources[0].Verbs = []string{"create", "list", "delete", "get"}
	got, err = c.NamespacedResources(t.Context())
	if err != nil || len(got) != 3 {
		t.Errorf("NamespacedResources without watch on widgets = %v, %v; want the 3 core resources", got, err)
	}
}

// brokenGroup is a discovery client whose broken.example.com group
// fails.
type brokenGroup struct{ *fakediscovery.FakeDiscovery }

func (d brokenGroup) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	return d.ServerResourcesForGroupVersionWithContext(context.Background(), gv)
}

func (d brokenGroup) ServerResourcesForGroupVersionWithContext(ctx context.Context, gv string) (*metav1.APIResourceList, error) {
	if strings.HasPrefix(gv, "broken.example.com/") {
		return nil, errors.New("service unavailable")
	}
	return d.FakeDiscovery.ServerResourcesForGroupVersionWithContext(ctx, gv)
}

// TestNamespacedResourcesPartial checks that a group whose discovery
// fails leaves the others' resources, returned with the error.
func TestNamespacedResourcesPartial(t *testing.T) {
	cl := newCluster(t, nil)
	cl.typed.Resources = append(cl.typed.Resources, &metav1.APIResourceList{GroupVersion: "broken.example.com/v1"})
	clients := cl.clients()
	clients.Discovery = brokenGroup{cl.typed.Discovery().(*fakediscovery.FakeDiscovery)}
	got, err := kube.New(clients, quotakit.Options{}).NamespacedResources(t.Context())
	var failed *discovery.ErrGroupDiscoveryFailed
	if !errors.As(err, &failed) || len(got) != 4 {
		t.Errorf("NamespacedResources = %v, %v; want the 4 resources of the working groups and an ErrGroupDiscoveryFailed", got, err)
	}

	c := kube.New(kube.Clients{}, quotakit.Options{})
	if _, err := c.NamespacedResources(t.Context()); err == nil {
		t.Error("NamespacedResources without a discovery client = nil error, want one")
	}
}

func TestNamespacedResourcesFailure(t *testing.T) {
	d := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}
	d.AddReactor("get", "group", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	c := kube.New(kube.Clients{Discovery: d}, quotakit.Options{})
	got, err := c.NamespacedResources(t.Context())
	if err == nil || len(got) != 0 {
		t.Errorf("NamespacedResources = %v, %v; want nothing and an error", got, err)
	}
}

func TestWithDefaults(t *testing.T) {
	tests := []struct {
		qps, wantQPS     float32
		burst, wantBurst int
	}{
		{0, kube.DefaultQPS, 0, kube.DefaultBurst},
		{50, 50, 100, 100},
		{-1, -1, 0, kube.DefaultBurst},
	}
	for _, tt := range tests {
		in := &rest.Config{Host: "https://example.invalid", QPS: tt.qps, Burst: tt.burst}
		got := kube.WithDefaults(in)
		if got.QPS != tt.wantQPS || got.Burst != tt.wantBurst {
			t.Errorf("WithDefaults(QPS %v, Burst %v) = %v, %v; want %v, %v", tt.qps, tt.burst, got.QPS, got.Burst, tt.wantQPS, tt.wantBurst)
		}
		if in.QPS != tt.qps || in.Burst != tt.burst {
			t.Errorf("WithDefaults changed its argument")
		}
	}
}

func TestNewForConfig(t *testing.T) {
	if _, err := kube.NewForConfig(nil, quotakit.Options{}); err == nil {
		t.Error("NewForConfig(nil) = nil error, want one")
	}
	c, err := kube.NewForConfig(&rest.Config{Host: "https://127.0.0.1:1"}, quotakit.Options{})
	if err != nil || c == nil {
		t.Fatalf("NewForConfig = %v, %v", c, err)
	}
	if _, err := kube.NewForConfig(&rest.Config{Host: "://bad"}, quotakit.Options{}); err == nil {
		t.Error("NewForConfig with a malformed host = nil error, want one")
	}
	// Where no controller runs, no Options.
	if c, err := kube.NewForConfig(&rest.Config{Host: "https://127.0.0.1:1"}); err != nil || c == nil {
		t.Errorf("NewForConfig without Options = %v, %v; want a client", c, err)
	}
	if _, err := kube.NewForConfig(&rest.Config{Host: "https://127.0.0.1:1"}, quotakit.Options{}, quotakit.Options{}); err == nil {
		t.Error("NewForConfig with two Options = nil error, want one")
	}
}

// TestQuotaInformer runs the webhook's quota cache over a typed client and
// over a dynamic one only, whose unstructured quotas the informer turns
// into typed ones, and lists a namespace through QuotaLister.
func TestQuotaInformer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t, corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")})
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("v1")
		u.SetKind("ResourceQuota")
		u.SetNamespace("ns")
		u.SetName("q")
		u.Object["spec"] = map[string]any{"hard": map[string]any{"pods": "1"}}
		dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
			map[schema.GroupVersionResource]string{corev1.SchemeGroupVersion.WithResource("resourcequotas"): "ResourceQuotaList"}, u)
		for name, clients := range map[string]kube.Clients{"typed": cl.clients(), "dynamic": {Dynamic: dyn}} {
			inf := kube.New(clients, quotakit.Options{}).QuotaInformer("ns")
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan struct{})
			go func() { defer close(done); inf.Run(ctx) }()
			synctest.Wait()
			if !inf.HasSynced() {
				t.Errorf("%s: the quota informer did not sync", name)
			}
			got, err := kube.QuotaLister(inf)("ns")
			if err != nil || len(got) != 1 || got[0].Name != "q" || got[0].Spec.Hard.Pods().String() != "1" {
				t.Errorf("%s: QuotaLister(ns) = %v, %v; want quota q of 1 pod", name, got, err)
			}
			if got, err := kube.QuotaLister(inf)("other"); err != nil || len(got) != 0 {
				t.Errorf("%s: QuotaLister(other) = %v, %v; want none", name, got, err)
			}
			cancel()
			<-done
		}
	})
	if _, err := kube.QuotaLister(nil)("ns"); err == nil {
		t.Error("QuotaLister(nil) = nil error, want one")
	}
}

// TestQuotaClient checks the two methods admission's Accessor calls.
func TestQuotaClient(t *testing.T) {
	cl := newCluster(t, corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")})
	c := kube.New(cl.clients(), quotakit.Options{})
	quotas, err := c.ListQuotas(t.Context(), "ns")
	if err != nil || len(quotas) != 1 || quotas[0].Name != "q" {
		t.Fatalf("ListQuotas = %v, %v; want quota q", quotas, err)
	}
	q := quotas[0].DeepCopy()
	q.Status.Used = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}
	out, err := c.UpdateQuotaStatus(t.Context(), q)
	if err != nil || out.Status.Used.Pods().String() != "1" {
		t.Errorf("UpdateQuotaStatus = %v, %v; want used pods 1", out, err)
	}
	if _, err := kube.New(kube.Clients{}, quotakit.Options{}).ListQuotas(t.Context(), "ns"); err == nil {
		t.Error("ListQuotas without a typed client = nil error, want one")
	}
	if _, err := c.UpdateQuotaStatus(t.Context(), nil); err == nil {
		t.Error("UpdateQuotaStatus(nil) = nil error, want one")
	}
}
