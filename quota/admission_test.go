package quota_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit/internal/qcmp"
	"github.com/quotakit/quotakit/quota"
)

// dataEvaluator charges a ConfigMap the resources written in its data
// ("requests.cpu": "500m", …). The scope "Terminating" matches a ConfigMap
// labelled terminating=true; no other scope matches. It requires every
// constrained "requests.cpu" to be present.
type dataEvaluator struct{}

var dataGR = schema.GroupResource{Resource: "configmaps"}

func (dataEvaluator) Constraints(required []corev1.ResourceName, item runtime.Object) error {
	cm := item.(*corev1.ConfigMap)
	if quota.Contains(required, "requests.cpu") {
		if _, ok := cm.Data["requests.cpu"]; !ok {
			return errString("must specify requests.cpu for: " + cm.Name)
		}
	}
	return nil
}
func (dataEvaluator) GroupResource() schema.GroupResource { return dataGR }
func (dataEvaluator) Handles(a quota.Attributes) bool {
	op := a.GetOperation()
	return op == admissionv1.Create || op == admissionv1.Update
}
func (e dataEvaluator) Matches(q *corev1.ResourceQuota, item runtime.Object) (bool, error) {
	if len(e.MatchingResources(quota.ResourceNames(q.Status.Hard))) == 0 {
		return false, nil
	}
	for _, s := range q.Spec.Scopes {
		if s != corev1.ResourceQuotaScopeTerminating || item.(*corev1.ConfigMap).Labels["terminating"] != "true" {
			return false, nil
		}
	}
	return true, nil
}
func (dataEvaluator) MatchingScopes(item runtime.Object, scopes []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	var out []corev1.ScopedResourceSelectorRequirement
	for _, s := range scopes {
		if s.ScopeName == corev1.ResourceQuotaScopeTerminating && item.(*corev1.ConfigMap).Labels["terminating"] == "true" {
			out = append(out, s)
		}
	}
	return out, nil
}
func (dataEvaluator) UncoveredQuotaScopes(limited, matched []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	var out []corev1.ScopedResourceSelectorRequirement
	for _, l := range limited {
		found := false
		for _, m := range matched {
			found = found || m.ScopeName == l.ScopeName
		}
		if !found {
			out = append(out, l)
		}
	}
	return out, nil
}
func (dataEvaluator) MatchingResources(input []corev1.ResourceName) []corev1.ResourceName {
	return quota.Intersection(input, names("pods", "requests.cpu", "requests.memory"))
}
func (dataEvaluator) Usage(item runtime.Object) (corev1.ResourceList, error) {
	cm, ok := item.(*corev1.ConfigMap)
	if !ok {
		return nil, errString("not a configmap")
	}
	out := corev1.ResourceList{}
	for k, v := range cm.Data {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, err
		}
		out[corev1.ResourceName(k)] = q
	}
	return out, nil
}
func (dataEvaluator) UsageStats(quota.UsageStatsOptions) (quota.UsageStats, error) {
	return quota.UsageStats{}, nil
}

type errString string

func (e errString) Error() string { return string(e) }

func cm(rv string, labels map[string]string, kv ...string) *corev1.ConfigMap {
	data := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		data[kv[i]] = kv[i+1]
	}
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web", ResourceVersion: rv, Labels: labels}, Data: data}
}

func rq(name string, hard, used corev1.ResourceList, scopes ...corev1.ResourceQuotaScope) corev1.ResourceQuota {
	return corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec:       corev1.ResourceQuotaSpec{Hard: hard, Scopes: scopes},
		Status:     corev1.ResourceQuotaStatus{Hard: hard, Used: used},
	}
}

