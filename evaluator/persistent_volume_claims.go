package evaluator

import (
	"fmt"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit/generic"
	"github.com/quotakit/quotakit/quota"
)

// pvcsGR is the resource the PVC evaluator charges.
var pvcsGR = schema.GroupResource{Resource: "persistentvolumeclaims"}

const (
	// pvcCountName is count/persistentvolumeclaims.
	pvcCountName corev1.ResourceName = "count/persistentvolumeclaims"
	// storageClassSuffix separates a storage class name from the resource
	// it qualifies: gold.storageclass.storage.k8s.io/requests.storage.
	storageClassSuffix = ".storageclass.storage.k8s.io/"
)

// ResourceByStorageClass returns the quota resource name that limits name
// (persistentvolumeclaims or requests.storage) for the claims of one storage
// class: <storageClass>.storageclass.storage.k8s.io/<name>.
func ResourceByStorageClass(storageClass string, name corev1.ResourceName) corev1.ResourceName {
	return corev1.ResourceName(storageClass + storageClassSuffix + string(name))
}

// PersistentVolumeClaimEvaluator is the [quota.Evaluator] of core/v1
// PersistentVolumeClaims, with the semantics of Kubernetes 1.37. It charges
//
//   - count/persistentvolumeclaims and persistentvolumeclaims: 1 for every
//     claim;
//   - requests.storage: the claim's storage request rounded up to a whole
//     number of bytes, or status.allocatedResources[storage] (also rounded
//     up) when that is larger, since a failed expansion that was reverted
//     still holds the allocated size; no key without a storage request;
//   - <class>.storageclass.storage.k8s.io/persistentvolumeclaims and
//     <class>.storageclass.storage.k8s.io/requests.storage, the same values
//     for the claim's storage class: the beta annotation
//     volume.beta.kubernetes.io/storage-class when present (even empty),
//     otherwise spec.storageClassName; none for a claim without a class.
//
// Its one scope is VolumeAttributesClass, over the set of class names the
// claim refers to (spec.volumeAttributesClassName,
// status.currentVolumeAttributesClassName and
// status.modifyVolumeStatus.targetVolumeAttributesClassName): Exists
// matches a claim with at least one name, In and NotIn match when any name
// does (NotIn also matches a claim with none), DoesNotExist matches a claim
// with none. Any other scope never matches.
//
// Creates and updates of the main resource go through quota, and so do
// updates of the status subresource that change the allocated storage or a
// volume attributes class name. Upstream compares the allocated storage of
// the old and new claim as two *resource.Quantity pointers, which always
// differ, so it sends every status update through quota; this evaluator
// compares the values.
//
// It is safe for concurrent use.
type PersistentVolumeClaimEvaluator struct {
	listFunc generic.ListFuncByNamespace
}

var _ quota.Evaluator = (*PersistentVolumeClaimEvaluator)(nil)

// NewPersistentVolumeClaimEvaluator returns the evaluator of persistent
// volume claims. listFunc lists the claims of a namespace for UsageStats; it
// may be nil for an evaluator used only by admission, whose UsageStats then
// fails with [generic.ErrNoListFunc].
func NewPersistentVolumeClaimEvaluator(listFunc generic.ListFuncByNamespace) *PersistentVolumeClaimEvaluator {
	return &PersistentVolumeClaimEvaluator{listFunc: listFunc}
}

// Constraints does nothing: a claim needs nothing to be charged.
func (e *PersistentVolumeClaimEvaluator) Constraints(required []corev1.ResourceName, item runtime.Object) error {
	return nil
}

// GroupResource returns persistentvolumeclaims in the core group.
func (e *PersistentVolumeClaimEvaluator) GroupResource() schema.GroupResource { return pvcsGR }

