package kube_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/quotakit/quotakit"
	"github.com/quotakit/quotakit/kube"
)

// addToManager is the wiring the package example shows: the controller,
// built over client with the manager's logger and queue metrics in the
// manager's registry, added to mgr as a Runnable that waits for leader
// election, with a readiness check that passes on standbys. It returns the
// check, which mgr serves on /readyz.
func addToManager(mgr manager.Manager, client func(quotakit.Options) *kube.Client) (healthz.Checker, error) {
	metrics, err := kube.NewMetricsProvider(crmetrics.Registry)
	if err != nil {
		return nil, err
	}
	opts := quotakit.Options{Logger: mgr.GetLogger(), MetricsProvider: metrics}
	ctrl, err := quotakit.NewController(client(opts), opts)
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(ctrl); err != nil {
		return nil, err
	}
	ready := func(r *http.Request) error {
		// A standby runs no controller: it is ready all the same.
		if err := ctrl.Ready(r); !errors.Is(err, quotakit.ErrNotRunning) {
			return err
		}
		return nil
	}
	if err := mgr.AddReadyzCheck("resourcequota", ready); err != nil {
		return nil, err
	}
	return ready, nil
}

// TestManager runs a controller-runtime manager with leader election and
// the controller added as above, over client-go's fake clients. The
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
		cl := newCluster(t, corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")})
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
		mgr, err := manager.New(&rest.Config{Host: "https://127.0.0.1:1"}, manager.Options{
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
		ready, err := addToManager(mgr, func(opts quotakit.Options) *kube.Client { return kube.New(cl.clients(), opts) })
		if err != nil {
			t.Fatalf("addToManager: %v", err)
		}
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
