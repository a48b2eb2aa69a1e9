package e2e_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/quotakit/quotakit/e2e/internal/cluster"
)

// The tests of this file install quotakit as kube/README.md says: the
// quotakit-controller command, two processes where the Deployment has
// two replicas, and the ValidatingWebhookConfiguration that
// kube/deploy/webhook/configuration renders, kept as shipped (rules,
// namespaceSelector, matchConditions, failurePolicy, timeout) but for its
// clientConfig, which names the processes on loopback instead of the
// Service. They check what issue 24 asks of a safe install: an outage of
// the webhook stops only creations in enforced namespaces; a rolling
// restart denies nothing for quotakit's own reasons; a review without a
// trusted client certificate is refused and charges nothing; an in-place
// resize over quota is refused; and with kube-apiserver's plugin on, the
// default install charges each creation once.

// TestInstallWebhookDown registers the shipped webhook configuration for
// two replicas, kills both with SIGKILL, and checks that what the cluster
// needs to run still works while the configuration (failurePolicy Fail)
// is in place: Leases in kube-node-lease created and renewed, leader
// election Leases, Events, Endpoints and EndpointSlices and a
// LocalSubjectAccessReview even in an enforced namespace, and creations
// in an unlabelled namespace and in quotakit's own; while creations in an
// enforced namespace are refused, which proves that kube-apiserver sends
// them to the dead webhook. kube-node-lease and quotakit-system are
// labelled quotakit.io/enforce=true for the test: the configuration must
// leave them out whatever their labels say.
func TestInstallWebhookDown(t *testing.T) {
	ctx := t.Context()
	cs := clientset(t, env.api.Config())
	enforced := enforcedNamespace(t, cs)
	plain := namespace(t, cs)
	for _, ns := range []string{"kube-node-lease", "quotakit-system"} {
		if _, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
		} else if err != nil {
			t.Fatal(err)
		}
		setEnforceLabel(t, cs, ns, ptr.To("true"))
		t.Cleanup(func() { setEnforceLabel(t, cs, ns, nil) })
	}

	in := newInstallation(t, env.api, enforced)
	replicas := []*replica{in.start(), in.start()}
	register(t, cs, shippedWebhook(t, roundRobin(t, []*url.URL{replicas[0].webhook, replicas[1].webhook})))
	// The webhook, without -enforce-namespaced-quota, allows every
	// request: wait until both replicas have answered reviews, which
	// shows that kube-apiserver can reach and verify them.
	waitFor(t, 30*time.Second, "reviews reaching both replicas", func() bool {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-"}}
		if _, err := cs.CoreV1().ConfigMaps(enforced).Create(ctx, cm, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Fatalf("dry run with the webhook up: %v", err)
		}
		return replicas[0].webhookRequests(t) > 0 && replicas[1].webhookRequests(t) > 0
	})
	reviewed := webhookRequests(t, replicas...)

	for _, r := range replicas {
		r.kill()
		t.Logf("killed %s (pid %d) with SIGKILL", r.name, r.prog.Pid())
	}
	var refusal error
	waitFor(t, 30*time.Second, "a creation in the enforced namespace to be refused", func() bool {
		_, refusal = cs.CoreV1().Pods(enforced).Create(ctx, simplePod("refused"), metav1.CreateOptions{})
		return refusedByFailurePolicy(refusal)
	})
	t.Logf("with every replica down (after %v reviews answered), a pod creation in an enforced namespace: %v", reviewed, refusal)

	now := func() *metav1.MicroTime { return ptr.To(metav1.NewMicroTime(time.Now())) }
	var slowest time.Duration
	var slowestWhat string
	check := func(what string, f func() error) {
		t.Helper()
		start := time.Now()
		err := f()
		if d := time.Since(start); d > slowest {
			slowest, slowestWhat = d, what
		}
		if err != nil {
			t.Errorf("%s with the webhook down: %v", what, err)
		}
	}
	// A kubelet's node Lease: created, then renewed as kubelets do every
	// ten seconds.
	nodeLease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: strings.ToLower("e2e-node-" + enforced)},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("e2e-node"), LeaseDurationSeconds: ptr.To[int32](40), RenewTime: now()},
	}
	leases := cs.CoordinationV1().Leases("kube-node-lease")
	check("creating a node Lease in kube-node-lease", func() error {
		var err error
		nodeLease, err = leases.Create(ctx, nodeLease, metav1.CreateOptions{})
		return err
	})
	t.Cleanup(func() { _ = leases.Delete(context.Background(), nodeLease.Name, metav1.DeleteOptions{}) })
	for i := range 3 {
		check(fmt.Sprintf("renewal %d of the node Lease", i+1), func() error {
			nodeLease.Spec.RenewTime = now()
			var err error
			nodeLease, err = leases.Update(ctx, nodeLease, metav1.UpdateOptions{})
			return err
		})
	}
	// A leader election Lease in the enforced namespace, created and
	// renewed: matchConditions leave Leases out everywhere.
	leader := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-leader"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("e2e"), LeaseDurationSeconds: ptr.To[int32](15), RenewTime: now()},
	}
	check("creating a Lease in the enforced namespace", func() error {
		var err error
		leader, err = cs.CoordinationV1().Leases(enforced).Create(ctx, leader, metav1.CreateOptions{})
		return err
	})
	check("renewing the Lease in the enforced namespace", func() error {
		leader.Spec.RenewTime = now()
		_, err := cs.CoordinationV1().Leases(enforced).Update(ctx, leader, metav1.UpdateOptions{})
		return err
	})
	coreEvent := func(ns string) *corev1.Event {
		return &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{GenerateName: "e2e-"},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "somepod"},
			Reason:         "Testing", Message: "the webhook is down", Type: corev1.EventTypeNormal,
			FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(), Count: 1,
			Source: corev1.EventSource{Component: "e2e"},
		}
	}
	for _, ns := range []string{enforced, plain} {
		check("creating an Event in namespace "+ns, func() error {
			_, err := cs.CoreV1().Events(ns).Create(ctx, coreEvent(ns), metav1.CreateOptions{})
			return err
		})
	}
	check("creating an events.k8s.io Event in the enforced namespace", func() error {
		ev := &eventsv1.Event{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-"},
			EventTime:  metav1.NewMicroTime(time.Now()), ReportingController: "e2e.quotakit.io/test", ReportingInstance: "e2e",
			Action: "Testing", Reason: "Testing", Type: corev1.EventTypeNormal,
			Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: enforced, Name: "somepod"},
		}
		_, err := cs.EventsV1().Events(enforced).Create(ctx, ev, metav1.CreateOptions{})
		return err
	})
	check("creating Endpoints in the enforced namespace", func() error {
		_, err := cs.CoreV1().Endpoints(enforced).Create(ctx, &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "e2e"}}, metav1.CreateOptions{})
		return err
	})
	check("creating an EndpointSlice in the enforced namespace", func() error {
		slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "e2e"}, AddressType: discoveryv1.AddressTypeIPv4}
		_, err := cs.DiscoveryV1().EndpointSlices(enforced).Create(ctx, slice, metav1.CreateOptions{})
		return err
	})
	check("a LocalSubjectAccessReview in the enforced namespace", func() error {
		review := &authorizationv1.LocalSubjectAccessReview{
			ObjectMeta: metav1.ObjectMeta{Namespace: enforced},
			Spec: authorizationv1.SubjectAccessReviewSpec{User: "someone",
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: enforced, Verb: "get", Resource: "pods"}},
		}
		_, err := cs.AuthorizationV1().LocalSubjectAccessReviews(enforced).Create(ctx, review, metav1.CreateOptions{})
		return err
	})
	check("creating a pod in an unlabelled namespace", func() error {
		_, err := cs.CoreV1().Pods(plain).Create(ctx, simplePod("admitted"), metav1.CreateOptions{})
		return err
	})
	check("creating a pod in quotakit-system, labelled", func() error {
		p := simplePod("e2e-" + enforced)
		_, err := cs.CoreV1().Pods("quotakit-system").Create(ctx, p, metav1.CreateOptions{})
		if err == nil {
			t.Cleanup(func() {
				_ = cs.CoreV1().Pods("quotakit-system").Delete(context.Background(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
			})
		}
		return err
	})
	t.Logf("every request the cluster needs succeeded with the webhook down; the slowest took %v (%s)", slowest.Round(time.Millisecond), slowestWhat)

	// And the webhook is still registered: creations in the enforced
	// namespace are refused by its failurePolicy.
	_, err := cs.CoreV1().ConfigMaps(enforced).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "refused"}}, metav1.CreateOptions{})
	if !refusedByFailurePolicy(err) {
		t.Errorf("creating a configmap in the enforced namespace with the webhook down: %v, want a refusal by failurePolicy Fail", err)
	}
	_, err = cs.CoreV1().Pods(enforced).Create(ctx, simplePod("refused-again"), metav1.CreateOptions{})
	if !refusedByFailurePolicy(err) {
		t.Errorf("creating a pod in the enforced namespace with the webhook down: %v, want a refusal by failurePolicy Fail", err)
	}
}

