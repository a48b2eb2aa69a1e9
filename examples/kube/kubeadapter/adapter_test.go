package kubeadapter_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/quotakit/quotakit/examples/kube/kubeadapter"
)

var widgets = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}

// newDynamic returns a fake dynamic client that knows the list kind of
// widgets, holding objs.
func newDynamic(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{widgets: "WidgetList"}, objs...)
}

func widget(namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("example.com/v1")
	u.SetKind("Widget")
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

func TestListerWatcherListTypes(t *testing.T) {
	meta := metav1.ObjectMeta{Namespace: "ns", Name: "a"}
	cs := fake.NewClientset(
		&corev1.Pod{ObjectMeta: meta},
		&corev1.Service{ObjectMeta: meta},
		&corev1.PersistentVolumeClaim{ObjectMeta: meta},
		&corev1.ConfigMap{ObjectMeta: meta},
		&corev1.Secret{ObjectMeta: meta},
		&corev1.ReplicationController{ObjectMeta: meta},
		&corev1.ResourceQuota{ObjectMeta: meta},
	)
	c := kubeadapter.New(cs, newDynamic(widget("ns", "a")))

	tests := []struct {
		gvr  schema.GroupVersionResource
		want string
	}{
		{corev1.SchemeGroupVersion.WithResource("pods"), "*v1.PodList"},
		{corev1.SchemeGroupVersion.WithResource("services"), "*v1.ServiceList"},
		{corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims"), "*v1.PersistentVolumeClaimList"},
		{corev1.SchemeGroupVersion.WithResource("configmaps"), "*v1.ConfigMapList"},
		{corev1.SchemeGroupVersion.WithResource("secrets"), "*v1.SecretList"},
		{corev1.SchemeGroupVersion.WithResource("replicationcontrollers"), "*v1.ReplicationControllerList"},
		{corev1.SchemeGroupVersion.WithResource("resourcequotas"), "*v1.ResourceQuotaList"},
		{widgets, "*unstructured.UnstructuredList"},
	}
	for _, tt := range tests {
		t.Run(tt.gvr.Resource, func(t *testing.T) {
			for _, ns := range []string{"ns", ""} {
				list, err := c.ListerWatcher(tt.gvr, ns).List(t.Context(), metav1.ListOptions{})
				if err != nil {
					t.Fatalf("List(%v, %q): %v", tt.gvr, ns, err)
				}
				if got := fmt.Sprintf("%T", list); got != tt.want {
					t.Errorf("List(%v, %q) = %s, want %s", tt.gvr, ns, got, tt.want)
				}
				var names []string
				for _, obj := range listItems(t, list) {
					names = append(names, obj.GetNamespace()+"/"+obj.GetName())
				}
				if diff := cmp.Diff([]string{"ns/a"}, names); diff != "" {
					t.Errorf("List(%v, %q) names (-want +got):\n%s", tt.gvr, ns, diff)
				}
			}
		})
	}
}

// listItems returns the items of a typed or unstructured list.
func listItems(t *testing.T, list runtime.Object) []metav1.Object {
	t.Helper()
	objs, err := meta.ExtractList(list)
	if err != nil {
		t.Fatalf("ExtractList(%T): %v", list, err)
	}
	var out []metav1.Object
	for _, obj := range objs {
		m, err := meta.Accessor(obj)
		if err != nil {
			t.Fatalf("Accessor(%T): %v", obj, err)
		}
		out = append(out, m)
	}
	return out
}

func TestListerWatcherNamespace(t *testing.T) {
	cs := fake.NewClientset(
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "p"}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "p"}},
	)
	c := kubeadapter.New(cs, nil)
	list, err := c.ListerWatcher(corev1.SchemeGroupVersion.WithResource("pods"), "b").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	pods, ok := list.(*corev1.PodList)
	if !ok {
		t.Fatalf("List = %T, want *v1.PodList", list)
	}
	var got []string
	for _, p := range pods.Items {
		got = append(got, p.Namespace+"/"+p.Name)
	}
	if diff := cmp.Diff([]string{"b/p"}, got); diff != "" {
		t.Errorf("List(pods, \"b\") (-want +got):\n%s", diff)
	}
}

// nextEvent returns the next event of w, failing the test when none comes.
// The fakes deliver an event before Create returns, so the timeout only
// bounds a broken test.
func nextEvent(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch closed before an event")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event within 10s")
	}
	return watch.Event{}
}

