package evaluator_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/quotakit/quotakit/evaluator"
	"github.com/quotakit/quotakit/generic"
	"github.com/quotakit/quotakit/internal/qcmp"
	"github.com/quotakit/quotakit/quota"
)

// claim builds a PVC; each option edits it.
func claim(opts ...func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pvc"}}
	for _, o := range opts {
		o(pvc)
	}
	return pvc
}

func request(q string) func(*corev1.PersistentVolumeClaim) {
	return func(p *corev1.PersistentVolumeClaim) {
		p.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(q)}
	}
}

func allocated(q string) func(*corev1.PersistentVolumeClaim) {
	return func(p *corev1.PersistentVolumeClaim) {
		p.Status.AllocatedResources = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(q)}
	}
}

func specClass(c string) func(*corev1.PersistentVolumeClaim) {
	return func(p *corev1.PersistentVolumeClaim) { p.Spec.StorageClassName = ptr.To(c) }
}

func betaClass(c string) func(*corev1.PersistentVolumeClaim) {
	return func(p *corev1.PersistentVolumeClaim) {
		p.Annotations = map[string]string{corev1.BetaStorageClassAnnotation: c}
	}
}

func vac(spec, current, target string) func(*corev1.PersistentVolumeClaim) {
	return func(p *corev1.PersistentVolumeClaim) {
		if spec != "" {
			p.Spec.VolumeAttributesClassName = ptr.To(spec)
		}
		if current != "" {
			p.Status.CurrentVolumeAttributesClassName = ptr.To(current)
		}
		if target != "" {
			p.Status.ModifyVolumeStatus = &corev1.ModifyVolumeStatus{TargetVolumeAttributesClassName: target, Status: corev1.PersistentVolumeClaimModifyVolumeInProgress}
		}
	}
}