// TestInstallRollingRestart runs two replicas enforcing namespaced quota
// on an API server without the ResourceQuota plugin, behind a proxy that
// sends reviews only to ready replicas, and streams 20 pod creations a
// second into an enforced namespace whose quota has room, while each
// replica in turn gets SIGTERM, exits, and is replaced by a new one: no
// creation may be refused for anything but an exceeded quota (none here)
// — no "context canceled", "quota evaluator stopped", failed call or
// refused connection. The replicas run with -shutdown-delay=3s: the pool
// notices a failing /readyz within 100ms, where endpoints take seconds
// to reach every kube-apiserver of a real cluster (the shipped delay is
// 10s).
func TestInstallRollingRestart(t *testing.T) {
	api := apiServerWithoutPlugin(t, "install-rolling")
	ctx := t.Context()
	cfg := api.Config()
	cs := clientset(t, cfg)
	rc := newRecounter(t, cfg)
	ns := enforcedNamespace(t, cs)
	podQuota(t, cs, ns, 5000)

	in := newInstallation(t, api, ns, "-enforce-namespaced-quota", "-shutdown-delay=3s")
	pool := newReadyPool(t)
	old := []*replica{in.start(), in.start()}
	for _, r := range old {
		pool.add(t, r)
	}
	register(t, cs, shippedWebhook(t, pool.url))
	waitFor(t, 30*time.Second, "the controller's first status", func() bool { return podUsed(t, cs, ns) == 0 })
	// kube-apiserver reads webhook configurations from an informer: wait
	// until a dry run goes through the pool.
	waitFor(t, 30*time.Second, "reviews reaching the pool", func() bool {
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, simplePod("probe"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Fatalf("dry run: %v", err)
		}
		return pool.total() > 0
	})

	const rate = 20
	begin := time.Now()
	stream := streamCreations(ctx, cs, ns, rate)
	time.Sleep(2 * time.Second)
	var steps []string
	for _, r := range old {
		start := time.Now()
		r.stop(45 * time.Second) // SIGTERM, then wait for the exit
		stopped := time.Since(start)
		if exited, err := r.prog.Exited(); !exited || err != nil {
			t.Errorf("%s after SIGTERM: exited %v, %v; want a clean exit", r.name, exited, err)
		}
		sent := pool.remove(r)
		start = time.Now()
		n := in.start()
		pool.add(t, n)
		steps = append(steps, fmt.Sprintf("%s (sent %d reviews) exited %v after SIGTERM; %s ready and in the pool %v later",
			r.name, sent, stopped.Round(time.Millisecond), n.name, time.Since(start).Round(time.Millisecond)))
	}
	time.Sleep(2 * time.Second)
	stream.end()
	elapsed := time.Since(begin)

	stream.mu.Lock()
	admitted, exceeded, others, slowest := stream.admitted, stream.exceeded, stream.others, stream.slowest
	stream.mu.Unlock()
	t.Logf("rolling restart under %d creations/s for %v: %s", rate, elapsed.Round(time.Millisecond), strings.Join(steps, "; "))
	t.Logf("%d creations: %d admitted, %d refused for an exceeded quota, %d refused for anything else; the slowest took %v; the pool found no ready replica %d times, failed to forward %d reviews, sent %v to the new replicas",
		admitted+exceeded+len(others), admitted, exceeded, len(others), slowest.Round(time.Millisecond), pool.noneReady.Load(), pool.failed.Load(), pool.sentTo())
	for _, e := range pool.errors() {
		t.Logf("proxy error: %s", e)
	}
	if len(others) > 0 {
		t.Errorf("%d creations refused for quotakit's own reasons during the rolling restart:\n%s", len(others), strings.Join(others, "\n"))
	}
	if exceeded > 0 {
		t.Errorf("%d creations refused for an exceeded quota, with room for 5000 pods", exceeded)
	}
	if admitted < rate*int(elapsed/time.Second)/2 {
		t.Errorf("only %d creations in %v at %d/s", admitted, elapsed, rate)
	}
	rc.waitQuotasRight(t, ns, 60*time.Second, "after the rolling restart")
}

