// Package cqcases holds the table of ClusterQuota validation cases: what
// clusterquota.Validate must say of each object. Two tests read it:
// clusterquota's own, which compares Validate's errors with the table,
// and the e2e module's crdvalidation test, which runs the same objects
// through the CRD's OpenAPI schema and CEL rules with the API server's
// validators, so that the CRD and Validate cannot drift apart unseen.
// The table lives here, in an internal package of the library, because
// the second test is in another module; it is test data with no API.
package cqcases

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/quotakit/quotakit/clusterquota"
)

// Case is one object and the errors Validate must return for it.
type Case struct {
	// Name names the case in both tests.
	Name string
	// Modify changes the quota of [Valid] into the case's object.
	Modify func(*clusterquota.ClusterQuota)
	// Want are Validate's errors, in order; none for a valid object.
	Want []FieldErr
}

// Object returns the case's object: [Valid] changed by Modify.
func (c Case) Object() *clusterquota.ClusterQuota {
	q := Valid()
	c.Modify(q)
	return q
}

// FieldErr is the part of a field error a case states.
type FieldErr struct {
	Type   field.ErrorType
	Field  string
	Detail string
}

// AnyDetail as a FieldErr's Detail accepts any detail: for messages that
// apimachinery's validators write.
const AnyDetail = "*"

// Valid returns a ClusterQuota that Validate accepts; each case breaks
// one thing, or stretches one to its bound.
func Valid() *clusterquota.ClusterQuota {
	return &clusterquota.ClusterQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "team-a"},
		Spec: clusterquota.ClusterQuotaSpec{
			Selector: clusterquota.ClusterQuotaSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}},
			Quota:    corev1.ResourceQuotaSpec{Hard: RL("pods", "50", "requests.cpu", "10", "count/secrets", "100")},
		},
	}
}

