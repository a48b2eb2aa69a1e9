package clusterquota_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/quotakit/quotakit/clusterquota"
)

// appliedCRDFile is the CRD that serves AppliedClusterQuota, relative to
// the package's directory.
const appliedCRDFile = "../kube/deploy/applied-cluster-quotas/appliedclusterquotas.yaml"

// TestAppliedCRDNames checks the names, scope and version of the
// AppliedClusterQuota CRD: namespaced, and without a status subresource,
// since its writer writes each copy whole in one request.
func TestAppliedCRDNames(t *testing.T) {
	got := crdFacts(t, loadCRDFile(t, appliedCRDFile))
	want := map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"name":       clusterquota.AppliedResourcePlural + "." + clusterquota.GroupName,
		"group":      clusterquota.GroupName,
		"scope":      "Namespaced",
		"names": map[string]any{
			"kind":       "AppliedClusterQuota",
			"listKind":   "AppliedClusterQuotaList",
			"plural":     clusterquota.AppliedResourcePlural,
			"singular":   "appliedclusterquota",
			"shortNames": []any{"acq"},
		},
		"version":      clusterquota.Version,
		"served":       true,
		"storage":      true,
		"subresources": nil,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("AppliedClusterQuota CRD names (-want +got):\n%s", diff)
	}
	if got := clusterquota.AppliedClusterQuotas.Resource; got != clusterquota.AppliedResourcePlural {
		t.Errorf("AppliedClusterQuotas.Resource = %q, want %q", got, clusterquota.AppliedResourcePlural)
	}
}

// TestAppliedCRDSchema checks that the AppliedClusterQuota CRD describes
// spec and status exactly as the ClusterQuota CRD does, so that a copy
// can hold what a ClusterQuota holds and nothing else, and walks the Go
// type beside it as TestCRDSchemaMatchesTypes walks ClusterQuota.
func TestAppliedCRDSchema(t *testing.T) {
	applied := get[map[string]any](t, version(t, loadCRDFile(t, appliedCRDFile)), "schema", "openAPIV3Schema")
	cluster := get[map[string]any](t, version(t, loadCRD(t)), "schema", "openAPIV3Schema")
	for _, field := range []string{"apiVersion", "kind", "metadata", "spec", "status"} {
		if diff := cmp.Diff(get[map[string]any](t, cluster, "properties", field), get[map[string]any](t, applied, "properties", field)); diff != "" {
			t.Errorf("%s differs from the ClusterQuota CRD's (-clusterquota +applied):\n%s", field, diff)
		}
	}
	if diff := cmp.Diff(cluster["required"], applied["required"]); diff != "" {
		t.Errorf("required differs from the ClusterQuota CRD's (-clusterquota +applied):\n%s", diff)
	}
	w := &schemaWalker{t: t}
	w.walk(reflect.TypeFor[clusterquota.AppliedClusterQuota](), applied, "")
	if len(w.paths) < 30 {
		t.Errorf("the walk compared only %d fields", len(w.paths))
	}
}

// TestAppliedCRDPrinterColumns checks that each printer column of the
// AppliedClusterQuota CRD names a field of the type.
func TestAppliedCRDPrinterColumns(t *testing.T) {
	columns := get[[]any](t, version(t, loadCRDFile(t, appliedCRDFile)), "additionalPrinterColumns")
	var names []string
	for i := range columns {
		name := get[string](t, columns, i, "name")
		names = append(names, name)
		path := get[string](t, columns, i, "jsonPath")
		if !hasPath(reflect.TypeFor[clusterquota.AppliedClusterQuota](), path) {
			t.Errorf("column %s: %s names no field of AppliedClusterQuota", name, path)
		}
	}
	if !slices.Contains(names, "Hard") || !slices.Contains(names, "Used") || !slices.Contains(names, "Age") {
		t.Errorf("printer columns %v, want Hard, Used and Age at least", names)
	}
}

// hasPath reports whether the JSON path (".a.b[0].c") names a field of
// typ, an index following a slice's element type.
func hasPath(typ reflect.Type, path string) bool {
	for _, name := range strings.Split(strings.TrimPrefix(path, "."), ".") {
		name, indexed := strings.CutSuffix(name, "[0]")
		next, ok := typeAt(typ, []string{name})
		if !ok {
			return false
		}
		if indexed {
			if next.Kind() != reflect.Slice {
				return false
			}
			next = next.Elem()
		}
		typ = next
	}
	return true
}
