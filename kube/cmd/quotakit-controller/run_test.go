package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/quotakit/quotakit"
	"github.com/quotakit/quotakit/kube"
	kubemanager "github.com/quotakit/quotakit/kube/manager"
)

// fakes are client-go's fake clients behind one run of the binary.
type fakes struct {
	typed    *fake.Clientset
	metadata *metadatafake.FakeMetadataClient
	dynamic  *dynamicfake.FakeDynamicClient
}

func newFakes() *fakes {
	// The namespaces the tests review, labelled for enforcement as the
	// default -enforced-namespaces wants: the webhook tells enforced
	// namespaces by their labels, from its cache or a live get.
	var typedNS, metaNS []runtime.Object
	for _, name := range []string{"ns", "full", "room", "other"} {
		labels := map[string]string{"quotakit.io/enforce": "true", "kubernetes.io/metadata.name": name}
		om := metav1.ObjectMeta{Name: name, Labels: labels}
		typedNS = append(typedNS, &corev1.Namespace{ObjectMeta: om})
		metaNS = append(metaNS, &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: om})
	}
	metaScheme := metadatafake.NewTestScheme()
	metaScheme.AddKnownTypeWithName(corev1.SchemeGroupVersion.WithKind("Namespace"), &metav1.PartialObjectMetadata{})
	f := &fakes{
		typed: fake.NewClientset(append(typedNS,
			&corev1.ResourceQuota{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "q"},
				Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
					corev1.ResourcePods: resource.MustParse("10"), "count/widgets.example.com": resource.MustParse("10"),
				}},
			},
			&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}},
		)...),
		metadata: metadatafake.NewSimpleMetadataClient(metaScheme, metaNS...),
		dynamic: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
			{Group: "quota.quotakit.io", Version: "v1alpha1", Resource: "clusterquotas"}:        "ClusterQuotaList",
			{Group: "quota.quotakit.io", Version: "v1alpha1", Resource: "appliedclusterquotas"}: "AppliedClusterQuotaList",
			{Group: "example.com", Version: "v1", Resource: "widgets"}:                          "WidgetList",
		}),
	}
	all := []string{"create", "delete", "get", "list", "patch", "update", "watch"}
	f.typed.Resources = []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{{Name: "pods", Namespaced: true, Kind: "Pod", Verbs: all}}},
		{GroupVersion: "example.com/v1", APIResources: []metav1.APIResource{{Name: "widgets", Namespaced: true, Kind: "Widget", Verbs: all}}},
		{GroupVersion: "resource.k8s.io/v1", APIResources: []metav1.APIResource{{Name: "resourceclaims", Namespaced: true, Kind: "ResourceClaim", Verbs: all}}},
	}
	return f
}

func (f *fakes) clients() kube.Clients {
	return kube.Clients{Typed: f.typed, Metadata: f.metadata, Dynamic: f.dynamic, Discovery: f.typed.Discovery()}
}

// call is one API request the binary made: its verb and resource, and
// whether it named a namespace (a list or watch of every namespace's
// objects does not).
type call struct {
	verb       string
	gr         schema.GroupResource
	sub        string
	namespaced bool
}

func (c call) String() string {
	r := c.gr.String()
	if c.sub != "" {
		r = c.gr.Resource + "/" + c.sub
		if c.gr.Group != "" {
			r += "." + c.gr.Group
		}
	}
	if c.namespaced {
		return c.verb + " " + r + " (in a namespace)"
	}
	return c.verb + " " + r
}

