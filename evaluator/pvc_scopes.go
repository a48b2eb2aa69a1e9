package evaluator

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/quotakit/quotakit/generic"
)

// The scopes of persistent volume claims: VolumeAttributesClass, matched
// against the classes a claim requests, has and is being modified to.

// pvcScopes evaluates a quota's requirements against many claims, parsing
// each selector once, on first use, so that an invalid one is reported
// exactly when pvcMatchesScope would report it: at the first claim.
type pvcScopes struct {
	reqs      []corev1.ScopedResourceSelectorRequirement
	selectors []labels.Selector // selectors[i] is reqs[i]'s, once parsed
}

func newPVCScopes(reqs []corev1.ScopedResourceSelectorRequirement) *pvcScopes {
	return &pvcScopes{reqs: reqs, selectors: make([]labels.Selector, len(reqs))}
}

// matches reports whether pvc matches every requirement, as
// pvcMatchesScope does one at a time. Every requirement is evaluated, so
// that an invalid one is an error even after one that does not match.
func (s *pvcScopes) matches(pvc *corev1.PersistentVolumeClaim) (bool, error) {
	if len(s.reqs) == 0 {
		return true, nil
	}
	names := pvcVolumeAttributesClasses(pvc)
	all := true
	for i, req := range s.reqs {
		if req.ScopeName != corev1.ResourceQuotaScopeVolumeAttributesClass {
			all = false
			continue
		}
		if req.Operator == corev1.ScopeSelectorOpExists {
			all = all && names.n > 0
			continue
		}
		if s.selectors[i] == nil {
			sel, err := generic.ScopeLabelSelector(req)
			if err != nil {
				return false, err
			}
			s.selectors[i] = sel
		}
		all = all && names.matches(s.selectors[i])
	}
	return all, nil
}

// pvcMatchesScope is the [generic.MatchesScopeFunc] of claims.
func pvcMatchesScope(req corev1.ScopedResourceSelectorRequirement, obj runtime.Object) (bool, error) {
	pvc, err := asPVC(obj)
	if err != nil {
		return false, err
	}
	if req.ScopeName != corev1.ResourceQuotaScopeVolumeAttributesClass {
		return false, nil
	}
	names := pvcVolumeAttributesClasses(pvc)
	if req.Operator == corev1.ScopeSelectorOpExists {
		// No selector needed, and values are not checked, as upstream.
		return names.n > 0, nil
	}
	sel, err := generic.ScopeLabelSelector(req)
	if err != nil {
		return false, err
	}
	return names.matches(sel), nil
}

// classNames is a set of at most three volume attributes class names,
// kept in an array so that building it does not allocate.
type classNames struct {
	names [3]string
	n     int
}

// add inserts name unless it is empty or already present.
func (s *classNames) add(name string) {
	if name == "" || s.has(name) {
		return
	}
	s.names[s.n] = name
	s.n++
}

// has reports whether name is in s.
func (s *classNames) has(name string) bool {
	for _, n := range s.names[:s.n] {
		if n == name {
			return true
		}
	}
	return false
}

// matches reports whether sel matches the label set
// {VolumeAttributesClass: name} of any name in s, or the empty label set
// when s is empty (so that NotIn and DoesNotExist match a claim without a
// class).
func (s *classNames) matches(sel labels.Selector) bool {
	if s.n == 0 {
		return sel.Matches(labels.Set{})
	}
	for _, name := range s.names[:s.n] {
		if sel.Matches(vacLabel(name)) {
			return true
		}
	}
	return false
}

// vacLabel is a labels.Labels holding the single label
// VolumeAttributesClass=name, without the map a labels.Set needs.
type vacLabel string

// Has reports whether key is VolumeAttributesClass.
func (l vacLabel) Has(key string) bool {
	return key == string(corev1.ResourceQuotaScopeVolumeAttributesClass)
}

// Get returns the class name for VolumeAttributesClass, "" otherwise.
func (l vacLabel) Get(key string) string {
	if l.Has(key) {
		return string(l)
	}
	return ""
}

// Lookup returns the class name and true for VolumeAttributesClass.
func (l vacLabel) Lookup(key string) (string, bool) {
	return l.Get(key), l.Has(key)
}

// equal reports whether s and o hold the same names.
func (s *classNames) equal(o *classNames) bool {
	if s.n != o.n {
		return false
	}
	for _, n := range s.names[:s.n] {
		if !o.has(n) {
			return false
		}
	}
	return true
}

// pvcVolumeAttributesClasses returns the volume attributes class names the
// claim refers to: requested, current and target of a modification.
func pvcVolumeAttributesClasses(pvc *corev1.PersistentVolumeClaim) classNames {
	var s classNames
	if pvc.Spec.VolumeAttributesClassName != nil {
		s.add(*pvc.Spec.VolumeAttributesClassName)
	}
	if pvc.Status.CurrentVolumeAttributesClassName != nil {
		s.add(*pvc.Status.CurrentVolumeAttributesClassName)
	}
	if pvc.Status.ModifyVolumeStatus != nil {
		s.add(pvc.Status.ModifyVolumeStatus.TargetVolumeAttributesClassName)
	}
	return s
}
