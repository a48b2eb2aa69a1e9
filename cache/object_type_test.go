package cache_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/quotakit/quotakit/cache"
	"github.com/quotakit/quotakit/cache/cachetest"
)

// errorLog collects the errors given to a watch error handler.
type errorLog struct {
	mu   sync.Mutex
	errs []error
}

func (l *errorLog) handle(_ context.Context, _ *cache.Reflector, err error) {
	l.mu.Lock()
	l.errs = append(l.errs, err)
	l.mu.Unlock()
}

// count returns how many errors match target (errors.Is).
func (l *errorLog) count(target error) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, err := range l.errs {
		if errors.Is(err, target) {
			n++
		}
	}
	return n
}

func (l *errorLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, err := range l.errs {
		b.WriteString(err.Error())
		b.WriteByte('\n')
	}
	return b.String()
}

// badPodsBecomeConfigMaps is a transform that turns pods labelled bad=yes
// into configmaps: an object that, after the transform, is not a pod.
func badPodsBecomeConfigMaps(obj any) (any, error) {
	p := obj.(*corev1.Pod)
	if p.Labels["bad"] == "yes" {
		return &corev1.ConfigMap{ObjectMeta: p.ObjectMeta}, nil
	}
	return p, nil
}

func labeled(ns, name, key, value string) *corev1.Pod {
	p := testPod(ns, name)
	p.Labels = map[string]string{key: value}
	return p
}

func TestReflectorWrongTypeInListFailsTheList(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := cachetest.New(cachetest.Options{})
		defer srv.Close()
		mustCreate(t, srv, configMapsGVR, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "listed"}})
		store := cache.NewStore(cache.MetaNamespaceKeyFunc)
		var errs errorLog
		// A reflector that expects pods, given a configmap endpoint.
		r := cache.NewReflector(srv.ListerWatcher(configMapsGVR, ""), &corev1.Pod{}, store, cache.ReflectorOptions{
			WatchErrorHandler: errs.handle,
		})
		stop := startReflector(t.Context(), r)
		defer stop()
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := len(store.List()); n != 0 {
			t.Errorf("store holds %d objects of the wrong type", n)
		}
		if rv := r.LastSyncResourceVersion(); rv != "" {
			t.Errorf("LastSyncResourceVersion() = %q after failed lists, want \"\"", rv)
		}
		// 800ms doubling, with up to 100% jitter: at least 5 lists a minute.
		if n := errs.count(cache.ErrUnexpectedType); n < 5 {
			t.Errorf("%d list failures wrapping ErrUnexpectedType in a minute, want >= 5; errors:\n%s", n, &errs)
		}
		const want = `object "ns/listed": got *v1.ConfigMap, want *v1.Pod`
		if !strings.Contains(errs.String(), want) {
			t.Errorf("errors do not say %q:\n%s", want, &errs)
		}
		for _, req := range srv.Requests() {
			if req.Verb == "watch" {
				t.Errorf("reflector watched after its list failed: %+v", req)
			}
		}
	})
}

func TestInformerWrongTypeInListNeverSyncs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := cachetest.New(cachetest.Options{})
		defer srv.Close()
		mustCreate(t, srv, podsGVR, testPod("ns", "good"))
		mustCreate(t, srv, podsGVR, labeled("ns", "bad", "bad", "yes"))
		inf := newPodInformer(srv, cache.SharedIndexInformerOptions{})
		var errs errorLog
		inf.SetWatchErrorHandler(errs.handle)
		inf.SetTransform(badPodsBecomeConfigMaps)
		rec := &recorder{}
		inf.AddEventHandler(rec)
		stop := startInformer(t.Context(), inf)
		defer stop()
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		if inf.HasSynced() {
			t.Error("HasSynced() = true, though every list held an object of the wrong type")
		}
		if keys := inf.GetStore().ListKeys(); len(keys) != 0 {
			t.Errorf("store holds %v, want nothing: a list is stored whole or not at all", keys)
		}
		if got := rec.take(); len(got) != 0 {
			t.Errorf("handler was told %v", got)
		}
		if n := errs.count(cache.ErrUnexpectedType); n < 5 {
			t.Errorf("%d errors wrapping ErrUnexpectedType, want the informer to keep relisting; errors:\n%s", n, &errs)
		}

		// Once the object is fixed, the next relist syncs.
		update(t, srv, "ns", "bad", nil)
		time.Sleep(time.Minute)
		synctest.Wait()
		if !inf.HasSynced() {
			t.Error("HasSynced() = false after the bad object was fixed")
		}
		if diff := cmp.Diff([]string{"ns/bad", "ns/good"}, storeKeys(inf.GetStore())); diff != "" {
			t.Errorf("store keys (-want +got):\n%s", diff)
		}
	})
}

