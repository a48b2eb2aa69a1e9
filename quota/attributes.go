package quota

import (
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Attributes is what an evaluator reads of an admission request. It is the
// part of k8s.io/apiserver's admission.Attributes that quota uses, with the
// same method names, so evaluators port unchanged. [AttributesRecord] is a
// plain implementation; the admission package builds one from a webhook's
// AdmissionRequest.
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
