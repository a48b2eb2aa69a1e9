package admission

import (
	"errors"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit/quota"
)

// ErrNilRequest is returned by [NewAttributes] for a nil request.
var ErrNilRequest = errors.New("admission: nil admission request")

// NewAttributes returns the [quota.Attributes] of a request received by a
// validating webhook. Object and OldObject are decoded into the typed
// k8s.io/api objects (*corev1.Pod, …) that evaluators expect; a kind that
// k8s.io/api does not define (a custom resource) is decoded into
// *unstructured.Unstructured, which is enough for counting. An object that
// is not valid JSON, or has no apiVersion or kind, is an error naming the
// field, and so is a CREATE or UPDATE without an object (kube-apiserver
// always sends one); nothing in the request can make it panic.
func NewAttributes(req *admissionv1.AdmissionRequest) (*quota.AttributesRecord, error) {
	if req == nil {
		return nil, ErrNilRequest
	}
	obj, err := decodeRawObject(req.Object)
	if err != nil {
		return nil, fmt.Errorf("admission: decoding request %s object: %w", req.UID, err)
	}
	if obj == nil && (req.Operation == admissionv1.Create || req.Operation == admissionv1.Update) {
		return nil, fmt.Errorf("admission: request %s: a %s request has no object", req.UID, req.Operation)
	}
	old, err := decodeRawObject(req.OldObject)
	if err != nil {
		return nil, fmt.Errorf("admission: decoding request %s oldObject: %w", req.UID, err)
	}
	return &quota.AttributesRecord{
		Operation:   req.Operation,
		Subresource: req.SubResource,
		Object:      obj,
		OldObject:   old,
		Resource:    schema.GroupVersionResource{Group: req.Resource.Group, Version: req.Resource.Version, Resource: req.Resource.Resource},
		Namespace:   req.Namespace,
		Name:        req.Name,
		DryRun:      req.DryRun != nil && *req.DryRun,
	}, nil
}

// decodeRawObject decodes a request's embedded object. An empty raw object
// (a delete has no object, a create no old object) is nil.
func decodeRawObject(raw runtime.RawExtension) (runtime.Object, error) {
	if raw.Object != nil {
		return raw.Object, nil
	}
	if len(raw.Raw) == 0 {
		return nil, nil
	}
	obj, _, err := codecs().UniversalDeserializer().Decode(raw.Raw, nil, nil)
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
