package e2e_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// The custom resource the tests create, counted as
// count/widgets.e2e.quotakit.io, and jobs, counted as count/jobs.batch;
// neither is in the library's table of core resources, so the controller
// finds them by discovery.
var (
	widgets = schema.GroupVersionResource{Group: "e2e.quotakit.io", Version: "v1", Resource: "widgets"}
	jobs    = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}
)

var clusterObjects sync.Once

// ensureClusterObjects creates, once per run, the cluster-scoped objects
// the controller tests need: the widgets CustomResourceDefinition
// (waiting until it is served) and two PriorityClasses, which the Priority
// admission plugin requires a pod's priorityClassName to name.
func ensureClusterObjects(t *testing.T, cs kubernetes.Interface, dyn dynamic.Interface) {
	t.Helper()
	var err error
	clusterObjects.Do(func() { err = createClusterObjects(t.Context(), cs, dyn) })
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "widgets to be served", func() bool {
		_, err := dyn.Resource(widgets).Namespace("default").List(t.Context(), metav1.ListOptions{})
		return err == nil
	})
}

func createClusterObjects(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface) error {
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": "widgets.e2e.quotakit.io"},
		"spec": map[string]any{
			"group": "e2e.quotakit.io",
			"scope": "Namespaced",
			"names": map[string]any{"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type":                                 "object",
					"x-kubernetes-preserve-unknown-fields": true,
				}},
			}},
		},
	}}
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	if _, err := dyn.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create widgets CRD: %w", err)
	}
	for i, name := range []string{"e2e-high", "e2e-low"} {
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: int32(1000 - i*500)}
		if _, err := cs.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create PriorityClass %s: %w", name, err)
		}
	}
	return nil
}

// world makes seeded, random changes to the objects of one namespace, of
// every kind a quota of the tests charges, through the real API. Creations
// the API refuses (kube-apiserver's own quota admission does, once a quota
// is full) are counted and otherwise ignored: what matters is that the
// controller's statuses then match what exists.
type world struct {
	t      *testing.T
	ns     string
	cs     kubernetes.Interface
	dyn    dynamic.Interface
	rng    *rand.Rand
	serial int
	// created and refused count creations by outcome.
	created, refused int
	// done counts the changes other than creations that the API
	// accepted, by kind, so that a test can tell its churn covered them.
	done map[string]int
}

func newWorld(t *testing.T, ns string, cs kubernetes.Interface, dyn dynamic.Interface, seed uint64) *world {
	return &world{t: t, ns: ns, cs: cs, dyn: dyn, rng: rand.New(rand.NewPCG(seed, 16)), done: map[string]int{}}
}

func (w *world) name(kind string) string {
	w.serial++
	return fmt.Sprintf("%s-%d", kind, w.serial)
}

// outcome records a creation's result; an error other than a refusal by
// quota fails the test.
func (w *world) outcome(err error) {
	w.t.Helper()
	switch {
	case err == nil:
		w.created++
	case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "quota"):
		w.refused++
	default:
		w.t.Fatalf("create: %v", err)
	}
}

// must fails the test on an error other than a missing object or a
// conflict, which concurrent writers (the controller, admission) make
// ordinary.
func (w *world) must(err error) {
	w.t.Helper()
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		w.t.Fatal(err)
	}
}

// record is must for a change of the given kind, counted when it passed.
func (w *world) record(kind string, err error) {
	w.t.Helper()
	w.must(err)
	if err == nil {
		w.done[kind]++
	}
}

// checkCoverage fails the test if the churn so far has not made every
// kind of change at least once.
func (w *world) checkCoverage() {
	w.t.Helper()
	for _, kind := range []string{"pod turned terminal", "graceful pod deletion", "service type change", "deletion"} {
		if w.done[kind] == 0 {
			w.t.Errorf("the churn made no %s: raise its share or the number of steps", kind)
		}
	}
	w.t.Logf("changes: %v", w.done)
}

