package cache_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit/cache"
	"github.com/quotakit/quotakit/cache/cachetest"
)

// An informer over the in-memory API of cachetest: a typed handler prints
// what happens, and a lister reads the informer's store.
func ExampleSharedIndexInformer() {
	ctx, cancel := context.WithCancel(context.Background())
	srv := cachetest.New(cachetest.Options{})
	defer srv.Close()
	pods := corev1.SchemeGroupVersion.WithResource("pods")
	srv.Create(ctx, pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web"}})

	informer := cache.NewSharedIndexInformer(srv.ListerWatcher(pods, ""), &corev1.Pod{}, cache.SharedIndexInformerOptions{})
	seen := make(chan string)
	informer.AddEventHandler(cache.ResourceEventHandlerFuncs[*corev1.Pod]{
		AddFunc: func(p *corev1.Pod, initial bool) {
			seen <- fmt.Sprintf("added %s/%s (initial list: %v)", p.Namespace, p.Name, initial)
		},
		UpdateFunc: func(old, p *corev1.Pod) {
			seen <- fmt.Sprintf("updated %s/%s: labels %v", p.Namespace, p.Name, p.Labels)
		},
		DeleteFunc: func(d cache.DeletedObject[*corev1.Pod]) {
			seen <- fmt.Sprintf("deleted %s", d.Key)
		},
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		informer.Run(ctx)
	}()
	fmt.Println(<-seen)
	cache.WaitForCacheSync(ctx, informer.HasSynced)

	srv.Create(ctx, pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "db"}})
	fmt.Println(<-seen)
	web, _ := srv.Get(ctx, pods, "team-a", "web")
	web.(*corev1.Pod).Labels = map[string]string{"tier": "frontend"}
	srv.Update(ctx, pods, web)
	fmt.Println(<-seen)

	lister := cache.NewLister[*corev1.Pod](informer.GetIndexer(), schema.GroupResource{Resource: "pods"})
	frontends, _ := lister.ByNamespace("team-a").List(labels.SelectorFromSet(labels.Set{"tier": "frontend"}))
	fmt.Println("frontend pods:", len(frontends), frontends[0].Name)
	_, err := lister.ByNamespace("team-a").Get("cache")
	fmt.Println(err)

	srv.Delete(ctx, pods, "team-a", "db", metav1.DeleteOptions{})
	fmt.Println(<-seen)

	cancel()
	<-done
	// Output:
	// added team-a/web (initial list: true)
	// added team-a/db (initial list: false)
	// updated team-a/web: labels map[tier:frontend]
	// frontend pods: 1 web
	// pods "cache" not found
	// deleted team-a/db
}
