package quota_test

import (
	"encoding/binary"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/quotakit/quotakit/quota"
)

var fuzzNames = names("cpu", "memory", "pods", "requests.cpu", "limits.memory", "count/secrets", "example.com/gpu")

// listsFromBytes turns fuzz input into two ResourceLists. Each 7-byte record
// is: list (a or b), name, scale, then a signed 32-bit value, so values cover
// milli-units to exa-units, negatives and zero.
func listsFromBytes(data []byte) (a, b corev1.ResourceList) {
	a, b = corev1.ResourceList{}, corev1.ResourceList{}
	for len(data) >= 7 {
		rec := data[:7]
		data = data[7:]
		target := a
		if rec[0]&1 == 1 {
			target = b
		}
		name := fuzzNames[int(rec[1])%len(fuzzNames)]
		scale := resource.Scale(int(int8(rec[2])) % 19) // -18..18
		value := int64(int32(binary.LittleEndian.Uint32(rec[3:])))
		format := resource.DecimalSI
		if rec[0]&2 == 2 {
			format = resource.BinarySI
		}
		q := resource.NewScaledQuantity(value, scale)
		q.Format = format
		target[name] = *q
	}
	return a, b
}

func FuzzResourceListArithmetic(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0, 1, 0, 253, 5, 0, 0, 0})
	f.Add([]byte{0, 1, 6, 255, 255, 255, 255, 1, 1, 250, 7, 0, 0, 0, 1, 2, 0, 0, 0, 0, 0})
	f.Add([]byte{2, 3, 0, 10, 0, 0, 0, 3, 3, 253, 0, 39, 0, 0, 0, 4, 18, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		a, b := listsFromBytes(data)
		aBefore, bBefore := a.DeepCopy(), b.DeepCopy()

		// Equals is reflexive and symmetric.
		if !quota.Equals(a, a.DeepCopy()) {
			t.Fatalf("Equals(a, copy of a) = false for a=%v", a)
		}
		if quota.Equals(a, b) != quota.Equals(b, a) {
			t.Fatalf("Equals not symmetric for a=%v b=%v", a, b)
		}

		// Add then Subtract gives a back for a's keys, and zero for b's own.
		round := quota.Subtract(quota.Add(a, b), b)
		for name, q := range round {
			want, ok := a[name]
			if !ok {
				want = resource.Quantity{}
			}
			if q.Cmp(want) != 0 {
				t.Fatalf("Subtract(Add(a, b), b)[%s] = %s, want %s (a=%v b=%v)", name, q.String(), want.String(), a, b)
			}
		}
		if len(round) != len(quota.Add(a, b)) {
			t.Fatalf("Subtract(Add(a, b), b) has %d keys, want %d", len(round), len(quota.Add(a, b)))
		}

		// Max is commutative and bounds both sides.
		mab, mba := quota.Max(a, b), quota.Max(b, a)
		if !quota.Equals(mab, mba) {
			t.Fatalf("Max(a, b) = %v, Max(b, a) = %v", mab, mba)
		}
		if ok, _ := quota.LessThanOrEqual(a, mab); !ok {
			t.Fatalf("a=%v is not <= Max(a, b)=%v", a, mab)
		}
		if ok, _ := quota.LessThanOrEqual(b, mab); !ok {
			t.Fatalf("b=%v is not <= Max(a, b)=%v", b, mab)
		}

		// LessThanOrEqual agrees with the sign of Subtract on shared keys.
		ok, exceeded := quota.LessThanOrEqual(a, b)
		diff := quota.Subtract(a, b)
		var wantExceeded []corev1.ResourceName
		for _, name := range quota.ResourceNames(diff) {
			_, inA := a[name]
			_, inB := b[name]
			if d := diff[name]; inA && inB && d.Sign() > 0 {
				wantExceeded = append(wantExceeded, name)
			}
		}
		if ok != (len(wantExceeded) == 0) || !cmp.Equal(wantExceeded, exceeded) {
			t.Fatalf("LessThanOrEqual(a, b) = %v, %v; Subtract says exceeded %v (a=%v b=%v)", ok, exceeded, wantExceeded, a, b)
		}

		// SubtractWithNonNegativeResult is Subtract clamped at zero, except
		// that a key only in b is zero whatever its sign.
		nonNeg := quota.SubtractWithNonNegativeResult(a, b)
		if len(nonNeg) != len(diff) {
			t.Fatalf("SubtractWithNonNegativeResult has %d keys, Subtract %d", len(nonNeg), len(diff))
		}
		for name, d := range diff {
			got := nonNeg[name]
			if _, inA := a[name]; !inA {
				d = resource.Quantity{}
			}
			if d.Sign() <= 0 && !got.IsZero() || d.Sign() > 0 && got.Cmp(d) != 0 {
				t.Fatalf("SubtractWithNonNegativeResult[%s] = %s, Subtract = %s", name, got.String(), d.String())
			}
		}

		// Mask is idempotent and only keeps listed names.
		mask := quota.ResourceNames(b)
		once := quota.Mask(a, mask)
		if !quota.Equals(once, quota.Mask(once, mask)) {
			t.Fatalf("Mask not idempotent: %v", once)
		}
		for name := range once {
			if !quota.Contains(mask, name) {
				t.Fatalf("Mask kept unlisted %s", name)
			}
		}

		// RemoveZeros and IsZero agree.
		if quota.IsZero(a) != (len(quota.RemoveZeros(a)) == 0) {
			t.Fatalf("IsZero(a) = %v but RemoveZeros(a) = %v", quota.IsZero(a), quota.RemoveZeros(a))
		}

		// Nothing above changed its inputs.
		if !cmp.Equal(aBefore, a) || !cmp.Equal(bBefore, b) {
			t.Fatalf("inputs mutated: a %v -> %v, b %v -> %v", aBefore, a, bBefore, b)
		}
	})
}

func FuzzNameSets(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3}, []byte{2, 3, 4})
	f.Add([]byte{}, []byte{1, 1, 1})
	f.Fuzz(func(t *testing.T, ab, bb []byte) {
		pick := func(bs []byte) []corev1.ResourceName {
			var out []corev1.ResourceName
			for _, c := range bs {
				out = append(out, fuzzNames[int(c)%len(fuzzNames)])
			}
			return out
		}
		a, b := pick(ab), pick(bb)
		inter, diff := quota.Intersection(a, b), quota.Difference(a, b)
		// The two partition the distinct names of a, sorted.
		all := quota.ToSet(a)
		if all.Len() != len(inter)+len(diff) {
			t.Fatalf("|Intersection|+|Difference| = %d+%d, want %d", len(inter), len(diff), all.Len())
		}
		for _, list := range [][]corev1.ResourceName{inter, diff} {
			for i := 1; i < len(list); i++ {
				if list[i-1] >= list[i] {
					t.Fatalf("not sorted and unique: %v", list)
				}
			}
		}
		for _, n := range inter {
			if !quota.Contains(b, n) {
				t.Fatalf("Intersection has %s, not in b", n)
			}
		}
		for _, n := range diff {
			if quota.Contains(b, n) {
				t.Fatalf("Difference has %s, which is in b", n)
			}
		}
	})
}
