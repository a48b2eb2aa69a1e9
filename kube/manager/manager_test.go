package manager_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	crmanager "sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/quotakit/quotakit"
	"github.com/quotakit/quotakit/kube"
	"github.com/quotakit/quotakit/kube/manager"
)

// TestManager runs a controller-runtime manager with leader election and
// the controller added by the package example's one call
// (AddClient is Add over a given client), over
// client-go's fake clients. The
// manager's own client points nowhere: it is never used, and its lease
// lock goes through the fake clientset (LeaderElectionResourceLockInterface),
// since no API server can run here. The manager's metrics and probe
// servers are off (no listening sockets inside synctest), so the readiness
// check is called directly rather than over HTTP.
//
// It checks that the manager starts the controller once elected, that the
// controller logs through the manager's logger, that its queue metrics
// land in controller-runtime's registry with controller-runtime's labels,
// that the readiness check passes once synced, that the quota's status is
// written, and that the manager stops cleanly and releases the lease.
func TestManager(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")})
		var mu sync.Mutex
		var logs []string
		logger := funcr.New(func(prefix, args string) {
			mu.Lock()
			defer mu.Unlock()
			logs = append(logs, prefix+" "+args)
		}, funcr.Options{})
		lock := &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: "kube-system", Name: "quotakit"},
			Client:     cl.typed.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: "replica-1"},
		}
		lease, renew, retry := 15*time.Second, 10*time.Second, 2*time.Second
		mgr, err := crmanager.New(&rest.Config{Host: "https://127.0.0.1:1"}, crmanager.Options{
			Logger:                              logger,
			Metrics:                             metricsserver.Options{BindAddress: "0"},
			HealthProbeBindAddress:              "0",
			LeaderElection:                      true,
			LeaderElectionID:                    "quotakit",
			LeaderElectionNamespace:             "kube-system",
			LeaderElectionResourceLockInterface: lock,
			LeaderElectionReleaseOnCancel:       true,
			LeaseDuration:                       &lease,
			RenewDeadline:                       &renew,
			RetryPeriod:                         &retry,
		})
		if err != nil {
			t.Fatalf("manager.New: %v", err)
		}
		rec := &recordingManager{Manager: mgr}
		ctrl, err := manager.AddClient(rec, kube.New(cl.clients()))
		if err != nil {
			t.Fatalf("AddClient: %v", err)
		}
		if ctrl == nil {
			t.Fatal("AddClient returned no controller")
		}
		if rec.healthz[manager.CheckName] == nil || rec.readyz[manager.CheckName] == nil {
			t.Fatalf("checks registered: healthz %v, readyz %v; want %q in both", rec.healthz, rec.readyz, manager.CheckName)
		}
		ready := rec.readyz[manager.CheckName]
		if err := ready(nil); err != nil {
			t.Errorf("readiness before the manager starts (a standby) = %v, want nil", err)
		}

		ctx, cancel := context.WithCancel(logr.NewContext(t.Context(), logr.Discard()))
		done := make(chan error, 1)
		go func() { done <- mgr.Start(ctx) }()
		time.Sleep(time.Minute)
		synctest.Wait()

		select {
		case <-mgr.Elected():
		default:
			t.Fatal("the manager was not elected")
		}
		if err := ready(nil); err != nil {
			t.Errorf("readiness of the synced leader = %v, want nil", err)
		}
		if err := rec.healthz[manager.CheckName](nil); err != nil {
			t.Errorf("liveness of the leader = %v, want nil", err)
		}
		rq, err := cl.typed.CoreV1().ResourceQuotas("ns").Get(t.Context(), "q", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := rq.Status.Used.Pods().String(); got != "2" {
			t.Errorf("status.used pods = %s, want 2", got)
		}
		mu.Lock()
		joined := strings.Join(logs, "\n")
		mu.Unlock()
		if !strings.Contains(joined, `resourcequota "level"=0 "msg"="starting"`) {
			t.Errorf("the manager's logger has no start line of the controller:\n%s", joined)
		}
		// A new quota, whose status.hard is not yet spec.hard, goes to
		// the priority queue.
		if _, m := series(t, crmetrics.Registry, "workqueue_adds_total", map[string]string{"name": "resourcequota_priority", "controller": "resourcequota_priority"}); m.GetCounter().GetValue() < 1 {
			t.Errorf("workqueue_adds_total of resourcequota_priority = %v, want at least 1", m.GetCounter().GetValue())
		}

		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start = %v, want nil", err)
		}
		l, err := cl.typed.CoordinationV1().Leases("kube-system").Get(t.Context(), "quotakit", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if h := l.Spec.HolderIdentity; h != nil && *h != "" {
			t.Errorf("after the manager stopped the lease is held by %q, want released", *h)
		}
	})
}

