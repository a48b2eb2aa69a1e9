package cachetest_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/quotakit/quotakit/cache/cachetest"
)

func Example() {
	ctx := context.Background()
	srv := cachetest.New(cachetest.Options{})
	defer srv.Close()
	pods := corev1.SchemeGroupVersion.WithResource("pods")

	for _, name := range []string{"web-1", "web-2", "db-1"} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Namespace: "shop", Name: name, Labels: map[string]string{"app": name[:len(name)-2]},
		}}
		if _, err := srv.Create(ctx, pods, pod); err != nil {
			fmt.Println(err)
		}
	}
	list, err := srv.List(ctx, pods, "shop", metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		fmt.Println(err)
		return
	}
	podList := list.(*corev1.PodList)
	fmt.Println("list at resourceVersion", podList.ResourceVersion)
	for _, p := range podList.Items {
		fmt.Println(p.Name, p.ResourceVersion)
	}
	// Output:
	// list at resourceVersion 4
	// web-1 2
	// web-2 3
}

func ExampleServer_Watch() {
	ctx := context.Background()
	srv := cachetest.New(cachetest.Options{})
	defer srv.Close()
	cms := corev1.SchemeGroupVersion.WithResource("configmaps")

	w, err := srv.Watch(ctx, cms, "", metav1.ListOptions{ResourceVersion: srv.ResourceVersion()})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Stop()

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "settings"}}
	created, _ := srv.Create(ctx, cms, cm)
	cm = created.(*corev1.ConfigMap)
	cm.Data = map[string]string{"color": "blue"}
	_, _ = srv.Update(ctx, cms, cm)
	_ = srv.Delete(ctx, cms, "default", "settings", metav1.DeleteOptions{})

	for range 3 {
		ev := <-w.ResultChan()
		obj := ev.Object.(*corev1.ConfigMap)
		fmt.Println(ev.Type, obj.Name, obj.ResourceVersion, obj.Data)
	}
	// Output:
	// ADDED settings 2 map[]
	// MODIFIED settings 3 map[color:blue]
	// DELETED settings 4 map[color:blue]
}

func ExampleServer_ListerWatcher() {
	ctx := context.Background()
	srv := cachetest.New(cachetest.Options{})
	defer srv.Close()
	nodes := corev1.SchemeGroupVersion.WithResource("nodes")
	_, _ = srv.Create(ctx, nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})

	// What a Reflector does: list, then watch from the list's
	// resourceVersion so that nothing is missed in between.
	lw := srv.ListerWatcher(nodes, "")
	list, _ := lw.List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	rv := list.(*corev1.NodeList).ResourceVersion
	fmt.Println("listed", len(list.(*corev1.NodeList).Items), "node at", rv)

	_, _ = srv.Create(ctx, nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}})
	w, _ := lw.Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
	defer w.Stop()
	ev := <-w.ResultChan()
	fmt.Println(ev.Type, ev.Object.(*corev1.Node).Name)

	for _, r := range srv.Requests() {
		fmt.Printf("%s rv=%q\n", r.Verb, r.Options.ResourceVersion)
	}
	// Output:
	// listed 1 node at 2
	// ADDED n2
	// list rv="0"
	// watch rv="2"
}

func ExampleServer_Register() {
	ctx := context.Background()
	srv := cachetest.New(cachetest.Options{NoDefaultResources: true})
	defer srv.Close()
	widgets := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	if err := srv.Register(cachetest.Resource{GVR: widgets, Namespaced: true, Kind: "Widget"}); err != nil {
		fmt.Println(err)
		return
	}
	w := &unstructured.Unstructured{}
	w.SetNamespace("default")
	w.SetName("w1")
	_, _ = srv.Create(ctx, widgets, w)

	list, _ := srv.List(ctx, widgets, "", metav1.ListOptions{})
	ul := list.(*unstructured.UnstructuredList)
	fmt.Println(ul.GetKind(), len(ul.Items), ul.Items[0].GetAPIVersion(), ul.Items[0].GetKind(), ul.Items[0].GetName())
	// Output:
	// WidgetList 1 example.com/v1 Widget w1
}

func ExampleServer_Compact() {
	ctx := context.Background()
	srv := cachetest.New(cachetest.Options{})
	defer srv.Close()
	pods := corev1.SchemeGroupVersion.WithResource("pods")
	_, _ = srv.Create(ctx, pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "p"}})
	srv.Compact()

	// Resuming from before the compaction: the watch delivers one error.
	w, _ := srv.Watch(ctx, pods, "", metav1.ListOptions{ResourceVersion: "1"})
	ev := <-w.ResultChan()
	err := apierrors.FromObject(ev.Object)
	fmt.Println(ev.Type == watch.Error, apierrors.IsResourceExpired(err), err)
	// Output:
	// true true too old resource version: 1 (2)
}

func ExampleServer_FailNextLists() {
	ctx := context.Background()
	srv := cachetest.New(cachetest.Options{})
	defer srv.Close()
	pods := corev1.SchemeGroupVersion.WithResource("pods")

	srv.FailNextLists(1, apierrors.NewTooManyRequests("try later", 1))
	_, err := srv.List(ctx, pods, "", metav1.ListOptions{})
	fmt.Println(apierrors.IsTooManyRequests(err))
	_, err = srv.List(ctx, pods, "", metav1.ListOptions{})
	fmt.Println(err)
	// Output:
	// true
	// <nil>
}

func ExampleServer_Watch_sendInitialEvents() {
	ctx := context.Background()
	srv := cachetest.New(cachetest.Options{})
	defer srv.Close()
	pods := corev1.SchemeGroupVersion.WithResource("pods")
	for _, name := range []string{"a", "b"} {
		_, _ = srv.Create(ctx, pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}})
	}

	// A streaming list: the current objects as ADDED events, then a
	// bookmark marking the end of the initial state.
	yes := true
	w, err := srv.Watch(ctx, pods, "", metav1.ListOptions{
		SendInitialEvents:    &yes,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		AllowWatchBookmarks:  true,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Stop()
	for range 3 {
		ev := <-w.ResultChan()
		pod := ev.Object.(*corev1.Pod)
		if ev.Type == watch.Bookmark {
			fmt.Println(ev.Type, pod.ResourceVersion, metav1.InitialEventsAnnotationKey+"="+pod.Annotations[metav1.InitialEventsAnnotationKey])
			continue
		}
		fmt.Println(ev.Type, pod.Name, pod.ResourceVersion)
	}
	// Output:
	// ADDED a 2
	// ADDED b 3
	// BOOKMARK 3 k8s.io/initial-events-end=true
}

func ExampleServer_Update() {
	ctx := context.Background()
	srv := cachetest.New(cachetest.Options{})
	defer srv.Close()
	cms := corev1.SchemeGroupVersion.WithResource("configmaps")
	obj, _ := srv.Create(ctx, cms, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cfg"}})

	// Two writers start from the same resourceVersion; the second loses.
	first := obj.(*corev1.ConfigMap).DeepCopy()
	first.Data = map[string]string{"by": "first"}
	second := obj.(*corev1.ConfigMap).DeepCopy()
	second.Data = map[string]string{"by": "second"}
	_, err := srv.Update(ctx, cms, first)
	fmt.Println("first:", err)
	_, err = srv.Update(ctx, cms, second)
	fmt.Println("second conflicts:", apierrors.IsConflict(err))
	// Output:
	// first: <nil>
	// second conflicts: true
}
