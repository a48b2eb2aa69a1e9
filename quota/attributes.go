package quota

import (
	"errors"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Attributes is what an evaluator reads of an admission request. It is the
// part of k8s.io/apiserver's admission.Attributes that quota uses, with the
// same method names, so evaluators port unchanged. [AttributesRecord] is a
// plain implementation; [NewAttributesFromAdmissionRequest] builds one for a
// validating webhook.
type Attributes interface {
	// GetOperation is the operation being performed.
	GetOperation() admissionv1.Operation
	// GetSubresource is the subresource ("status", "resize", …), or "" for
	// the main resource.
	GetSubresource() string
	// GetObject is the object of a create or the new object of an update.
	GetObject() runtime.Object
	// GetOldObject is the existing object of an update or delete, or nil.
	GetOldObject() runtime.Object
	// GetResource is the resource being requested.
	GetResource() schema.GroupVersionResource
	// GetNamespace is the namespace of the request, or "" for a
	// cluster-scoped resource.
	GetNamespace() string
	// GetName is the name of the object, when the request names one.
	GetName() string
	// IsDryRun reports whether the request will not be persisted.
	IsDryRun() bool
}

// AttributesRecord is a plain [Attributes]. Its zero value is a request with
// no operation; fill the fields that matter to the evaluator at hand.
type AttributesRecord struct {
	// Operation is returned by GetOperation.
	Operation admissionv1.Operation
	// Subresource is returned by GetSubresource.
	Subresource string
	// Object is returned by GetObject.
	Object runtime.Object
	// OldObject is returned by GetOldObject.
	OldObject runtime.Object
	// Resource is returned by GetResource.
	Resource schema.GroupVersionResource
	// Namespace is returned by GetNamespace.
	Namespace string
	// Name is returned by GetName.
	Name string
	// DryRun is returned by IsDryRun.
	DryRun bool
}

var _ Attributes = (*AttributesRecord)(nil)

// GetOperation returns r.Operation.
func (r *AttributesRecord) GetOperation() admissionv1.Operation { return r.Operation }

// GetSubresource returns r.Subresource.
func (r *AttributesRecord) GetSubresource() string { return r.Subresource }

// GetObject returns r.Object.
func (r *AttributesRecord) GetObject() runtime.Object { return r.Object }

// GetOldObject returns r.OldObject.
func (r *AttributesRecord) GetOldObject() runtime.Object { return r.OldObject }

// GetResource returns r.Resource.
func (r *AttributesRecord) GetResource() schema.GroupVersionResource { return r.Resource }

// GetNamespace returns r.Namespace.
func (r *AttributesRecord) GetNamespace() string { return r.Namespace }

// GetName returns r.Name.
func (r *AttributesRecord) GetName() string { return r.Name }

// IsDryRun returns r.DryRun.
func (r *AttributesRecord) IsDryRun() bool { return r.DryRun }

// ErrNilAdmissionRequest is returned by [NewAttributesFromAdmissionRequest]
// for a nil request.
var ErrNilAdmissionRequest = errors.New("quota: nil admission request")

// NewAttributesFromAdmissionRequest returns the [Attributes] of a request
// received by a validating webhook. Object and OldObject are decoded into the
// typed k8s.io/api objects (*corev1.Pod, …) that evaluators expect; a kind
// that k8s.io/api does not define (a custom resource) is decoded into
// *unstructured.Unstructured, which is enough for counting. An object that is
// not valid JSON, or has no apiVersion/kind, is an error naming the field.
func NewAttributesFromAdmissionRequest(req *admissionv1.AdmissionRequest) (*AttributesRecord, error) {
	if req == nil {
		return nil, ErrNilAdmissionRequest
	}
	obj, err := decodeRawObject(req.Object)
	if err != nil {
		return nil, fmt.Errorf("quota: decoding admission request %s object: %w", req.UID, err)
	}
	old, err := decodeRawObject(req.OldObject)
	if err != nil {
		return nil, fmt.Errorf("quota: decoding admission request %s oldObject: %w", req.UID, err)
	}
	dryRun := req.DryRun != nil && *req.DryRun
	return &AttributesRecord{
		Operation:   req.Operation,
		Subresource: req.SubResource,
		Object:      obj,
		OldObject:   old,
		Resource:    schema.GroupVersionResource{Group: req.Resource.Group, Version: req.Resource.Version, Resource: req.Resource.Resource},
		Namespace:   req.Namespace,
		Name:        req.Name,
		DryRun:      dryRun,
	}, nil
}

// decodeRawObject decodes an admission request's embedded object. An empty
// raw object (a delete has no Object, a create no OldObject) is nil.
func decodeRawObject(raw runtime.RawExtension) (runtime.Object, error) {
	if raw.Object != nil {
		return raw.Object, nil
	}
	if len(raw.Raw) == 0 {
		return nil, nil
	}
	obj, _, err := admissionCodecs().UniversalDeserializer().Decode(raw.Raw, nil, nil)
	if err == nil {
		return obj, nil
	}
	if !runtime.IsNotRegisteredError(err) {
		return nil, err
	}
	// A kind outside k8s.io/api: keep it as unstructured.
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw.Raw); err != nil {
		return nil, err
	}

	return u, nil
}