func TestListerWatcherWatchPods(t *testing.T) {
	cs := fake.NewClientset()
	c := kubeadapter.New(cs, nil)
	w, err := c.ListerWatcher(corev1.SchemeGroupVersion.WithResource("pods"), "").Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	defer w.Stop()

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
	if _, err := cs.CoreV1().Pods("ns").Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("Create: %v", err)
	}
	ev := nextEvent(t, w)
	got, ok := ev.Object.(*corev1.Pod)
	if !ok {
		t.Fatalf("event object = %T, want *v1.Pod", ev.Object)
	}
	if ev.Type != watch.Added || got.Namespace != "ns" || got.Name != "p" {
		t.Errorf("event = %s %s/%s, want ADDED ns/p", ev.Type, got.Namespace, got.Name)
	}
}

func TestListerWatcherWatchDynamic(t *testing.T) {
	dyn := newDynamic()
	c := kubeadapter.New(fake.NewClientset(), dyn)
	w, err := c.ListerWatcher(widgets, "").Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	defer w.Stop()

	if _, err := dyn.Resource(widgets).Namespace("ns").Create(t.Context(), widget("ns", "w"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("Create: %v", err)
	}
	ev := nextEvent(t, w)
	got, ok := ev.Object.(*unstructured.Unstructured)
	if !ok {
		t.Fatalf("event object = %T, want *unstructured.Unstructured", ev.Object)
	}
	if ev.Type != watch.Added || got.GetName() != "w" {
		t.Errorf("event = %s %s, want ADDED w", ev.Type, got.GetName())
	}
}

func TestUpdateStatusResourceQuota(t *testing.T) {
	rq := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "q"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")}},
	}
	cs := fake.NewClientset(rq)
	c := kubeadapter.New(cs, nil)

	stored, err := cs.CoreV1().ResourceQuotas("ns").Get(t.Context(), "q", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	update := stored.DeepCopy()
	update.Status = corev1.ResourceQuotaStatus{
		Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")},
		Used: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("3")},
	}
	out, err := c.UpdateStatus(t.Context(), corev1.SchemeGroupVersion.WithResource("resourcequotas"), update)
	if err != nil {
		t.Fatalf("UpdateStatus: %v", err)
	}
	ret, ok := out.(*corev1.ResourceQuota)
	if !ok {
		t.Fatalf("UpdateStatus = %T, want *v1.ResourceQuota", out)
	}
	got, err := cs.CoreV1().ResourceQuotas("ns").Get(t.Context(), "q", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	want := map[string]string{"pods": "3"}
	for name, status := range map[string]corev1.ResourceQuotaStatus{"returned": ret.Status, "stored": got.Status} {
		used := map[string]string{}
		for k, v := range status.Used {
			used[string(k)] = v.String()
		}
		if diff := cmp.Diff(want, used); diff != "" {
			t.Errorf("%s status.used (-want +got):\n%s", name, diff)
		}
	}
}

func TestUpdateStatusDynamic(t *testing.T) {
	w := widget("ns", "w")
	dyn := newDynamic(w)
	c := kubeadapter.New(fake.NewClientset(), dyn)

	update := w.DeepCopy()
	if err := unstructured.SetNestedField(update.Object, "ready", "status", "phase"); err != nil {
		t.Fatalf("SetNestedField: %v", err)
	}
	out, err := c.UpdateStatus(t.Context(), widgets, update)
	if err != nil {
		t.Fatalf("UpdateStatus: %v", err)
	}
	if _, ok := out.(*unstructured.Unstructured); !ok {
		t.Fatalf("UpdateStatus = %T, want *unstructured.Unstructured", out)
	}
	got, err := dyn.Resource(widgets).Namespace("ns").Get(t.Context(), "w", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	phase, _, _ := unstructured.NestedString(got.Object, "status", "phase")
	if phase != "ready" {
		t.Errorf("stored status.phase = %q, want %q", phase, "ready")
	}
}

// TestUpdateStatusTypedThroughDynamic sends a typed object through the
// dynamic path: it must be converted, and its empty TypeMeta filled in
// before it is sent.
func TestUpdateStatusTypedThroughDynamic(t *testing.T) {
	cm := &unstructured.Unstructured{}
	cm.SetAPIVersion("v1")
	cm.SetKind("ConfigMap")
	cm.SetNamespace("ns")
	cm.SetName("c")
	dyn := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme(), cm)
	var sent runtime.Object
	dyn.PrependReactor("update", "configmaps", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "status" {
			sent = a.(clienttesting.UpdateAction).GetObject()
		}
		return false, nil, nil
	})
	c := kubeadapter.New(nil, dyn)

	update := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"},
		Data:       map[string]string{"k": "v"},
	}
	out, err := c.UpdateStatus(t.Context(), corev1.SchemeGroupVersion.WithResource("configmaps"), update)
	if err != nil {
		t.Fatalf("UpdateStatus: %v", err)
	}
	if _, ok := out.(*unstructured.Unstructured); !ok {
		t.Fatalf("UpdateStatus = %T, want *unstructured.Unstructured", out)
	}
	u, ok := sent.(*unstructured.Unstructured)
	if !ok {
		t.Fatalf("sent %T, want *unstructured.Unstructured", sent)
	}
	want := map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata":   map[string]any{"namespace": "ns", "name": "c"},
		"data":       map[string]any{"k": "v"},
	}
	if diff := cmp.Diff(want, u.Object); diff != "" {
		t.Errorf("sent object (-want +got):\n%s", diff)
	}
}

