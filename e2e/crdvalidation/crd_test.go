package crdvalidation_test

import (
	"regexp"
	"strings"
	"testing"

	apiextensionsvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/quotakit/quotakit/clusterquota"
	"github.com/quotakit/quotakit/internal/cqcases"
)

// TestCRDAccepted validates the CRD as kube-apiserver does when it is
// created: a structural schema, CEL rules that compile in the API
// server's environment (its quantity and format libraries included), and
// an estimated CEL cost within the budget of each rule and of the whole
// schema, which is what requires every string, list and map that a rule
// reads to be bounded.
func TestCRDAccepted(t *testing.T) {
	for _, err := range apiextensionsvalidation.ValidateCustomResourceDefinition(t.Context(), internal(t, loadCRD(t))) {
		t.Errorf("kube-apiserver would refuse the CRD: %v", err)
	}
}

// notInCRD lists what Validate rejects and the CRD cannot: each entry
// matches Validate's errors by field and detail (and type, when given),
// and says why no schema or CEL rule states it. Any other error of
// Validate must have a counterpart in the CRD's verdict.
var notInCRD = []struct {
	field, detail *regexp.Regexp
	typ           field.ErrorType
	why           string
}{{
	field:  regexp.MustCompile(`\]$`),
	detail: regexp.MustCompile(`^must be a standard resource (type or fully qualified|for quota)$`),
	why: "resource names: which names without a '/' are quota resources is Kubernetes' list " +
		"(with the hugepages- prefixes); CEL would have to copy it and follow every release",
}, {
	field:  regexp.MustCompile(`\]$`),
	detail: regexp.MustCompile(`^must be an integer$`),
	why: "wholeness depends on the resource name: Kubernetes' list of counted resources, " +
		"and extended resources, which are a name rule of their own",
}, {
	field:  regexp.MustCompile(`^spec\.quota\.(scopes|scopeSelector\.matchExpressions)$`),
	detail: regexp.MustCompile(`^unsupported scope applied to resource$`),
	why:    "which scopes apply to which resources: a rule over scope and resource names together, on Kubernetes' list of resources",
}, {
	field:  regexp.MustCompile(`^status\.namespaces\[\d+\]\.namespace$`),
	detail: regexp.MustCompile(`^$`),
	typ:    field.ErrorTypeDuplicate,
	why: "a namespace listed twice: status.namespaces is an atomic list, so that managedFields " +
		"does not grow with it, and a pairwise CEL check over 1,000 entries is over the cost budget",
}, {
	field:  regexp.MustCompile(`^status\.namespaces\[\d+\]\.status\.(hard|used)\[`),
	detail: regexp.MustCompile(`^must be less than or equal to `),
	why: "the bound of the quantities of status.namespaces: a CEL rule on 1,000 entries of " +
		"MaxResources quantities is over the cost budget (the pattern still refuses exponents of " +
		"three digits, so no quantity there can make arithmetic slow)",
}, {
	field:  regexp.MustCompile(`\]$`),
	detail: regexp.MustCompile(`^must be written with a decimal exponent between `),
	why: "the exponent a quantity is held with in Go, not its value: Go clients write such a " +
		"quantity in its canonical form (0e1000000 as \"0\"), and the CRD's pattern refuses " +
		"exponents of three digits as written",
}, {
	field:  regexp.MustCompile(`^metadata\.name$`),
	detail: regexp.MustCompile(`^name or generateName is required$`),
	why: "Validate reads stored objects, which always have a name; on a create the API server " +
		"makes the name from generateName before it validates",
}}

// inexpressible returns why the CRD cannot report fe, or "".
func inexpressible(fe cqcases.FieldErr) string {
	for _, n := range notInCRD {
		if n.field.MatchString(fe.Field) && n.detail.MatchString(fe.Detail) && (n.typ == "" || n.typ == fe.Type) {
			return n.why
		}
	}
	return ""
}