// Handles reports whether a may change what a claim charges: a create or an
// update of the claim, or an update of its status that changes the
// allocated storage or a volume attributes class name. A status request
// whose objects are not claims is not handled.
func (e *PersistentVolumeClaimEvaluator) Handles(a quota.Attributes) bool {
	if a == nil {
		return false
	}
	switch a.GetSubresource() {
	case "":
		op := a.GetOperation()
		return op == admissionv1.Create || op == admissionv1.Update
	case "status":
		newPVC, err1 := asPVC(a.GetObject())
		oldPVC, err2 := asPVC(a.GetOldObject())
		if err1 != nil || err2 != nil {
			return false
		}
		return pvcStatusMayChangeUsage(oldPVC, newPVC)
	}
	return false
}

// Matches reports whether the quota's status.hard names a claim resource
// and item matches every scope of the quota. item must be a
// *corev1.PersistentVolumeClaim.
func (e *PersistentVolumeClaimEvaluator) Matches(resourceQuota *corev1.ResourceQuota, item runtime.Object) (bool, error) {
	if _, err := asPVC(item); err != nil {
		return false, err
	}
	return generic.Matches(resourceQuota, item, e.MatchingResources, pvcMatchesScope)
}

// MatchingResources returns, in input order, the names of input that this
// evaluator charges: count/persistentvolumeclaims, persistentvolumeclaims,
// requests.storage, and any name ending in
// .storageclass.storage.k8s.io/persistentvolumeclaims or
// .storageclass.storage.k8s.io/requests.storage.
func (e *PersistentVolumeClaimEvaluator) MatchingResources(input []corev1.ResourceName) []corev1.ResourceName {
	out := make([]corev1.ResourceName, 0, len(input))
	for _, name := range input {
		switch {
		case name == pvcCountName, name == corev1.ResourcePersistentVolumeClaims, name == corev1.ResourceRequestsStorage,
			strings.HasSuffix(string(name), storageClassSuffix+string(corev1.ResourcePersistentVolumeClaims)),
			strings.HasSuffix(string(name), storageClassSuffix+string(corev1.ResourceRequestsStorage)):
			out = append(out, name)
		}
	}
	return out
}

// MatchingScopes returns the requirements of scopes that item matches.
func (e *PersistentVolumeClaimEvaluator) MatchingScopes(item runtime.Object, scopes []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	matched := []corev1.ScopedResourceSelectorRequirement{}
	for _, req := range scopes {
		ok, err := pvcMatchesScope(req, item)
		if err != nil {
			return []corev1.ScopedResourceSelectorRequirement{}, fmt.Errorf("evaluator: matching scope %s %s %v: %w", req.ScopeName, req.Operator, req.Values, err)
		}
		if ok {
			matched = append(matched, req)
		}
	}
	return matched, nil
}

// UncoveredQuotaScopes returns the requirements of limitedScopes whose scope
// name no requirement of matchedQuotaScopes has; operators and values do not
// matter.
func (e *PersistentVolumeClaimEvaluator) UncoveredQuotaScopes(limitedScopes, matchedQuotaScopes []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	uncovered := []corev1.ScopedResourceSelectorRequirement{}
	for _, limited := range limitedScopes {
		covered := false
		for _, m := range matchedQuotaScopes {
			if m.ScopeName == limited.ScopeName {
				covered = true
				break
			}
		}
		if !covered {
			uncovered = append(uncovered, limited)
		}
	}
	return uncovered, nil
}

// Usage returns what a *corev1.PersistentVolumeClaim consumes; see
// [PersistentVolumeClaimEvaluator].
func (e *PersistentVolumeClaimEvaluator) Usage(item runtime.Object) (corev1.ResourceList, error) {
	pvc, err := asPVC(item)
	if err != nil {
		return nil, err
	}
	class := pvcStorageClass(pvc)
	storage, hasStorage := pvcStorage(pvc)
	n := 2
	if class != "" {
		n++
	}
	if hasStorage {
		n += 2
	}
	rl := make(corev1.ResourceList, n)
	rl[corev1.ResourcePersistentVolumeClaims] = *resource.NewQuantity(1, resource.DecimalSI)
	rl[pvcCountName] = *resource.NewQuantity(1, resource.DecimalSI)
	if class != "" {
		rl[ResourceByStorageClass(class, corev1.ResourcePersistentVolumeClaims)] = *resource.NewQuantity(1, resource.DecimalSI)
	}
	if hasStorage {
		rl[corev1.ResourceRequestsStorage] = storage
		if class != "" {
			rl[ResourceByStorageClass(class, corev1.ResourceRequestsStorage)] = storage.DeepCopy()
		}
	}
	return rl, nil
}

