// Package reslist tells resource lists apart cheaply, so that lists equal
// in every way an evaluator reads can be kept once and shared.
package reslist

import (
	"encoding/binary"
	"hash/maphash"
	"math"

	corev1 "k8s.io/api/core/v1"
)

// Hash returns a hash of rl's names, amounts and formats under seed,
// whatever the map's order. Lists for which [Same] is true hash alike
// when their amounts are written alike (the lists of one template); equal
// amounts written differently (1 and 1000m) may hash apart, which only
// costs a chance to share. It does not allocate.
func Hash(seed maphash.Seed, rl corev1.ResourceList) uint64 {
	var sum uint64
	for name, q := range rl {
		var h maphash.Hash
		h.SetSeed(seed)
		h.WriteString(string(name))
		h.WriteByte(0)
		h.WriteString(string(q.Format))
		WriteUint64(&h, math.Float64bits(q.AsApproximateFloat64()))
		// Adding the entries' hashes makes the result independent of the
		// order a map is walked in.
		sum += h.Sum64()
	}
	return sum + uint64(len(rl))
}

// WriteUint64 writes v to h as eight bytes, little-endian, in one write.
func WriteUint64(h *maphash.Hash, v uint64) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	h.Write(b[:])
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
	for name, v := range src {
		if only != nil {
			if _, ok := only[name]; !ok {
				continue
			}
		}
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
}