// creationStream creates pods in a namespace at a steady rate, each
// creation in a goroutine of its own so that a slow one does not delay
// the next, and sorts the outcomes.
type creationStream struct {
	stop chan struct{}
	done sync.WaitGroup

	mu sync.Mutex
	// guarded by mu
	admitted, exceeded int
	others             []string
	slowest            time.Duration
}

func streamCreations(ctx context.Context, cs kubernetes.Interface, ns string, perSecond int) *creationStream {
	s := &creationStream{stop: make(chan struct{})}
	s.done.Go(func() {
		tick := time.NewTicker(time.Second / time.Duration(perSecond))
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
			s.done.Go(func() {
				start := time.Now()
				_, err := cs.CoreV1().Pods(ns).Create(ctx, simplePod(fmt.Sprintf("stream-%d", i)), metav1.CreateOptions{})
				d := time.Since(start)
				s.mu.Lock()
				defer s.mu.Unlock()
				s.slowest = max(s.slowest, d)
				switch {
				case err == nil:
					s.admitted++
				case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "exceeded quota"):
					s.exceeded++
				default:
					s.others = append(s.others, fmt.Sprintf("%s: %v", time.Now().Format("15:04:05.000"), err))
				}
			})
		}
	})
	return s
}

// end stops the stream and waits for the creations in flight.
func (s *creationStream) end() {
	close(s.stop)
	s.done.Wait()
}