// TestValidateCasesThroughCRD runs every case of Validate's table
// through kube-apiserver's validation of the CRD's objects, as Go
// clients and the controller write them (JSON of the Go type). An object
// Validate accepts must be accepted; for each error of Validate that is
// not in notInCRD, the API server must report an error at the same field
// or one enclosing it (or one inside it: a CEL rule on a map reports at
// the map, Validate at a key; list indexes aside).
func TestValidateCasesThroughCRD(t *testing.T) {
	s := newServer(t, loadCRD(t))
	for _, tt := range cqcases.Cases() {
		t.Run(tt.Name, func(t *testing.T) {
			cq := tt.Object()
			if err := clusterquota.Validate(cq); (err != nil) != (len(tt.Want) > 0) {
				t.Fatalf("Validate() = %v, but the table wants %d errors: run clusterquota's tests", err, len(tt.Want))
			}
			got := s.validate(t, toJSON(t, cq)).errs()
			if len(tt.Want) == 0 {
				for _, e := range got {
					t.Errorf("Validate accepts the object, the CRD refuses it: %v", e)
				}
				return
			}
			for _, want := range tt.Want {
				if why := inexpressible(want); why != "" {
					t.Logf("not in the CRD: %s %s: %s", want.Field, want.Detail, why)
					continue
				}
				switch {
				case reported(got, want.Field):
				case celSkipped(got):
					// The API server runs no CEL rule on an object with
					// errors of some kinds (an unknown enum value, too many
					// items); the object is refused all the same, and a
					// case of its own checks the rule.
					t.Logf("not checked: %s %q: the CEL rules did not run", want.Field, want.Detail)
				default:
					t.Errorf("Validate reports %s: %s %q; the CRD does not (it says %v)", want.Field, want.Type, want.Detail, got.ToAggregate())
				}
			}
			t.Logf("the CRD: %v", got.ToAggregate())
		})
	}
}

// reported reports whether errs has an error at path, or at a field that
// encloses it or that it encloses, with list indexes ignored.
func reported(errs field.ErrorList, path string) bool {
	want := normalize(path)
	for _, e := range errs {
		got := normalize(e.Field)
		if got == want || strings.HasPrefix(want, got+".") || strings.HasPrefix(got, want+".") {
			return true
		}
	}
	return false
}

// celSkipped reports whether the API server said it left the CEL rules
// out because of the schema's errors.
func celSkipped(errs field.ErrorList) bool {
	for _, e := range errs {
		if e.Field == "<nil>" && strings.HasPrefix(e.Detail, "some validation rules were not checked") {
			return true
		}
	}
	return false
}

// index and key are the two forms of a subscript in a field path: a list
// index, and a map key as Validate writes it.
var (
	index = regexp.MustCompile(`\[\d+\]`)
	key   = regexp.MustCompile(`\[([^\]]*)\]`)
)

// normalize writes path without list indexes and with map keys as
// fields, as the OpenAPI validator writes them.
func normalize(path string) string {
	return key.ReplaceAllString(index.ReplaceAllString(path, ""), ".$1")
}

// TestStatusOfInvalidQuota checks that the controller can still write
// the status of a quota that an older CRD let in and this one refuses:
// the Valid condition that says so, and the status an invalid quota
// keeps. The status subresource validates the status by its schema, and
// the API server's CEL rules ratchet: a rule on a value the update does
// not change does not fail it.
func TestStatusOfInvalidQuota(t *testing.T) {
	s := newServer(t, loadCRD(t))
	ctx := t.Context()
	stored := cqcases.Valid()
	stored.Spec.Selector.LabelSelector.MatchLabels = map[string]string{"team": "b c", "bad key!": "a"}
	stored.Spec.Selector.AnnotationSelector = map[string]string{"Bad/Prefix/x": "y"}
	stored.Spec.Quota.Hard = cqcases.RL("pods", "1e1000000", "requests.memory", "1e19")
	if err := clusterquota.Validate(stored); err == nil {
		t.Fatal("Validate accepts the stored quota; the test needs an invalid one")
	}
	if v := s.validate(t, toJSON(t, stored)); len(v.create) == 0 {
		t.Fatal("the CRD accepts the stored quota; the test needs one it refuses")
	}

	updated := stored.DeepCopy()
	updated.Generation = 1
	updated.Status.ObservedGeneration = 1
	updated.Status.Conditions = []metav1.Condition{{
		Type: clusterquota.ConditionValid, Status: metav1.ConditionFalse, Reason: clusterquota.ReasonInvalidSpec,
		Message: clusterquota.Validate(stored).Error(), LastTransitionTime: metav1.Now(), ObservedGeneration: 1,
	}}
	oldObj, newObj := s.decode(t, toJSON(t, stored)), s.decode(t, toJSON(t, updated))
	delete(oldObj.Object, "status")
	s.status.PrepareForUpdate(ctx, newObj, oldObj)
	if errs := s.status.ValidateUpdate(ctx, newObj, oldObj); len(errs) != 0 {
		t.Errorf("the status update of an invalid quota is refused: %v", errs.ToAggregate())
	}
}
