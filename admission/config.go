package admission

import (
	"fmt"
	"io"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/quotakit/quotakit/quota"
)

// Configuration is kube-apiserver's ResourceQuota admission configuration:
// the resources whose consumption needs a covering quota. Pass its
// LimitedResources to [Options.LimitedResources].
type Configuration struct {
	// LimitedResources lists the limited resources, in the file's order.
	LimitedResources []quota.LimitedResource
}

// The apiVersion and kind pairs kube-apiserver accepts for the file: the
// current group, and the legacy group whose kind has another name.
var configKinds = []schema.GroupVersionKind{
	{Group: "apiserver.config.k8s.io", Version: "v1", Kind: "ResourceQuotaConfiguration"},
	{Group: "resourcequota.admission.k8s.io", Version: "v1beta1", Kind: "Configuration"},
	{Group: "resourcequota.admission.k8s.io", Version: "v1alpha1", Kind: "Configuration"},
}

// LoadConfiguration reads the ResourceQuota admission configuration file
// kube-apiserver reads (the file a ResourceQuota entry of
// --admission-control-config-file points to), in JSON or YAML, in any of the
// versions kube-apiserver accepts:
//
//	apiserver.config.k8s.io/v1               kind: ResourceQuotaConfiguration
//	resourcequota.admission.k8s.io/v1beta1   kind: Configuration
//	resourcequota.admission.k8s.io/v1alpha1  kind: Configuration
//
// Decoding is strict, as kube-apiserver's: an unknown or duplicated field is
// an error ("strict decoding error: …"), and so are an empty file ("'Kind'
// is missing"), another kind, and an entry without a resource
// ("limitedResources[0].resource: Required value"). A nil reader is the
// empty configuration, as kube-apiserver without a file.
func LoadConfiguration(r io.Reader) (*Configuration, error) {
	if r == nil {
		return &Configuration{}, nil
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("admission: reading the quota configuration: %w", err)
	}
	scheme := runtime.NewScheme()
	for _, gvk := range configKinds {
		scheme.AddKnownTypeWithName(gvk, &configFile{})
	}
	obj, _, err := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer().Decode(data, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("admission: decoding the quota configuration: %w", err)
	}
	file, ok := obj.(*configFile)
	if !ok {
		return nil, fmt.Errorf("admission: decoding the quota configuration: unexpected type %T", obj)
	}
	cfg := &Configuration{}
	var errs field.ErrorList
	for i, l := range file.LimitedResources {
		if l.Resource == "" {
			errs = append(errs, field.Required(field.NewPath("limitedResources").Index(i).Child("resource"), ""))
		}
		cfg.LimitedResources = append(cfg.LimitedResources, quota.LimitedResource{
			APIGroup:      l.APIGroup,
			Resource:      l.Resource,
			MatchContains: l.MatchContains,
			MatchScopes:   l.MatchScopes,
		})
	}
	if err := errs.ToAggregate(); err != nil {
		return nil, fmt.Errorf("admission: invalid quota configuration: %w", err)
	}
	return cfg, nil
}

// configFile is the file's wire form, the same in every version.
type configFile struct {
	metav1.TypeMeta  `json:",inline"`
	LimitedResources []limitedResourceFile `json:"limitedResources"`
}

type limitedResourceFile struct {
	APIGroup      string                                     `json:"apiGroup,omitempty"`
	Resource      string                                     `json:"resource"`
	MatchContains []string                                   `json:"matchContains,omitempty"`
	MatchScopes   []corev1.ScopedResourceSelectorRequirement `json:"matchScopes,omitempty"`
}

// DeepCopyObject makes configFile a runtime.Object for the decoder.
func (c *configFile) DeepCopyObject() runtime.Object {
	out := &configFile{TypeMeta: c.TypeMeta}
	for _, l := range c.LimitedResources {
		cp := limitedResourceFile{APIGroup: l.APIGroup, Resource: l.Resource, MatchContains: slices.Clone(l.MatchContains)}
		for _, s := range l.MatchScopes {
			cp.MatchScopes = append(cp.MatchScopes, *s.DeepCopy())
		}
		out.LimitedResources = append(out.LimitedResources, cp)
	}
	return out
}
