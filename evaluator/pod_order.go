package evaluator

import (
	"unsafe"

	corev1 "k8s.io/api/core/v1"
)

// radixBits is the width of the digit sortByAddress sorts by in one pass.
const radixBits = 11

// sortByAddress sorts pods by address, using scratch (as long as pods) as
// scratch space. It is a least-significant-digit radix sort on the offset
// of each pod from the lowest one, in 64-byte units (one pod per unit), so
// a namespace of 10,000 pods spread over a few hundred megabytes takes two
// linear passes instead of a comparison sort's 130,000 calls. The
// addresses are only compared; the slices hold the pointers throughout.
func sortByAddress(pods, scratch []*corev1.Pod) {
	if len(pods) < 2 {
		return
	}
	lo, hi := ^uintptr(0), uintptr(0)
	for _, p := range pods {
		a := uintptr(unsafe.Pointer(p))
		lo, hi = min(lo, a), max(hi, a)
	}
	key := func(p *corev1.Pod) uintptr { return (uintptr(unsafe.Pointer(p)) - lo) >> 6 }
	span := (hi - lo) >> 6
	src, dst := pods, scratch[:len(pods)]
	var counts [1 << radixBits]int
	for shift := 0; shift < 64 && span>>shift != 0; shift += radixBits {
		clear(counts[:])
		for _, p := range src {
			counts[(key(p)>>shift)&(1<<radixBits-1)]++
		}
		at := 0
		for d, n := range counts {
			counts[d] = at
			at += n
		}
		for _, p := range src {
			d := (key(p) >> shift) & (1<<radixBits - 1)
			dst[counts[d]] = p
			counts[d]++
		}
		src, dst = dst, src
	}
	if &src[0] != &pods[0] {
		copy(pods, src)
	}
}