// pvcStorageClass is the claim's storage class: the beta annotation wins
// over spec.storageClassName, even when it is empty.
func pvcStorageClass(pvc *corev1.PersistentVolumeClaim) string {
	if class, ok := pvc.Annotations[corev1.BetaStorageClassAnnotation]; ok {
		return class
	}
	if pvc.Spec.StorageClassName != nil {
		return *pvc.Spec.StorageClassName
	}
	return ""
}

// pvcStorage is the storage a claim charges, and whether it charges any: the
// request rounded up to whole bytes (quota values must be whole bytes,
// kubernetes#94313), or the allocated storage, rounded up, when that is
// larger. A claim without a storage request charges none, whatever is
// allocated.
func pvcStorage(pvc *corev1.PersistentVolumeClaim) (resource.Quantity, bool) {
	req, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if !ok {
		return resource.Quantity{}, false
	}
	storage := roundUpToBytes(req)
	if allocated, ok := pvc.Status.AllocatedResources[corev1.ResourceStorage]; ok && allocated.Cmp(storage) > 0 {
		storage = roundUpToBytes(allocated)
	}
	return storage, true
}

// roundUpToBytes returns q rounded up to an integer, without sharing its
// arbitrary-precision value, if any, with q.
func roundUpToBytes(q resource.Quantity) resource.Quantity {
	c := q.DeepCopy()
	c.RoundUp(0)
	return c
}

// UsageStats sums the usage of the claims of options.Namespace that match
// the quota's scopes. The result is the one [generic.CalculateUsageStats]
// computes with [PersistentVolumeClaimEvaluator.Usage] (zero for each of
// options.Resources, plus every name a counted claim charges), including its
// handling of errors: a requirement that cannot be evaluated is an error,
// not a partial sum (kubernetes#117676). It is computed without a
// ResourceList per claim, and scope selectors are parsed once per call.
func (e *PersistentVolumeClaimEvaluator) UsageStats(options quota.UsageStatsOptions) (quota.UsageStats, error) {
	if e.listFunc == nil {
		return quota.UsageStats{}, fmt.Errorf("evaluator: usage stats of %s: %w", pvcsGR, generic.ErrNoListFunc)
	}
	scopes := newPVCScopes(generic.ScopeRequirements(options.Scopes, options.ScopeSelector))
	items, err := e.listFunc(options.Namespace)
	if err != nil {
		return quota.UsageStats{}, fmt.Errorf("evaluator: listing %s in namespace %q: %w", pvcsGR, options.Namespace, err)
	}
	var totals pvcTotals
	for _, item := range items {
		pvc, err := asPVC(item)
		if err != nil {
			return quota.UsageStats{}, err
		}
		ok, err := scopes.matches(pvc)
		if err != nil {
			return quota.UsageStats{}, fmt.Errorf("evaluator: %s %s/%s: %w", pvcsGR, pvc.Namespace, pvc.Name, err)
		}
		if ok {
			totals.add(pvc)
		}
	}
	return quota.UsageStats{Used: totals.resourceList(options.Resources)}, nil
}

// pvcTotals sums the usage of claims.
type pvcTotals struct {
	claims  int64
	storage resource.Quantity
	// hasStorage is whether a counted claim requested storage, and so
	// whether requests.storage is in the result.
	hasStorage bool
	// byClass sums the claims of each storage class; nil until a claim
	// with a class is counted.
	byClass map[string]*classTotals
}

// classTotals sums the claims of one storage class.
type classTotals struct {
	claims     int64
	storage    resource.Quantity
	hasStorage bool
}