// calls returns the API requests the fakes recorded, discovery aside
// (every authenticated user may discover).
func (f *fakes) calls() []call {
	seen := map[call]bool{}
	var out []call
	for _, fk := range []interface{ Actions() []clienttesting.Action }{f.typed, f.metadata, f.dynamic} {
		for _, a := range fk.Actions() {
			gvr := a.GetResource()
			if gvr.Resource == "" || gvr.Resource == "group" || gvr.Resource == "resource" {
				continue
			}
			c := call{a.GetVerb(), gvr.GroupResource(), a.GetSubresource(), a.GetNamespace() != ""}
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// newRegistry returns a registry of a run's own series, apart from
// controller-runtime's, which one process's runs share.
func newRegistry() *prometheus.Registry { return prometheus.NewRegistry() }

// served returns what /metrics serves for a run whose own series are in
// reg: those and controller-runtime's registry.
func served(reg *prometheus.Registry) prometheus.Gatherer {
	return prometheus.Gatherers{crmetrics.Registry, reg}
}

// runLeader runs the binary over f with leader election, as one replica,
// for a minute of virtual time, then stops it as SIGTERM would, and
// returns what runWith returned. check is called while it leads, with
// what /metrics serves.
func runLeader(t *testing.T, f *fakes, check func(cfg config, reg prometheus.Gatherer)) error {
	t.Helper()
	cfg, err := parseFlags([]string{"-leader-elect-resource-namespace=kube-system", "-metrics-bind-address=0", "-health-probe-bind-address=0"}, t.Output())
	if err != nil {
		t.Fatalf("parseFlags: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	reg := newRegistry()
	done := make(chan error, 1)
	go func() { done <- runWith(ctx, cfg, env{clients: f.clients(), reg: reg}) }()
	time.Sleep(time.Minute)
	synctest.Wait()
	if check != nil {
		check(cfg, served(reg))
	}
	cancel()
	return <-done
}

// gauge returns the value of the gauge name whose labels include want,
// or -1 if reg has none.
func gauge(t *testing.T, reg prometheus.Gatherer, name string, want map[string]string) float64 {
	t.Helper()
	if m := metric(t, reg, name, want); m != nil {
		return m.GetGauge().GetValue()
	}
	return -1
}

// counter returns the value of the counter name whose labels include
// want, or -1 if reg has none.
func counter(t *testing.T, reg prometheus.Gatherer, name string, want map[string]string) float64 {
	t.Helper()
	if m := metric(t, reg, name, want); m != nil {
		return m.GetCounter().GetValue()
	}
	return -1
}

// metric returns the series of name whose labels include want.
func metric(t *testing.T, reg prometheus.Gatherer, name string, want map[string]string) *dto.Metric {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if have[k] != v {
					continue series
				}
			}
			return m
		}
	}
	return nil
}

// TestRunLeaderElection runs the binary over client-go's fakes: it must
// take the lease, run the controller (the quota's status counts the pod),
// report itself leader, and on shutdown stop the controller, release the
// lease and report itself leader no more.
func TestRunLeaderElection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakes()
		var reg prometheus.Gatherer
		err := runLeader(t, f, func(cfg config, r prometheus.Gatherer) {
			reg = r
			if got := gauge(t, reg, "leader_election_master_status", map[string]string{"name": "quotakit-controller"}); got != 1 {
				t.Errorf("leader_election_master_status while leading = %v, want 1", got)
			}
			lease, err := f.typed.CoordinationV1().Leases("kube-system").Get(t.Context(), cfg.leaseName, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("lease: %v", err)
			}
			if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
				t.Errorf("lease holder = %v, want this replica", lease.Spec.HolderIdentity)
			}
			if *lease.Spec.LeaseDurationSeconds != 15 {
				t.Errorf("lease duration = %ds, want 15s", *lease.Spec.LeaseDurationSeconds)
			}
			rq, err := f.typed.CoreV1().ResourceQuotas("ns").Get(t.Context(), "q", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := rq.Status.Used.Pods().String(); got != "1" {
				t.Errorf("status.used pods = %s, want 1", got)
			}
			if _, ok := rq.Status.Used["count/widgets.example.com"]; !ok {
				t.Errorf("status.used lacks the discovered widgets: %v", rq.Status.Used)
			}
			// Renewals on the fast path only: the lease was never
			// changed behind this replica's back.
			if got := counter(t, reg, "leader_election_slowpath_total", map[string]string{"name": "quotakit-controller"}); got > 0 {
				t.Errorf("leader_election_slowpath_total = %v, want 0", got)
			}
		})
		if err != nil {
			t.Errorf("runWith = %v, want nil after a shutdown", err)
		}
		lease, err := f.typed.CoordinationV1().Leases("kube-system").Get(t.Context(), "quotakit-controller", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if h := lease.Spec.HolderIdentity; h != nil && *h != "" {
			t.Errorf("after shutdown the lease is held by %q, want released", *h)
		}
		if got := gauge(t, reg, "leader_election_master_status", map[string]string{"name": "quotakit-controller"}); got != 0 {
			t.Errorf("leader_election_master_status after shutdown = %v, want 0", got)
		}
	})
}