func TestCheckRequest(t *testing.T) {
	terminating := map[string]string{"terminating": "true"}
	tests := []struct {
		name        string
		quotas      []corev1.ResourceQuota
		op          admissionv1.Operation
		subresource string
		obj, old    runtime.Object
		limited     []quota.LimitedResource
		wantUsed    []corev1.ResourceList // status.used of each returned quota
		wantErr     string                // substring; "" means success
		wantForbid  bool
	}{
		{
			name:     "create within quota advances used",
			quotas:   []corev1.ResourceQuota{rq("q1", rl("pods", "2", "requests.cpu", "1"), rl("pods", "1", "requests.cpu", "250m"))},
			op:       admissionv1.Create,
			obj:      cm("", nil, "pods", "1", "requests.cpu", "500m"),
			wantUsed: []corev1.ResourceList{rl("pods", "2", "requests.cpu", "750m")},
		},
		{
			name:     "usage of names the quota does not limit changes nothing",
			quotas:   []corev1.ResourceQuota{rq("q1", rl("requests.memory", "1Gi"), rl("requests.memory", "0"))},
			op:       admissionv1.Create,
			obj:      cm("", nil, "pods", "1"),
			wantUsed: []corev1.ResourceList{rl("requests.memory", "0")},
		},
		{
			name:       "create over a hard limit is forbidden with upstream's message",
			quotas:     []corev1.ResourceQuota{rq("q1", rl("pods", "2", "requests.cpu", "4"), rl("pods", "2", "requests.cpu", "0"))},
			op:         admissionv1.Create,
			obj:        cm("", nil, "pods", "1", "requests.cpu", "1"),
			wantErr:    `configmaps "web" is forbidden: exceeded quota: q1, requested: pods=1, used: pods=2, limited: pods=2`,
			wantForbid: true,
		},
		{
			name:       "hard resource without used value is status unknown",
			quotas:     []corev1.ResourceQuota{rq("q1", rl("pods", "2", "requests.cpu", "4"), rl("pods", "0"))},
			op:         admissionv1.Create,
			obj:        cm("", nil, "pods", "1", "requests.cpu", "1"),
			wantErr:    "status unknown for quota: q1, resources: pods,requests.cpu",
			wantForbid: true,
		},
		{
			name:       "failed constraints",
			quotas:     []corev1.ResourceQuota{rq("q1", rl("requests.cpu", "4"), rl("requests.cpu", "0"))},
			op:         admissionv1.Create,
			obj:        cm("", nil, "pods", "1"),
			wantErr:    "failed quota: q1: must specify requests.cpu for: web",
			wantForbid: true,
		},
		{
			name:       "negative usage is forbidden",
			quotas:     []corev1.ResourceQuota{rq("q1", rl("pods", "2"), rl("pods", "0"))},
			op:         admissionv1.Create,
			obj:        cm("", nil, "pods", "-1", "requests.memory", "-1"),
			wantErr:    "quota usage is negative for resource(s): pods,requests.memory",
			wantForbid: true,
		},
		{
			name:     "quota with empty status.hard does not apply",
			quotas:   []corev1.ResourceQuota{{ObjectMeta: metav1.ObjectMeta{Name: "new"}, Spec: corev1.ResourceQuotaSpec{Hard: rl("pods", "0")}}},
			op:       admissionv1.Create,
			obj:      cm("", nil, "pods", "1"),
			wantUsed: []corev1.ResourceList{nil},
		},
		{
			name:     "update never lowers usage",
			quotas:   []corev1.ResourceQuota{rq("q1", rl("requests.cpu", "4"), rl("requests.cpu", "3"))},
			op:       admissionv1.Update,
			obj:      cm("5", nil, "requests.cpu", "1"),
			old:      cm("5", nil, "requests.cpu", "2"),
			wantUsed: []corev1.ResourceList{rl("requests.cpu", "3")},
		},
		{
			name:     "update is charged only its increase",
			quotas:   []corev1.ResourceQuota{rq("q1", rl("requests.cpu", "4"), rl("requests.cpu", "3"))},
			op:       admissionv1.Update,
			obj:      cm("5", nil, "requests.cpu", "2500m"),
			old:      cm("5", nil, "requests.cpu", "2"),
			wantUsed: []corev1.ResourceList{rl("requests.cpu", "3500m")},
		},
		{
			name:     "update moving into a quota's scope is charged in full",
			quotas:   []corev1.ResourceQuota{rq("term", rl("requests.cpu", "4"), rl("requests.cpu", "0"), corev1.ResourceQuotaScopeTerminating)},
			op:       admissionv1.Update,
			obj:      cm("5", terminating, "requests.cpu", "2"),
			old:      cm("5", nil, "requests.cpu", "2"),
			wantUsed: []corev1.ResourceList{rl("requests.cpu", "2")},
		},
		{
			name:     "create on update (no resourceVersion) is charged in full",
			quotas:   []corev1.ResourceQuota{rq("q1", rl("requests.cpu", "4"), rl("requests.cpu", "1"))},
			op:       admissionv1.Update,
			obj:      cm("", nil, "requests.cpu", "2"),
			old:      cm("", nil, "requests.cpu", "2"),
			wantUsed: []corev1.ResourceList{rl("requests.cpu", "3")},
		},
		{
			name:       "update without old object is forbidden",
			quotas:     []corev1.ResourceQuota{rq("q1", rl("requests.cpu", "4"), rl("requests.cpu", "1"))},
			op:         admissionv1.Update,
			obj:        cm("5", nil, "requests.cpu", "2"),
			wantErr:    "unable to get previous usage since prior version of object was not found",
			wantForbid: true,
		},
		{
			name:        "status update is charged but never denied",
			quotas:      []corev1.ResourceQuota{rq("q1", rl("requests.cpu", "4"), rl("requests.cpu", "4"))},
			op:          admissionv1.Update,
			subresource: "status",
			obj:         cm("5", nil, "requests.cpu", "3"),
			old:         cm("5", nil, "requests.cpu", "1"),
			wantUsed:    []corev1.ResourceList{rl("requests.cpu", "6")},
		},
		{
			name:       "limited resource without covering quota",
			quotas:     []corev1.ResourceQuota{rq("q1", rl("pods", "4"), rl("pods", "0"))},
			op:         admissionv1.Create,
			obj:        cm("", nil, "pods", "1", "requests.cpu", "1"),
			limited:    []quota.LimitedResource{{Resource: "configmaps", MatchContains: []string{"cpu"}}},
			wantErr:    "insufficient quota to consume: requests.cpu",
			wantForbid: true,
		},
		{
			name:     "limited resource covered by a quota",
			quotas:   []corev1.ResourceQuota{rq("q1", rl("requests.cpu", "4"), rl("requests.cpu", "0"))},
			op:       admissionv1.Create,
			obj:      cm("", nil, "pods", "1", "requests.cpu", "1"),
			limited:  []quota.LimitedResource{{Resource: "configmaps", MatchContains: []string{"cpu"}}},
			wantUsed: []corev1.ResourceList{rl("requests.cpu", "1")},
		},
		{
			name:   "limited scope without covering quota",
			quotas: []corev1.ResourceQuota{rq("q1", rl("pods", "4"), rl("pods", "0"))},
			op:     admissionv1.Create,
			obj:    cm("", terminating, "pods", "1"),
			limited: []quota.LimitedResource{{Resource: "configmaps", MatchScopes: []corev1.ScopedResourceSelectorRequirement{{
				ScopeName: corev1.ResourceQuotaScopeTerminating, Operator: corev1.ScopeSelectorOpExists,
			}}}},
			wantErr: "insufficient quota to match these scopes",
		},
		{
			name:     "request not handled changes nothing",
			quotas:   []corev1.ResourceQuota{rq("q1", rl("pods", "1"), rl("pods", "1"))},
			op:       admissionv1.Delete,
			obj:      cm("5", nil, "pods", "1"),
			wantUsed: []corev1.ResourceList{rl("pods", "1")},
		},
		{
			name: "only matching quotas are charged",
			quotas: []corev1.ResourceQuota{
				rq("all", rl("pods", "10"), rl("pods", "1")),
				rq("term", rl("pods", "10"), rl("pods", "1"), corev1.ResourceQuotaScopeTerminating),
			},
			op:       admissionv1.Create,
			obj:      cm("", nil, "pods", "1"),
			wantUsed: []corev1.ResourceList{rl("pods", "2"), rl("pods", "1")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := make([]corev1.ResourceQuota, len(tt.quotas))
			for i := range tt.quotas {
				tt.quotas[i].DeepCopyInto(&before[i])
			}
			a := &quota.AttributesRecord{
				Operation: tt.op, Subresource: tt.subresource, Object: tt.obj, OldObject: tt.old,
				Resource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: "ns",
			}
			got, err := quota.CheckRequest(tt.quotas, a, dataEvaluator{}, tt.limited)
			charges, chargeErr := quota.ChargeRequest(tt.quotas, a, dataEvaluator{}, tt.limited)
			if diff := cmp.Diff(before, tt.quotas, qcmp.Quantities()); diff != "" {
				t.Errorf("CheckRequest or ChargeRequest modified its input quotas (-before +after):\n%s", diff)
			}
			checkCharges(t, tt.quotas, got, err, charges, chargeErr)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("CheckRequest error = %v, want it to contain %q", err, tt.wantErr)
				}
				if apierrors.IsForbidden(err) != tt.wantForbid {
					t.Errorf("IsForbidden(%v) = %v, want %v", err, !tt.wantForbid, tt.wantForbid)
				}
				if got != nil {
					t.Errorf("CheckRequest returned %d quotas with its error, want nil", len(got))
				}
				return
			}
			if err != nil {
				t.Fatalf("CheckRequest error = %v, want nil", err)
			}
			var used []corev1.ResourceList
			for _, q := range got {
				used = append(used, q.Status.Used)
			}
			if diff := cmp.Diff(tt.wantUsed, used, qcmp.Quantities()); diff != "" {
				t.Errorf("CheckRequest status.used (-want +got):\n%s", diff)
			}
		})
	}
}

