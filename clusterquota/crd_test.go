package clusterquota_test

import (
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/quotakit/quotakit/clusterquota"
)

// crdFile is the CRD that serves the types of this package, relative to
// the package's directory.
const crdFile = "../kube/deploy/crd/clusterquotas.yaml"

// nonNegativeQuantity is the pattern the CRD gives every quantity:
// Kubernetes' quantity pattern without the leading minus sign, and with
// exponents of one or two digits (Kubernetes' allows any number, and
// fractions that resource.ParseQuantity refuses).
const nonNegativeQuantity = `^\+?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?[0-9]{1,2}))?$`

// maxQuantityLength is the CRD's maxLength of a quantity string: more
// than twice the longest canonical form of a quantity within
// clusterquota.MaxQuantity (29 characters, as
// 9223372036854775806999999999n).
const maxQuantityLength = 64

// quantityBoundRule is the part of the CEL rule that bounds a quantity
// at clusterquota.MaxQuantity.
var quantityBoundRule = "quantity(self).compareTo(quantity('" + strconv.FormatInt(clusterquota.MaxQuantity, 10) + "')) <= 0"

// loadCRD reads the CRD as plain JSON values: the root module does not
// depend on the apiextensions types.
func loadCRD(t *testing.T) map[string]any {
	t.Helper()
	return loadCRDFile(t, crdFile)
}

// loadCRDFile reads the CRD in file as plain JSON values.
func loadCRDFile(t *testing.T, file string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var crd map[string]any
	if err := yaml.UnmarshalStrict(data, &crd); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return crd
}

// get walks m along keys, failing the test where a key is missing.
func get[T any](t *testing.T, m any, keys ...any) T {
	t.Helper()
	cur := m
	for i, k := range keys {
		switch k := k.(type) {
		case string:
			obj, ok := cur.(map[string]any)
			if !ok {
				t.Fatalf("%v: not an object", keys[:i])
			}
			if cur, ok = obj[k]; !ok {
				t.Fatalf("%v: no %q", keys[:i], k)
			}
		case int:
			arr, ok := cur.([]any)
			if !ok || k >= len(arr) {
				t.Fatalf("%v: no item %d", keys[:i], k)
			}
			cur = arr[k]
		}
	}
	v, ok := cur.(T)
	if !ok {
		t.Fatalf("%v: %T, want %T", keys, cur, *new(T))
	}
	return v
}

// version returns the CRD's only version.
func version(t *testing.T, crd map[string]any) map[string]any {
	t.Helper()
	versions := get[[]any](t, crd, "spec", "versions")
	if len(versions) != 1 {
		t.Fatalf("the CRD has %d versions, want 1", len(versions))
	}
	return versions[0].(map[string]any)
}

// crdFacts returns what TestCRDNames and TestAppliedCRDNames compare of
// a CRD: its kind, names, scope, and its one version's flags and
// subresources.
func crdFacts(t *testing.T, crd map[string]any) map[string]any {
	t.Helper()
	v := version(t, crd)
	return map[string]any{
		"apiVersion":   crd["apiVersion"],
		"kind":         crd["kind"],
		"name":         get[string](t, crd, "metadata", "name"),
		"group":        get[string](t, crd, "spec", "group"),
		"scope":        get[string](t, crd, "spec", "scope"),
		"names":        get[map[string]any](t, crd, "spec", "names"),
		"version":      v["name"],
		"served":       v["served"],
		"storage":      v["storage"],
		"subresources": v["subresources"],
	}
}

func TestCRDNames(t *testing.T) {
	got := crdFacts(t, loadCRD(t))
	want := map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"name":       clusterquota.ResourcePlural + "." + clusterquota.GroupName,
		"group":      clusterquota.GroupName,
		"scope":      "Cluster",
		"names": map[string]any{
			"kind":       "ClusterQuota",
			"listKind":   "ClusterQuotaList",
			"plural":     clusterquota.ResourcePlural,
			"singular":   "clusterquota",
			"shortNames": []any{"cq"},
		},
		"version":      clusterquota.Version,
		"served":       true,
		"storage":      true,
		"subresources": map[string]any{"status": map[string]any{}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CRD names (-want +got):\n%s", diff)
	}
}

// TestCRDSchemaMatchesTypes walks ClusterQuota with reflection beside the
// CRD's schema: every JSON field of the Go types must be a property of
// the schema with a compatible type, and every property of the schema a
// field of the Go types.
func TestCRDSchemaMatchesTypes(t *testing.T) {
	schema := get[map[string]any](t, version(t, loadCRD(t)), "schema", "openAPIV3Schema")
	w := &schemaWalker{t: t}
	w.walk(reflect.TypeFor[clusterquota.ClusterQuota](), schema, "")
	if len(w.paths) < 30 {
		t.Errorf("the walk compared only %d fields", len(w.paths))
	}
}

