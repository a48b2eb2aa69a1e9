package clusterquota_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/quotakit/quotakit/clusterquota"
)

// validQuota returns a ClusterQuota that Validate accepts; each test case
// breaks one thing.
func validQuota() *clusterquota.ClusterQuota {
	return &clusterquota.ClusterQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "team-a"},
		Spec: clusterquota.ClusterQuotaSpec{
			Selector: clusterquota.ClusterQuotaSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}},
			Quota:    corev1.ResourceQuotaSpec{Hard: rl("pods", "50", "requests.cpu", "10", "count/secrets", "100")},
		},
	}
}

// anyDetail in a fieldErr accepts any detail: for messages that
// apimachinery's validators write.
const anyDetail = "*"

// msgExistsOnly is Kubernetes' message for a pod scope whose operator is
// not Exists.
const msgExistsOnly = "must be 'Exists' when scope is any of ResourceQuotaScopeTerminating, ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort, ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity"

// fieldErr is the part of a field error a test states.
type fieldErr struct {
	Type   field.ErrorType
	Field  string
	Detail string
}

func TestValidate(t *testing.T) {
	scopeReq := func(scope corev1.ResourceQuotaScope, op corev1.ScopeSelectorOperator, values ...string) corev1.ScopedResourceSelectorRequirement {
		return corev1.ScopedResourceSelectorRequirement{ScopeName: scope, Operator: op, Values: values}
	}
	tests := []struct {
		name   string
		modify func(*clusterquota.ClusterQuota)
		want   []fieldErr
	}{
		{name: "valid", modify: func(*clusterquota.ClusterQuota) {}},
		{name: "annotations alone", modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Selector = clusterquota.ClusterQuotaSelector{AnnotationSelector: map[string]string{"openshift.io/requester": "alice"}}
		}},
		{name: "both parts", modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Selector.AnnotationSelector = map[string]string{"owner": "alice"}
		}},
		{name: "no selector", modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Selector = clusterquota.ClusterQuotaSelector{}
		}, want: []fieldErr{{field.ErrorTypeRequired, "spec.selector", "must restrict the selected namespaces: set labels, annotations or both"}}},
		{name: "empty annotation map", modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Selector = clusterquota.ClusterQuotaSelector{AnnotationSelector: map[string]string{}}
		}, want: []fieldErr{{field.ErrorTypeRequired, "spec.selector", "must restrict the selected namespaces: set labels, annotations or both"}}},
		{name: "empty label selector", modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Selector = clusterquota.ClusterQuotaSelector{LabelSelector: &metav1.LabelSelector{}}
		}, want: []fieldErr{
			{field.ErrorTypeRequired, "spec.selector", "must restrict the selected namespaces: set labels, annotations or both"},
			{field.ErrorTypeInvalid, "spec.selector.labels", "must restrict the selected namespaces: an empty label selector would select every namespace"},
		}},
		{name: "empty label selector beside annotations", modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Selector = clusterquota.ClusterQuotaSelector{LabelSelector: &metav1.LabelSelector{}, AnnotationSelector: map[string]string{"owner": "alice"}}
		}, want: []fieldErr{
			{field.ErrorTypeInvalid, "spec.selector.labels", "must restrict the selected namespaces: an empty label selector would select every namespace"},
		}},
		{name: "label selector operator", modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Selector.LabelSelector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Near", Values: []string{"x"}}}
		}, want: []fieldErr{{field.ErrorTypeInvalid, "spec.selector.labels.matchExpressions[0].operator", "not a valid selector operator"}}},
		{name: "label selector key", modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Selector.LabelSelector.MatchLabels = map[string]string{"bad key!": "a"}
		}, want: []fieldErr{{field.ErrorTypeInvalid, "spec.selector.labels.matchLabels", anyDetail}}},
		{name: "annotation key", modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Selector.AnnotationSelector = map[string]string{"Bad/Prefix/x": "y"}
		}, want: []fieldErr{{field.ErrorTypeInvalid, "spec.selector.annotations", anyDetail}}},
		{name: "negative hard", modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Quota.Hard = rl("requests.memory", "-1Gi")
		}, want: []fieldErr{{field.ErrorTypeInvalid, "spec.quota.hard[requests.memory]", "must be greater than or equal to 0"}}},
		{name: "fractional count", modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Quota.Hard = rl("pods", "1500m", "requests.example.com/gpu", "500m", "requests.cpu", "500m")
		}, want: []fieldErr{
			// As in Kubernetes: a requests. name is no extended resource.
			{field.ErrorTypeInvalid, "spec.quota.hard[pods]", "must be an integer"},
		}},
		{name: "extended resource without requests prefix is whole", modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Quota.Hard = rl("example.com/gpu", "1500m")
		}, want: []fieldErr{{field.ErrorTypeInvalid, "spec.quota.hard[example.com/gpu]", "must be an integer"}}},
		{name: "unknown resource", modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Quota.Hard = rl("gpus", "1")
		}, want: []fieldErr{
			{field.ErrorTypeInvalid, "spec.quota.hard[gpus]", "must be a standard resource type or fully qualified"},
			{field.ErrorTypeInvalid, "spec.quota.hard[gpus]", "must be a standard resource for quota"},
		}},
		{name: "storage is no quota resource", modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Quota.Hard = rl("storage", "1Gi")
		}, want: []fieldErr{{field.ErrorTypeInvalid, "spec.quota.hard[storage]", "must be a standard resource for quota"}}},
		{name: "hugepages and qualified names", modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Quota.Hard = rl("requests.hugepages-2Mi", "1Gi", "hugepages-1Gi", "2Gi", "count/deployments.apps", "5", "gpu.deviceclass.resource.k8s.io/devices", "2")
		}},
		{name: "scopes", modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Quota.Hard = rl("pods", "5", "requests.cpu", "1", "count/secrets", "3")
			q.Spec.Quota.Scopes = []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeNotTerminating, corev1.ResourceQuotaScopeNotBestEffort}
		}},
		{name: "unknown scope", modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Quota.Scopes = []corev1.ResourceQuotaScope{"Everything"}
		}, want: []fieldErr{{field.ErrorTypeInvalid, "spec.quota.scopes", "unsupported scope"}}},
		{name: "scope not for resource", modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Quota.Hard = rl("pods", "5", "services", "3")
			q.Spec.Quota.Scopes = []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeTerminating}
		}, want: []fieldErr{{field.ErrorTypeInvalid, "spec.quota.scopes", "unsupported scope applied to resource"}}},
		{name: "BestEffort limits pods only", modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Quota.Hard = rl("pods", "5", "requests.cpu", "1")
			q.Spec.Quota.Scopes = []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort}
		}, want: []fieldErr{{field.ErrorTypeInvalid, "spec.quota.scopes", "unsupported scope applied to resource"}}},
		{name: "VolumeAttributesClass limits claims", modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Quota.Hard = rl("persistentvolumeclaims", "5", "requests.storage", "10Gi", "pods", "1")
			q.Spec.Quota.ScopeSelector = &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
				scopeReq(corev1.ResourceQuotaScopeVolumeAttributesClass, corev1.ScopeSelectorOpIn, "gold"),
			}}
		}, want: []fieldErr{{field.ErrorTypeInvalid, "spec.quota.scopeSelector.matchExpressions", "unsupported scope applied to resource"}}},
		{name: "conflicting scopes", modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Quota.Hard = rl("pods", "5")
			q.Spec.Quota.Scopes = []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeTerminating, corev1.ResourceQuotaScopeNotTerminating}
		}, want: []fieldErr{{field.ErrorTypeInvalid, "spec.quota.scopes", "conflicting scopes"}}},
		{name: "scope selector", modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Quota.Hard = rl("pods", "5")
			q.Spec.Quota.ScopeSelector = &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
				scopeReq(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpNotIn, "low"),
				scopeReq(corev1.ResourceQuotaScopeCrossNamespacePodAffinity, corev1.ScopeSelectorOpExists),
			}}
		}},
		{name: "scope selector operators", modify: func(q *clusterquota.ClusterQuota) {
			q.Spec.Quota.Hard = rl("pods", "5")
			q.Spec.Quota.ScopeSelector = &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
				scopeReq(corev1.ResourceQuotaScopeTerminating, corev1.ScopeSelectorOpDoesNotExist),
				scopeReq(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpIn),
				scopeReq(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpExists, "high"),
				scopeReq(corev1.ResourceQuotaScopePriorityClass, "Near", "high"),
				scopeReq("Everything", corev1.ScopeSelectorOpExists),
				scopeReq(corev1.ResourceQuotaScopeBestEffort, corev1.ScopeSelectorOpExists),
				scopeReq(corev1.ResourceQuotaScopeNotBestEffort, corev1.ScopeSelectorOpExists),
			}}
		}, want: []fieldErr{
			{field.ErrorTypeInvalid, "spec.quota.scopeSelector.matchExpressions.operator", msgExistsOnly},
			{field.ErrorTypeRequired, "spec.quota.scopeSelector.matchExpressions.values", "must be at least one value when `operator` is 'In' or 'NotIn' for scope selector"},
			{field.ErrorTypeInvalid, "spec.quota.scopeSelector.matchExpressions.values", "must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector"},
			{field.ErrorTypeInvalid, "spec.quota.scopeSelector.matchExpressions.operator", "not a valid selector operator"},
			{field.ErrorTypeInvalid, "spec.quota.scopeSelector.matchExpressions.scopeName", "unsupported scope"},
			{field.ErrorTypeInvalid, "spec.quota.scopeSelector.matchExpressions", "conflicting scopes"},
		}},
		{name: "metadata", modify: func(q *clusterquota.ClusterQuota) {
			q.Name = "Not_A_Name"
			q.Namespace = "default"
		}, want: []fieldErr{
			{field.ErrorTypeInvalid, "metadata.name", anyDetail},
			{field.ErrorTypeForbidden, "metadata.namespace", "not allowed on this type"},
		}},
		{name: "generateName is no name", modify: func(q *clusterquota.ClusterQuota) {
			q.Name, q.GenerateName = "", "team-"
		}, want: []fieldErr{{field.ErrorTypeRequired, "metadata.name", "name or generateName is required"}}},
		{name: "status", modify: func(q *clusterquota.ClusterQuota) {
			q.Status = clusterquota.ClusterQuotaStatus{
				Total: corev1.ResourceQuotaStatus{Hard: rl("pods", "50"), Used: rl("pods", "-1")},
				Namespaces: []clusterquota.ResourceQuotaStatusByNamespace{
					{Namespace: "a", Status: corev1.ResourceQuotaStatus{Used: rl("pods", "1")}},
					{Namespace: "a", Status: corev1.ResourceQuotaStatus{Used: rl("pods", "1")}},
					{Namespace: "", Status: corev1.ResourceQuotaStatus{Used: rl("bogus", "1")}},
					{Namespace: "Upper.Case"},
				},
				NamespacesOmitted: -2,
			}
		}, want: []fieldErr{
			{field.ErrorTypeInvalid, "status.total.used[pods]", "must be greater than or equal to 0"},
			{field.ErrorTypeDuplicate, "status.namespaces[1].namespace", ""},
			{field.ErrorTypeRequired, "status.namespaces[2].namespace", ""},
			{field.ErrorTypeInvalid, "status.namespaces[2].status.used[bogus]", "must be a standard resource type or fully qualified"},
			{field.ErrorTypeInvalid, "status.namespaces[2].status.used[bogus]", "must be a standard resource for quota"},
			{field.ErrorTypeInvalid, "status.namespaces[3].namespace", anyDetail},
			{field.ErrorTypeInvalid, "status.namespacesOmitted", "must be greater than or equal to 0"},
		}},
		{name: "too many namespaces", modify: func(q *clusterquota.ClusterQuota) {
			q.Status.Namespaces = manyEntries(clusterquota.MaxNamespaceStatuses + 1)
		}, want: []fieldErr{{field.ErrorTypeTooMany, "status.namespaces", "must have at most 1000 items"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := validQuota()
			tt.modify(q)
			err := clusterquota.Validate(q)
			var got []fieldErr
			if err != nil {
				var verr *clusterquota.ValidationError
				if !errors.As(err, &verr) {
					t.Fatalf("Validate() = %v, not a *ValidationError", err)
				}
				for i, fe := range verr.Errors {
					detail := fe.Detail
					if i < len(tt.want) && tt.want[i].Detail == anyDetail {
						detail = anyDetail
					}
					got = append(got, fieldErr{fe.Type, fe.Field, detail})
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Validate() errors (-want +got):\n%s\n%v", diff, err)
			}
		})
	}
}

func TestValidateNil(t *testing.T) {
	if err := clusterquota.Validate(nil); err == nil {
		t.Error("Validate(nil) = nil, want an error")
	}
}

func TestValidationErrorMessage(t *testing.T) {
	q := validQuota()
	q.Spec.Selector = clusterquota.ClusterQuotaSelector{}
	q.Spec.Quota.Hard = rl("pods", "-1")
	err := clusterquota.Validate(q)
	const want = `clusterquota: ClusterQuota.quota.quotakit.io "team-a" is invalid: [spec.selector: Required value: must restrict the selected namespaces: set labels, annotations or both, spec.quota.hard[pods]: Invalid value: "-1": must be greater than or equal to 0]`
	if err == nil || err.Error() != want {
		t.Errorf("Validate() = %v\nwant %s", err, want)
	}
	var fe *field.Error
	if !errors.As(err, &fe) || !strings.HasPrefix(fe.Field, "spec.") {
		t.Errorf("errors.As(err, *field.Error) = %v", fe)
	}
}