// rl parses name=value pairs.
func rl(pairs ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(pairs); i += 2 {
		out[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return out
}

func TestPersistentVolumeClaimUsage(t *testing.T) {
	const (
		goldClaims   = "gold.storageclass.storage.k8s.io/persistentvolumeclaims"
		goldStorage  = "gold.storageclass.storage.k8s.io/requests.storage"
		betaClaims   = "beta.storageclass.storage.k8s.io/persistentvolumeclaims"
		betaStorage  = "beta.storageclass.storage.k8s.io/requests.storage"
		claimsCount  = "count/persistentvolumeclaims"
		claims       = "persistentvolumeclaims"
		storage      = "requests.storage"
		one          = "1"
		tenGi        = "10Gi"
		twentyGi     = "20Gi"
		twoBytes     = "2"
		threeBytes   = "3"
		elevenBytes  = "11"
		withFraction = "1500m"
	)
	tests := []struct {
		name string
		pvc  *corev1.PersistentVolumeClaim
		want corev1.ResourceList
	}{
		{"no class, no request", claim(), rl(claims, one, claimsCount, one)},
		{"request without class", claim(request(tenGi)), rl(claims, one, claimsCount, one, storage, tenGi)},
		{"class from spec", claim(specClass("gold"), request(tenGi)), rl(claims, one, claimsCount, one, storage, tenGi, goldClaims, one, goldStorage, tenGi)},
		{"class without request: no storage keys", claim(specClass("gold")), rl(claims, one, claimsCount, one, goldClaims, one)},
		{"beta annotation wins over spec", claim(specClass("gold"), betaClass("beta"), request(tenGi)), rl(claims, one, claimsCount, one, storage, tenGi, betaClaims, one, betaStorage, tenGi)},
		{"empty beta annotation wins over spec: no class", claim(specClass("gold"), betaClass(""), request(tenGi)), rl(claims, one, claimsCount, one, storage, tenGi)},
		{"empty spec class: no class", claim(specClass(""), request(tenGi)), rl(claims, one, claimsCount, one, storage, tenGi)},
		{"fractional bytes round up (kubernetes#94313)", claim(specClass("gold"), request(withFraction)), rl(claims, one, claimsCount, one, storage, twoBytes, goldClaims, one, goldStorage, twoBytes)},
		{"allocated larger than request", claim(request(tenGi), allocated(twentyGi)), rl(claims, one, claimsCount, one, storage, twentyGi)},
		{"allocated smaller than request", claim(request(twentyGi), allocated(tenGi)), rl(claims, one, claimsCount, one, storage, twentyGi)},
		{"allocated fractional and larger: rounded up", claim(request("10"), allocated("10.5")), rl(claims, one, claimsCount, one, storage, elevenBytes)},
		{"allocated above the request but not its rounded value", claim(request(withFraction), allocated("1700m")), rl(claims, one, claimsCount, one, storage, twoBytes)},
		{"allocated above the rounded request", claim(request(withFraction), allocated("2500m")), rl(claims, one, claimsCount, one, storage, threeBytes)},
		{"allocated without request: no storage keys", claim(allocated(twentyGi)), rl(claims, one, claimsCount, one)},
		{"allocated list without storage", claim(request(tenGi), func(p *corev1.PersistentVolumeClaim) {
			p.Status.AllocatedResources = rl("cpu", "20")
		}), rl(claims, one, claimsCount, one, storage, tenGi)},
		{"allocated and class", claim(specClass("gold"), request(tenGi), allocated(twentyGi)), rl(claims, one, claimsCount, one, storage, twentyGi, goldClaims, one, goldStorage, twentyGi)},
	}
	e := evaluator.NewPersistentVolumeClaimEvaluator(nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := e.Usage(tt.pvc)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, qcmp.Quantities()); diff != "" {
				t.Errorf("Usage() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPersistentVolumeClaimUsageDoesNotModifyClaim(t *testing.T) {
	pvc := claim(specClass("gold"), request("1500m"), allocated("2500m"))
	if _, err := evaluator.NewPersistentVolumeClaimEvaluator(nil).Usage(pvc); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(claim(specClass("gold"), request("1500m"), allocated("2500m")), pvc); diff != "" {
		t.Errorf("Usage() modified the claim (-want +got):\n%s", diff)
	}
}

func TestResourceByStorageClass(t *testing.T) {
	if got, want := evaluator.ResourceByStorageClass("gold", corev1.ResourceRequestsStorage), corev1.ResourceName("gold.storageclass.storage.k8s.io/requests.storage"); got != want {
		t.Errorf("ResourceByStorageClass() = %q, want %q", got, want)
	}
}

func TestPersistentVolumeClaimBadObjects(t *testing.T) {
	e := evaluator.NewPersistentVolumeClaimEvaluator(nil)
	q := &corev1.ResourceQuota{Status: corev1.ResourceQuotaStatus{Hard: rl("requests.storage", "1Gi")}}
	scopes := []corev1.ScopedResourceSelectorRequirement{{ScopeName: corev1.ResourceQuotaScopeVolumeAttributesClass, Operator: corev1.ScopeSelectorOpExists}}
	for name, obj := range map[string]runtime.Object{
		"nil":        nil,
		"typed nil":  (*corev1.PersistentVolumeClaim)(nil),
		"wrong type": &corev1.PersistentVolume{},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := e.Usage(obj); err == nil || !strings.HasPrefix(err.Error(), "evaluator: ") {
				t.Errorf("Usage() error = %v, want an evaluator error", err)
			}
			if ok, err := e.Matches(q, obj); ok || err == nil {
				t.Errorf("Matches() = %v, %v, want false and an error", ok, err)
			}
			if got, err := e.MatchingScopes(obj, scopes); err == nil || len(got) != 0 {
				t.Errorf("MatchingScopes() = %v, %v, want empty and an error", got, err)
			}
		})
	}
}

func TestPersistentVolumeClaimMatchingResources(t *testing.T) {
	e := evaluator.NewPersistentVolumeClaimEvaluator(nil)
	input := []corev1.ResourceName{
		"requests.storage",
		"pods",
		"gold.storageclass.storage.k8s.io/requests.storage",
		"count/persistentvolumeclaims",
		"silver.storageclass.storage.k8s.io/persistentvolumeclaims",
		"gold.storageclass.storage.k8s.io/limits.storage",
		"persistentvolumeclaims",
		"requests.storage",
		".storageclass.storage.k8s.io/requests.storage",
		"storage",
	}
	// Input order, duplicates kept, as upstream.
	want := []corev1.ResourceName{
		"requests.storage",
		"gold.storageclass.storage.k8s.io/requests.storage",
		"count/persistentvolumeclaims",
		"silver.storageclass.storage.k8s.io/persistentvolumeclaims",
		"persistentvolumeclaims",
		"requests.storage",
		".storageclass.storage.k8s.io/requests.storage",
	}
	if diff := cmp.Diff(want, e.MatchingResources(input)); diff != "" {
		t.Errorf("MatchingResources() mismatch (-want +got):\n%s", diff)
	}
}

func vacReq(op corev1.ScopeSelectorOperator, values ...string) corev1.ScopedResourceSelectorRequirement {
	return corev1.ScopedResourceSelectorRequirement{ScopeName: corev1.ResourceQuotaScopeVolumeAttributesClass, Operator: op, Values: values}
}

func TestPersistentVolumeClaimScopes(t *testing.T) {
	none := claim()
	specGold := claim(vac("gold", "", ""))
	goldToSilver := claim(vac("silver", "gold", "silver"))
	onlyTarget := claim(vac("", "", "bronze"))
	onlyCurrent := claim(vac("", "silver", ""))
	tests := []struct {
		name string
		req  corev1.ScopedResourceSelectorRequirement
		pvc  *corev1.PersistentVolumeClaim
		want bool
	}{
		{"Exists, no class", vacReq(corev1.ScopeSelectorOpExists), none, false},
		{"Exists, spec class", vacReq(corev1.ScopeSelectorOpExists), specGold, true},
		{"Exists, only target class", vacReq(corev1.ScopeSelectorOpExists), onlyTarget, true},
		{"Exists, only current class", vacReq(corev1.ScopeSelectorOpExists), onlyCurrent, true},
		{"In, spec class", vacReq(corev1.ScopeSelectorOpIn, "gold"), specGold, true},
		{"In, other class", vacReq(corev1.ScopeSelectorOpIn, "silver"), specGold, false},
		{"In, no class", vacReq(corev1.ScopeSelectorOpIn, "gold"), none, false},
		{"In matches the current class during a modification", vacReq(corev1.ScopeSelectorOpIn, "gold"), goldToSilver, true},
		{"In matches the target class", vacReq(corev1.ScopeSelectorOpIn, "bronze"), onlyTarget, true},
		{"NotIn, no class", vacReq(corev1.ScopeSelectorOpNotIn, "gold"), none, true},
		{"NotIn, spec class listed", vacReq(corev1.ScopeSelectorOpNotIn, "gold"), specGold, false},
		{"NotIn, spec class not listed", vacReq(corev1.ScopeSelectorOpNotIn, "silver"), specGold, true},
		{"NotIn, any name not listed matches", vacReq(corev1.ScopeSelectorOpNotIn, "gold"), goldToSilver, true},
		{"NotIn, every name listed", vacReq(corev1.ScopeSelectorOpNotIn, "gold", "silver"), goldToSilver, false},
		{"DoesNotExist, no class", vacReq(corev1.ScopeSelectorOpDoesNotExist), none, true},
		{"DoesNotExist, a class", vacReq(corev1.ScopeSelectorOpDoesNotExist), onlyCurrent, false},
		{"other scope never matches", corev1.ScopedResourceSelectorRequirement{ScopeName: corev1.ResourceQuotaScopeBestEffort, Operator: corev1.ScopeSelectorOpExists}, specGold, false},
		{"PriorityClass DoesNotExist never matches a claim", corev1.ScopedResourceSelectorRequirement{ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpDoesNotExist}, none, false},
	}
	e := evaluator.NewPersistentVolumeClaimEvaluator(nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := e.MatchingScopes(tt.pvc, []corev1.ScopedResourceSelectorRequirement{tt.req})
			if err != nil {
				t.Fatal(err)
			}
			if (len(got) == 1) != tt.want {
				t.Errorf("MatchingScopes(%v) = %v, want match %v", tt.req, got, tt.want)
			}
			q := &corev1.ResourceQuota{
				Spec:   corev1.ResourceQuotaSpec{ScopeSelector: &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{tt.req}}},
				Status: corev1.ResourceQuotaStatus{Hard: rl("requests.storage", "10Gi")},
			}
			matched, err := e.Matches(q, tt.pvc)
			if err != nil {
				t.Fatal(err)
			}
			if matched != tt.want {
				t.Errorf("Matches(quota selecting %v) = %v, want %v", tt.req, matched, tt.want)
			}
		})
	}
}