// TestInstallClientCertificates runs a replica enforcing namespaced quota
// with -client-ca-file, a CA of the test's own, and POSTs an
// AdmissionReview of a pod creation straight to it: without a client
// certificate, and with one from another CA, the TLS handshake fails, no
// review reaches the handler and the quota's status.used does not move;
// with a certificate from the trusted CA the review is answered, allowed
// and charged.
func TestInstallClientCertificates(t *testing.T) {
	ctx := t.Context()
	cs := clientset(t, env.api.Config())
	// Enforced: a review of any other namespace charges nothing, trusted
	// or not.
	ns := enforcedNamespace(t, cs)
	podQuota(t, cs, ns, 10)
	trusted, err := cluster.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	rogue, err := cluster.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "client-ca.crt")
	writeTestFile(t, caFile, trusted.PEM)
	in := newInstallation(t, env.api, ns, "-enforce-namespaced-quota", "-caller-trust=client-certificates", "-client-ca-file="+caFile, "-client-allowed-names=kube-apiserver")
	r := in.start()
	waitFor(t, 30*time.Second, "the controller's first status", func() bool { return podUsed(t, cs, ns) == 0 })

	clientCert := func(ca *cluster.CA) []tls.Certificate {
		certPEM, keyPEM, err := ca.IssueClient("kube-apiserver")
		if err != nil {
			t.Fatal(err)
		}
		c, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return []tls.Certificate{c}
	}
	review := podReview(t, ns, "forged")
	for _, tt := range []struct {
		name  string
		certs []tls.Certificate
	}{
		{"no client certificate", nil},
		{"a certificate from another CA", clientCert(rogue)},
	} {
		resp, err := postReview(ctx, r.webhook, tt.certs, review)
		if err == nil {
			t.Errorf("review with %s: HTTP %d %s, want a failed TLS handshake", tt.name, resp.StatusCode, resp.body)
			continue
		}
		t.Logf("review with %s: %v", tt.name, err)
	}
	// A charge would have been written before an answer; give a review
	// that slipped through time to show anyway.
	time.Sleep(2 * time.Second)
	if used := podUsed(t, cs, ns); used != 0 {
		t.Errorf("status.used pods = %d after the untrusted reviews, want 0", used)
	}
	if n := r.webhookRequests(t); n != 0 {
		t.Errorf("the webhook's handler saw %v requests from untrusted clients, want 0", n)
	}

	resp, err := postReview(ctx, r.webhook, clientCert(trusted), review)
	if err != nil {
		t.Fatalf("review with a trusted certificate: %v", err)
	}
	var answer admissionv1.AdmissionReview
	if err := json.Unmarshal(resp.body, &answer); err != nil || resp.StatusCode != http.StatusOK || answer.Response == nil {
		t.Fatalf("review with a trusted certificate: HTTP %d %s (%v)", resp.StatusCode, resp.body, err)
	}
	if !answer.Response.Allowed || answer.Response.UID != "e2e-forged" {
		t.Fatalf("review with a trusted certificate answered %+v, want allowed, UID e2e-forged", answer.Response)
	}
	// The answered review was charged: the untrusted ones would have
	// shown the same way.
	waitFor(t, 5*time.Second, "the trusted review's charge", func() bool { return podUsed(t, cs, ns) == 1 })
	t.Logf("review with a trusted certificate: allowed and charged (status.used pods 1)")
}