func TestInformerWrongTypeInWatchRelistsAndKeepsTheStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := cachetest.New(cachetest.Options{})
		defer srv.Close()
		mustCreate(t, srv, podsGVR, testPod("ns", "a"))
		inf := newPodInformer(srv, cache.SharedIndexInformerOptions{})
		var errs errorLog
		inf.SetWatchErrorHandler(errs.handle)
		inf.SetTransform(badPodsBecomeConfigMaps)
		stop := startInformer(t.Context(), inf)
		defer stop()
		synctest.Wait()
		if !inf.HasSynced() {
			t.Fatal("informer did not sync")
		}
		srv.ResetRequests()
		mustCreate(t, srv, podsGVR, labeled("ns", "bad", "bad", "yes"))
		mustCreate(t, srv, podsGVR, testPod("ns", "b"))
		time.Sleep(2 * time.Minute)
		synctest.Wait()

		if !inf.HasSynced() {
			t.Error("HasSynced() = false: an informer that synced stays synced")
		}
		// The watch ended at the bad object, before b; every relist since
		// fails on it, so the store keeps what it had.
		if diff := cmp.Diff([]string{"ns/a"}, storeKeys(inf.GetStore())); diff != "" {
			t.Errorf("store keys (-want +got):\n%s", diff)
		}
		if !strings.Contains(errs.String(), `ADDED event: cache: object of an unexpected type: object "ns/bad"`) {
			t.Errorf("no error for the watched object:\n%s", &errs)
		}
		lists := 0
		for _, req := range srv.Requests() {
			if req.Verb == "list" {
				lists++
			}
		}
		if lists < 3 || errs.count(cache.ErrUnexpectedType) != lists+1 {
			t.Errorf("%d relists and %d type errors, want several relists each failing, after the failed watch; errors:\n%s",
				lists, errs.count(cache.ErrUnexpectedType), &errs)
		}

		update(t, srv, "ns", "bad", nil)
		time.Sleep(time.Minute)
		synctest.Wait()
		if diff := cmp.Diff([]string{"ns/a", "ns/b", "ns/bad"}, storeKeys(inf.GetStore())); diff != "" {
			t.Errorf("store keys after the fix (-want +got):\n%s", diff)
		}
	})
}

