package cache_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit/cache"
)

var podsResource = schema.GroupResource{Resource: "pods"}

func podIndexer(t *testing.T) cache.Indexer {
	idx := namespaceIndexer()
	for _, p := range []*corev1.Pod{
		labeledPod("a", "web-1", map[string]string{"app": "web"}),
		labeledPod("a", "db-1", map[string]string{"app": "db"}),
		labeledPod("b", "web-2", map[string]string{"app": "web"}),
	} {
		require.NoError(t, idx.Add(p))
	}
	return idx
}

func names(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	slices.Sort(out)
	return out
}

func TestLister_List(t *testing.T) {
	lister := cache.NewLister[*corev1.Pod](podIndexer(t), podsResource)
	web := labels.SelectorFromSet(labels.Set{"app": "web"})
	tests := []struct {
		name     string
		list     func() ([]*corev1.Pod, error)
		wantKeys []string
	}{
		{"all namespaces, everything", func() ([]*corev1.Pod, error) { return lister.List(labels.Everything()) }, []string{"a/db-1", "a/web-1", "b/web-2"}},
		{"all namespaces, nil selector", func() ([]*corev1.Pod, error) { return lister.List(nil) }, []string{"a/db-1", "a/web-1", "b/web-2"}},
		{"all namespaces, by label", func() ([]*corev1.Pod, error) { return lister.List(web) }, []string{"a/web-1", "b/web-2"}},
		{"nothing", func() ([]*corev1.Pod, error) { return lister.List(labels.Nothing()) }, nil},
		{"one namespace", func() ([]*corev1.Pod, error) { return lister.ByNamespace("a").List(labels.Everything()) }, []string{"a/db-1", "a/web-1"}},
		{"one namespace, by label", func() ([]*corev1.Pod, error) { return lister.ByNamespace("a").List(web) }, []string{"a/web-1"}},
		{"empty namespace", func() ([]*corev1.Pod, error) { return lister.ByNamespace("zzz").List(nil) }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.list()
			require.NoError(t, err)
			if keys := names(got); !slices.Equal(keys, tt.wantKeys) {
				t.Errorf("List = %v, want %v", keys, tt.wantKeys)
			}
		})
	}
}

func TestLister_GetNotFound(t *testing.T) {
	lister := cache.NewLister[*corev1.Pod](podIndexer(t), podsResource)
	got, err := lister.ByNamespace("a").Get("web-1")
	if err != nil || got.Name != "web-1" {
		t.Fatalf("Get(a/web-1) = %v, %v", got, err)
	}
	for _, get := range []func() (*corev1.Pod, error){
		func() (*corev1.Pod, error) { return lister.ByNamespace("b").Get("db-1") },
		func() (*corev1.Pod, error) { return lister.Get("web-1") }, // cluster-scoped key "web-1" does not exist
	} {
		p, err := get()
		if !apierrors.IsNotFound(err) || p != nil {
			t.Errorf("Get of a missing pod = %v, %v, want NotFound", p, err)
			continue
		}
		status := err.(apierrors.APIStatus).Status()
		if status.Details.Kind != "pods" || status.Details.Group != "" {
			t.Errorf("NotFound details = %+v, want resource pods", status.Details)
		}
	}
}

func TestLister_ClusterScoped(t *testing.T) {
	idx := namespaceIndexer()
	require.NoError(t, idx.Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}))
	lister := cache.NewLister[*corev1.Node](idx, schema.GroupResource{Resource: "nodes"})
	if n, err := lister.Get("n1"); err != nil || n.Name != "n1" {
		t.Errorf("Get(n1) = %v, %v", n, err)
	}
}

func TestLister_WrongTypeIsAnError(t *testing.T) {
	idx := podIndexer(t)
	require.NoError(t, idx.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "cm"}}))
	lister := cache.NewLister[*corev1.Pod](idx, podsResource)
	if _, err := lister.List(labels.Everything()); err == nil || !strings.Contains(err.Error(), "ConfigMap") {
		t.Errorf("List with a ConfigMap in the cache = %v, want a type error", err)
	}
	if _, err := lister.ByNamespace("a").List(nil); err == nil {
		t.Error("namespace List with a ConfigMap in the cache succeeded, want error")
	}
	if _, err := lister.ByNamespace("a").Get("cm"); err == nil {
		t.Error("Get of a ConfigMap through a pod lister succeeded, want error")
	}
	var zero cache.Lister[*corev1.Pod]
	if _, err := zero.List(nil); err == nil {
		t.Error("List on the zero lister succeeded, want error")
	}
}

func TestGenericLister(t *testing.T) {
	lister := cache.NewGenericLister(podIndexer(t), podsResource)
	objs, err := lister.ByNamespace("b").List(labels.Everything())
	require.NoError(t, err)
	if len(objs) != 1 || objs[0].(*corev1.Pod).Name != "web-2" {
		t.Errorf("List(b) = %v", objs)
	}
	var obj runtime.Object
	if obj, err = lister.ByNamespace("a").Get("db-1"); err != nil || obj.(*corev1.Pod).Name != "db-1" {
		t.Errorf("Get(a/db-1) = %v, %v", obj, err)
	}
}

func TestListAllByNamespace(t *testing.T) {
	withIndex := podIndexer(t)
	withoutIndex := cache.NewIndexer(cache.MetaNamespaceKeyFunc, nil)
	for _, obj := range withIndex.List() {
		require.NoError(t, withoutIndex.Add(obj))
	}
	web := labels.SelectorFromSet(labels.Set{"app": "web"})
	for name, idx := range map[string]cache.Indexer{"namespace index": withIndex, "no index (scan)": withoutIndex} {
		t.Run(name, func(t *testing.T) {
			var got []*corev1.Pod
			collect := func(obj any) { got = append(got, obj.(*corev1.Pod)) }
			require.NoError(t, cache.ListAllByNamespace(idx, "a", web, collect))
			if keys := names(got); !slices.Equal(keys, []string{"a/web-1"}) {
				t.Errorf("ListAllByNamespace(a, app=web) = %v", keys)
			}
			got = nil
			require.NoError(t, cache.ListAllByNamespace(idx, metav1.NamespaceAll, web, collect))
			if keys := names(got); !slices.Equal(keys, []string{"a/web-1", "b/web-2"}) {
				t.Errorf("ListAllByNamespace(all, app=web) = %v", keys)
			}
		})
	}
}

func TestListAll_ObjectWithoutMeta(t *testing.T) {
	store := cache.NewStore(func(obj any) (string, error) { return "k", nil })
	require.NoError(t, store.Add("not an object"))
	if err := cache.ListAll(store, labels.SelectorFromSet(labels.Set{"a": "b"}), func(any) {}); err == nil {
		t.Error("ListAll with a label selector over an object without meta succeeded, want error")
	}
	n := 0
	require.NoError(t, cache.ListAll(store, labels.Everything(), func(any) { n++ }))
	if n != 1 {
		t.Errorf("ListAll(Everything) visited %d objects, want 1", n)
	}
}

func TestListAll_NilArguments(t *testing.T) {
	if err := cache.ListAll(nil, nil, func(any) {}); err == nil {
		t.Error("ListAll(nil store) succeeded, want error")
	}
	if err := cache.ListAllByNamespace(nil, "a", nil, func(any) {}); err == nil {
		t.Error("ListAllByNamespace(nil indexer) succeeded, want error")
	}
	if err := cache.ListAll(cache.NewStore(cache.MetaNamespaceKeyFunc), nil, nil); err == nil {
		t.Error("ListAll(nil append function) succeeded, want error")
	}
}