func TestPersistentVolumeClaimScopeErrors(t *testing.T) {
	e := evaluator.NewPersistentVolumeClaimEvaluator(nil)
	tests := []struct {
		name    string
		req     corev1.ScopedResourceSelectorRequirement
		wantErr string
	}{
		{"unknown operator", vacReq("Foo", "gold"), `"Foo" is not a valid scope selector operator`},
		{"In without values", vacReq(corev1.ScopeSelectorOpIn), "VolumeAttributesClass In []"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := e.MatchingScopes(claim(vac("gold", "", "")), []corev1.ScopedResourceSelectorRequirement{vacReq(corev1.ScopeSelectorOpExists), tt.req})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("MatchingScopes() error = %v, want one containing %q", err, tt.wantErr)
			}
			if got == nil || len(got) != 0 {
				t.Errorf("MatchingScopes() = %#v with an error, want an empty list", got)
			}
			q := &corev1.ResourceQuota{
				Spec:   corev1.ResourceQuotaSpec{ScopeSelector: &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{tt.req}}},
				Status: corev1.ResourceQuotaStatus{Hard: rl("requests.storage", "10Gi")},
			}
			if ok, err := e.Matches(q, claim()); ok || err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Matches() = %v, %v, want false and an error containing %q", ok, err, tt.wantErr)
			}
		})
	}
}