func TestInformerTransformErrorFailsTheList(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := cachetest.New(cachetest.Options{})
		defer srv.Close()
		mustCreate(t, srv, podsGVR, testPod("ns", "good"))
		mustCreate(t, srv, podsGVR, labeled("ns", "broken", "broken", "yes"))
		errBroken := errors.New("cannot trim this pod")
		inf := newPodInformer(srv, cache.SharedIndexInformerOptions{})
		var errs errorLog
		inf.SetWatchErrorHandler(errs.handle)
		inf.SetTransform(func(obj any) (any, error) {
			if obj.(*corev1.Pod).Labels["broken"] == "yes" {
				return nil, errBroken
			}
			return obj, nil
		})
		stop := startInformer(t.Context(), inf)
		defer stop()
		time.Sleep(time.Minute)
		synctest.Wait()
		if inf.HasSynced() {
			t.Error("HasSynced() = true, though the transform failed on a listed object")
		}
		if keys := inf.GetStore().ListKeys(); len(keys) != 0 {
			t.Errorf("store holds %v, want nothing", keys)
		}
		if n := errs.count(errBroken); n < 5 {
			t.Errorf("%d errors wrapping the transform's error, want >= 5; errors:\n%s", n, &errs)
		}
		if !strings.Contains(errs.String(), `transform of object "ns/broken": cannot trim this pod`) {
			t.Errorf("errors do not name the object:\n%s", &errs)
		}

		// In a watch, a transform error ends the watch and is reported.
		del(t, srv, "ns", "broken")
		time.Sleep(time.Minute)
		synctest.Wait()
		if !inf.HasSynced() {
			t.Fatal("HasSynced() = false after the broken object was deleted")
		}
		before := errs.count(errBroken)
		mustCreate(t, srv, podsGVR, labeled("ns", "broken2", "broken", "yes"))
		synctest.Wait()
		if errs.count(errBroken) != before+1 {
			t.Errorf("watch of a broken object reported %d errors, want 1", errs.count(errBroken)-before)
		}
		if diff := cmp.Diff([]string{"ns/good"}, storeKeys(inf.GetStore())); diff != "" {
			t.Errorf("store keys (-want +got):\n%s", diff)
		}
	})
}

func TestInformerTransformConvertsUnstructured(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := cachetest.New(cachetest.Options{NoDefaultResources: true})
		defer srv.Close()
		// Pods served unstructured, as a dynamic client would.
		if err := srv.Register(cachetest.Resource{GVR: podsGVR, Namespaced: true, Kind: "Pod"}); err != nil {
			t.Fatal(err)
		}
		newPod := func(name string) *unstructured.Unstructured {
			return &unstructured.Unstructured{Object: map[string]any{
				"metadata": map[string]any{"namespace": "ns", "name": name},
				"spec":     map[string]any{"nodeName": "node-1"},
			}}
		}
		mustCreate(t, srv, podsGVR, newPod("listed"))
		toPod := func(obj any) (any, error) {
			u, ok := obj.(*unstructured.Unstructured)
			if !ok {
				return obj, nil // already converted
			}
			p := &corev1.Pod{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, p); err != nil {
				return nil, err
			}
			return p, nil
		}

		inf := cache.NewSharedIndexInformer(srv.ListerWatcher(podsGVR, ""), &corev1.Pod{}, cache.SharedIndexInformerOptions{})
		var errs errorLog
		inf.SetWatchErrorHandler(errs.handle)
		inf.SetTransform(toPod)
		var mu sync.Mutex
		var nodes []string
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs[*corev1.Pod]{
			AddFunc: func(p *corev1.Pod, _ bool) {
				mu.Lock()
				nodes = append(nodes, p.Name+"@"+p.Spec.NodeName)
				mu.Unlock()
			},
		}); err != nil {
			t.Fatalf("AddEventHandler of a *v1.Pod handler: %v", err)
		}
		// Without the transform the same objects are of the wrong type.
		untransformed := cache.NewSharedIndexInformer(srv.ListerWatcher(podsGVR, ""), &corev1.Pod{}, cache.SharedIndexInformerOptions{})
		var untransformedErrs errorLog
		untransformed.SetWatchErrorHandler(untransformedErrs.handle)

		stop := startInformer(t.Context(), inf)
		defer stop()
		stopUntransformed := startInformer(t.Context(), untransformed)
		defer stopUntransformed()
		synctest.Wait()
		mustCreate(t, srv, podsGVR, newPod("watched"))
		time.Sleep(2 * time.Minute) // bookmarks arrive unstructured, untransformed
		synctest.Wait()

		if !inf.HasSynced() {
			t.Errorf("HasSynced() = false; errors:\n%s", &errs)
		}
		if s := errs.String(); s != "" {
			t.Errorf("errors:\n%s", s)
		}
		for _, obj := range inf.GetStore().List() {
			if _, ok := obj.(*corev1.Pod); !ok {
				t.Errorf("store holds a %T", obj)
			}
		}
		mu.Lock()
		if diff := cmp.Diff([]string{"listed@node-1", "watched@node-1"}, nodes); diff != "" {
			t.Errorf("handler saw (-want +got):\n%s", diff)
		}
		mu.Unlock()
		if untransformed.HasSynced() || untransformedErrs.count(cache.ErrUnexpectedType) == 0 {
			t.Errorf("informer without the transform: HasSynced() = %v, errors:\n%s", untransformed.HasSynced(), &untransformedErrs)
		}
	})
}

