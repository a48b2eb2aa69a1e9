package admission_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit/admission"
)

const podJSON = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"team-a","resourceVersion":"7"},
 "spec":{"containers":[{"name":"app","image":"nginx","resources":{"requests":{"cpu":"250m"}}}]}}`

func TestNewAttributes(t *testing.T) {
	dryRun := true
	req := &admissionv1.AdmissionRequest{
		UID:         "1",
		Operation:   admissionv1.Update,
		SubResource: "resize",
		Resource:    metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		Namespace:   "team-a",
		Name:        "web",
		Object:      runtime.RawExtension{Raw: []byte(podJSON)},
		OldObject:   runtime.RawExtension{Raw: []byte(podJSON)},
		DryRun:      &dryRun,
	}
	a, err := admission.NewAttributes(req)
	if err != nil {
		t.Fatalf("NewAttributes: %v", err)
	}
	if got, want := a.GetOperation(), admissionv1.Update; got != want {
		t.Errorf("GetOperation() = %q, want %q", got, want)
	}
	if got, want := a.GetSubresource(), "resize"; got != want {
		t.Errorf("GetSubresource() = %q, want %q", got, want)
	}
	if got, want := a.GetResource(), (schema.GroupVersionResource{Version: "v1", Resource: "pods"}); got != want {
		t.Errorf("GetResource() = %v, want %v", got, want)
	}
	if a.GetNamespace() != "team-a" || a.GetName() != "web" || !a.IsDryRun() {
		t.Errorf("namespace, name, dry-run = %q, %q, %v; want team-a, web, true", a.GetNamespace(), a.GetName(), a.IsDryRun())
	}
	for field, obj := range map[string]runtime.Object{"object": a.GetObject(), "oldObject": a.GetOldObject()} {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			t.Fatalf("%s decoded as %T, want *corev1.Pod", field, obj)
		}
		if got := pod.Spec.Containers[0].Resources.Requests.Cpu().String(); got != "250m" {
			t.Errorf("%s cpu request = %s, want 250m", field, got)
		}
	}
}

func TestNewAttributesEmptyObjects(t *testing.T) {
	// A delete carries only the old object; a connect neither.
	a, err := admission.NewAttributes(&admissionv1.AdmissionRequest{
		Operation: admissionv1.Delete,
		OldObject: runtime.RawExtension{Raw: []byte(podJSON)},
	})
	if err != nil {
		t.Fatalf("NewAttributes: %v", err)
	}
	if a.GetObject() != nil {
		t.Errorf("GetObject() = %v, want nil", a.GetObject())
	}
	if _, ok := a.GetOldObject().(*corev1.Pod); !ok {
		t.Errorf("GetOldObject() = %T, want *corev1.Pod", a.GetOldObject())
	}
	if a.IsDryRun() {
		t.Errorf("IsDryRun() = true for a request with no dryRun field")
	}
}

func TestNewAttributesCustomResource(t *testing.T) {
	raw := `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","namespace":"ns"},"spec":{"size":3}}`
	a, err := admission.NewAttributes(&admissionv1.AdmissionRequest{
		Operation: admissionv1.Create,
		Object:    runtime.RawExtension{Raw: []byte(raw)},
	})
	if err != nil {
		t.Fatalf("NewAttributes: %v", err)
	}
	u, ok := a.GetObject().(*unstructured.Unstructured)
	if !ok {
		t.Fatalf("GetObject() = %T, want *unstructured.Unstructured", a.GetObject())
	}
	if diff := cmp.Diff("Widget", u.GetKind()); diff != "" {
		t.Errorf("kind (-want +got):\n%s", diff)
	}
}

func TestNewAttributesErrors(t *testing.T) {
	tests := []struct {
		name string
		req  *admissionv1.AdmissionRequest
	}{
		{"nil request", nil},
		{"create without object", &admissionv1.AdmissionRequest{Operation: admissionv1.Create}},
		{"update without object", &admissionv1.AdmissionRequest{Operation: admissionv1.Update, OldObject: runtime.RawExtension{Raw: []byte(podJSON)}}},
		{"create with a null object", &admissionv1.AdmissionRequest{Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: []byte("null")}}},
		{"object not JSON", &admissionv1.AdmissionRequest{Object: runtime.RawExtension{Raw: []byte("{not json")}}},
		{"object without kind", &admissionv1.AdmissionRequest{Object: runtime.RawExtension{Raw: []byte(`{"metadata":{"name":"x"}}`)}}},
		{"old object not JSON", &admissionv1.AdmissionRequest{Object: runtime.RawExtension{Raw: []byte(podJSON)}, OldObject: runtime.RawExtension{Raw: []byte("[")}}},
		{"field of the wrong type", &admissionv1.AdmissionRequest{Object: runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"Pod","spec":{"containers":"x"}}`)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := admission.NewAttributes(tt.req)
			if err == nil {
				t.Fatalf("NewAttributes = %+v, nil; want an error", a)
			}
			if a != nil {
				t.Errorf("NewAttributes returned %+v with its error, want nil", a)
			}
		})
	}
	if _, err := admission.NewAttributes(nil); !errors.Is(err, admission.ErrNilRequest) {
		t.Errorf("nil request error = %v, want %v", err, admission.ErrNilRequest)
	}
}
