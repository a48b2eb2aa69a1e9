package admission_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/quotakit/quotakit/admission"
	"github.com/quotakit/quotakit/quota"
)

// memQuotas keeps the quotas of one namespace in memory, with
// resourceVersion preconditions on status writes, as an API server.
type memQuotas struct {
	mu     sync.Mutex
	quotas map[string]corev1.ResourceQuota
	rv     int
}

func (m *memQuotas) GetQuotas(ctx context.Context, namespace string) ([]corev1.ResourceQuota, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []corev1.ResourceQuota
	for _, q := range m.quotas {
		if q.Namespace == namespace {
			out = append(out, *q.DeepCopy())
		}
	}
	return out, nil
}

func (m *memQuotas) UpdateQuotaStatus(ctx context.Context, q *corev1.ResourceQuota) (*corev1.ResourceQuota, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.quotas[q.Name]
	if cur.ResourceVersion != q.ResourceVersion {
		return nil, apierrors.NewConflict(corev1.Resource("resourcequotas"), q.Name, fmt.Errorf("stale resourceVersion"))
	}
	m.rv++
	cur.Status = *q.Status.DeepCopy()
	cur.ResourceVersion = strconv.Itoa(m.rv)
	m.quotas[q.Name] = cur
	return cur.DeepCopy(), nil
}

func exampleQuotas() *memQuotas {
	hard := corev1.ResourceList{corev1.ResourcePods: resource.MustParse("2")}
	return &memQuotas{quotas: map[string]corev1.ResourceQuota{"pods": {
		ObjectMeta: metav1.ObjectMeta{Name: "pods", Namespace: "team-a", ResourceVersion: "1"},
		Spec:       corev1.ResourceQuotaSpec{Hard: hard},
		Status:     corev1.ResourceQuotaStatus{Hard: hard, Used: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}},
	}}, rv: 1}
}

func ExampleEvaluator() {
	quotas := exampleQuotas() // team-a: pods 1 used of 2
	e, err := admission.NewEvaluator(quotas, admission.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- e.Run(ctx) }()

	for _, name := range []string{"web", "db"} {
		attrs := &quota.AttributesRecord{
			Operation: admissionv1.Create,
			Resource:  corev1.SchemeGroupVersion.WithResource("pods"),
			Namespace: "team-a",
			Name:      name,
			Object:    &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}},
		}
		if err := e.Evaluate(ctx, attrs); err != nil {
			fmt.Printf("%s: denied: %v\n", name, err)
		} else {
			fmt.Printf("%s: admitted\n", name)
		}
	}
	stored, _ := quotas.GetQuotas(ctx, "team-a")
	fmt.Println("used:", stored[0].Status.Used.Pods())

	stop()
	<-done
	// Output:
	// web: admitted
	// db: denied: pods "db" is forbidden: exceeded quota: pods, requested: pods=1, used: pods=2, limited: pods=2
	// used: 2
}

func ExampleHandler() {
	e, err := admission.NewEvaluator(exampleQuotas(), admission.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- e.Run(ctx) }()
	defer func() { stop(); <-done }()

	// In a program: http.Handle("/validate", &admission.Handler{Evaluator: e})
	// behind TLS. Here, two reviews as kube-apiserver sends them.
	h := &admission.Handler{Evaluator: e}
	for _, name := range []string{"web", "db"} {
		body := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{
			"uid":"` + name + `-uid","operation":"CREATE","namespace":"team-a","name":"` + name + `",
			"kind":{"version":"v1","kind":"Pod"},"resource":{"version":"v1","resource":"pods"},
			"object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"` + name + `"},
				"spec":{"containers":[{"name":"app","image":"nginx"}]}}}}`
		req := httptest.NewRequest("POST", "/validate", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var review admissionv1.AdmissionReview
		if err := json.Unmarshal(rec.Body.Bytes(), &review); err != nil {
			fmt.Println(err)
			return
		}
		r := review.Response
		if r.Allowed {
			fmt.Println(r.UID, "allowed")
		} else {
			fmt.Println(r.UID, "denied:", r.Result.Code, r.Result.Reason, r.Result.Message)
		}
	}
	// Output:
	// web-uid allowed
	// db-uid denied: 403 Forbidden pods "db" is forbidden: exceeded quota: pods, requested: pods=1, used: pods=2, limited: pods=2
}

func ExampleNewAttributes() {
	// What a validating webhook receives for "kubectl run web --image=nginx".
	req := &admissionv1.AdmissionRequest{
		UID:       "705ab4f5-6393-11e8-b7cc-42010a800002",
		Operation: admissionv1.Create,
		Namespace: "team-a",
		Name:      "web",
		Object: runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"Pod",
			"metadata":{"name":"web","namespace":"team-a"},
			"spec":{"containers":[{"name":"web","image":"nginx","resources":{"requests":{"cpu":"100m"}}}]}}`)},
	}
	attrs, err := admission.NewAttributes(req)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	pod := attrs.GetObject().(*corev1.Pod)
	fmt.Println(attrs.GetOperation(), attrs.GetNamespace(), pod.Name, pod.Spec.Containers[0].Resources.Requests.Cpu())

	_, err = admission.NewAttributes(&admissionv1.AdmissionRequest{
		UID:    "1",
		Object: runtime.RawExtension{Raw: []byte(`{"kind":`)},
	})
	fmt.Println(err != nil)
	// Output:
	// CREATE team-a web 100m
	// true
}