type schemaWalker struct {
	t     *testing.T
	paths []string
}

var (
	quantityType   = reflect.TypeFor[resource.Quantity]()
	objectMetaType = reflect.TypeFor[metav1.ObjectMeta]()
	timeType       = reflect.TypeFor[metav1.Time]()

	resourceListType = reflect.TypeFor[corev1.ResourceList]()
)

// hasRule reports whether one of schema's CEL rules contains part.
func hasRule(schema map[string]any, part string) bool {
	rules, _ := schema["x-kubernetes-validations"].([]any)
	for _, r := range rules {
		if rule, _ := r.(map[string]any)["rule"].(string); strings.Contains(rule, part) {
			return true
		}
	}
	return false
}

func (w *schemaWalker) errorf(path, format string, args ...any) {
	w.t.Helper()
	w.t.Errorf("%s: %s", orRoot(path), fmt.Sprintf(format, args...))
}

func orRoot(path string) string {
	if path == "" {
		return "(root)"
	}
	return path
}

func (w *schemaWalker) walk(typ reflect.Type, schema map[string]any, path string) {
	w.t.Helper()
	w.paths = append(w.paths, path)
	if nullable, _ := schema["nullable"].(bool); nullable {
		w.errorf(path, "nullable: a null must be dropped by the API server, not stored (see the CRD's header)")
	}
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	switch {
	case typ == quantityType:
		want := map[string]any{
			"anyOf":                      []any{map[string]any{"type": "integer"}, map[string]any{"type": "string"}},
			"pattern":                    nonNegativeQuantity,
			"maxLength":                  float64(maxQuantityLength),
			"minimum":                    float64(0),
			"x-kubernetes-int-or-string": true,
		}
		got := map[string]any{}
		for k := range want {
			if v, ok := schema[k]; ok {
				got[k] = v
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			w.errorf(path, "a quantity, but the schema is not a non-negative int-or-string quantity (-want +got):\n%s", diff)
		}
		if _, ok := schema["type"]; ok {
			w.errorf(path, "an int-or-string must not have a type")
		}
		// Every quantity is bounded by CEL but those of
		// status.namespaces: a thousand entries of MaxResources
		// quantities each are over CEL's cost budget.
		if !strings.HasPrefix(path, "status.namespaces") && !hasRule(schema, quantityBoundRule) {
			w.errorf(path, "a quantity without the CEL rule %s", quantityBoundRule)
		}
		return
	case typ == timeType:
		w.expectType(schema, path, "string")
		if schema["format"] != "date-time" {
			w.errorf(path, "a time must have format date-time")
		}
		return
	case typ == objectMetaType:
		w.expectType(schema, path, "object")
		if _, ok := schema["properties"]; ok {
			w.errorf(path, "metadata must not be described in a CRD")
		}
		return
	}
	switch typ.Kind() {
	case reflect.String:
		w.expectType(schema, path, "string")
	case reflect.Bool:
		w.expectType(schema, path, "boolean")
	case reflect.Int32, reflect.Int64:
		w.expectType(schema, path, "integer")
		if f, ok := schema["format"]; ok && f != typ.Kind().String() {
			w.errorf(path, "format %v for a Go %v", f, typ.Kind())
		}
	case reflect.Slice:
		w.expectType(schema, path, "array")
		items, ok := schema["items"].(map[string]any)
		if !ok {
			w.errorf(path, "an array without items")
			return
		}
		w.walk(typ.Elem(), items, path+"[]")
	case reflect.Map:
		w.expectType(schema, path, "object")
		if typ == resourceListType && schema["maxProperties"] != float64(clusterquota.MaxResources) {
			w.errorf(path, "a resource list with maxProperties %v, want MaxResources (%d)", schema["maxProperties"], clusterquota.MaxResources)
		}
		if typ.Key().Kind() != reflect.String {
			w.errorf(path, "a map whose keys are %v", typ.Key())
		}
		if _, ok := schema["properties"]; ok {
			w.errorf(path, "a map with properties")
		}
		values, ok := schema["additionalProperties"].(map[string]any)
		if !ok {
			w.errorf(path, "a map without additionalProperties")
			return
		}
		w.walk(typ.Elem(), values, path+"[*]")
	case reflect.Struct:
		w.expectType(schema, path, "object")
		props, _ := schema["properties"].(map[string]any)
		fields := jsonFields(typ)
		for _, name := range sortedKeys(fields) {
			sub, ok := props[name].(map[string]any)
			if !ok {
				w.errorf(path, "the Go field %q is not in the schema", name)
				continue
			}
			w.walk(fields[name].typ, sub, strings.TrimPrefix(path+"."+name, "."))
		}
		for _, name := range sortedKeys(props) {
			if _, ok := fields[name]; !ok {
				w.errorf(path, "the schema's property %q is no field of %v", name, typ)
			}
		}
		// A required property must be one that Go clients always write:
		// no omitempty, and never null.
		required, _ := schema["required"].([]any)
		for _, r := range required {
			f, ok := fields[r.(string)]
			switch {
			case !ok:
				w.errorf(path, "requires %q, which is no field", r)
			case f.omitempty:
				w.errorf(path, "requires %q, which Go clients omit when empty", r)
			case f.typ.Kind() == reflect.Pointer || f.typ.Kind() == reflect.Map || f.typ.Kind() == reflect.Slice:
				w.errorf(path, "requires %q, which Go clients write as null when nil", r)
			}
		}
	default:
		w.errorf(path, "the walk does not know Go kind %v (%v)", typ.Kind(), typ)
	}
}

func (w *schemaWalker) expectType(schema map[string]any, path, want string) {
	w.t.Helper()
	if got := schema["type"]; got != want {
		w.errorf(path, "schema type %v, want %s", got, want)
	}
}

// jsonField is a field as encoding/json sees it.
type jsonField struct {
	typ       reflect.Type
	omitempty bool
}

// jsonFields returns the JSON fields of struct type typ, with inlined
// (embedded, untagged or ",inline") structs flattened as encoding/json
// flattens them.
func jsonFields(typ reflect.Type) map[string]jsonField {
	out := map[string]jsonField{}
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" && f.Anonymous && f.Type.Kind() == reflect.Struct {
			for k, v := range jsonFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = jsonField{typ: f.Type, omitempty: slices.Contains(strings.Split(opts, ","), "omitempty")}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// TestCRDBounds checks that the schema states the bounds and scopes the
// Go code applies.
func TestCRDBounds(t *testing.T) {
	schema := get[map[string]any](t, version(t, loadCRD(t)), "schema", "openAPIV3Schema")
	props := func(keys ...string) []any {
		var out []any
		for _, k := range keys {
			out = append(out, "properties", k)
		}
		return slices.Clip(out) // so that each append copies
	}
	if got := get[float64](t, schema, append(props("status", "namespaces"), "maxItems")...); got != clusterquota.MaxNamespaceStatuses {
		t.Errorf("status.namespaces maxItems = %v, want MaxNamespaceStatuses (%d)", got, clusterquota.MaxNamespaceStatuses)
	}
	if got := get[string](t, schema, append(props("status", "namespaces"), "x-kubernetes-list-type")...); got != "atomic" {
		t.Errorf("status.namespaces list type = %q, want atomic: a map list puts every entry's fields in managedFields", got)
	}
	var want []any
	for _, s := range clusterquota.KnownScopes {
		want = append(want, string(s))
	}
	scopes := get[[]any](t, schema, append(props("spec", "quota", "scopes"), "items", "enum")...)
	scopeNames := get[[]any](t, schema, append(props("spec", "quota", "scopeSelector", "matchExpressions"), "items", "properties", "scopeName", "enum")...)
	if diff := cmp.Diff(want, scopes); diff != "" {
		t.Errorf("spec.quota.scopes enum differs from the scopes Validate accepts (-go +crd):\n%s", diff)
	}
	if diff := cmp.Diff(want, scopeNames); diff != "" {
		t.Errorf("spec.quota.scopeSelector scopeName enum differs from the scopes Validate accepts (-go +crd):\n%s", diff)
	}
	rules := get[[]any](t, schema, append(props("spec", "selector"), "x-kubernetes-validations")...)
	if len(rules) == 0 || !strings.Contains(get[string](t, rules, 0, "rule"), "has(self.labels)") {
		t.Errorf("spec.selector has no rule requiring labels or annotations: %v", rules)
	}

	// The selector's bounds are Validate's.
	labels := props("spec", "selector", "labels", "matchLabels")
	exprs := props("spec", "selector", "labels", "matchExpressions")
	annotations := props("spec", "selector", "annotations")
	for _, b := range []struct {
		name string
		keys []any
		want int
	}{
		{"matchLabels maxProperties", append(labels, "maxProperties"), clusterquota.MaxSelectorTerms},
		{"matchLabels value maxLength", append(labels, "additionalProperties", "maxLength"), 63},
		{"matchExpressions maxItems", append(exprs, "maxItems"), clusterquota.MaxSelectorTerms},
		{"matchExpressions key maxLength", append(exprs, "items", "properties", "key", "maxLength"), 317},
		{"matchExpressions values maxItems", append(exprs, "items", "properties", "values", "maxItems"), clusterquota.MaxSelectorValues},
		{"matchExpressions value maxLength", append(exprs, "items", "properties", "values", "items", "maxLength"), 63},
		{"annotations maxProperties", append(annotations, "maxProperties"), clusterquota.MaxSelectorTerms},
		{"annotation value maxLength", append(annotations, "additionalProperties", "maxLength"), clusterquota.MaxAnnotationValueLength},
		{"namespace maxLength", append(props("status", "namespaces"), "items", "properties", "namespace", "maxLength"), 63},
	} {
		if got := get[float64](t, schema, b.keys...); got != float64(b.want) {
			t.Errorf("%s = %v, want %d", b.name, got, b.want)
		}
	}
	for _, keys := range [][]any{labels, annotations, append(exprs, "items", "properties", "key")} {
		if !hasRule(get[map[string]any](t, schema, keys...), "format.qualifiedName().validate(") {
			t.Errorf("%v: no CEL rule that keys be qualified names", keys)
		}
	}
	// With these bounds the annotations cannot exceed Kubernetes' limit
	// on their total size (a key is at most 317 bytes, a character at most
	// 4), so Validate's check of it needs no counterpart in the CRD.
	if most := clusterquota.MaxSelectorTerms * (317 + 4*clusterquota.MaxAnnotationValueLength); most > 256<<10 {
		t.Errorf("the annotations' bounds allow %d bytes, more than Kubernetes' 256 KiB", most)
	}
}

// TestCRDQuantityPattern checks the CRD's quantity pattern against
// resource.ParseQuantity: what it accepts parses as a quantity that is
// not negative, and it rejects negative quantities and garbage.
func TestCRDQuantityPattern(t *testing.T) {
	re := regexp.MustCompile(nonNegativeQuantity)
	accepted := []string{
		"0", "1", "+1", "10", "1.5", ".5", "5.", "100m", "250m", "1k", "1Ki", "64Mi", "20Ti", "2E", "1Ei",
		"1e3", "1E3", "1e-3", "1.5e+2", "123456789", "0.000001", "1.5Mi", "1e99", "1e-99", "0e99",
	}
	rejected := []string{
		"-1", "-0.5", "-100m", "-1Gi", "-1e3", "-0",
		"", "abc", "1.2.3", "1 Gi", "1Gb", "1KB", "1e", "1ee3", "0x10", "--1", "+-1", "1mi",
		"Mi", // ParseQuantity reads it as 0; Kubernetes' pattern rejects it too
		// Exponents of three digits or more: resource.Quantity holds
		// them as written, and arithmetic on them takes time in
		// proportion to the exponent.
		"1e100", "1e-100", "0e1000000", "1e1000000", "1E010",
		"1e1.5", "1e.5", // Kubernetes' pattern allows these; ParseQuantity refuses them
	}
	for _, s := range accepted {
		q, err := resource.ParseQuantity(s)
		if err != nil || q.Sign() < 0 {
			t.Fatalf("bad test case %q: %v, %v", s, q.String(), err)
		}
		if !re.MatchString(s) {
			t.Errorf("the pattern rejects %q", s)
		}
	}
	for _, s := range rejected {
		if re.MatchString(s) {
			t.Errorf("the pattern accepts %q", s)
		}
	}
}

// TestCRDPrinterColumns checks that each printer column's JSON path names
// fields that exist, with a column type that fits.
func TestCRDPrinterColumns(t *testing.T) {
	columns := get[[]any](t, version(t, loadCRD(t)), "additionalPrinterColumns")
	var names []string
	for i := range columns {
		name := get[string](t, columns, i, "name")
		names = append(names, name)
		path := get[string](t, columns, i, "jsonPath")
		colType := get[string](t, columns, i, "type")
		typ, ok := typeAt(reflect.TypeFor[clusterquota.ClusterQuota](), strings.Split(strings.TrimPrefix(path, "."), "."))
		if !ok {
			t.Errorf("column %s: %s names no field of ClusterQuota", name, path)
			continue
		}
		var fits bool
		switch colType {
		case "date":
			fits = typ == reflect.TypeFor[metav1.Time]()
		case "integer":
			fits = typ.Kind() == reflect.Int32 || typ.Kind() == reflect.Int64
		case "string":
			fits = true // maps and selectors print as JSON
		}
		if !fits {
			t.Errorf("column %s: type %s does not fit %v at %s", name, colType, typ, path)
		}
	}
	if !slices.Contains(names, "Age") || !slices.Contains(names, "Hard") || !slices.Contains(names, "Used") {
		t.Errorf("printer columns %v, want Hard, Used and Age at least", names)
	}
}

// typeAt follows the JSON field names of path from typ.
func typeAt(typ reflect.Type, path []string) (reflect.Type, bool) {
	for _, name := range path {
		for typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct {
			return nil, false
		}
		f, ok := jsonFields(typ)[name]
		if !ok {
			return nil, false
		}
		typ = f.typ
	}
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	return typ, true
}
