package admission_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/quotakit/quotakit/admission"
	"github.com/quotakit/quotakit/quota"
)

func TestLoadConfiguration(t *testing.T) {
	body := `
limitedResources:
- resource: pods
  matchScopes:
  - {scopeName: PriorityClass, operator: In, values: [cluster-services]}
- apiGroup: resource.k8s.io
  resource: resourceclaims
  matchContains: [".deviceclass.resource.k8s.io/devices"]
`
	want := &admission.Configuration{LimitedResources: []quota.LimitedResource{
		{Resource: "pods", MatchScopes: []corev1.ScopedResourceSelectorRequirement{{
			ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpIn, Values: []string{"cluster-services"}}}},
		{APIGroup: "resource.k8s.io", Resource: "resourceclaims", MatchContains: []string{".deviceclass.resource.k8s.io/devices"}},
	}}
	for _, head := range []string{
		"apiVersion: apiserver.config.k8s.io/v1\nkind: ResourceQuotaConfiguration\n",
		"apiVersion: resourcequota.admission.k8s.io/v1beta1\nkind: Configuration\n",
		"apiVersion: resourcequota.admission.k8s.io/v1alpha1\nkind: Configuration\n",
	} {
		t.Run(strings.SplitN(head, "\n", 2)[0], func(t *testing.T) {
			got, err := admission.LoadConfiguration(strings.NewReader(head + body))
			if err != nil {
				t.Fatalf("LoadConfiguration: %v", err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("LoadConfiguration (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("json", func(t *testing.T) {
		got, err := admission.LoadConfiguration(strings.NewReader(`{"apiVersion":"apiserver.config.k8s.io/v1","kind":"ResourceQuotaConfiguration","limitedResources":[{"resource":"pods","matchContains":["cpu"]}]}`))
		if err != nil {
			t.Fatalf("LoadConfiguration: %v", err)
		}
		if diff := cmp.Diff(&admission.Configuration{LimitedResources: []quota.LimitedResource{{Resource: "pods", MatchContains: []string{"cpu"}}}}, got); diff != "" {
			t.Errorf("LoadConfiguration (-want +got):\n%s", diff)
		}
	})
	t.Run("no file", func(t *testing.T) {
		got, err := admission.LoadConfiguration(nil)
		if err != nil || len(got.LimitedResources) != 0 {
			t.Errorf("LoadConfiguration(nil) = %+v, %v; want the empty configuration", got, err)
		}
	})
}

func TestLoadConfigurationErrors(t *testing.T) {
	const v1 = "apiVersion: apiserver.config.k8s.io/v1\nkind: ResourceQuotaConfiguration\n"
	tests := []struct {
		name, body, want string
	}{
		{"empty", "", "'Kind' is missing"},
		{"unknown field", v1 + "limitedResources:\n- resource: pods\n  matchContain: [cpu]\n", "strict decoding error"},
		{"duplicated field", v1 + "limitedResources:\n- resource: pods\n  resource: secrets\n", "strict decoding error"},
		{"legacy group with the new kind", "apiVersion: resourcequota.admission.k8s.io/v1beta1\nkind: ResourceQuotaConfiguration\n", `no kind "ResourceQuotaConfiguration" is registered`},
		{"new group with the legacy kind", "apiVersion: apiserver.config.k8s.io/v1\nkind: Configuration\n", `no kind "Configuration" is registered`},
		{"missing resource", v1 + "limitedResources:\n- apiGroup: apps\n", "limitedResources[0].resource: Required value"},
		{"not yaml", "\t{[", "admission: decoding the quota configuration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := admission.LoadConfiguration(strings.NewReader(tt.body))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("LoadConfiguration = %+v, %v; want an error containing %q", got, err, tt.want)
			}
		})
	}
}
