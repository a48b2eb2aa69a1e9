// Package reslist tells resource lists apart cheaply, so that lists equal
// in every way an evaluator reads can be kept once and shared.
package reslist

import (
	"hash/maphash"
	"math"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Hash returns a hash of rl's names, amounts and formats under seed,
// whatever the map's order. Lists for which [Same] is true hash alike
// when their amounts are written alike (the lists of one template); equal
// amounts written differently (1 and 1000m) may hash apart, which only
// costs a chance to share. It does not allocate.
func Hash(seed maphash.Seed, rl corev1.ResourceList) uint64 {
	var sum uint64
	for name, q := range rl {
		h := maphash.String(seed, string(name))
		h = Mix(h ^ math.Float64bits(q.AsApproximateFloat64()))
		h = Mix(h ^ formatCode(seed, q.Format))
		// Adding the entries' hashes makes the result independent of the
		// order a map is walked in.
		sum += h
	}
	return sum + uint64(len(rl))
}

// formatCode stands for a quantity's format in a hash: a constant for the
// three formats Kubernetes writes, the string's hash for any other.
func formatCode(seed maphash.Seed, f resource.Format) uint64 {
	switch f {
	case resource.DecimalSI:
		return 1
	case resource.BinarySI:
		return 2
	case resource.DecimalExponent:
		return 3
	}
	return maphash.String(seed, string(f))
}

// Mix spreads the bits of x over the whole word (the finalizer of
// SplitMix64): hashes combined as Mix(h ^ v) tell apart values that
// differ in one field.
func Mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// Same reports whether a and b hold the same names, each with an equal
// amount in the same format: then every sum, comparison and spelling an
// evaluator makes of one, it makes of the other.
func Same(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for name, q := range a {
		p, ok := b[name]
		if !ok || p.Format != q.Format || p.Cmp(q) != 0 {
			return false
		}
	}
	return true
}

// Accumulate adds the amounts of src to dst, in place, or subtracts them
// when subtract is true, for the names only holds (every name when only is
// nil). dst must own its values, sharing none with another list: a decimal
// amount is changed where it lies. Amounts taken from src are copied.
func Accumulate(dst, src corev1.ResourceList, subtract bool, only corev1.ResourceList) {
	if only != nil && len(only) < len(src) {
		// A quota limits a few of the names a pod charges: look those up
		// instead of walking the usage and looking up each name twice.
		for name := range only {
			if v, ok := src[name]; ok {
				accumulate(dst, name, v, subtract)
			}
		}
		return
	}
	for name, v := range src {
		if only != nil {
			if _, ok := only[name]; !ok {
				continue
			}
		}
		accumulate(dst, name, v, subtract)
	}
}

// accumulate adds v to, or subtracts it from, dst's amount of name.
func accumulate(dst corev1.ResourceList, name corev1.ResourceName, v resource.Quantity, subtract bool) {
	q, ok := dst[name]
	switch {
	case !ok:
		q = v.DeepCopy()
		if subtract {
			q.Neg()
		}
	case subtract:
		q.Sub(v)
	default:
		q.Add(v)
	}
	dst[name] = q
}
