package admission

import (
	"encoding/json"
	"errors"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	admissionv1beta1 "k8s.io/api/admission/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// kube-apiserver sends a webhook an AdmissionReview of the first version
// in the webhook's admissionReviewVersions that it supports: v1, or
// v1beta1 for a configuration that lists v1beta1 first. The two carry the
// same request and response fields; the answer must be of the version
// asked.

// review is a decoded AdmissionReview: its request, as admission.k8s.io/v1
// whichever version came, and the type it came as, which the answer
// repeats.
type review struct {
	typeMeta metav1.TypeMeta
	request  *admissionv1.AdmissionRequest
}

// decodeReview decodes an AdmissionReview of admission.k8s.io/v1 or
// v1beta1 with a request.
func decodeReview(body []byte) (review, error) {
	obj, gvk, err := codecs().UniversalDeserializer().Decode(body, nil, nil)
	if err != nil {
		return review{}, fmt.Errorf("admission: decoding the AdmissionReview: %w", err)
	}
	var r review
	switch rv := obj.(type) {
	case *admissionv1.AdmissionReview:
		r = review{typeMeta: rv.TypeMeta, request: rv.Request}
	case *admissionv1beta1.AdmissionReview:
		r = review{typeMeta: rv.TypeMeta, request: v1Request(rv.Request)}
	default:
		return review{}, fmt.Errorf("admission: got %s, want an AdmissionReview of admission.k8s.io/v1 or v1beta1", gvk)
	}
	if r.request == nil {
		return review{}, errors.New("admission: the AdmissionReview has no request")
	}
	return r, nil
}

// encode returns the AdmissionReview that answers r with resp, in r's
// version.
func (r review) encode(resp *admissionv1.AdmissionResponse) ([]byte, error) {
	if r.typeMeta.GroupVersionKind().GroupVersion() == admissionv1beta1.SchemeGroupVersion {
		return json.Marshal(&admissionv1beta1.AdmissionReview{TypeMeta: r.typeMeta, Response: &admissionv1beta1.AdmissionResponse{
			UID:              resp.UID,
			Allowed:          resp.Allowed,
			Result:           resp.Result,
			AuditAnnotations: resp.AuditAnnotations,
			Warnings:         resp.Warnings,
		}})
	}
	return json.Marshal(&admissionv1.AdmissionReview{TypeMeta: r.typeMeta, Response: resp})
}

// v1Request returns req as an admission.k8s.io/v1 request, or nil.
func v1Request(req *admissionv1beta1.AdmissionRequest) *admissionv1.AdmissionRequest {
	if req == nil {
		return nil
	}
	return &admissionv1.AdmissionRequest{
		UID:                req.UID,
		Kind:               req.Kind,
		Resource:           req.Resource,
		SubResource:        req.SubResource,
		RequestKind:        req.RequestKind,
		RequestResource:    req.RequestResource,
		RequestSubResource: req.RequestSubResource,
		Name:               req.Name,
		Namespace:          req.Namespace,
		Operation:          admissionv1.Operation(req.Operation),
		UserInfo:           req.UserInfo,
		Object:             req.Object,
		OldObject:          req.OldObject,
		DryRun:             req.DryRun,
		Options:            req.Options,
	}
}