func TestAddEventHandlerRefusesHandlerOfAnotherType(t *testing.T) {
	lw := &cache.ListWatch{}
	configMaps := cache.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, cache.SharedIndexInformerOptions{})
	untyped := cache.NewSharedIndexInformer(lw, nil, cache.SharedIndexInformerOptions{})
	podHandler := cache.ResourceEventHandlerFuncs[*corev1.Pod]{}
	tests := []struct {
		name    string
		inf     *cache.SharedIndexInformer
		h       cache.ResourceEventHandler
		wantErr string
	}{
		{"pod handler on configmaps", configMaps, podHandler, "cache: handler for *v1.Pod cannot receive *v1.ConfigMap objects"},
		{"filtered pod handler on configmaps", configMaps, cache.FilteringResourceEventHandler{FilterFunc: func(any) bool { return true }, Handler: podHandler},
			"cache: handler for *v1.Pod cannot receive *v1.ConfigMap objects"},
		{"configmap handler", configMaps, cache.ResourceEventHandlerFuncs[*corev1.ConfigMap]{}, ""},
		{"metav1.Object handler", configMaps, cache.ResourceEventHandlerFuncs[metav1.Object]{}, ""},
		{"runtime.Object handler", configMaps, cache.ResourceEventHandlerFuncs[runtime.Object]{}, ""},
		{"any handler", configMaps, cache.ResourceEventHandlerFuncs[any]{}, ""},
		{"handler of its own type", configMaps, &recorder{}, ""},
		{"pod handler on an untyped informer", untyped, podHandler, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.inf.AddEventHandler(tt.h)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.wantErr {
				t.Errorf("AddEventHandler(%T) error = %q, want %q", tt.h, got, tt.wantErr)
			}
			_, err = tt.inf.AddEventHandlerWithOptions(tt.h, cache.HandlerOptions{})
			if (err != nil) != (tt.wantErr != "") {
				t.Errorf("AddEventHandlerWithOptions(%T) error = %v, want error %v", tt.h, err, tt.wantErr != "")
			}
		})
	}
}

// TestInformerUpdatesWithoutResourceVersion checks that an update between
// objects without a resourceVersion reaches a handler that does not
// resync: only equal, known versions make a resync.
func TestInformerUpdatesWithoutResourceVersion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lw := &cache.ListWatch{
			ListFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
				return &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}, Items: []corev1.ConfigMap{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}}}, nil
			},
			WatchFunc: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
				w := watch.NewFake()
				go w.Modify(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", Labels: map[string]string{"v": "2"}}})
				return w, nil
			},
		}
		inf := cache.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, cache.SharedIndexInformerOptions{})
		var updates atomic.Int32
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs[*corev1.ConfigMap]{
			UpdateFunc: func(_, _ *corev1.ConfigMap) { updates.Add(1) },
		}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); inf.Run(ctx) }()
		time.Sleep(time.Second)
		synctest.Wait()
		cancel()
		<-done
		if n := updates.Load(); n != 1 {
			t.Errorf("handler saw %d updates, want 1", n)
		}
	})
}