func TestPersistentVolumeClaimUncoveredQuotaScopes(t *testing.T) {
	e := evaluator.NewPersistentVolumeClaimEvaluator(nil)
	exists := vacReq(corev1.ScopeSelectorOpExists)
	inGold := vacReq(corev1.ScopeSelectorOpIn, "gold")
	pc := corev1.ScopedResourceSelectorRequirement{ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpExists}
	tests := []struct {
		name             string
		limited, matched []corev1.ScopedResourceSelectorRequirement
		want             []corev1.ScopedResourceSelectorRequirement
	}{
		{"nothing limited", nil, []corev1.ScopedResourceSelectorRequirement{exists}, []corev1.ScopedResourceSelectorRequirement{}},
		{"covered by the same scope name, other operator", []corev1.ScopedResourceSelectorRequirement{exists}, []corev1.ScopedResourceSelectorRequirement{inGold}, []corev1.ScopedResourceSelectorRequirement{}},
		{"uncovered", []corev1.ScopedResourceSelectorRequirement{inGold, pc}, []corev1.ScopedResourceSelectorRequirement{pc}, []corev1.ScopedResourceSelectorRequirement{inGold}},
		{"no quota matched", []corev1.ScopedResourceSelectorRequirement{inGold}, nil, []corev1.ScopedResourceSelectorRequirement{inGold}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := e.UncoveredQuotaScopes(tt.limited, tt.matched)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("UncoveredQuotaScopes() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPersistentVolumeClaimHandles(t *testing.T) {
	base := claim(request("10Gi"), allocated("10Gi"), vac("gold", "gold", ""))
	tests := []struct {
		name        string
		op          admissionv1.Operation
		subresource string
		old, obj    runtime.Object
		want        bool
	}{
		{"create", admissionv1.Create, "", nil, base, true},
		{"update", admissionv1.Update, "", base, base, true},
		{"delete", admissionv1.Delete, "", base, nil, false},
		{"connect", admissionv1.Connect, "", nil, base, false},
		// Upstream answers true to every status update: it compares two
		// *resource.Quantity pointers (RequiresQuotaReplenish).
		{"status update changing nothing: upstream pointer comparison says true", admissionv1.Update, "status", base, base.DeepCopy(), false},
		{"status update changing the phase only", admissionv1.Update, "status", base, withPhase(base, corev1.ClaimBound), false},
		{"status update, same allocated value in another format", admissionv1.Update, "status", base, edit(base, allocated("10737418240")), false},
		{"status update growing allocated storage", admissionv1.Update, "status", base, edit(base, allocated("20Gi")), true},
		{"status update shrinking allocated storage", admissionv1.Update, "status", base, edit(base, allocated("5Gi")), true},
		{"status update removing allocated storage", admissionv1.Update, "status", base, edit(base, func(p *corev1.PersistentVolumeClaim) { p.Status.AllocatedResources = nil }), true},
		{"status update adding allocated storage", admissionv1.Update, "status", claim(request("1Gi")), claim(request("1Gi"), allocated("1Gi")), true},
		{"status update changing the current class", admissionv1.Update, "status", base, edit(base, vac("gold", "silver", "")), true},
		{"status update adding a target class", admissionv1.Update, "status", base, edit(base, vac("gold", "gold", "silver")), true},
		{"status update, same class set", admissionv1.Update, "status", claim(vac("gold", "gold", "")), claim(vac("gold", "", "gold")), false},
		{"status update of wrong types", admissionv1.Update, "status", &corev1.Pod{}, base, false},
		{"status update without old object", admissionv1.Update, "status", nil, base, false},
		{"status update with a typed nil", admissionv1.Update, "status", (*corev1.PersistentVolumeClaim)(nil), base, false},
		{"other subresource", admissionv1.Update, "resize", base, edit(base, allocated("20Gi")), false},
	}
	e := evaluator.NewPersistentVolumeClaimEvaluator(nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := &quota.AttributesRecord{Operation: tt.op, Subresource: tt.subresource, Object: tt.obj, OldObject: tt.old}
			if got := e.Handles(a); got != tt.want {
				t.Errorf("Handles() = %v, want %v", got, tt.want)
			}
		})
	}
	if e.Handles(nil) {
		t.Error("Handles(nil) = true, want false")
	}
}

func withPhase(pvc *corev1.PersistentVolumeClaim, phase corev1.PersistentVolumeClaimPhase) *corev1.PersistentVolumeClaim {
	c := pvc.DeepCopy()
	c.Status.Phase = phase
	return c
}

func edit(pvc *corev1.PersistentVolumeClaim, opts ...func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	c := pvc.DeepCopy()
	for _, o := range opts {
		o(c)
	}
	return c
}

func TestPersistentVolumeClaimUsageStats(t *testing.T) {
	list := listOf(
		claim(specClass("gold"), request("10Gi"), vac("fast", "", "")),
		claim(specClass("gold"), request("1500m")),
		claim(betaClass("silver"), request("5Gi"), allocated("8Gi"), vac("", "slow", "")),
		claim(),
	)
	tests := []struct {
		name    string
		options quota.UsageStatsOptions
		want    corev1.ResourceList
	}{
		{
			name:    "all claims",
			options: quota.UsageStatsOptions{Namespace: "ns", Resources: []corev1.ResourceName{"requests.storage", "bronze.storageclass.storage.k8s.io/requests.storage"}},
			want: rl(
				"persistentvolumeclaims", "4",
				"count/persistentvolumeclaims", "4",
				"requests.storage", "19327352834", // 10Gi + 2 + 8Gi
				"gold.storageclass.storage.k8s.io/persistentvolumeclaims", "2",
				"gold.storageclass.storage.k8s.io/requests.storage", "10737418242",
				"silver.storageclass.storage.k8s.io/persistentvolumeclaims", "1",
				"silver.storageclass.storage.k8s.io/requests.storage", "8Gi",
				"bronze.storageclass.storage.k8s.io/requests.storage", "0",
			),
		},
		{
			name:    "VolumeAttributesClass scope",
			options: quota.UsageStatsOptions{Namespace: "ns", Scopes: []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeVolumeAttributesClass}, Resources: []corev1.ResourceName{"requests.storage"}},
			want: rl(
				"persistentvolumeclaims", "2",
				"count/persistentvolumeclaims", "2",
				"requests.storage", "18Gi",
				"gold.storageclass.storage.k8s.io/persistentvolumeclaims", "1",
				"gold.storageclass.storage.k8s.io/requests.storage", "10Gi",
				"silver.storageclass.storage.k8s.io/persistentvolumeclaims", "1",
				"silver.storageclass.storage.k8s.io/requests.storage", "8Gi",
			),
		},
		{
			name: "VolumeAttributesClass NotIn selector matches claims without a class",
			options: quota.UsageStatsOptions{Namespace: "ns", Resources: []corev1.ResourceName{"requests.storage"}, ScopeSelector: &corev1.ScopeSelector{
				MatchExpressions: []corev1.ScopedResourceSelectorRequirement{vacReq(corev1.ScopeSelectorOpNotIn, "fast")},
			}},
			want: rl(
				"persistentvolumeclaims", "3",
				"count/persistentvolumeclaims", "3",
				"requests.storage", "8589934594",
				"gold.storageclass.storage.k8s.io/persistentvolumeclaims", "1",
				"gold.storageclass.storage.k8s.io/requests.storage", "2",
				"silver.storageclass.storage.k8s.io/persistentvolumeclaims", "1",
				"silver.storageclass.storage.k8s.io/requests.storage", "8Gi",
			),
		},
		{
			name:    "a pod scope matches no claim",
			options: quota.UsageStatsOptions{Namespace: "ns", Scopes: []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort}, Resources: []corev1.ResourceName{"persistentvolumeclaims"}},
			want:    rl("persistentvolumeclaims", "0"),
		},
	}
	e := evaluator.NewPersistentVolumeClaimEvaluator(list)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := e.UsageStats(tt.options)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got.Used, qcmp.Quantities()); diff != "" {
				t.Errorf("UsageStats() mismatch (-want +got):\n%s", diff)
			}
			// The direct sum must agree with the generic one over Usage.
			general, err := generic.CalculateUsageStats(tt.options, list, pvcScopeFunc(e), e.Usage)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(general.Used, got.Used, qcmp.Quantities()); diff != "" {
				t.Errorf("UsageStats() differs from generic.CalculateUsageStats (-generic +got):\n%s", diff)
			}
		})
	}
}