func ExampleLoadConfiguration() {
	file := `
apiVersion: apiserver.config.k8s.io/v1
kind: ResourceQuotaConfiguration
limitedResources:
- resource: pods
  matchScopes:
  - {scopeName: PriorityClass, operator: In, values: [cluster-services]}
`
	cfg, err := admission.LoadConfiguration(strings.NewReader(file))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, l := range cfg.LimitedResources {
		fmt.Println(l.Resource, l.MatchScopes[0].ScopeName, l.MatchScopes[0].Values)
	}
	// The limited resources go to the Evaluator:
	// admission.NewEvaluator(accessor, admission.Options{LimitedResources: cfg.LimitedResources})

	_, err = admission.LoadConfiguration(strings.NewReader(file + "unknownField: 1\n"))
	fmt.Println(err)
	// Output:
	// pods PriorityClass [cluster-services]
	// admission: decoding the quota configuration: strict decoding error: unknown field "unknownField"
}

// quotaClient is a QuotaClient over memQuotas; a program adapts a client-go
// clientset the same way.
type quotaClient struct{ *memQuotas }

func (c quotaClient) ListQuotas(ctx context.Context, namespace string) ([]corev1.ResourceQuota, error) {
	return c.GetQuotas(ctx, namespace)
}

func ExampleNewAccessor() {
	server := exampleQuotas()
	// The informer's cache, which has not seen the writes yet.
	snapshot, _ := server.GetQuotas(context.Background(), "team-a")
	lister := func(ns string) ([]*corev1.ResourceQuota, error) {
		if ns != "team-a" {
			return nil, nil
		}
		return []*corev1.ResourceQuota{&snapshot[0]}, nil
	}
	// An informer's HasSynced; this cache has listed everything.
	hasSynced := func() bool { return true }
	a := admission.NewAccessor(lister, hasSynced, quotaClient{server}, admission.AccessorOptions{})

	q, _ := a.GetQuotas(context.Background(), "team-a")
	q[0].Status.Used[corev1.ResourcePods] = resource.MustParse("2")
	if _, err := a.UpdateQuotaStatus(context.Background(), &q[0]); err != nil {
		fmt.Println(err)
		return
	}
	// The cache still holds resourceVersion 1; the accessor answers with
	// its own newer write.
	q, _ = a.GetQuotas(context.Background(), "team-a")
	fmt.Println("cache:", snapshot[0].ResourceVersion, "read:", q[0].ResourceVersion, q[0].Status.Used.Pods())
	// Output: cache: 1 read: 2 2
}

func ExampleSelectedNamespaces() {
	quotas := exampleQuotas() // team-a: pods 1 used of 2
	// The namespaces as an informer's cache holds them; team-a has not
	// opted in.
	nss := map[string]*corev1.Namespace{
		"team-a": {ObjectMeta: metav1.ObjectMeta{Name: "team-a"}},
		"team-b": {ObjectMeta: metav1.ObjectMeta{Name: "team-b", Labels: map[string]string{"quotakit.io/enforce": "true"}}},
	}
	getter := func(name string) (*corev1.Namespace, error) {
		if ns, ok := nss[name]; ok {
			return ns, nil
		}
		return nil, apierrors.NewNotFound(corev1.Resource("namespaces"), name)
	}
	// The selector of the webhook configuration's namespaceSelector.
	selector := labels.SelectorFromSet(labels.Set{"quotakit.io/enforce": "true"})
	e, err := admission.NewEvaluator(quotas, admission.Options{Enforced: admission.SelectedNamespaces(selector, getter)})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- e.Run(ctx) }()

	// A review for team-a, which is not enforced, whoever sent it: allowed
	// without reading or charging its quota.
	for _, name := range []string{"web", "db", "cache"} {
		attrs := &quota.AttributesRecord{
			Operation: admissionv1.Create,
			Resource:  corev1.SchemeGroupVersion.WithResource("pods"),
			Namespace: "team-a",
			Name:      name,
			Object:    &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}},
		}
		fmt.Printf("%s: %v\n", name, e.Evaluate(ctx, attrs))
	}
	stored, _ := quotas.GetQuotas(ctx, "team-a")
	fmt.Println("used:", stored[0].Status.Used.Pods())

	stop()
	<-done
	// Output:
	// web: <nil>
	// db: <nil>
	// cache: <nil>
	// used: 1
}