// recordingManager is a manager that keeps the checks added to it, for
// the test to call.
type recordingManager struct {
	crmanager.Manager
	healthz, readyz map[string]healthz.Checker
}

func (m *recordingManager) AddHealthzCheck(name string, check healthz.Checker) error {
	if m.healthz == nil {
		m.healthz = map[string]healthz.Checker{}
	}
	m.healthz[name] = check
	return m.Manager.AddHealthzCheck(name, check)
}

func (m *recordingManager) AddReadyzCheck(name string, check healthz.Checker) error {
	if m.readyz == nil {
		m.readyz = map[string]healthz.Checker{}
	}
	m.readyz[name] = check
	return m.Manager.AddReadyzCheck(name, check)
}

// TestAdd checks the one-call form: it builds its client from
// the manager's rest.Config (no request is made before the manager
// starts) and registers both checks; a nil manager and bad Options are
// errors.
func TestAdd(t *testing.T) {
	if _, err := manager.Add(nil, quotakit.Options{}); err == nil {
		t.Error("Add(nil) = nil error, want one")
	}
	if _, err := manager.AddClient(nil, nil, quotakit.Options{}); err == nil {
		t.Error("AddClient(nil) = nil error, want one")
	}
	mgr, err := crmanager.New(&rest.Config{Host: "https://127.0.0.1:1"}, crmanager.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatalf("manager.New: %v", err)
	}
	rec := &recordingManager{Manager: mgr}
	ctrl, err := manager.Add(rec, quotakit.Options{Workers: 2})
	if err != nil || ctrl == nil {
		t.Fatalf("Add = %v, %v; want a controller", ctrl, err)
	}
	if rec.healthz[manager.CheckName] == nil || rec.readyz[manager.CheckName] == nil {
		t.Errorf("checks registered: healthz %v, readyz %v; want %q in both", rec.healthz, rec.readyz, manager.CheckName)
	}
	if err := rec.readyz[manager.CheckName](nil); err != nil {
		t.Errorf("readiness before the manager starts (a standby) = %v, want nil", err)
	}
	if _, err := manager.Add(mgr, quotakit.Options{Workers: -1}); err == nil {
		t.Error("Add with bad Options = nil error, want NewController's")
	}
}

// TestReadyCheck checks the readiness check on a controller that does not
// run (a standby: ready), and on a nil controller (an error, not a
// panic).
func TestReadyCheck(t *testing.T) {
	ctrl, err := quotakit.NewController(kube.New(kube.Clients{}), quotakit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := manager.ReadyCheck(ctrl)(nil); err != nil {
		t.Errorf("ReadyCheck of a controller that does not run = %v, want nil", err)
	}
	if err := manager.ReadyCheck(nil)(&http.Request{}); err == nil {
		t.Error("ReadyCheck(nil) = nil, want an error")
	}
}

// cluster is client-go's fake clients holding namespace ns with a quota
// q and two pods.
type cluster struct {
	typed    *fake.Clientset
	metadata *metadatafake.FakeMetadataClient
	dynamic  *dynamicfake.FakeDynamicClient
}

func newCluster(hard corev1.ResourceList) *cluster {
	c := &cluster{
		typed: fake.NewClientset(
			&corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "q"}, Spec: corev1.ResourceQuotaSpec{Hard: hard}},
			&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}},
			&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}},
		),
		metadata: metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme()),
		dynamic:  dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()),
	}
	all := []string{"create", "delete", "get", "list", "patch", "update", "watch"}
	c.typed.Resources = []*metav1.APIResourceList{{GroupVersion: "v1", APIResources: []metav1.APIResource{
		{Name: "pods", Namespaced: true, Kind: "Pod", Verbs: all},
		{Name: "resourcequotas", Namespaced: true, Kind: "ResourceQuota", Verbs: all},
	}}}
	return c
}

func (c *cluster) clients() kube.Clients {
	return kube.Clients{Typed: c.typed, Metadata: c.metadata, Dynamic: c.dynamic, Discovery: c.typed.Discovery()}
}

// series returns the family name of g and its first metric with the
// labels want.
func series(t *testing.T, g prometheus.Gatherer, name string, want map[string]string) (*dto.MetricFamily, *dto.Metric) {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			for k, v := range want {
				found := false
				for _, l := range m.GetLabel() {
					found = found || (l.GetName() == k && l.GetValue() == v)
				}
				if !found {
					continue metrics
				}
			}
			return f, m
		}
	}
	return nil, nil
}