// checkCharges checks that ChargeRequest's charges, applied to quotas,
// give what CheckRequest returned, and that both fail alike.
func checkCharges(t *testing.T, quotas, checked []corev1.ResourceQuota, checkErr error, charges []quota.Charge, chargeErr error) {
	t.Helper()
	if fmt.Sprint(checkErr) != fmt.Sprint(chargeErr) {
		t.Errorf("ChargeRequest error = %v, CheckRequest's = %v", chargeErr, checkErr)
	}
	if chargeErr != nil {
		if charges != nil {
			t.Errorf("ChargeRequest returned %d charges with its error, want none", len(charges))
		}
		return
	}
	applied := make([]corev1.ResourceList, len(quotas))
	for i := range quotas {
		applied[i] = quotas[i].Status.Used
	}
	for k, c := range charges {
		if k > 0 && c.Quota <= charges[k-1].Quota {
			t.Errorf("charges out of quota order: %v", charges)
		}
		if len(c.Added) == 0 || len(quota.RemoveZeros(c.Added)) != len(c.Added) {
			t.Errorf("charge of quota %d adds %v: want no zero amounts, never empty", c.Quota, c.Added)
		}
		applied[c.Quota] = quota.Add(applied[c.Quota], c.Added)
	}
	want := make([]corev1.ResourceList, len(checked))
	for i := range checked {
		want[i] = checked[i].Status.Used
	}
	if diff := cmp.Diff(want, applied, qcmp.Quantities()); diff != "" {
		t.Errorf("ChargeRequest's charges applied differ from CheckRequest's quotas (-check +charge):\n%s", diff)
	}
}

