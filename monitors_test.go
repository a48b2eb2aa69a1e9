package quotakit

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit/cache"
	"github.com/quotakit/quotakit/cache/cachetest"
	"github.com/quotakit/quotakit/generic"
	"github.com/quotakit/quotakit/quota"
)

// askCounter is an evaluator that counts the names MatchingResources is
// asked about.
type askCounter struct {
	quota.Evaluator
	asked map[corev1.ResourceName]int
}

func (a *askCounter) MatchingResources(input []corev1.ResourceName) []corev1.ResourceName {
	for _, name := range input {
		a.asked[name]++
	}
	return a.Evaluator.MatchingResources(input)
}

func TestMonitorChargesAny(t *testing.T) {
	gr := schema.GroupResource{Resource: "configmaps"}
	counter := &askCounter{Evaluator: generic.NewObjectCountEvaluator(gr, nil, ""), asked: map[corev1.ResourceName]int{}}
	m := &monitor{evaluator: counter}
	hard := func(names ...string) corev1.ResourceList {
		l := corev1.ResourceList{}
		for _, n := range names {
			l[corev1.ResourceName(n)] = resource.MustParse("1")
		}
		return l
	}
	for range 3 {
		for _, tc := range []struct {
			hard corev1.ResourceList
			want bool
		}{
			{hard("count/configmaps"), true},
			{hard("pods", "count/configmaps"), true},
			{hard("pods", "requests.cpu"), false},
			{hard(), false},
			{nil, false},
		} {
			if got := m.chargesAny(tc.hard); got != tc.want {
				t.Errorf("chargesAny(%v) = %v, want %v", tc.hard, got, tc.want)
			}
		}
	}
	for name, n := range counter.asked {
		if n != 1 {
			t.Errorf("MatchingResources asked about %s %d times, want once", name, n)
		}
	}

	// Past the bound, names are still answered right, without being kept.
	for i := range chargedNamesLimit + 10 {
		name := fmt.Sprintf("example.com/r%d", i)
		if m.chargesAny(hard(name)) {
			t.Fatalf("chargesAny(%s) = true, want false", name)
		}
	}
	if len(m.charged) > chargedNamesLimit {
		t.Errorf("%d names kept, want at most %d", len(m.charged), chargedNamesLimit)
	}
	if !m.chargesAny(hard("example.com/r9999", "count/configmaps")) {
		t.Error("chargesAny past the bound = false, want true")
	}
}

// TestEnqueueReportsListErrors checks that a quota cache that cannot be
// listed (here it holds an object that is not a quota) is an error for
// the caller to log, not a silent skip, and that a full resync that could
// not list starts no resync generation.
func TestEnqueueReportsListErrors(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	if err := indexer.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "not-a-quota"}}); err != nil {
		t.Fatal(err)
	}
	c := &Controller{
		quotas: cache.NewLister[*corev1.ResourceQuota](indexer, resourceQuotas.GroupResource()),
		queues: newQuotaQueues(Options{}),
	}
	defer c.queues.shutDown()
	m := &monitor{evaluator: generic.NewObjectCountEvaluator(schema.GroupResource{Resource: "configmaps"}, nil, "")}
	if err := c.enqueueMatching(m, "ns"); err == nil || !strings.Contains(err.Error(), `namespace "ns"`) {
		t.Errorf("enqueueMatching = %v, want an error naming the namespace", err)
	}
	if err := c.enqueueAll(); err == nil {
		t.Error("enqueueAll = nil, want the list error")
	}
	if n := c.resyncs.Load(); n != 0 {
		t.Errorf("resync generation %d after a failed resync, want 0", n)
	}
}

// TestInformerNamedForItsResource checks that the controller's reflectors
// are named for their resource, not for the type they store: every
// counted resource stores metadata, and logs and errors must tell their
// reflectors apart.
func TestInformerNamedForItsResource(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := cachetest.New(cachetest.Options{})
		defer srv.Close()
		secrets := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
		inf, err := newInformer(srv, secrets, "", metadataForm(secrets))
		if err != nil {
			t.Fatal(err)
		}
		names := make(chan string, 1)
		if err := inf.SetWatchErrorHandler(func(_ context.Context, r *cache.Reflector, _ error) {
			select {
			case names <- r.Name():
			default:
			}
		}); err != nil {
			t.Fatal(err)
		}
		srv.FailNextLists(1, nil)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { inf.Run(ctx); close(done) }()
		name := <-names
		cancel()
		<-done
		if name != "secrets" {
			t.Errorf("reflector name %q, want %q", name, "secrets")
		}
	})
}