// RL builds a resource list from name, quantity pairs.
func RL(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

// Kubernetes' messages that the cases state.
const (
	msgExistsOnly   = "must be 'Exists' when scope is any of ResourceQuotaScopeTerminating, ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort, ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity"
	msgRestrict     = "must restrict the selected namespaces: set labels, annotations or both"
	msgNegative     = "must be greater than or equal to 0"
	msgTooLarge     = "must be less than or equal to 9223372036854775807"
	msgExponent     = "must be written with a decimal exponent between -300 and 300"
	msgNotResource  = "must be a standard resource type or fully qualified"
	msgNotQuotaRes  = "must be a standard resource for quota"
	msgNotInteger   = "must be an integer"
	msgBadOperator  = "not a valid selector operator"
	msgScopeNotForR = "unsupported scope applied to resource"
)

// Strings at and past the bounds of label keys and values.
var (
	// longestPrefix is a DNS subdomain of 253 characters, the most.
	longestPrefix = strings.Join([]string{strings.Repeat("a", 63), strings.Repeat("b", 63), strings.Repeat("c", 63), strings.Repeat("d", 61)}, ".")
	// longestName is a label name of 63 characters, the most.
	longestName = "n" + strings.Repeat("-", 61) + "n"
	// longestKey is the longest qualified name, 317 characters.
	longestKey = longestPrefix + "/" + longestName
)

// Cases returns the table. Each call builds it anew, so a test may change
// what it gets.
func Cases() []Case {
	scopeReq := func(scope corev1.ResourceQuotaScope, op corev1.ScopeSelectorOperator, values ...string) corev1.ScopedResourceSelectorRequirement {
		return corev1.ScopedResourceSelectorRequirement{ScopeName: scope, Operator: op, Values: values}
	}
	labelReq := func(key string, op metav1.LabelSelectorOperator, values ...string) metav1.LabelSelectorRequirement {
		return metav1.LabelSelectorRequirement{Key: key, Operator: op, Values: values}
	}
	return []Case{
		{Name: "valid", Modify: func(*clusterquota.ClusterQuota) {}},
		{Name: "annotations alone", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Selector = clusterquota.ClusterQuotaSelector{AnnotationSelector: map[string]string{"openshift.io/requester": "alice"}}
		}},
		{Name: "both parts", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Selector.AnnotationSelector = map[string]string{"owner": "alice"}
		}},
		{Name: "no selector", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Selector = clusterquota.ClusterQuotaSelector{}
		}, Want: []FieldErr{{field.ErrorTypeRequired, "spec.selector", msgRestrict}}},
		{Name: "empty annotation map", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Selector = clusterquota.ClusterQuotaSelector{AnnotationSelector: map[string]string{}}
		}, Want: []FieldErr{{field.ErrorTypeRequired, "spec.selector", msgRestrict}}},
		{Name: "empty label selector", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Selector = clusterquota.ClusterQuotaSelector{LabelSelector: &metav1.LabelSelector{}}
		}, Want: []FieldErr{
			{field.ErrorTypeRequired, "spec.selector", msgRestrict},
			{field.ErrorTypeInvalid, "spec.selector.labels", "must restrict the selected namespaces: an empty label selector would select every namespace"},
		}},
		{Name: "empty label selector beside annotations", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Selector = clusterquota.ClusterQuotaSelector{LabelSelector: &metav1.LabelSelector{}, AnnotationSelector: map[string]string{"owner": "alice"}}
		}, Want: []FieldErr{
			{field.ErrorTypeInvalid, "spec.selector.labels", "must restrict the selected namespaces: an empty label selector would select every namespace"},
		}},

		// Label selectors: keys, values and operators as
		// ValidateLabelSelector has them.
		{Name: "label selector expressions", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Selector.LabelSelector.MatchExpressions = []metav1.LabelSelectorRequirement{
				labelReq("tier", metav1.LabelSelectorOpIn, "gold", "silver"),
				labelReq("example.com/frozen", metav1.LabelSelectorOpDoesNotExist),
				labelReq("Team_B.x", metav1.LabelSelectorOpNotIn, "", "a-b_c.D"),
				labelReq("owner", metav1.LabelSelectorOpExists),
			}
		}},
		{Name: "label selector operator", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Selector.LabelSelector.MatchExpressions = []metav1.LabelSelectorRequirement{labelReq("tier", "Near", "x")}
		}, Want: []FieldErr{{field.ErrorTypeInvalid, "spec.selector.labels.matchExpressions[0].operator", msgBadOperator}}},
		{Name: "label selector operator in lower case", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Selector.LabelSelector.MatchExpressions = []metav1.LabelSelectorRequirement{labelReq("tier", "in", "x")}
		}, Want: []FieldErr{{field.ErrorTypeInvalid, "spec.selector.labels.matchExpressions[0].operator", msgBadOperator}}},
		{Name: "In without values", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Selector.LabelSelector.MatchExpressions = []metav1.LabelSelectorRequirement{labelReq("tier", metav1.LabelSelectorOpIn)}
		}, Want: []FieldErr{{field.ErrorTypeRequired, "spec.selector.labels.matchExpressions[0].values", AnyDetail}}},
		{Name: "NotIn without values", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Selector.LabelSelector.MatchExpressions = []metav1.LabelSelectorRequirement{labelReq("tier", metav1.LabelSelectorOpNotIn)}
		}, Want: []FieldErr{{field.ErrorTypeRequired, "spec.selector.labels.matchExpressions[0].values", AnyDetail}}},
		{Name: "Exists with values", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Selector.LabelSelector.MatchExpressions = []metav1.LabelSelectorRequirement{labelReq("tier", metav1.LabelSelectorOpExists, "gold")}
		}, Want: []FieldErr{{field.ErrorTypeForbidden, "spec.selector.labels.matchExpressions[0].values", AnyDetail}}},
		{Name: "DoesNotExist with values", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Selector.LabelSelector.MatchExpressions = []metav1.LabelSelectorRequirement{labelReq("tier", metav1.LabelSelectorOpDoesNotExist, "gold")}
		}, Want: []FieldErr{{field.ErrorTypeForbidden, "spec.selector.labels.matchExpressions[0].values", AnyDetail}}},
		{Name: "label selector key", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Selector.LabelSelector.MatchLabels = map[string]string{"bad key!": "a"}
		}, Want: []FieldErr{{field.ErrorTypeInvalid, "spec.selector.labels.matchLabels", AnyDetail}}},
		{Name: "label selector value", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Selector.LabelSelector.MatchLabels = map[string]string{"team": "b c"}
		}, Want: []FieldErr{{field.ErrorTypeInvalid, "spec.selector.labels.matchLabels", AnyDetail}}},
		{Name: "label selector value with a trailing dash", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Selector.LabelSelector.MatchLabels = map[string]string{"team": "b-"}
		}, Want: []FieldErr{{field.ErrorTypeInvalid, "spec.selector.labels.matchLabels", AnyDetail}}},
		{Name: "label selector expression key", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Selector.LabelSelector.MatchExpressions = []metav1.LabelSelectorRequirement{labelReq("bad key!", metav1.LabelSelectorOpExists)}
		}, Want: []FieldErr{{field.ErrorTypeInvalid, "spec.selector.labels.matchExpressions[0].key", AnyDetail}}},
		{Name: "label selector expression value", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Selector.LabelSelector.MatchExpressions = []metav1.LabelSelectorRequirement{labelReq("tier", metav1.LabelSelectorOpIn, "gold", "b c")}
		}, Want: []FieldErr{{field.ErrorTypeInvalid, "spec.selector.labels.matchExpressions[0].values[1]", AnyDetail}}},
		{Name: "label keys and values at their longest", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Selector.LabelSelector.MatchLabels = map[string]string{longestKey: strings.Repeat("v", 63)}
			q.Spec.Selector.LabelSelector.MatchExpressions = []metav1.LabelSelectorRequirement{labelReq(longestKey, metav1.LabelSelectorOpIn, strings.Repeat("w", 63))}
		}},
		{Name: "label name too long", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Selector.LabelSelector.MatchLabels = map[string]string{"example.com/" + longestName + "x": "a"}
		}, Want: []FieldErr{{field.ErrorTypeInvalid, "spec.selector.labels.matchLabels", AnyDetail}}},
		{Name: "label prefix too long", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Selector.LabelSelector.MatchExpressions = []metav1.LabelSelectorRequirement{labelReq("e"+longestPrefix+"/x", metav1.LabelSelectorOpExists)}
		}, Want: []FieldErr{{field.ErrorTypeInvalid, "spec.selector.labels.matchExpressions[0].key", AnyDetail}}},
		{Name: "label key with an upper-case prefix", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Selector.LabelSelector.MatchLabels = map[string]string{"Example.com/team": "a"}
		}, Want: []FieldErr{{field.ErrorTypeInvalid, "spec.selector.labels.matchLabels", AnyDetail}}},
		{Name: "label value too long", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Selector.LabelSelector.MatchLabels = map[string]string{"team": strings.Repeat("v", 64)}
		}, Want: []FieldErr{{field.ErrorTypeInvalid, "spec.selector.labels.matchLabels", AnyDetail}}},
		{Name: "selector at its bounds", Modify: func(q *clusterquota.ClusterQuota) {
			ls := q.Spec.Selector.LabelSelector
			ls.MatchLabels = map[string]string{}
			for i := range clusterquota.MaxSelectorTerms {
				ls.MatchLabels[fmt.Sprintf("example.com/l%d", i)] = "v"
				ls.MatchExpressions = append(ls.MatchExpressions, labelReq(fmt.Sprintf("k%d", i), metav1.LabelSelectorOpNotIn, values(clusterquota.MaxSelectorValues)...))
			}
			q.Spec.Selector.AnnotationSelector = map[string]string{}
			for i := range clusterquota.MaxSelectorTerms {
				// Two bytes a character: the bound counts characters.
				q.Spec.Selector.AnnotationSelector[fmt.Sprintf("Example.com/A%d", i)] = strings.Repeat("é", clusterquota.MaxAnnotationValueLength)
			}
		}},
		{Name: "too many match labels", Modify: func(q *clusterquota.ClusterQuota) {
			ls := q.Spec.Selector.LabelSelector
			for i := range clusterquota.MaxSelectorTerms {
				ls.MatchLabels[fmt.Sprintf("l%d", i)] = "v"
			}
		}, Want: []FieldErr{{field.ErrorTypeTooMany, "spec.selector.labels.matchLabels", "must have at most 32 items"}}},
		{Name: "too many match expressions", Modify: func(q *clusterquota.ClusterQuota) {
			ls := q.Spec.Selector.LabelSelector
			for i := range clusterquota.MaxSelectorTerms + 1 {
				ls.MatchExpressions = append(ls.MatchExpressions, labelReq(fmt.Sprintf("k%d", i), metav1.LabelSelectorOpExists))
			}
		}, Want: []FieldErr{{field.ErrorTypeTooMany, "spec.selector.labels.matchExpressions", "must have at most 32 items"}}},
		{Name: "too many values", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Selector.LabelSelector.MatchExpressions = []metav1.LabelSelectorRequirement{
				labelReq("tier", metav1.LabelSelectorOpIn, values(clusterquota.MaxSelectorValues+1)...),
			}
		}, Want: []FieldErr{{field.ErrorTypeTooMany, "spec.selector.labels.matchExpressions[0].values", "must have at most 256 items"}}},

		// Annotation selectors: keys as annotation keys, in any case.
		{Name: "annotation key", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Selector.AnnotationSelector = map[string]string{"Bad/Prefix/x": "y"}
		}, Want: []FieldErr{{field.ErrorTypeInvalid, "spec.selector.annotations", AnyDetail}}},
		{Name: "annotation key with a space", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Selector.AnnotationSelector = map[string]string{"bad key": "y"}
		}, Want: []FieldErr{{field.ErrorTypeInvalid, "spec.selector.annotations", AnyDetail}}},
		{Name: "annotation key in upper case", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Selector.AnnotationSelector = map[string]string{"Example.COM/Owner": "any value: spaces too"}
		}},
		{Name: "too many annotations", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Selector.AnnotationSelector = map[string]string{}
			for i := range clusterquota.MaxSelectorTerms + 1 {
				q.Spec.Selector.AnnotationSelector[fmt.Sprintf("a%d", i)] = "v"
			}
		}, Want: []FieldErr{{field.ErrorTypeTooMany, "spec.selector.annotations", "must have at most 32 items"}}},
		{Name: "annotation value too long", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Selector.AnnotationSelector = map[string]string{"owner": strings.Repeat("v", clusterquota.MaxAnnotationValueLength+1)}
		}, Want: []FieldErr{{field.ErrorTypeTooLong, "spec.selector.annotations[owner]", "may not be more than 1024 characters"}}},

		// Quantities: sign, bound and wholeness.
		{Name: "negative hard", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Quota.Hard = RL("requests.memory", "-1Gi")
		}, Want: []FieldErr{{field.ErrorTypeInvalid, "spec.quota.hard[requests.memory]", msgNegative}}},
		{Name: "quantities at the bound", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Quota.Hard = RL(
				"requests.storage", "100Ei", // capped by ParseQuantity at 2^63-1
				"limits.memory", "8Ei", // 2^63, capped too
				"requests.memory", "1e15",
				"pods", "1e6",
				"requests.cpu", "9223372036854775807",
				"limits.cpu", "9223372036854775806999m",
				"count/secrets", "9E",
				"services", "0e99",
			)
			q.Status.Total = corev1.ResourceQuotaStatus{Hard: RL("requests.storage", "100Ei"), Used: RL("requests.storage", "9223372036854775807")}
		}},
		{Name: "quantity above the bound", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Quota.Hard = RL("requests.memory", "9223372036854775808")
		}, Want: []FieldErr{{field.ErrorTypeInvalid, "spec.quota.hard[requests.memory]", msgTooLarge}}},
		{Name: "quantities above the bound by fractions and suffixes", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Quota.Hard = RL("limits.cpu", "9223372036854775807001m", "requests.storage", "10E", "requests.memory", "1e19")
		}, Want: []FieldErr{
			{field.ErrorTypeInvalid, "spec.quota.hard[limits.cpu]", msgTooLarge},
			{field.ErrorTypeInvalid, "spec.quota.hard[requests.memory]", msgTooLarge},
			{field.ErrorTypeInvalid, "spec.quota.hard[requests.storage]", msgTooLarge},
		}},
		{Name: "quantity with a huge exponent", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Quota.Hard = RL("pods", "1e1000000", "requests.cpu", "1E300")
		}, Want: []FieldErr{
			{field.ErrorTypeInvalid, "spec.quota.hard[pods]", msgTooLarge},
			{field.ErrorTypeInvalid, "spec.quota.hard[requests.cpu]", msgTooLarge},
		}},
		{Name: "zero with a huge exponent", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Quota.Hard = RL("pods", "0e1000000", "requests.cpu", "0e-301")
		}, Want: []FieldErr{
			{field.ErrorTypeInvalid, "spec.quota.hard[pods]", msgExponent},
			{field.ErrorTypeInvalid, "spec.quota.hard[requests.cpu]", msgExponent},
		}},
		{Name: "status quantities above the bound", Modify: func(q *clusterquota.ClusterQuota) {
			q.Status.Total = corev1.ResourceQuotaStatus{Hard: RL("pods", "1e19"), Used: RL("pods", "1e1000000")}
		}, Want: []FieldErr{
			{field.ErrorTypeInvalid, "status.total.hard[pods]", msgTooLarge},
			{field.ErrorTypeInvalid, "status.total.used[pods]", msgTooLarge},
		}},
		{Name: "namespace quantity with a huge exponent", Modify: func(q *clusterquota.ClusterQuota) {
			q.Status.Namespaces = []clusterquota.ResourceQuotaStatusByNamespace{{Namespace: "a", Status: corev1.ResourceQuotaStatus{Used: RL("pods", "1e1000000")}}}
		}, Want: []FieldErr{{field.ErrorTypeInvalid, "status.namespaces[0].status.used[pods]", msgTooLarge}}},
		{Name: "namespace quantity above the bound", Modify: func(q *clusterquota.ClusterQuota) {
			q.Status.Namespaces = []clusterquota.ResourceQuotaStatusByNamespace{{Namespace: "a", Status: corev1.ResourceQuotaStatus{Used: RL("pods", "1e19")}}}
		}, Want: []FieldErr{{field.ErrorTypeInvalid, "status.namespaces[0].status.used[pods]", msgTooLarge}}},
		{Name: "resources at the bound", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Quota.Hard = countResources(clusterquota.MaxResources)
			q.Status.Total = corev1.ResourceQuotaStatus{Hard: countResources(clusterquota.MaxResources), Used: countResources(clusterquota.MaxResources)}
			q.Status.Namespaces = []clusterquota.ResourceQuotaStatusByNamespace{{Namespace: "a", Status: corev1.ResourceQuotaStatus{Used: countResources(clusterquota.MaxResources)}}}
		}},
		{Name: "too many resources", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Quota.Hard = countResources(clusterquota.MaxResources + 1)
		}, Want: []FieldErr{{field.ErrorTypeTooMany, "spec.quota.hard", "must have at most 256 items"}}},
		{Name: "too many resources in the status", Modify: func(q *clusterquota.ClusterQuota) {
			q.Status.Total = corev1.ResourceQuotaStatus{Used: countResources(clusterquota.MaxResources + 1)}
		}, Want: []FieldErr{{field.ErrorTypeTooMany, "status.total.used", "must have at most 256 items"}}},
		{Name: "fractional count", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Quota.Hard = RL("pods", "1500m", "requests.example.com/gpu", "500m", "requests.cpu", "500m")
		}, Want: []FieldErr{
			// As in Kubernetes: a requests. name is no extended resource.
			{field.ErrorTypeInvalid, "spec.quota.hard[pods]", msgNotInteger},
		}},
		{Name: "extended resource without requests prefix is whole", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Quota.Hard = RL("example.com/gpu", "1500m")
		}, Want: []FieldErr{{field.ErrorTypeInvalid, "spec.quota.hard[example.com/gpu]", msgNotInteger}}},

		// Resource names and scopes.
		{Name: "unknown resource", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Quota.Hard = RL("gpus", "1")
		}, Want: []FieldErr{
			{field.ErrorTypeInvalid, "spec.quota.hard[gpus]", msgNotResource},
			{field.ErrorTypeInvalid, "spec.quota.hard[gpus]", msgNotQuotaRes},
		}},
		{Name: "storage is no quota resource", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Quota.Hard = RL("storage", "1Gi")
		}, Want: []FieldErr{{field.ErrorTypeInvalid, "spec.quota.hard[storage]", msgNotQuotaRes}}},
		{Name: "hugepages and qualified names", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Quota.Hard = RL("requests.hugepages-2Mi", "1Gi", "hugepages-1Gi", "2Gi", "count/deployments.apps", "5", "gpu.deviceclass.resource.k8s.io/devices", "2")
		}},
		{Name: "scopes", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Quota.Hard = RL("pods", "5", "requests.cpu", "1", "count/secrets", "3")
			q.Spec.Quota.Scopes = []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeNotTerminating, corev1.ResourceQuotaScopeNotBestEffort}
		}},
		{Name: "unknown scope", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Quota.Scopes = []corev1.ResourceQuotaScope{"Everything"}
		}, Want: []FieldErr{{field.ErrorTypeInvalid, "spec.quota.scopes", "unsupported scope"}}},
		{Name: "scope not for resource", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Quota.Hard = RL("pods", "5", "services", "3")
			q.Spec.Quota.Scopes = []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeTerminating}
		}, Want: []FieldErr{{field.ErrorTypeInvalid, "spec.quota.scopes", msgScopeNotForR}}},
		{Name: "BestEffort limits pods only", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Quota.Hard = RL("pods", "5", "requests.cpu", "1")
			q.Spec.Quota.Scopes = []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort}
		}, Want: []FieldErr{{field.ErrorTypeInvalid, "spec.quota.scopes", msgScopeNotForR}}},
		{Name: "VolumeAttributesClass limits claims", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Quota.Hard = RL("persistentvolumeclaims", "5", "requests.storage", "10Gi", "pods", "1")
			q.Spec.Quota.ScopeSelector = &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
				scopeReq(corev1.ResourceQuotaScopeVolumeAttributesClass, corev1.ScopeSelectorOpIn, "gold"),
			}}
		}, Want: []FieldErr{{field.ErrorTypeInvalid, "spec.quota.scopeSelector.matchExpressions", msgScopeNotForR}}},
		{Name: "conflicting scopes", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Quota.Hard = RL("pods", "5")
			q.Spec.Quota.Scopes = []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeTerminating, corev1.ResourceQuotaScopeNotTerminating}
		}, Want: []FieldErr{{field.ErrorTypeInvalid, "spec.quota.scopes", "conflicting scopes"}}},
		{Name: "scope selector", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Quota.Hard = RL("pods", "5")
			q.Spec.Quota.ScopeSelector = &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
				scopeReq(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpNotIn, "low"),
				scopeReq(corev1.ResourceQuotaScopeCrossNamespacePodAffinity, corev1.ScopeSelectorOpExists),
			}}
		}},
		{Name: "scope selector operators", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Quota.Hard = RL("pods", "5")
			q.Spec.Quota.ScopeSelector = &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
				scopeReq(corev1.ResourceQuotaScopeTerminating, corev1.ScopeSelectorOpDoesNotExist),
				scopeReq(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpIn),
				scopeReq(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpExists, "high"),
				scopeReq(corev1.ResourceQuotaScopePriorityClass, "Near", "high"),
				scopeReq("Everything", corev1.ScopeSelectorOpExists),
				scopeReq(corev1.ResourceQuotaScopeBestEffort, corev1.ScopeSelectorOpExists),
				scopeReq(corev1.ResourceQuotaScopeNotBestEffort, corev1.ScopeSelectorOpExists),
			}}
		}, Want: []FieldErr{
			{field.ErrorTypeInvalid, "spec.quota.scopeSelector.matchExpressions.operator", msgExistsOnly},
			{field.ErrorTypeRequired, "spec.quota.scopeSelector.matchExpressions.values", "must be at least one value when `operator` is 'In' or 'NotIn' for scope selector"},
			{field.ErrorTypeInvalid, "spec.quota.scopeSelector.matchExpressions.values", "must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector"},
			{field.ErrorTypeInvalid, "spec.quota.scopeSelector.matchExpressions.operator", msgBadOperator},
			{field.ErrorTypeInvalid, "spec.quota.scopeSelector.matchExpressions.scopeName", "unsupported scope"},
			{field.ErrorTypeInvalid, "spec.quota.scopeSelector.matchExpressions", "conflicting scopes"},
		}},

		{Name: "scope selector In without values", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Quota.Hard = RL("pods", "5")
			q.Spec.Quota.ScopeSelector = &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
				scopeReq(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpIn),
			}}
		}, Want: []FieldErr{{field.ErrorTypeRequired, "spec.quota.scopeSelector.matchExpressions.values", "must be at least one value when `operator` is 'In' or 'NotIn' for scope selector"}}},
		{Name: "scope selector Exists with values", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Quota.Hard = RL("pods", "5")
			q.Spec.Quota.ScopeSelector = &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
				scopeReq(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpExists, "high"),
			}}
		}, Want: []FieldErr{{field.ErrorTypeInvalid, "spec.quota.scopeSelector.matchExpressions.values", "must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector"}}},
		{Name: "pod scope selector not Exists", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Quota.Hard = RL("pods", "5")
			q.Spec.Quota.ScopeSelector = &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
				scopeReq(corev1.ResourceQuotaScopeTerminating, corev1.ScopeSelectorOpDoesNotExist),
			}}
		}, Want: []FieldErr{{field.ErrorTypeInvalid, "spec.quota.scopeSelector.matchExpressions.operator", msgExistsOnly}}},
		{Name: "conflicting scopes in the selector", Modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Quota.Hard = RL("pods", "5")
			q.Spec.Quota.ScopeSelector = &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
				scopeReq(corev1.ResourceQuotaScopeBestEffort, corev1.ScopeSelectorOpExists),
				scopeReq(corev1.ResourceQuotaScopeNotBestEffort, corev1.ScopeSelectorOpExists),
			}}
		}, Want: []FieldErr{{field.ErrorTypeInvalid, "spec.quota.scopeSelector.matchExpressions", "conflicting scopes"}}},

		// Metadata and status.
		{Name: "metadata", Modify: func(q *clusterquota.ClusterQuota) {
			q.Name = "Not_A_Name"
			q.Namespace = "default"
		}, Want: []FieldErr{
			{field.ErrorTypeInvalid, "metadata.name", AnyDetail},
			{field.ErrorTypeForbidden, "metadata.namespace", "not allowed on this type"},
		}},
		{Name: "generateName is no name", Modify: func(q *clusterquota.ClusterQuota) {
			q.Name, q.GenerateName = "", "team-"
		}, Want: []FieldErr{{field.ErrorTypeRequired, "metadata.name", "name or generateName is required"}}},
		{Name: "status", Modify: func(q *clusterquota.ClusterQuota) {
			q.Status = clusterquota.ClusterQuotaStatus{
				Total: corev1.ResourceQuotaStatus{Hard: RL("pods", "50"), Used: RL("pods", "-1")},
				Namespaces: []clusterquota.ResourceQuotaStatusByNamespace{
					{Namespace: "a", Status: corev1.ResourceQuotaStatus{Used: RL("pods", "1")}},
					{Namespace: "a", Status: corev1.ResourceQuotaStatus{Used: RL("pods", "1")}},
					{Namespace: "", Status: corev1.ResourceQuotaStatus{Used: RL("bogus", "1")}},
					{Namespace: "Upper.Case"},
				},
				NamespacesOmitted: -2,
			}
		}, Want: []FieldErr{
			{field.ErrorTypeInvalid, "status.total.used[pods]", msgNegative},
			{field.ErrorTypeDuplicate, "status.namespaces[1].namespace", ""},
			{field.ErrorTypeRequired, "status.namespaces[2].namespace", ""},
			{field.ErrorTypeInvalid, "status.namespaces[2].status.used[bogus]", msgNotResource},
			{field.ErrorTypeInvalid, "status.namespaces[2].status.used[bogus]", msgNotQuotaRes},
			{field.ErrorTypeInvalid, "status.namespaces[3].namespace", AnyDetail},
			{field.ErrorTypeInvalid, "status.namespacesOmitted", msgNegative},
		}},
		{Name: "duplicate namespace", Modify: func(q *clusterquota.ClusterQuota) {
			q.Status.Namespaces = []clusterquota.ResourceQuotaStatusByNamespace{
				{Namespace: "a", Status: corev1.ResourceQuotaStatus{Used: RL("pods", "1")}},
				{Namespace: "a", Status: corev1.ResourceQuotaStatus{Used: RL("pods", "2")}},
			}
		}, Want: []FieldErr{{field.ErrorTypeDuplicate, "status.namespaces[1].namespace", ""}}},
		{Name: "namespace name", Modify: func(q *clusterquota.ClusterQuota) {
			q.Status.Namespaces = []clusterquota.ResourceQuotaStatusByNamespace{{Namespace: "team.a", Status: corev1.ResourceQuotaStatus{Used: RL("pods", "1")}}}
		}, Want: []FieldErr{{field.ErrorTypeInvalid, "status.namespaces[0].namespace", AnyDetail}}},
		{Name: "namespace quantity resource name", Modify: func(q *clusterquota.ClusterQuota) {
			q.Status.Namespaces = []clusterquota.ResourceQuotaStatusByNamespace{{Namespace: "a", Status: corev1.ResourceQuotaStatus{Used: RL("bogus", "1")}}}
		}, Want: []FieldErr{
			{field.ErrorTypeInvalid, "status.namespaces[0].status.used[bogus]", msgNotResource},
			{field.ErrorTypeInvalid, "status.namespaces[0].status.used[bogus]", msgNotQuotaRes},
		}},
		{Name: "too many namespaces", Modify: func(q *clusterquota.ClusterQuota) {
			q.Status.Namespaces = namespaceEntries(clusterquota.MaxNamespaceStatuses + 1)
		}, Want: []FieldErr{{field.ErrorTypeTooMany, "status.namespaces", "must have at most 1000 items"}}},
		{Name: "namespaces at the bound", Modify: func(q *clusterquota.ClusterQuota) {
			q.Status.Namespaces = namespaceEntries(clusterquota.MaxNamespaceStatuses)
		}},
	}
}

// values returns n distinct label values.
func values(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("v%d", i)
	}
	return out
}

// countResources returns a resource list of n count/ resources, all 1.
func countResources(n int) corev1.ResourceList {
	out := make(corev1.ResourceList, n)
	for i := range n {
		out[corev1.ResourceName(fmt.Sprintf("count/r%d.example.com", i))] = resource.MustParse("1")
	}
	return out
}

// namespaceEntries returns n entries of status.namespaces, sorted and
// each using one pod.
func namespaceEntries(n int) []clusterquota.ResourceQuotaStatusByNamespace {
	out := make([]clusterquota.ResourceQuotaStatusByNamespace, n)
	for i := range out {
		out[i] = clusterquota.ResourceQuotaStatusByNamespace{Namespace: fmt.Sprintf("ns-%05d", i), Status: corev1.ResourceQuotaStatus{Used: RL("pods", "1")}}
	}
	return out
}