// pvcScopeFunc is the evaluator's scope matching as a MatchesScopeFunc.
func pvcScopeFunc(e *evaluator.PersistentVolumeClaimEvaluator) generic.MatchesScopeFunc {
	return func(req corev1.ScopedResourceSelectorRequirement, obj runtime.Object) (bool, error) {
		m, err := e.MatchingScopes(obj, []corev1.ScopedResourceSelectorRequirement{req})
		return len(m) == 1, err
	}
}

func TestPersistentVolumeClaimUsageStatsErrors(t *testing.T) {
	errList := errors.New("not synced")
	fooSelector := &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{vacReq("Foo", "fast")}}
	tests := []struct {
		name     string
		list     generic.ListFuncByNamespace
		options  quota.UsageStatsOptions
		wantErr  string
		wantWrap error
	}{
		{
			name:     "list error",
			list:     func(string) ([]runtime.Object, error) { return nil, errList },
			options:  quota.UsageStatsOptions{Namespace: "ns"},
			wantErr:  `listing persistentvolumeclaims in namespace "ns"`,
			wantWrap: errList,
		},
		{
			name:    "wrong object from the lister",
			list:    listOf(claim(), &corev1.PersistentVolume{}),
			options: quota.UsageStatsOptions{Namespace: "ns"},
			wantErr: "expected *v1.PersistentVolumeClaim, got *v1.PersistentVolume",
		},
		{
			name:    "nil object from the lister",
			list:    listOf(nil),
			options: quota.UsageStatsOptions{Namespace: "ns"},
			wantErr: "got <nil>",
		},
		{
			name:    "invalid requirement after one that does not match",
			list:    listOf(claim(request("1Gi"))),
			options: quota.UsageStatsOptions{Namespace: "ns", Scopes: []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort}, ScopeSelector: fooSelector},
			wantErr: `evaluator: persistentvolumeclaims ns/pvc: generic: "Foo" is not a valid scope selector operator`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := evaluator.NewPersistentVolumeClaimEvaluator(tt.list).UsageStats(tt.options)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("UsageStats() error = %v, want one containing %q", err, tt.wantErr)
			}
			if tt.wantWrap != nil && !errors.Is(err, tt.wantWrap) {
				t.Errorf("UsageStats() error = %v, want it to wrap %v", err, tt.wantWrap)
			}
		})
	}

	// As with generic.CalculateUsageStats, requirements are evaluated
	// against claims, so a namespace without claims is no error.
	got, err := evaluator.NewPersistentVolumeClaimEvaluator(listOf()).UsageStats(quota.UsageStatsOptions{Namespace: "ns", ScopeSelector: fooSelector, Resources: []corev1.ResourceName{"requests.storage"}})
	if err != nil {
		t.Fatalf("UsageStats() of an empty namespace: %v", err)
	}
	if diff := cmp.Diff(rl("requests.storage", "0"), got.Used, qcmp.Quantities()); diff != "" {
		t.Errorf("UsageStats() of an empty namespace mismatch (-want +got):\n%s", diff)
	}
}