// TestSlowpathCounted checks that a renewal that must read the lease
// first, because its update failed, counts as a slow path, as client-go
// counts it, and that neither the renewals on the fast path nor the
// release do.
func TestSlowpathCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakes()
		var updates int
		f.typed.PrependReactor("update", "leases", func(clienttesting.Action) (bool, runtime.Object, error) {
			updates++
			if updates == 3 {
				// One optimistic renewal fails: the elector reads the
				// lease and renews on the slow path.
				return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "quotakit-controller", errors.New("changed"))
			}
			return false, nil, nil
		})
		err := runLeader(t, f, func(_ config, reg prometheus.Gatherer) {
			if got := counter(t, reg, "leader_election_slowpath_total", map[string]string{"name": "quotakit-controller"}); got != 1 {
				t.Errorf("leader_election_slowpath_total = %v, want 1", got)
			}
		})
		if err != nil {
			t.Errorf("runWith = %v", err)
		}
	})
}

// TestRunLostLease checks that a leader whose lease renewals fail stops
// and reports the loss, so that the process exits with code 1.
func TestRunLostLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakes()
		var renewals int
		f.typed.PrependReactor("update", "leases", func(clienttesting.Action) (bool, runtime.Object, error) {
			renewals++
			if renewals > 3 {
				return true, nil, context.DeadlineExceeded
			}
			return false, nil, nil
		})
		cfg, err := parseFlags([]string{"-leader-elect-resource-namespace=kube-system", "-metrics-bind-address=0", "-health-probe-bind-address=0"}, t.Output())
		if err != nil {
			t.Fatal(err)
		}
		err = runWith(t.Context(), cfg, env{clients: f.clients(), reg: newRegistry()})
		if err == nil || err.Error() != "leader election lost" {
			t.Errorf("runWith = %v, want leader election lost", err)
		}
	})
}

// probeHandlers returns the manager's /healthz and /readyz handlers over
// the checks runWith adds for cfg, ctrl and hook, kube/manager's
// included, with stopping as the context whose end is SIGTERM.
func probeHandlers(stopping context.Context, cfg config, ctrl *quotakit.Controller, hook *webhook) (healthzH, readyzH http.Handler) {
	live, ready := probeChecks(stopping, cfg, ctrl, nil, hook)
	if ctrl != nil {
		live[kubemanager.CheckName] = healthz.Ping
		ready[kubemanager.CheckName] = kubemanager.ReadyCheck(ctrl)
	}
	return &healthz.Handler{Checks: live}, &healthz.Handler{Checks: ready}
}

// probe returns the code h answers a probe with.
func probe(h http.Handler) int {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	return rec.Code
}

