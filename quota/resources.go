package quota

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
)

// The functions in this file are the ResourceList set arithmetic of
// k8s.io/apiserver/pkg/quota/v1, with the same results. They differ in two
// ways that only make them safer: they never mutate their inputs and never
// return a Quantity that shares memory with an input (upstream's RemoveZeros
// copies shallowly), and every list of names they return is sorted, where
// upstream's order depends on map iteration.
//
// A nil ResourceList is treated as an empty one everywhere. ResourceList
// results are never nil; a list of names with nothing in it may be.

// Equals reports whether a and b have the same keys with equal values.
// Values compare as numbers, so "1000m" equals "1", and nil equals an empty
// list.
func Equals(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for name, av := range a {
		bv, ok := b[name]
		if !ok || av.Cmp(bv) != 0 {
			return false
		}
	}
	return true
}

// LessThanOrEqual reports whether every value of a is at most the value of
// the same key in b, and returns the sorted names where it is not. Only keys
// present in both lists are compared: a key missing from either side is
// ignored, so LessThanOrEqual(empty, b) is always true. This is the check
// admission applies between a quota's new used and its hard limits.
func LessThanOrEqual(a, b corev1.ResourceList) (bool, []corev1.ResourceName) {
	var exceeded []corev1.ResourceName
	for name, bv := range b {
		if av, ok := a[name]; ok && av.Cmp(bv) > 0 {
			exceeded = append(exceeded, name)
		}
	}
	slices.Sort(exceeded)
	return len(exceeded) == 0, exceeded
}

// Max returns the union of a and b's keys, each with the larger value.
func Max(a, b corev1.ResourceList) corev1.ResourceList {
	result := make(corev1.ResourceList, max(len(a), len(b)))
	for name, av := range a {
		// On a tie b's value wins, as upstream, which matters only for
		// its format ("1" versus "1000m").
		if bv, ok := b[name]; ok && bv.Cmp(av) >= 0 {
			result[name] = bv.DeepCopy()
			continue
		}
		result[name] = av.DeepCopy()
	}
	for name, bv := range b {
		if _, ok := result[name]; !ok {
			result[name] = bv.DeepCopy()
		}
	}
	return result
}

// Add returns a+b: the union of their keys, with shared keys summed.
func Add(a, b corev1.ResourceList) corev1.ResourceList {
	result := make(corev1.ResourceList, max(len(a), len(b)))
	for name, av := range a {
		q := av.DeepCopy()
		if bv, ok := b[name]; ok {
			q.Add(bv)
		}
		result[name] = q
	}
	for name, bv := range b {
		if _, ok := result[name]; !ok {
			result[name] = bv.DeepCopy()
		}
	}
	return result
}

// Subtract returns a-b: the union of their keys, with a key present only in
// b negated.
func Subtract(a, b corev1.ResourceList) corev1.ResourceList {
	result := make(corev1.ResourceList, max(len(a), len(b)))
	for name, av := range a {
		q := av.DeepCopy()
		if bv, ok := b[name]; ok {
			q.Sub(bv)
		}
		result[name] = q
	}
	for name, bv := range b {
		if _, ok := result[name]; !ok {
			q := bv.DeepCopy()
			q.Neg()
			result[name] = q
		}
	}
	return result
}

// SubtractWithNonNegativeResult returns a-b clamped at zero for every key of
// either list: a key present only in b comes out as 0, not negated.
// Admission uses it for updates, so that an update never lowers usage.
func SubtractWithNonNegativeResult(a, b corev1.ResourceList) corev1.ResourceList {
	result := make(corev1.ResourceList, max(len(a), len(b)))
	for name, av := range a {
		q := av.DeepCopy()
		if bv, ok := b[name]; ok {
			q.Sub(bv)
		}
		if q.Sign() <= 0 {
			q = zeroQuantity()
		}
		result[name] = q
	}
	for name := range b {
		if _, ok := result[name]; !ok {
			result[name] = zeroQuantity()
		}
	}
	return result
}

// zeroQuantity is the zero upstream writes: "0" in DecimalSI.
func zeroQuantity() resource.Quantity {
	return *resource.NewQuantity(0, resource.DecimalSI)
}

// Mask returns the entries of rl whose names are listed. A listed name that
// rl lacks is not added.
func Mask(rl corev1.ResourceList, names []corev1.ResourceName) corev1.ResourceList {
	result := make(corev1.ResourceList, min(len(rl), len(names)))
	for _, name := range names {
		if q, ok := rl[name]; ok {
			result[name] = q.DeepCopy()
		}
	}
	return result
}

// ResourceNames returns the keys of rl, sorted.
func ResourceNames(rl corev1.ResourceList) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(rl))
	for name := range rl {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Contains reports whether item is one of items.
func Contains(items []corev1.ResourceName, item corev1.ResourceName) bool {
	return slices.Contains(items, item)
}

// ContainsPrefix reports whether item starts with one of prefixes.
func ContainsPrefix(prefixes []string, item corev1.ResourceName) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(string(item), p) {
			return true
		}
	}
	return false
}

// Intersection returns the names of a that are also in b, sorted and without
// duplicates.
func Intersection(a, b []corev1.ResourceName) []corev1.ResourceName {
	return filterNames(a, b, true)
}

// Difference returns the names of a that are not in b, sorted and without
// duplicates.
func Difference(a, b []corev1.ResourceName) []corev1.ResourceName {
	return filterNames(a, b, false)
}

// filterNames keeps the names of a whose membership in b is inB, sorted and
// deduplicated. Short lists (the usual case: a quota has a handful of hard
// names) are searched linearly, which is faster than building a set.
func filterNames(a, b []corev1.ResourceName, inB bool) []corev1.ResourceName {
	result := make([]corev1.ResourceName, 0, len(a))
	if len(b) <= 16 {
		for _, name := range a {
			if slices.Contains(b, name) == inB {
				result = append(result, name)
			}
		}
	} else {
		set := sets.New(b...)
		for _, name := range a {
			if set.Has(name) == inB {
				result = append(result, name)
			}
		}
	}
	slices.Sort(result)
	return slices.Compact(result)
}

// IsZero reports whether every value of rl is zero. An empty or nil list is
// zero.
func IsZero(rl corev1.ResourceList) bool {
	for _, q := range rl {
		if !q.IsZero() {
			return false
		}
	}
	return true
}

// IsNegative returns the sorted names whose values are below zero.
func IsNegative(rl corev1.ResourceList) []corev1.ResourceName {
	var names []corev1.ResourceName
	for name, q := range rl {
		if q.Sign() < 0 {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// RemoveZeros returns the entries of rl whose values are not zero.
func RemoveZeros(rl corev1.ResourceList) corev1.ResourceList {
	result := make(corev1.ResourceList, len(rl))
	for name, q := range rl {
		if !q.IsZero() {
			result[name] = q.DeepCopy()
		}
	}
	return result
}

// ToSet returns names as a set. Upstream's returns the untyped sets.String
// of k8s.io/apimachinery; this one keeps the names typed.
func ToSet(names []corev1.ResourceName) sets.Set[corev1.ResourceName] {
	return sets.New(names...)
}