func TestCheckRequestDoesNotChangeTheObject(t *testing.T) {
	obj := cm("", nil, "pods", "1")
	a := &quota.AttributesRecord{Operation: admissionv1.Create, Object: obj, Namespace: "team-a",
		Resource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}}
	if _, err := quota.CheckRequest([]corev1.ResourceQuota{rq("q1", rl("pods", "2"), rl("pods", "0"))}, a, dataEvaluator{}, nil); err != nil {
		t.Fatalf("CheckRequest: %v", err)
	}
	if obj.Namespace != "" {
		t.Errorf("CheckRequest set the caller's object namespace to %q", obj.Namespace)
	}
}

func TestCheckRequestBadInput(t *testing.T) {
	good := &quota.AttributesRecord{Operation: admissionv1.Create, Object: cm("", nil, "pods", "1")}
	quotas := []corev1.ResourceQuota{rq("q1", rl("pods", "2"), rl("pods", "0"))}
	tests := []struct {
		name string
		a    quota.Attributes
		e    quota.Evaluator
	}{
		{"nil attributes", nil, dataEvaluator{}},
		{"nil evaluator", good, nil},
		{"nil *AttributesRecord", (*quota.AttributesRecord)(nil), dataEvaluator{}},
		{"nil pointer evaluator", good, (*dataEvaluator)(nil)},
		{"create of a nil *ConfigMap", &quota.AttributesRecord{Operation: admissionv1.Create, Object: (*corev1.ConfigMap)(nil)}, dataEvaluator{}},
		{"update from a nil *ConfigMap", &quota.AttributesRecord{Operation: admissionv1.Update, Object: cm("", nil, "pods", "1"), OldObject: (*corev1.ConfigMap)(nil)}, dataEvaluator{}},
		{"create without object", &quota.AttributesRecord{Operation: admissionv1.Create}, dataEvaluator{}},
		{"object of the wrong type", &quota.AttributesRecord{Operation: admissionv1.Create, Object: &corev1.Pod{}}, dataEvaluatorNoPanic{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := quota.CheckRequest(quotas, tt.a, tt.e, nil)
			if err == nil {
				t.Errorf("CheckRequest succeeded, want an error")
			}
			if got != nil {
				t.Errorf("CheckRequest returned %d quotas with its error, want nil", len(got))
			}
		})
	}
}

// dataEvaluatorNoPanic matches everything but fails Usage for non-ConfigMaps,
// as a real evaluator given the wrong type must.
type dataEvaluatorNoPanic struct{ dataEvaluator }

func (dataEvaluatorNoPanic) Matches(*corev1.ResourceQuota, runtime.Object) (bool, error) {
	return false, nil
}
func (dataEvaluatorNoPanic) MatchingScopes(runtime.Object, []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	return nil, nil
}