// step makes one random change.
func (w *world) step() {
	w.t.Helper()
	ctx := w.t.Context()
	switch n := w.rng.IntN(100); {
	case n < 30:
		w.outcome(w.createPod(ctx))
	case n < 38:
		w.mutatePod(ctx)
	case n < 48:
		_, err := w.cs.CoreV1().ConfigMaps(w.ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.name("cm")}}, metav1.CreateOptions{})
		w.outcome(err)
	case n < 54:
		_, err := w.cs.CoreV1().Secrets(w.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: w.name("secret")}}, metav1.CreateOptions{})
		w.outcome(err)
	case n < 62:
		w.outcome(w.createService(ctx))
	case n < 68:
		w.mutateService(ctx)
	case n < 73:
		w.outcome(w.createPVC(ctx))
	case n < 80:
		_, err := w.dyn.Resource(widgets).Namespace(w.ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "e2e.quotakit.io/v1", "kind": "Widget",
			"metadata": map[string]any{"name": w.name("widget")},
			"spec":     map[string]any{"size": int64(w.rng.IntN(10))},
		}}, metav1.CreateOptions{})
		w.outcome(err)
	case n < 85:
		w.outcome(w.createJob(ctx))
	default:
		w.deleteSomething(ctx)
	}
}

func (w *world) createPod(ctx context.Context) error {
	c := corev1.Container{Name: "c", Image: "e2e.invalid/none"}
	switch w.rng.IntN(3) {
	case 0: // best effort: no requests or limits
	case 1:
		c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}
		c.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("128Mi")}
	case 2:
		c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("100M")}
		c.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("100M")}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: w.name("pod")},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{c}},
	}
	if w.rng.IntN(4) == 0 {
		pod.Spec.ActiveDeadlineSeconds = ptr.To[int64](600) // the Terminating scope
	}
	switch w.rng.IntN(5) {
	case 0:
		pod.Spec.PriorityClassName = "e2e-high"
	case 1:
		pod.Spec.PriorityClassName = "e2e-low"
	}
	// A pod bound to a node is deleted gracefully, and no kubelet ever
	// finishes the deletion: it stays, with a deletionTimestamp, and
	// stops being charged when its grace period is over.
	if w.rng.IntN(2) == 0 {
		pod.Spec.NodeName = "e2e-node"
	}
	_, err := w.cs.CoreV1().Pods(w.ns).Create(ctx, pod, metav1.CreateOptions{})
	return err
}

// mutatePod turns a random pod Succeeded or Failed through the status
// subresource, as a kubelet would.
func (w *world) mutatePod(ctx context.Context) {
	w.t.Helper()
	pods, err := w.cs.CoreV1().Pods(w.ns).List(ctx, metav1.ListOptions{})
	w.must(err)
	if err != nil || len(pods.Items) == 0 {
		return
	}
	pod := pods.Items[w.rng.IntN(len(pods.Items))]
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return
	}
	pod.Status.Phase = corev1.PodSucceeded
	if w.rng.IntN(3) == 0 {
		pod.Status.Phase = corev1.PodFailed
	}
	_, err = w.cs.CoreV1().Pods(w.ns).UpdateStatus(ctx, &pod, metav1.UpdateOptions{})
	w.record("pod turned terminal", err)
}

func (w *world) createService(ctx context.Context) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: w.name("svc")},
		Spec: corev1.ServiceSpec{
			Type:  []corev1.ServiceType{corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer}[w.rng.IntN(3)],
			Ports: []corev1.ServicePort{{Name: "http", Port: 80}},
		},
	}
	_, err := w.cs.CoreV1().Services(w.ns).Create(ctx, svc, metav1.CreateOptions{})
	return err
}

// mutateService changes a random service's type, which changes what it
// charges (services.nodeports, services.loadbalancers).
func (w *world) mutateService(ctx context.Context) {
	w.t.Helper()
	svcs, err := w.cs.CoreV1().Services(w.ns).List(ctx, metav1.ListOptions{})
	w.must(err)
	if err != nil || len(svcs.Items) == 0 {
		return
	}
	svc := svcs.Items[w.rng.IntN(len(svcs.Items))]
	switch svc.Spec.Type {
	case corev1.ServiceTypeClusterIP:
		svc.Spec.Type = corev1.ServiceTypeNodePort
	case corev1.ServiceTypeNodePort:
		svc.Spec.Type = corev1.ServiceTypeLoadBalancer
	default:
		svc.Spec.Type = corev1.ServiceTypeClusterIP
		svc.Spec.AllocateLoadBalancerNodePorts = nil
		svc.Spec.ExternalTrafficPolicy = ""
		for i := range svc.Spec.Ports {
			svc.Spec.Ports[i].NodePort = 0
		}
	}
	_, err = w.cs.CoreV1().Services(w.ns).Update(ctx, &svc, metav1.UpdateOptions{})
	if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "quota") {
		w.refused++ // a type change is charged by admission too
		return
	}
	w.record("service type change", err)
}

