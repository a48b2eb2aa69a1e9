package crdvalidation_test

import (
	"encoding/json"
	"os"
	"testing"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/rest"
	"sigs.k8s.io/yaml"

	"github.com/quotakit/quotakit/clusterquota"
)

// crdFile is the CRD under test, relative to this package's directory.
const crdFile = "../../kube/deploy/crd/clusterquotas.yaml"

// loadCRD reads the CRD as kube-apiserver receives it: decoded strictly
// into apiextensions.k8s.io/v1 and defaulted.
func loadCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	data, err := os.ReadFile(crdFile)
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(data, &crd); err != nil {
		t.Fatalf("%s: %v", crdFile, err)
	}
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(&crd)
	return &crd
}

// internal converts crd to the internal version that kube-apiserver's
// validation of CRDs works on.
func internal(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsinternal.CustomResourceDefinition {
	t.Helper()
	var out apiextensionsinternal.CustomResourceDefinition
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(crd, &out, nil); err != nil {
		t.Fatal(err)
	}
	return &out
}

// server is the part of kube-apiserver that decodes and validates
// ClusterQuotas, built as its CRD handler builds it for the CRD's only
// version.
type server struct {
	structural *structuralschema.Structural
	create     rest.RESTCreateStrategy
	status     rest.RESTUpdateStrategy
}

// newServer builds the server for crd, which must be valid, as
// kube-apiserver's CRD handler builds it.
func newServer(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) *server {
	t.Helper()
	if len(crd.Spec.Versions) != 1 {
		t.Fatalf("the CRD has %d versions, want 1", len(crd.Spec.Versions))
	}
	v := crd.Spec.Versions[0]
	if v.Schema == nil || v.Subresources == nil || v.Subresources.Status == nil {
		t.Fatal("the CRD's version has no schema or no status subresource")
	}
	var validation apiextensionsinternal.CustomResourceValidation
	if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(v.Schema, &validation, nil); err != nil {
		t.Fatal(err)
	}
	props := validation.OpenAPIV3Schema
	structural, err := structuralschema.NewStructural(props)
	if err != nil {
		t.Fatal(err)
	}
	validator, _, err := apiservervalidation.NewSchemaValidator(props)
	if err != nil {
		t.Fatal(err)
	}
	statusProps, ok := props.Properties["status"]
	if !ok {
		t.Fatal("the CRD's schema has no status")
	}
	statusValidator, _, err := apiservervalidation.NewSchemaValidator(&statusProps)
	if err != nil {
		t.Fatal(err)
	}
	strategy := customresource.NewStrategy(
		runtime.NewScheme(), // the typer: validation never asks it
		false,
		clusterquota.SchemeGroupVersion.WithKind("ClusterQuota"),
		validator, statusValidator, structural,
		&apiextensionsinternal.CustomResourceSubresourceStatus{}, nil,
		v.SelectableFields,
	)
	return &server{structural: structural, create: strategy, status: customresource.NewStatusStrategy(strategy)}
}

// decode turns obj into what kube-apiserver validates: an unstructured
// object with unknown fields pruned and nulls dropped where the schema
// does not allow them, then defaulted.
func (s *server) decode(t *testing.T, obj map[string]any) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(obj)}
	u.SetAPIVersion(clusterquota.SchemeGroupVersion.String())
	u.SetKind("ClusterQuota")
	u.SetResourceVersion("1") // as read back for an update
	structuralpruning.Prune(u.Object, s.structural, true)
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(u.Object, s.structural)
	structuraldefaulting.Default(u.Object, s.structural)
	return u
}

// verdict is what kube-apiserver says of an object written whole: its
// spec and metadata by a create, which drops the status, and its status
// by an update of the status subresource over the same object without
// one, as the controller writes it.
type verdict struct {
	create, status field.ErrorList
}

func (v verdict) errs() field.ErrorList {
	return append(v.create[:len(v.create):len(v.create)], v.status...)
}

// validate returns kube-apiserver's verdict on obj.
func (s *server) validate(t *testing.T, obj map[string]any) verdict {
	t.Helper()
	ctx := t.Context()
	var v verdict

	created := s.decode(t, obj)
	s.create.PrepareForCreate(ctx, created)
	v.create = s.create.Validate(ctx, created)

	old := s.decode(t, obj)
	delete(old.Object, "status")
	updated := s.decode(t, obj)
	if _, ok := updated.Object["status"]; ok {
		s.status.PrepareForUpdate(ctx, updated, old)
		v.status = s.status.ValidateUpdate(ctx, updated, old)
	}
	return v
}

// toJSON returns cq as Go clients send it: its JSON, decoded as JSON
// values (int64 for integers, as kube-apiserver decodes them).
func toJSON(t *testing.T, cq *clusterquota.ClusterQuota) map[string]any {
	t.Helper()
	data, err := json.Marshal(cq)
	if err != nil {
		t.Fatal(err)
	}
	return fromJSON(t, string(data))
}

// fromJSON decodes data as kube-apiserver decodes a request body into an
// unstructured object: integers as int64, other numbers as float64.
func fromJSON(t *testing.T, data string) map[string]any {
	t.Helper()
	var obj map[string]any
	if err := utiljson.Unmarshal([]byte(data), &obj); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	return obj
}