// add counts pvc, as Usage charges it.
func (t *pvcTotals) add(pvc *corev1.PersistentVolumeClaim) {
	t.claims++
	storage, hasStorage := pvcStorage(pvc)
	if hasStorage {
		t.storage.Add(storage)
		t.hasStorage = true
	}
	class := pvcStorageClass(pvc)
	if class == "" {
		return
	}
	ct := t.byClass[class]
	if ct == nil {
		if t.byClass == nil {
			t.byClass = make(map[string]*classTotals)
		}
		ct = &classTotals{}
		t.byClass[class] = ct
	}
	ct.claims++
	if hasStorage {
		ct.storage.Add(storage)
		ct.hasStorage = true
	}
}

// resourceList returns the sums with a zero for each of zeros that no
// counted claim charges.
func (t *pvcTotals) resourceList(zeros []corev1.ResourceName) corev1.ResourceList {
	rl := make(corev1.ResourceList, len(zeros)+3+2*len(t.byClass))
	for _, name := range zeros {
		rl[name] = resource.Quantity{Format: resource.DecimalSI}
	}
	if t.claims == 0 {
		return rl
	}
	rl[corev1.ResourcePersistentVolumeClaims] = *resource.NewQuantity(t.claims, resource.DecimalSI)
	rl[pvcCountName] = *resource.NewQuantity(t.claims, resource.DecimalSI)
	if t.hasStorage {
		rl[corev1.ResourceRequestsStorage] = t.storage.DeepCopy()
	}
	for class, ct := range t.byClass {
		rl[ResourceByStorageClass(class, corev1.ResourcePersistentVolumeClaims)] = *resource.NewQuantity(ct.claims, resource.DecimalSI)
		if ct.hasStorage {
			rl[ResourceByStorageClass(class, corev1.ResourceRequestsStorage)] = ct.storage.DeepCopy()
		}
	}
	return rl
}

// pvcStatusMayChangeUsage reports whether a status update from oldPVC to
// newPVC may change what the claim charges or which quotas it is charged
// to: its allocated storage or its set of volume attributes class names
// changed. The allocated storage is compared by value; upstream compares two
// freshly taken pointers and so always answers yes.
func pvcStatusMayChangeUsage(oldPVC, newPVC *corev1.PersistentVolumeClaim) bool {
	if !sameQuantity(oldPVC.Status.AllocatedResources, newPVC.Status.AllocatedResources, corev1.ResourceStorage) {
		return true
	}
	oldNames, newNames := pvcVolumeAttributesClasses(oldPVC), pvcVolumeAttributesClasses(newPVC)
	return !oldNames.equal(&newNames)
}

// pvcUsageMayChange is the update filter of claims: besides what
// [pvcStatusMayChangeUsage] checks, the storage class (set once on a claim
// created without one, when a default class appears) and the storage
// request, whose decrease (allowed while recovering from a failed
// expansion) admission does not release.
func pvcUsageMayChange(oldPVC, newPVC *corev1.PersistentVolumeClaim) bool {
	return pvcStatusMayChangeUsage(oldPVC, newPVC) ||
		pvcStorageClass(oldPVC) != pvcStorageClass(newPVC) ||
		!sameQuantity(oldPVC.Spec.Resources.Requests, newPVC.Spec.Resources.Requests, corev1.ResourceStorage)
}

// sameQuantity reports whether a and b both lack name or both have it with
// equal values.
func sameQuantity(a, b corev1.ResourceList, name corev1.ResourceName) bool {
	qa, okA := a[name]
	qb, okB := b[name]
	if okA != okB {
		return false
	}
	return !okA || qa.Cmp(qb) == 0
}

// asPVC returns obj as a non-nil *corev1.PersistentVolumeClaim.
func asPVC(obj runtime.Object) (*corev1.PersistentVolumeClaim, error) {
	pvc, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok {
		return nil, fmt.Errorf("evaluator: expected *v1.PersistentVolumeClaim, got %T", obj)
	}
	if pvc == nil {
		return nil, fmt.Errorf("evaluator: nil *v1.PersistentVolumeClaim")
	}
	return pvc, nil
}