func (w *world) createPVC(ctx context.Context) error {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: w.name("pvc")},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: resource.MustParse(fmt.Sprintf("%dGi", 1+w.rng.IntN(3))),
			}},
		},
	}
	_, err := w.cs.CoreV1().PersistentVolumeClaims(w.ns).Create(ctx, pvc, metav1.CreateOptions{})
	return err
}

func (w *world) createJob(ctx context.Context) error {
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: w.name("job")},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "c", Image: "e2e.invalid/none"}},
		}}},
	}
	_, err := w.cs.BatchV1().Jobs(w.ns).Create(ctx, job, metav1.CreateOptions{})
	return err
}

// deleteSomething deletes a random object of a random kind. Pods are
// deleted with a short grace period: those bound to a node then stay,
// terminating, until it is over and beyond. Deletions propagate in the
// background, so that no object waits for a garbage collector that does
// not run here (persistentvolumeclaims still wait for the protection
// finalizer, which nobody removes: they stay, deleted, and charged).
func (w *world) deleteSomething(ctx context.Context) {
	w.t.Helper()
	opts := metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}
	pick := func(names []string) string {
		if len(names) == 0 {
			return ""
		}
		return names[w.rng.IntN(len(names))]
	}
	var (
		err     error
		deleted bool // whether a deletion was asked for
	)
	switch w.rng.IntN(7) {
	case 0:
		l, lerr := w.cs.CoreV1().Pods(w.ns).List(ctx, metav1.ListOptions{})
		w.must(lerr)
		if lerr != nil {
			return
		}
		i := w.rng.IntN(len(l.Items) + 1)
		if i == len(l.Items) {
			return
		}
		pod := l.Items[i]
		o := opts
		o.GracePeriodSeconds = ptr.To[int64](2)
		err = w.cs.CoreV1().Pods(w.ns).Delete(ctx, pod.Name, o)
		if pod.Spec.NodeName != "" && pod.DeletionTimestamp == nil {
			// Bound: the deletion only marks it, for a kubelet.
			w.record("graceful pod deletion", err)
			return
		}
	case 1:
		l, lerr := w.cs.CoreV1().ConfigMaps(w.ns).List(ctx, metav1.ListOptions{})
		w.must(lerr)
		if name := pick(namesOf(l.Items, func(o corev1.ConfigMap) string { return o.Name })); name != "" {
			err = w.cs.CoreV1().ConfigMaps(w.ns).Delete(ctx, name, opts)
			deleted = true
		}
	case 2:
		l, lerr := w.cs.CoreV1().Secrets(w.ns).List(ctx, metav1.ListOptions{})
		w.must(lerr)
		if name := pick(namesOf(l.Items, func(o corev1.Secret) string { return o.Name })); name != "" {
			err = w.cs.CoreV1().Secrets(w.ns).Delete(ctx, name, opts)
			deleted = true
		}
	case 3:
		l, lerr := w.cs.CoreV1().Services(w.ns).List(ctx, metav1.ListOptions{})
		w.must(lerr)
		if name := pick(namesOf(l.Items, func(o corev1.Service) string { return o.Name })); name != "" {
			err = w.cs.CoreV1().Services(w.ns).Delete(ctx, name, opts)
			deleted = true
		}
	case 4:
		l, lerr := w.cs.CoreV1().PersistentVolumeClaims(w.ns).List(ctx, metav1.ListOptions{})
		w.must(lerr)
		if name := pick(namesOf(l.Items, func(o corev1.PersistentVolumeClaim) string { return o.Name })); name != "" {
			err = w.cs.CoreV1().PersistentVolumeClaims(w.ns).Delete(ctx, name, opts)
			deleted = true
		}
	case 5:
		l, lerr := w.dyn.Resource(widgets).Namespace(w.ns).List(ctx, metav1.ListOptions{})
		w.must(lerr)
		if name := pick(namesOf(l.Items, func(o unstructured.Unstructured) string { return o.GetName() })); name != "" {
			err = w.dyn.Resource(widgets).Namespace(w.ns).Delete(ctx, name, opts)
			deleted = true
		}
	case 6:
		l, lerr := w.cs.BatchV1().Jobs(w.ns).List(ctx, metav1.ListOptions{})
		w.must(lerr)
		if name := pick(namesOf(l.Items, func(o batchv1.Job) string { return o.Name })); name != "" {
			err = w.cs.BatchV1().Jobs(w.ns).Delete(ctx, name, opts)
			deleted = true
		}
	}
	if deleted {
		w.record("deletion", err)
	}
}

func namesOf[T any](items []T, name func(T) string) []string {
	names := make([]string, len(items))
	for i, it := range items {
		names[i] = name(it)
	}
	return names
}