// TestProbes checks /healthz and /readyz on a standby, without leader
// election, and once shutdown has begun.
func TestProbes(t *testing.T) {
	ctrl, err := quotakit.NewController(kube.New(newFakes().clients(), quotakit.Options{}), quotakit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	stopping, sigterm := context.WithCancel(t.Context())
	standbyLive, standbyReady := probeHandlers(stopping, config{controller: true, leaderElect: true}, ctrl, nil)
	if code := probe(standbyReady); code != http.StatusOK {
		t.Errorf("standby /readyz = %d, want 200", code)
	}
	if code := probe(standbyLive); code != http.StatusOK {
		t.Errorf("standby /healthz = %d, want 200", code)
	}
	_, aloneReady := probeHandlers(stopping, config{controller: true, leaderElect: false}, ctrl, nil)
	if code := probe(aloneReady); code != http.StatusInternalServerError {
		t.Errorf("/readyz of a controller that does not run, without leader election = %d, want 500", code)
	}
	sigterm()
	if code := probe(standbyReady); code != http.StatusInternalServerError {
		t.Errorf("standby /readyz while shutting down = %d, want 500", code)
	}
	if code := probe(standbyLive); code != http.StatusOK {
		t.Errorf("standby /healthz while shutting down = %d, want 200", code)
	}
}

// TestLeaderHealth checks the liveness check of leader election: a
// standby passes; a leader passes while it renews, and fails once it has
// not renewed for the lease duration and the tolerance.
func TestLeaderHealth(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakes()
		cfg, err := parseFlags([]string{"-leader-elect-resource-namespace=kube-system"}, t.Output())
		if err != nil {
			t.Fatal(err)
		}
		lock, err := newLeaseLock(cfg, f.clients(), nil, newRegistry(), newRegistry())
		if err != nil {
			t.Fatal(err)
		}
		if err := lock.check(nil); err != nil {
			t.Errorf("check of a standby = %v, want nil", err)
		}
		now := metav1.NewTime(time.Now())
		rec := resourcelock.LeaderElectionRecord{HolderIdentity: lock.Identity(), LeaseDurationSeconds: 15, AcquireTime: now, RenewTime: now}
		if err := lock.Create(t.Context(), rec); err != nil {
			t.Fatal(err)
		}
		time.Sleep(cfg.leaseDuration + leaderHealthTolerance)
		if err := lock.check(nil); err != nil {
			t.Errorf("check of a leader at the end of the tolerance = %v, want nil", err)
		}
		time.Sleep(time.Second)
		if err := lock.check(nil); err == nil {
			t.Error("check of a leader that has not renewed past the tolerance = nil, want an error")
		}
		if err := lock.Update(t.Context(), rec); err != nil {
			t.Fatal(err)
		}
		if err := lock.check(nil); err != nil {
			t.Errorf("check of a leader that has just renewed = %v, want nil", err)
		}
	})
}

// TestRunBadEnv checks that runWith refuses a webhook without a client of
// its own before it listens or starts anything.
func TestRunBadEnv(t *testing.T) {
	cert, key := writeCert(t)
	cfg, err := parseFlags([]string{"-leader-elect=false", "-webhook-addr=:9443", "-caller-trust=insecure-any-caller", "-tls-cert-file=" + cert, "-tls-private-key-file=" + key}, t.Output())
	if err != nil {
		t.Fatal(err)
	}
	listen := func(addr string) (net.Listener, error) {
		t.Errorf("runWith listened on %s", addr)
		return nil, errors.New("no listening here")
	}
	if err := runWith(t.Context(), cfg, env{clients: newFakes().clients(), reg: newRegistry(), listen: listen}); err == nil || !strings.Contains(err.Error(), "client of its own") {
		t.Errorf("runWith of a webhook without its client = %v, want an error", err)
	}
}

// TestLeaderElectionOwnClient checks that leader election goes through
// its own client: the lease's requests never queue behind the
// controller's lists and writes, nor the controller's behind them.
func TestLeaderElectionOwnClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		controller, election := newFakes(), newFakes()
		cfg, err := parseFlags([]string{"-leader-elect-resource-namespace=kube-system", "-metrics-bind-address=0", "-health-probe-bind-address=0"}, t.Output())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			done <- runWith(ctx, cfg, env{clients: controller.clients(), election: election.clients(), reg: newRegistry()})
		}()
		time.Sleep(time.Minute)
		synctest.Wait()
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("runWith = %v", err)
		}
		leases := func(f *fakes) int {
			n := 0
			for _, c := range f.calls() {
				if c.gr.Resource == "leases" {
					n++
				}
			}
			return n
		}
		if n := leases(controller); n != 0 {
			t.Errorf("the controller's client made %d kinds of lease requests, want none", n)
		}
		if n := leases(election); n == 0 {
			t.Error("the election's client made no lease request")
		}
		if !slices.ContainsFunc(controller.calls(), func(c call) bool { return c.gr.Resource == "resourcequotas" && c.sub == "status" }) {
			t.Error("the controller wrote no quota status through its client")
		}
	})
}
