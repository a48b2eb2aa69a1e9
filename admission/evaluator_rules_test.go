package admission_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit/admission"
	"github.com/quotakit/quotakit/evaluator"
	"github.com/quotakit/quotakit/generic"
	"github.com/quotakit/quotakit/quota"
)

func TestEvaluatorRules(t *testing.T) {
	widgets := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	widget := func(op admissionv1.Operation) *quota.AttributesRecord {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("example.com/v1")
		u.SetKind("Widget")
		u.SetName("w")
		return &quota.AttributesRecord{Operation: op, Object: u, Resource: widgets, Namespace: "ns"}
	}
	full := rq("ns", "full", rl("pods", "1", "count/widgets.example.com", "0", "count/events", "0"), rl("pods", "1", "count/widgets.example.com", "0", "count/events", "0"))
	event := &quota.AttributesRecord{Operation: admissionv1.Create, Object: &corev1.Event{}, Resource: corev1.SchemeGroupVersion.WithResource("events"), Namespace: "ns"}
	clusterPod := podCreate("", "p", "")
	nsCreate := &quota.AttributesRecord{Operation: admissionv1.Create, Object: &corev1.Namespace{}, Resource: corev1.SchemeGroupVersion.WithResource("namespaces"), Namespace: "ns"}
	podDelete := podCreate("ns", "p", "")
	podDelete.Operation = admissionv1.Delete
	podUpdateNoOld := podCreate("ns", "p", "")
	podUpdateNoOld.Operation = admissionv1.Update
	podUpdateNoOld.Subresource = "resize"
	podUpdateNoOld.Object.(*corev1.Pod).Spec.Containers[0].Resources.Requests = rl("cpu", "1")

	tests := []struct {
		name    string
		quotas  []*corev1.ResourceQuota
		opts    admission.Options
		a       quota.Attributes
		wantErr string // "" for admitted
	}{
		{name: "over quota", quotas: []*corev1.ResourceQuota{full}, a: podCreate("ns", "p", ""),
			wantErr: `pods "p" is forbidden: exceeded quota: full, requested: pods=1, used: pods=1, limited: pods=1`},
		{name: "resource without an evaluator is counted", quotas: []*corev1.ResourceQuota{full}, a: widget(admissionv1.Create),
			wantErr: `widgets.example.com "w" is forbidden: exceeded quota: full, requested: count/widgets.example.com=1, used: count/widgets.example.com=0, limited: count/widgets.example.com=0`},
		{name: "counted resources are only charged on create", quotas: []*corev1.ResourceQuota{full}, a: widget(admissionv1.Update)},
		{name: "ignored resource", quotas: []*corev1.ResourceQuota{full}, a: event},
		{name: "ignored resources can be none", quotas: []*corev1.ResourceQuota{full}, a: event,
			opts: admission.Options{IgnoredResources: map[schema.GroupResource]struct{}{}}, wantErr: "exceeded quota: full"},
		{name: "not namespaced", quotas: []*corev1.ResourceQuota{full}, a: clusterPod},
		{name: "namespace creation", quotas: []*corev1.ResourceQuota{full}, a: nsCreate},
		{name: "delete", quotas: []*corev1.ResourceQuota{full}, a: podDelete},
		{name: "no quota", a: podCreate("ns", "p", "")},
		{name: "limited resource without quota", a: podCreate("ns", "p", "1"),
			opts:    admission.Options{LimitedResources: []quota.LimitedResource{{Resource: "pods", MatchContains: []string{"cpu"}}}},
			wantErr: `pods "p" is forbidden: insufficient quota to consume: cpu,requests.cpu`},
		{name: "update without the old object", quotas: []*corev1.ResourceQuota{rq("ns", "cpu", rl("requests.cpu", "2"), rl("requests.cpu", "0"))}, a: podUpdateNoOld,
			wantErr: "unable to get previous usage since prior version of object was not found"},
		{name: "quota without status.used", quotas: []*corev1.ResourceQuota{rq("ns", "new", rl("pods", "5"), nil)}, a: podCreate("ns", "p", ""),
			wantErr: "status unknown for quota: new, resources: pods"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newStore(tt.quotas...)
				registry, err := evaluator.NewRegistry(nil, evaluator.Options{})
				if err != nil {
					t.Fatal(err)
				}
				tt.opts.Registry = registry
				e := newEvaluator(t, s, tt.opts)
				run(t, e)
				err = e.Evaluate(t.Context(), tt.a)
				if tt.wantErr == "" {
					if err != nil {
						t.Errorf("Evaluate = %v, want nil", err)
					}
				} else if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("Evaluate = %v, want an error containing %q", err, tt.wantErr)
				}
				if got := registry.Get(widgets.GroupResource()); got != nil {
					t.Errorf("the caller's registry gained an evaluator for %s", widgets.GroupResource())
				}
			})
		})
	}
}

