package clusterquota_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	"github.com/quotakit/quotakit/clusterquota"
	"github.com/quotakit/quotakit/internal/qcmp"
)

func TestAddToScheme(t *testing.T) {
	if err := clusterquota.AddToScheme(nil); err == nil {
		t.Error("AddToScheme(nil) = nil, want an error")
	}
	s := runtime.NewScheme()
	if err := clusterquota.AddToScheme(s); err != nil {
		t.Fatalf("AddToScheme() = %v", err)
	}
	for kind, want := range map[string]runtime.Object{
		"ClusterQuota":     &clusterquota.ClusterQuota{},
		"ClusterQuotaList": &clusterquota.ClusterQuotaList{},

		"AppliedClusterQuota":     &clusterquota.AppliedClusterQuota{},
		"AppliedClusterQuotaList": &clusterquota.AppliedClusterQuotaList{},
	} {
		gvk := clusterquota.SchemeGroupVersion.WithKind(kind)
		obj, err := s.New(gvk)
		if err != nil {
			t.Errorf("scheme.New(%v) = %v", gvk, err)
			continue
		}
		if diff := cmp.Diff(want, obj); diff != "" {
			t.Errorf("scheme.New(%v) (-want +got):\n%s", gvk, diff)
		}
		kinds, _, err := s.ObjectKinds(want)
		if err != nil || len(kinds) != 1 || kinds[0] != gvk {
			t.Errorf("scheme.ObjectKinds(%T) = %v, %v; want [%v]", want, kinds, err, gvk)
		}
	}
	// The meta/v1 options every group version carries.
	if !s.Recognizes(clusterquota.SchemeGroupVersion.WithKind("ListOptions")) {
		t.Error("the scheme does not recognize ListOptions in the group version")
	}
}

func TestSchemeRoundTrip(t *testing.T) {
	s := runtime.NewScheme()
	if err := clusterquota.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	codecs := serializer.NewCodecFactory(s)
	info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	if !ok {
		t.Fatal("no JSON serializer")
	}
	want := fullQuota()
	encoder := codecs.EncoderForVersion(info.Serializer, clusterquota.SchemeGroupVersion)
	data, err := runtime.Encode(encoder, want)
	if err != nil {
		t.Fatalf("Encode() = %v", err)
	}
	obj, gvk, err := codecs.UniversalDeserializer().Decode(data, nil, nil)
	if err != nil {
		t.Fatalf("Decode(%s) = %v", data, err)
	}
	if *gvk != clusterquota.SchemeGroupVersion.WithKind("ClusterQuota") {
		t.Errorf("Decode() kind = %v", gvk)
	}
	if diff := cmp.Diff(want, obj, qcmp.Quantities()); diff != "" {
		t.Errorf("Decode(Encode(q)) (-want +got):\n%s", diff)
	}
}

func TestResourceAndKind(t *testing.T) {
	if got, want := clusterquota.Resource(clusterquota.ResourcePlural), (schema.GroupResource{Group: "quota.quotakit.io", Resource: "clusterquotas"}); got != want {
		t.Errorf("Resource(%q) = %v, want %v", clusterquota.ResourcePlural, got, want)
	}
	if got, want := clusterquota.Kind("ClusterQuota"), (schema.GroupKind{Group: "quota.quotakit.io", Kind: "ClusterQuota"}); got != want {
		t.Errorf("Kind(ClusterQuota) = %v, want %v", got, want)
	}
	if got := clusterquota.SchemeGroupVersion.String(); got != "quota.quotakit.io/v1alpha1" {
		t.Errorf("SchemeGroupVersion = %s, want quota.quotakit.io/v1alpha1", got)
	}
}