func TestUpdateStatusBadObject(t *testing.T) {
	rqs := corev1.SchemeGroupVersion.WithResource("resourcequotas")
	tests := []struct {
		name string
		gvr  schema.GroupVersionResource
		obj  runtime.Object
	}{
		{"quota as pod", rqs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "q"}}},
		{"quota as unstructured", rqs, widget("ns", "q")},
		{"quota nil", rqs, nil},
		{"quota typed nil", rqs, (*corev1.ResourceQuota)(nil)},
		{"widget nil", widgets, nil},
		{"widget typed nil", widgets, (*corev1.Pod)(nil)},
		{"widget unstructured nil", widgets, (*unstructured.Unstructured)(nil)},
		{"widget list", widgets, &unstructured.UnstructuredList{}},
		{"widget typed list", widgets, &corev1.PodList{}},
		{"widget missing", widgets, widget("ns", "absent")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := kubeadapter.New(fake.NewClientset(), newDynamic())
			out, err := c.UpdateStatus(t.Context(), tt.gvr, tt.obj)
			if err == nil {
				t.Fatalf("UpdateStatus(%v, %T) = %T, nil; want an error", tt.gvr, tt.obj, out)
			}
			if out != nil {
				t.Errorf("UpdateStatus(%v, %T) = %T, want nil with the error", tt.gvr, tt.obj, out)
			}
		})
	}
}

func TestErrorsKeepAPIStatus(t *testing.T) {
	c := kubeadapter.New(fake.NewClientset(), newDynamic())
	rq := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "absent"}}
	_, err := c.UpdateStatus(t.Context(), corev1.SchemeGroupVersion.WithResource("resourcequotas"), rq)
	if !apierrors.IsNotFound(err) {
		t.Errorf("UpdateStatus of a missing quota = %v, want a NotFound API error", err)
	}
}

func TestNilClients(t *testing.T) {
	c := kubeadapter.New(nil, nil)
	for _, gvr := range []schema.GroupVersionResource{corev1.SchemeGroupVersion.WithResource("pods"), widgets} {
		lw := c.ListerWatcher(gvr, "")
		if list, err := lw.List(t.Context(), metav1.ListOptions{}); err == nil || list != nil {
			t.Errorf("List(%v) with no clients = %v, %v; want nil, an error", gvr, list, err)
		}
		if w, err := lw.Watch(t.Context(), metav1.ListOptions{}); err == nil || w != nil {
			t.Errorf("Watch(%v) with no clients = %v, %v; want nil, an error", gvr, w, err)
		}
		if _, err := c.UpdateStatus(t.Context(), gvr, widget("ns", "x")); err == nil {
			t.Errorf("UpdateStatus(%v) with no clients: want an error", gvr)
		}
	}
}

func TestListWatchErrorsWrapped(t *testing.T) {
	cs := fake.NewClientset()
	forbidden := func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("no RBAC"))
	}
	cs.PrependReactor("list", "pods", forbidden)
	cs.PrependWatchReactor("pods", func(clienttesting.Action) (bool, watch.Interface, error) {
		_, _, err := forbidden(nil)
		return true, nil, err
	})
	lw := kubeadapter.New(cs, nil).ListerWatcher(corev1.SchemeGroupVersion.WithResource("pods"), "")

	list, err := lw.List(t.Context(), metav1.ListOptions{})
	if !apierrors.IsForbidden(err) || list != nil {
		t.Errorf("List = %v, %v; want nil, a Forbidden API error", list, err)
	}
	if err != nil && !strings.Contains(err.Error(), "list /v1, Resource=pods") {
		t.Errorf("List error %q does not name the resource", err)
	}
	w, err := lw.Watch(t.Context(), metav1.ListOptions{})
	if !apierrors.IsForbidden(err) || w != nil {
		t.Errorf("Watch = %v, %v; want nil, a Forbidden API error", w, err)
	}
}