func TestEvaluatorReadError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(rq("ns", "pods", rl("pods", "1"), rl("pods", "0")))
		s.getErr = errString("etcd is down")
		e := newEvaluator(t, s, admission.Options{})
		run(t, e)
		err := e.Evaluate(t.Context(), podCreate("ns", "p", ""))
		if err == nil || err.Error() != "error resolving quota: etcd is down" {
			t.Errorf("Evaluate = %v, want error resolving quota: etcd is down", err)
		}
	})
}

// panicky panics on Usage, as a broken evaluator of the caller might.
type panicky struct{ quota.Evaluator }

func (panicky) Usage(obj runtime.Object) (corev1.ResourceList, error) { panic("boom") }

func TestEvaluatorPanickingEvaluator(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pods, err := evaluator.NewRegistry(nil, evaluator.Options{})
		if err != nil {
			t.Fatal(err)
		}
		registry := generic.NewRegistry(panicky{pods.Get(schema.GroupResource{Resource: "pods"})})
		s := newStore(rq("ns", "pods", rl("pods", "1"), rl("pods", "0")))
		e := newEvaluator(t, s, admission.Options{Registry: registry})
		run(t, e)
		err = e.Evaluate(t.Context(), podCreate("ns", "p", ""))
		if err == nil || !strings.Contains(err.Error(), "panicked: boom") {
			t.Errorf("Evaluate = %v, want the evaluator's panic as an error", err)
		}
	})
}

func TestEvaluatorLifecycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(rq("ns", "pods", rl("pods", "1"), rl("pods", "0")))
		e := newEvaluator(t, s, admission.Options{})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- e.Run(ctx) }()
		synctest.Wait()
		if err := e.Run(ctx); err == nil {
			t.Errorf("second Run = nil, want an error")
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
		if err := e.Evaluate(t.Context(), podCreate("ns", "p", "")); !errors.Is(err, admission.ErrStopped) {
			t.Errorf("Evaluate after Run returned = %v, want ErrStopped", err)
		}
	})
}

// TestEvaluatorStopAnswersWaiting: requests waiting when Run stops are
// answered with ErrStopped, not left to time out.
func TestEvaluatorStopAnswersWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(rq("ns", "pods", rl("pods", "1"), rl("pods", "0")))
		e := newEvaluator(t, s, admission.Options{})
		done := make(chan error, 1)
		go func() { done <- e.Evaluate(t.Context(), podCreate("ns", "p", "")) }()
		synctest.Wait()
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := e.Run(ctx); err != nil {
			t.Errorf("Run = %v", err)
		}
		if err := <-done; !errors.Is(err, admission.ErrStopped) {
			t.Errorf("Evaluate = %v, want ErrStopped", err)
		}
	})
}