// podReview returns an AdmissionReview of a pod creation in ns, as
// kube-apiserver sends one.
func podReview(t *testing.T, ns, name string) []byte {
	t.Helper()
	pod := simplePod(name)
	pod.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	pod.Namespace = ns
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:         types.UID("e2e-" + name),
			Kind:        metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource:    metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			RequestKind: &metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			RequestResource: &metav1.GroupVersionResource{
				Version: "v1", Resource: "pods",
			},
			Name:      name,
			Namespace: ns,
			Operation: admissionv1.Create,
			Object:    runtime.RawExtension{Raw: raw},
			Options:   runtime.RawExtension{Raw: []byte(`{"apiVersion":"meta.k8s.io/v1","kind":"CreateOptions"}`)},
			DryRun:    ptr.To(false),
		},
	}
	b, err := json.Marshal(&review)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type reviewResponse struct {
	StatusCode int
	body       []byte
}

// postReview POSTs review to the webhook at base over TLS, trusting the
// test CA, presenting certs, on a connection of its own.
func postReview(ctx context.Context, base *url.URL, certs []tls.Certificate, review []byte) (*reviewResponse, error) {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(env.api.CA.PEM) {
		return nil, errors.New("bad CA certificate")
	}
	transport := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: certs, MinVersion: tls.VersionTLS12}}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: 10 * time.Second}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base.String()+"/validate", bytes.NewReader(review))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return &reviewResponse{StatusCode: resp.StatusCode, body: body}, nil
}