// An invalid selector is an error, where upstream returns the usage counted
// so far as a success (kubernetes#117676).
func TestPersistentVolumeClaimUsageStatsScopeError_kubernetes117676(t *testing.T) {
	e := evaluator.NewPersistentVolumeClaimEvaluator(listOf(claim(request("1Gi"))))
	_, err := e.UsageStats(quota.UsageStatsOptions{Namespace: "ns", ScopeSelector: &corev1.ScopeSelector{
		MatchExpressions: []corev1.ScopedResourceSelectorRequirement{vacReq("Foo", "fast")},
	}})
	if err == nil || !strings.Contains(err.Error(), `"Foo" is not a valid scope selector operator`) {
		t.Errorf("UsageStats() error = %v, want the operator error", err)
	}
}

func TestPersistentVolumeClaimUsageStatsNoListFunc(t *testing.T) {
	_, err := evaluator.NewPersistentVolumeClaimEvaluator(nil).UsageStats(quota.UsageStatsOptions{Namespace: "ns"})
	if !errors.Is(err, generic.ErrNoListFunc) || !strings.Contains(err.Error(), "persistentvolumeclaims") {
		t.Errorf("UsageStats() error = %v, want ErrNoListFunc naming persistentvolumeclaims", err)
	}
	if err := evaluator.NewPersistentVolumeClaimEvaluator(nil).Constraints([]corev1.ResourceName{"requests.storage"}, claim()); err != nil {
		t.Errorf("Constraints() = %v, want nil", err)
	}
}
