package bench

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	upresourcequota "k8s.io/apiserver/pkg/admission/plugin/resourcequota"
	upvalidation "k8s.io/apiserver/pkg/admission/plugin/resourcequota/apis/resourcequota/validation"

	"github.com/quotakit/quotakit/admission"
	"github.com/quotakit/quotakit/quota"
)

// TestLoadConfigurationAgrees reads the same files with kube-apiserver's
// LoadConfiguration (and the validation its plugin runs) and with
// admission.LoadConfiguration: both accept the same files with the same
// limited resources, and reject the same ones with upstream's message
// inside ours (up to the Go type names a JSON type error mentions).
func TestLoadConfigurationAgrees(t *testing.T) {
	const (
		v1      = "apiVersion: apiserver.config.k8s.io/v1\nkind: ResourceQuotaConfiguration\n"
		v1beta1 = "apiVersion: resourcequota.admission.k8s.io/v1beta1\nkind: Configuration\n"
		body    = `limitedResources:
- resource: pods
  matchScopes:
  - {scopeName: PriorityClass, operator: In, values: [cluster-services]}
- apiGroup: resource.k8s.io
  resource: resourceclaims
  matchContains: [".deviceclass.resource.k8s.io/devices"]
`
	)
	files := map[string]string{
		"v1":                        v1 + body,
		"v1beta1":                   v1beta1 + body,
		"v1alpha1":                  strings.Replace(v1beta1, "v1beta1", "v1alpha1", 1) + body,
		"json":                      `{"apiVersion":"apiserver.config.k8s.io/v1","kind":"ResourceQuotaConfiguration","limitedResources":[{"resource":"pods","matchContains":["cpu"]}]}`,
		"no limited resources":      v1,
		"empty list":                v1 + "limitedResources: []\n",
		"empty":                     "",
		"unknown field":             v1 + body + "extra: 1\n",
		"unknown nested field":      v1 + "limitedResources:\n- resource: pods\n  matchContain: [cpu]\n",
		"duplicated field":          v1 + "limitedResources:\n- resource: pods\n  resource: secrets\n",
		"legacy group new kind":     "apiVersion: resourcequota.admission.k8s.io/v1beta1\nkind: ResourceQuotaConfiguration\n",
		"new group legacy kind":     "apiVersion: apiserver.config.k8s.io/v1\nkind: Configuration\n",
		"unknown version":           "apiVersion: apiserver.config.k8s.io/v2\nkind: ResourceQuotaConfiguration\n",
		"missing resource":          v1 + "limitedResources:\n- apiGroup: apps\n- resource: pods\n- matchContains: [x]\n",
		"not yaml":                  "\t{[",
		"wrong type":                v1 + "limitedResources: 3\n",
		"scope with unknown fields": v1 + "limitedResources:\n- resource: pods\n  matchScopes:\n  - {scopeName: PriorityClass, operator: In, value: [x]}\n",
	}
	for name, file := range files {
		t.Run(name, func(t *testing.T) {
			theirs, theirErr := upresourcequota.LoadConfiguration(strings.NewReader(file))
			if theirErr == nil {
				theirErr = upvalidation.ValidateConfiguration(theirs).ToAggregate()
			}
			ours, ourErr := admission.LoadConfiguration(strings.NewReader(file))
			if (theirErr == nil) != (ourErr == nil) {
				t.Fatalf("kube-apiserver error %v, quotakit error %v", theirErr, ourErr)
			}
			if theirErr != nil {
				want := theirErr.Error()
				if i := strings.Index(want, " Go struct field "); i >= 0 {
					// The message names the Go types, which differ.
					want = want[:i]
				}
				if !strings.Contains(ourErr.Error(), want) {
					t.Errorf("quotakit error %q does not contain kube-apiserver's %q", ourErr, want)
				}
				return
			}
			var want []quota.LimitedResource
			for _, l := range theirs.LimitedResources {
				want = append(want, quota.LimitedResource{APIGroup: l.APIGroup, Resource: l.Resource, MatchContains: l.MatchContains, MatchScopes: l.MatchScopes})
			}
			if diff := cmp.Diff(want, ours.LimitedResources); diff != "" {
				t.Errorf("limited resources (-kube-apiserver +quotakit):\n%s", diff)
			}
		})
	}
}