// TestInstallResize runs a replica enforcing namespaced quota on an API
// server without the ResourceQuota plugin, registered with the shipped
// rules (which name pods/resize), and resizes a pod in place through
// kube-apiserver's pods/resize subresource: a resize that would exceed
// the quota on requests.cpu is refused with the webhook's exceeded-quota
// message and leaves the pod as it was; one within the quota succeeds and
// is charged.
func TestInstallResize(t *testing.T) {
	api := apiServerWithoutPlugin(t, "install-resize")
	ctx := t.Context()
	cfg := api.Config()
	cs := clientset(t, cfg)
	rc := newRecounter(t, cfg)
	ns := enforcedNamespace(t, cs)
	q := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "cpu"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
			corev1.ResourceRequestsCPU: resource.MustParse("1"),
			corev1.ResourceLimitsCPU:   resource.MustParse("2"),
		}},
	}
	if _, err := cs.CoreV1().ResourceQuotas(ns).Create(ctx, q, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := newInstallation(t, api, ns, "-enforce-namespaced-quota").start()
	register(t, cs, shippedWebhook(t, r.webhook.String()+"/validate"))
	rc.waitQuotasRight(t, ns, 30*time.Second, "the controller's first status")
	// Only the webhook can refuse for quota on this API server: wait
	// until it does, which shows that kube-apiserver calls it.
	var probe error
	if !poll(30*time.Second, func() bool {
		_, probe = cs.CoreV1().Pods(ns).Create(ctx, cpuPod("probe", "3", "4"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return apierrors.IsForbidden(probe) && strings.Contains(probe.Error(), "exceeded quota")
	}) {
		t.Fatalf("the webhook refused no dry run over quota within 30s: %v", probe)
	}

	pod, err := cs.CoreV1().Pods(ns).Create(ctx, cpuPod("resized", "200m", "400m"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rc.waitQuotasRight(t, ns, 30*time.Second, "after the pod's creation")

	over := pod.DeepCopy()
	over.Spec.Containers[0].Resources = cpuResources("1500m", "3")
	_, err = cs.CoreV1().Pods(ns).UpdateResize(ctx, pod.Name, over, metav1.UpdateOptions{})
	wantPrefix := fmt.Sprintf("admission webhook %q denied the request", shippedWebhookName)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), wantPrefix) || !strings.Contains(err.Error(), "exceeded quota: cpu") {
		t.Fatalf("resize to requests.cpu 1500m, limits.cpu 3 (hard 1 and 2): %v, want the webhook's exceeded-quota refusal", err)
	}
	t.Logf("resize over quota: %v", err)
	got, err := cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if req := got.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; req.Cmp(resource.MustParse("200m")) != 0 {
		t.Errorf("after the refused resize the pod requests %s CPU, want 200m", req.String())
	}

	within := got.DeepCopy()
	within.Spec.Containers[0].Resources = cpuResources("500m", "1")
	resized, err := cs.CoreV1().Pods(ns).UpdateResize(ctx, pod.Name, within, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("resize to requests.cpu 500m, limits.cpu 1 (hard 1 and 2): %v", err)
	}
	if req := resized.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; req.Cmp(resource.MustParse("500m")) != 0 {
		t.Errorf("after the resize the pod requests %s CPU, want 500m", req.String())
	}
	quotaNow, err := cs.CoreV1().ResourceQuotas(ns).Get(ctx, "cpu", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var used []string
	for name, v := range quotaNow.Status.Used {
		used = append(used, fmt.Sprintf("%s=%s", name, v.String()))
	}
	slices.Sort(used)
	t.Logf("resize within quota admitted; status.used right after: %s", strings.Join(used, ","))
	if used := quotaNow.Status.Used[corev1.ResourceRequestsCPU]; used.Cmp(resource.MustParse("500m")) < 0 {
		t.Errorf("status.used requests.cpu = %s right after the resize, want the resize charged (500m)", used.String())
	}
	rc.waitQuotasRight(t, ns, 30*time.Second, "after the resize")
}

// cpuPod is a pod of one container requesting req CPU and limited to
// lim: Burstable, as long as req < lim, so that a resize keeping that
// keeps its QoS class.
func cpuPod(name, req, lim string) *corev1.Pod {
	p := simplePod(name)
	p.Spec.Containers[0].Resources = cpuResources(req, lim)
	return p
}

func cpuResources(req, lim string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(req)},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(lim)},
	}
}

