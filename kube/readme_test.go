package kube_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/quotakit/quotakit"
	"github.com/quotakit/quotakit/admission"
	"github.com/quotakit/quotakit/cache"
	"github.com/quotakit/quotakit/evaluator"
	"github.com/quotakit/quotakit/generic"
	"github.com/quotakit/quotakit/kube"
	"github.com/quotakit/quotakit/kube/manager"
	"github.com/quotakit/quotakit/quota"
	"github.com/quotakit/quotakit/workqueue"
)

// TestREADMESnippets checks that every Go snippet of the repository's
// README and of this module's is code that compiles: its lines, in order,
// are those of one of the functions below, which this test file compiles
// with the module (this module can import both the library and
// controller-runtime, so it holds the snippets of both). A snippet edited
// in a README without its function here fails the test.
func TestREADMESnippets(t *testing.T) {
	checkSnippets(t, "../README.md", "readme_test.go")
	checkSnippets(t, "README.md", "readme_test.go")
}

// checkSnippets fails for every ```go block of doc whose non-blank lines
// are not an ordered subsequence of the lines of one top-level
// function of src.
func checkSnippets(t *testing.T, doc, src string) {
	t.Helper()
	md, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	code, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	var funcs [][]string
	for _, f := range strings.Split(string(code), "\nfunc ")[1:] {
		funcs = append(funcs, trimmedLines(f))
	}
	blocks := 0
	for i, part := range strings.Split(string(md), "```go\n")[1:] {
		block, _, ok := strings.Cut(part, "```")
		if !ok {
			t.Fatalf("%s: go block %d is not closed", doc, i+1)
		}
		blocks++
		want := trimmedLines(block)
		found := false
		for _, f := range funcs {
			if subsequence(want, f) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("%s: go block %d is in no function of %s:\n%s", doc, i+1, src, block)
		}
	}
	if blocks == 0 {
		t.Fatalf("%s has no go block", doc)
	}
}