func TestNewEvaluatorErrors(t *testing.T) {
	if _, err := admission.NewEvaluator(nil, admission.Options{}); err == nil {
		t.Errorf("NewEvaluator(nil) = nil error, want one")
	}
	_, err := admission.NewEvaluator(newStore(), admission.Options{LimitedResources: []quota.LimitedResource{{APIGroup: "x"}}})
	if err == nil || !strings.Contains(err.Error(), "limitedResources[0].resource: Required value") {
		t.Errorf("NewEvaluator with a limited resource without resource = %v, want Required value", err)
	}
	e := newEvaluator(t, newStore(), admission.Options{})
	if err := e.Evaluate(t.Context(), nil); err == nil {
		t.Errorf("Evaluate(nil) = nil, want an error")
	}
	// What NewAttributes returns with its error, passed on unchecked.
	var unchecked *quota.AttributesRecord
	if err := e.Evaluate(t.Context(), unchecked); err == nil || !strings.Contains(err.Error(), "nil attributes") {
		t.Errorf("Evaluate of a nil *AttributesRecord = %v, want the nil attributes error", err)
	}
	noResource := podCreate("ns", "p", "")
	noResource.Resource = schema.GroupVersionResource{}
	if err := e.Evaluate(t.Context(), noResource); err == nil || !strings.Contains(err.Error(), "names no resource") {
		t.Errorf("Evaluate of a request without a resource = %v, want an error", err)
	}
}

// panickyAccessor panics on every call, as a broken accessor of the
// caller might.
type panickyAccessor struct{}

func (panickyAccessor) GetQuotas(context.Context, string) ([]corev1.ResourceQuota, error) {
	panic("no quotas")
}
func (panickyAccessor) UpdateQuotaStatus(context.Context, *corev1.ResourceQuota) (*corev1.ResourceQuota, error) {
	panic("no writes")
}

// panickyWrites reads from a store and panics on writes.
type panickyWrites struct{ *store }

func (panickyWrites) UpdateQuotaStatus(context.Context, *corev1.ResourceQuota) (*corev1.ResourceQuota, error) {
	panic("no writes")
}

func TestEvaluatorPanickingAccessor(t *testing.T) {
	tests := []struct {
		name string
		a    admission.QuotaAccessor
		want string
	}{
		{"read", panickyAccessor{}, "the quota accessor panicked: no quotas"},
		{"write", panickyWrites{newStore(rq("ns", "pods", rl("pods", "1"), rl("pods", "0")))}, "the quota accessor panicked writing ns/pods: no writes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEvaluator(t, tt.a, admission.Options{})
				run(t, e)
				err := e.Evaluate(t.Context(), podCreate("ns", "p", ""))
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("Evaluate = %v, want an error containing %q", err, tt.want)
				}
			})
		})
	}
}

func TestEvaluatorZeroValue(t *testing.T) {
	var e admission.Evaluator
	if err := e.Evaluate(t.Context(), podCreate("ns", "p", "")); err == nil {
		t.Errorf("Evaluate on a zero Evaluator = nil, want an error")
	}
	if err := e.Run(t.Context()); err == nil {
		t.Errorf("Run on a zero Evaluator = nil, want an error")
	}
}

// TestEvaluatorStopReleases: when Run stops while a batch retries a
// conflicting quota, the charge already written to the other quota is
// still released before Run returns.
func TestEvaluatorStopReleases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(
			rq("ns", "a-pods", rl("pods", "10"), rl("pods", "3")),
			rq("ns", "b-pods", rl("pods", "10"), rl("pods", "3")),
		)
		s.writeDelay = time.Second
		s.interfere = func(n int, stored *corev1.ResourceQuota) bool { return stored.Name == "b-pods" }
		e := newEvaluator(t, s, admission.Options{})
		ctx, cancel := context.WithCancel(t.Context())
		stopped := make(chan error, 1)
		go func() { stopped <- e.Run(ctx) }()
		answer := make(chan error, 1)
		go func() { answer <- e.Evaluate(t.Context(), podCreate("ns", "p", "")) }()
		time.Sleep(1500 * time.Millisecond) // a-pods written, b-pods conflicted and is being written again
		cancel()
		if err := <-stopped; err != nil {
			t.Errorf("Run = %v", err)
		}
		if err := <-answer; err == nil {
			t.Errorf("Evaluate = nil, want an error: b-pods was never written")
		}
		if got := quantity(s.used("ns", "a-pods"), "pods"); got != 3 {
			t.Errorf("a-pods status.used pods = %d after Run stopped, want 3", got)
		}
	})
}