// TestInstallChargedOnce runs the default install on an API server with
// the ResourceQuota plugin on: two replicas serving the webhook without
// -enforce-namespaced-quota, registered with the shipped configuration
// for an enforced namespace, and the leader's controller keeping the
// quota. A burst of 100 concurrent pod creations against pods: 50 is
// charged once: every status.used the quota is written with is at most
// the pods admitted plus the creations in flight, 50 creations are
// admitted, and status.used ends at 50, a recount's value; double
// charging would admit 25 and write up to 100.
func TestInstallChargedOnce(t *testing.T) {
	ctx := t.Context()
	cfg := env.api.Config()
	cs := clientset(t, cfg)
	rc := newRecounter(t, cfg)
	ns := enforcedNamespace(t, cs)
	podQuota(t, cs, ns, 50)
	in := newInstallation(t, env.api, ns)
	replicas := []*replica{in.start(), in.start()}
	register(t, cs, shippedWebhook(t, roundRobin(t, []*url.URL{replicas[0].webhook, replicas[1].webhook})))
	waitFor(t, 30*time.Second, "the controller's first status", func() bool { return podUsed(t, cs, ns) == 0 })
	waitFor(t, 30*time.Second, "reviews reaching the replicas", func() bool {
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, simplePod("probe"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Fatalf("dry run: %v", err)
		}
		return webhookRequests(t, replicas...) > 0
	})
	before := webhookRequests(t, replicas...)

	// Every write of the quota, checked against what may be charged:
	// the admitted pods and the creations in flight. inFlight is read
	// before admitted, and a creation counts as admitted before it
	// leaves inFlight, so that none is missed between the two reads.
	var inFlight, admitted atomic.Int64
	w, err := cs.CoreV1().ResourceQuotas(ns).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", "pods").String()})
	if err != nil {
		t.Fatal(err)
	}
	var writes, most int64
	var over []string
	var watching sync.WaitGroup
	watching.Go(func() {
		for ev := range w.ResultChan() {
			q, ok := ev.Object.(*corev1.ResourceQuota)
			if !ok || ev.Type != watch.Modified {
				continue
			}
			bound := inFlight.Load()
			bound += admitted.Load()
			used := q.Status.Used.Pods().Value()
			writes++
			most = max(most, used)
			if used > bound {
				over = append(over, fmt.Sprintf("status.used pods %d with %d pods admitted or in flight", used, bound))
			}
		}
	})

	var exceeded atomic.Int64
	var others []string
	var mu sync.Mutex
	var burst sync.WaitGroup
	start := time.Now()
	for i := range 100 {
		burst.Go(func() {
			inFlight.Add(1)
			_, err := cs.CoreV1().Pods(ns).Create(ctx, simplePod(fmt.Sprintf("burst-%d", i)), metav1.CreateOptions{})
			switch {
			case err == nil:
				admitted.Add(1)
			case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "exceeded quota"):
				exceeded.Add(1)
			default:
				mu.Lock()
				others = append(others, err.Error())
				mu.Unlock()
			}
			inFlight.Add(-1)
		})
	}
	burst.Wait()
	took := time.Since(start)
	rc.waitQuotasRight(t, ns, 60*time.Second, "after the burst")
	w.Stop()
	watching.Wait()
	reviewed := webhookRequests(t, replicas...) - before

	t.Logf("100 concurrent creations against pods: 50 in %v with the plugin and the default install: %d admitted, %d refused for quota, %d otherwise; the webhook answered %v reviews; %d quota writes watched, the highest status.used %d; status.used %d, a recount's",
		took.Round(time.Millisecond), admitted.Load(), exceeded.Load(), len(others), reviewed, writes, most, podUsed(t, cs, ns))
	if len(others) > 0 {
		t.Errorf("creations refused for other reasons:\n%s", strings.Join(others, "\n"))
	}
	if admitted.Load() != 50 {
		t.Errorf("%d creations admitted, want 50: each must be charged once", admitted.Load())
	}
	if reviewed < 100 {
		t.Errorf("the webhook answered %v reviews during the burst, want at least 100: it must be in the path", reviewed)
	}
	if len(over) > 0 {
		t.Errorf("status.used above the pods admitted or in flight %d times:\n%s", len(over), strings.Join(over, "\n"))
	}
	if used := podUsed(t, cs, ns); used != 50 {
		t.Errorf("status.used pods = %d after the burst, want 50", used)
	}
}
