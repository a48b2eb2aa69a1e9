package cache_test

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit/cache"
)

func examplePod(namespace, name, app string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Namespace: namespace, Name: name, ResourceVersion: "1",
		Labels: map[string]string{"app": app},
	}}
}

func ExampleMetaNamespaceKeyFunc() {
	key, _ := cache.MetaNamespaceKeyFunc(examplePod("shop", "web-1", "web"))
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	fmt.Println(key, ns, name)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
	key, _ = cache.MetaNamespaceKeyFunc(node)
	fmt.Println(key)
	// Output:
	// shop/web-1 shop web-1
	// node-1
}

func ExampleNewStore() {
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	_ = store.Add(examplePod("shop", "web-1", "web"))
	_ = store.Add(examplePod("shop", "db-1", "db"))
	fmt.Println("objects:", store.Len())

	obj, exists, _ := store.GetByKey("shop/web-1")
	fmt.Println("shop/web-1:", exists, obj.(*corev1.Pod).Labels["app"])

	// Replace swaps the whole contents, as a relist does.
	_ = store.Replace([]any{examplePod("blog", "web-2", "web")}, "42")
	fmt.Println("keys:", store.ListKeys(), "at resourceVersion", store.LastStoreSyncResourceVersion())

	// An object without metadata has no key: an error, not a panic.
	fmt.Println(store.Add("not an object") != nil)
	// Output:
	// objects: 2
	// shop/web-1: true web
	// keys: [blog/web-2] at resourceVersion 42
	// true
}

func ExampleNewIndexer() {
	byApp := func(obj any) ([]string, error) {
		return []string{obj.(*corev1.Pod).Labels["app"]}, nil
	}
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{
		cache.NamespaceIndex: cache.MetaNamespaceIndexFunc,
		"app":                byApp,
	})
	_ = indexer.Add(examplePod("shop", "web-1", "web"))
	_ = indexer.Add(examplePod("shop", "db-1", "db"))
	_ = indexer.Add(examplePod("blog", "web-2", "web"))

	keys, _ := indexer.IndexKeys("app", "web")
	fmt.Println("app=web:", keys)
	keys, _ = indexer.IndexKeys(cache.NamespaceIndex, "shop")
	fmt.Println("namespace shop:", keys)
	fmt.Println("namespaces:", indexer.ListIndexFuncValues(cache.NamespaceIndex))

	// An index added later covers the objects already stored.
	_ = indexer.AddIndexers(cache.Indexers{"name": func(obj any) ([]string, error) {
		return []string{obj.(*corev1.Pod).Name}, nil
	}})
	objs, _ := indexer.ByIndex("name", "db-1")
	fmt.Println("name=db-1:", objs[0].(*corev1.Pod).Namespace)
	// Output:
	// app=web: [blog/web-2 shop/web-1]
	// namespace shop: [shop/db-1 shop/web-1]
	// namespaces: [blog shop]
	// name=db-1: shop
}

func ExampleDeltaFIFO() {
	// The consumer's store is also the queue's known objects, so that a
	// relist can tell which objects disappeared.
	store := cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, cache.Indexers{})
	fifo := cache.NewDeltaFIFO(cache.DeltaFIFOOptions{KnownObjects: store})

	// What a Reflector would write: a list, then watch events.
	_ = fifo.Replace([]any{examplePod("shop", "web-1", "web"), examplePod("shop", "db-1", "db")}, "10")
	_ = fifo.Update(examplePod("shop", "web-1", "web-v2")) // joins web-1's queued deltas
	_ = fifo.Delete(examplePod("shop", "db-1", "db"))

	process := func(deltas cache.Deltas, isInInitialList bool) error {
		for _, d := range deltas {
			key, _ := cache.DeletionHandlingMetaNamespaceKeyFunc(d.Object)
			fmt.Printf("%s %s (initial list: %v)\n", d.Type, key, isInInitialList)
			if d.Type == cache.Deleted {
				_ = store.Delete(d.Object)
			} else {
				_ = store.Update(d.Object)
			}
		}
		return nil
	}
	for fifo.Len() > 0 {
		_ = fifo.Pop(context.Background(), process)
	}
	fmt.Println("synced:", fifo.HasSynced(), "stored:", store.ListKeys())

	// A relist that no longer contains web-1 produces a tombstone.
	_ = fifo.Replace(nil, "20")
	_ = fifo.Pop(context.Background(), func(deltas cache.Deltas, _ bool) error {
		tomb := deltas.Newest().Object.(cache.DeletedFinalStateUnknown)
		fmt.Println(deltas.Newest().Type, tomb.Key, "last known app:", tomb.Obj.(*corev1.Pod).Labels["app"])
		return nil
	})
	// Output:
	// Sync shop/web-1 (initial list: true)
	// Updated shop/web-1 (initial list: true)
	// Sync shop/db-1 (initial list: true)
	// Deleted shop/db-1 (initial list: true)
	// synced: true stored: [shop/web-1]
	// Deleted shop/web-1 last known app: web-v2
}

func ExampleLister() {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	_ = indexer.Add(examplePod("shop", "web-1", "web"))
	_ = indexer.Add(examplePod("shop", "db-1", "db"))
	_ = indexer.Add(examplePod("blog", "web-2", "web"))

	pods := cache.NewLister[*corev1.Pod](indexer, schema.GroupResource{Resource: "pods"})
	web, _ := pods.List(labels.SelectorFromSet(labels.Set{"app": "web"}))
	var names []string
	for _, p := range web {
		names = append(names, p.Namespace+"/"+p.Name)
	}
	sort.Strings(names)
	fmt.Println(names)

	p, _ := pods.ByNamespace("shop").Get("db-1")
	fmt.Println(p.Name, p.Labels["app"])

	_, err := pods.ByNamespace("shop").Get("missing")
	fmt.Println(err)
	// Output:
	// [blog/web-2 shop/web-1]
	// db-1 db
	// pods "missing" not found
}

func ExampleListAllByNamespace() {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	_ = indexer.Add(examplePod("shop", "web-1", "web"))
	_ = indexer.Add(examplePod("blog", "web-2", "web"))
	_ = cache.ListAllByNamespace(indexer, "blog", labels.Everything(), func(obj any) {
		fmt.Println(obj.(*corev1.Pod).Name)
	})
	// Output:
	// web-2
}

func ExampleThreadSafeStore() {
	var s cache.ThreadSafeStore // the zero value is ready to use
	_ = s.Add("a", examplePod("shop", "a", "web"))
	s.Bookmark("42")
	obj, ok := s.Get("a")
	fmt.Println(obj.(*corev1.Pod).Name, ok, s.LastStoreSyncResourceVersion())
	// Output:
	// a true 42
}