// trimmedLines returns the non-blank lines of s with their runs of
// spaces and tabs made one space: gofmt aligns comments differently in a
// function than in a README.
func trimmedLines(s string) []string {
	var out []string
	for l := range strings.Lines(s) {
		if l = strings.Join(strings.Fields(l), " "); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// subsequence reports whether want's lines appear in have in order.
func subsequence(want, have []string) bool {
	i := 0
	for _, l := range have {
		if i < len(want) && l == want[i] {
			i++
		}
	}
	return i == len(want)
}

// The README's snippets, each in a function that gives it what it names.

func readmeController(ctx context.Context, client quotakit.Client, log logr.Logger, mgr interface {
	AddReadyzCheck(string, func(*http.Request) error) error
}) error {
	// client is anything with ListerWatcher(gvr, namespace) and UpdateStatus(ctx, gvr, obj):
	// a *cachetest.Server, or the kube bridge over client-go. A client that can also
	// discover resources (quotakit.Discoverer) gets count/<anything> counted.
	controller, err := quotakit.NewController(client, quotakit.Options{Logger: log})
	if err != nil {
		return err
	}
	go controller.Run(ctx) // or mgr.Add(controller): it is a controller-runtime Runnable

	// Ready is nil once every informer has synced. Under leader election a
	// standby does not run the controller and gets ErrNotRunning: ignore it, or
	// standbys stay unready and a rolling update waits on them.
	mgr.AddReadyzCheck("resourcequota", func(r *http.Request) error {
		if err := controller.Ready(r); !errors.Is(err, quotakit.ErrNotRunning) {
			return err
		}
		return nil
	})
	return nil
}

func readmeQuota(q corev1.ResourceQuota, requested corev1.ResourceList) error {
	used := quota.Add(q.Status.Used, requested)
	if ok, exceeded := quota.LessThanOrEqual(used, q.Status.Hard); !ok {
		return fmt.Errorf("exceeded quota on %v", exceeded)
	}
	return nil
}

func readmeAdmission(ctx context.Context, quotaLister admission.QuotaLister, informer *cache.SharedIndexInformer, quotaClient admission.QuotaClient, registry quota.Registry, review admissionv1.AdmissionReview) error {
	accessor := admission.NewAccessor(quotaLister, informer.HasSynced, quotaClient, admission.AccessorOptions{})
	e, err := admission.NewEvaluator(accessor, admission.Options{Registry: registry}) // registry is only read
	if err != nil {
		return err
	}
	go e.Run(ctx)

	http.Handle("/validate", &admission.Handler{Evaluator: e}) // AdmissionReview v1 (or v1beta1)

	// Or from your own admission code:
	attrs, err := admission.NewAttributes(review.Request) // typed objects out of an AdmissionRequest
	if err != nil {
		return err
	}
	err = e.Evaluate(ctx, attrs) // nil, or kube-apiserver's Forbidden error
	return err
}

func readmeClusterQuotas(client quotakit.Client, namespacedOrNil admission.QuotaAccessor, clusterQuotaInformer, namespaceInformer *cache.SharedIndexInformer, namespaceGetter admission.NamespaceGetter, cachesSynced func() bool, clusterQuotaClient admission.ClusterQuotaClient) error {
	controller, err := quotakit.NewController(client, quotakit.Options{ClusterQuotas: true})
	// A clusterquota.Index fed by the event handlers of a ClusterQuota
	// informer and a namespace informer (kube.ClusterQuotaIndex wires both).
	index, err := kube.ClusterQuotaIndex(clusterQuotaInformer, namespaceInformer)
	accessor := admission.NewClusterAccessor(namespacedOrNil, index, namespaceGetter, cachesSynced, clusterQuotaClient)
	engine, err := admission.NewEvaluator(accessor, admission.Options{})
	_, _ = controller, engine
	return err
}

func readmeEvaluators(pod *corev1.Pod, listerFor generic.ListerForResourceFunc, listWidgets generic.ListFuncByNamespace) error {
	// Admission only: usage of single objects, no listing.
	registry, err := evaluator.NewRegistry(nil, evaluator.Options{})
	if err != nil {
		return err
	}
	usage, err := registry.Get(schema.GroupResource{Resource: "pods"}).Usage(pod)
	_ = usage

	// A controller lists through its informers' indexers.
	listers := func(gvr schema.GroupVersionResource) (generic.ListFuncByNamespace, error) { return listerFor(gvr) }
	registry, err = evaluator.NewRegistry(listers, evaluator.Options{})

	// Anything else is counted as count/<resource>.<group>.
	widgets := generic.NewObjectCountEvaluator(schema.GroupResource{Group: "example.com", Resource: "widgets"}, listWidgets, "")
	_ = widgets
	return err
}

func readmeInformer(ctx context.Context, lw cache.ListerWatcher, podsGR schema.GroupResource, added, deleted func(*corev1.Pod)) cache.Lister[*corev1.Pod] {
	informer := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, cache.SharedIndexInformerOptions{})
	informer.AddEventHandler(cache.ResourceEventHandlerFuncs[*corev1.Pod]{
		AddFunc:    func(p *corev1.Pod, initial bool) { added(p) },
		DeleteFunc: func(d cache.DeletedObject[*corev1.Pod]) { deleted(d.Object) }, // tombstones unwrapped
	})
	go informer.Run(ctx) // returns once every goroutine it started has exited
	cache.WaitForCacheSync(ctx, informer.HasSynced)
	pods := cache.NewLister[*corev1.Pod](informer.GetIndexer(), podsGR)
	return pods
}

func readmeWorkqueue(sync func(string) error) {
	q := workqueue.NewRateLimiting(workqueue.DefaultControllerRateLimiter[string](), workqueue.Options{Name: "quota"})
	defer q.ShutDown()
	for {
		key, shutdown := q.Get()
		if shutdown {
			return
		}
		if err := sync(key); err != nil {
			q.AddRateLimited(key)
		} else {
			q.Forget(key)
		}
		q.Done(key)
	}
}

func readmeKubeController(ctx context.Context, cfg *rest.Config, log logr.Logger) error {
	opts := quotakit.Options{Logger: log}
	client, err := kube.NewForConfig(cfg, opts) // the same opts as the controller
	if err != nil {
		return err
	}
	controller, err := quotakit.NewController(client, opts)
	if err != nil {
		return err
	}
	err = controller.Run(ctx)
	return err
}

func readmeKubeManager(cfg *rest.Config) error {
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		LeaderElection: true, LeaderElectionID: "quotakit-controller",
		LeaderElectionReleaseOnCancel: true, // quotakit's line: hand the lease over at once on shutdown
		HealthProbeBindAddress:        ":8081",
	})
	if err != nil {
		return err
	}
	if _, err := manager.Add(mgr); err != nil { // quotakit's lines: 4 (package kube/manager)
		return err
	}
	return nil
}
