package evaluator

import (
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// FuzzPodAmounts checks the int64 fast path against exact arithmetic: amount
// sums and maxima against resource.Quantity, and the container formula of
// aggregateSmall against aggregateNamed, on pods built from fuzzed
// quantities (tiny, huge, negative, overflowing).
func FuzzPodAmounts(f *testing.F) {
	for _, seed := range [][4]string{
		{"1", "500m", "2", "0"},
		{"9000000000000000", "9000000000000000", "1", "1n"},
		{"-5", "3Ei", "1500u", "9223372036854775807"},
		{"1.5Gi", "0.1", "100M", "-9000000000000000"},
	} {
		f.Add(seed[0], seed[1], seed[2], seed[3], uint8(0b1010))
	}
	f.Fuzz(func(t *testing.T, s0, s1, s2, s3 string, layout uint8) {
		var qs [4]resource.Quantity
		for i, s := range []string{s0, s1, s2, s3} {
			// resource.ParseQuantity itself takes time proportional to an
			// exponent ("1E10100010100000" runs for minutes), which is
			// apimachinery's to bound, not the evaluator's.
			if hugeExponent(s) {
				t.Skip()
			}
			q, err := resource.ParseQuantity(s)
			if err != nil {
				t.Skip()
			}
			// Out-of-range values are capped, not converted exactly, and
			// the exact arithmetic this test compares with takes time
			// proportional to their exponent ("1E222222117", or a zero
			// written "0E99999999"): TestAmountOfOutOfRange covers them.
			if _, capped := capOutOfRange(&q); capped || q.IsZero() && strings.ContainsAny(s, "eE") {
				t.Skip()
			}
			qs[i] = q
		}

		a, b := amountOf(&qs[0]), amountOf(&qs[1])
		if got := a.quantity(); got.Cmp(qs[0]) != 0 {
			t.Fatalf("amountOf(%s).quantity() = %s", qs[0].String(), got.String())
		}
		sum := qs[0].DeepCopy()
		sum.Add(qs[1])
		if got := addAmounts(a, b).quantity(); got.Cmp(sum) != 0 {
			t.Fatalf("%s + %s = %s, want %s", qs[0].String(), qs[1].String(), got.String(), sum.String())
		}
		want := qs[0]
		if qs[1].Cmp(qs[0]) > 0 {
			want = qs[1]
		}
		if got := maxAmounts(a, b).quantity(); got.Cmp(want) != 0 {
			t.Fatalf("max(%s, %s) = %s, want %s", qs[0].String(), qs[1].String(), got.String(), want.String())
		}

		// A pod with one container per quantity; layout bits choose which
		// are init containers and sidecars.
		pod := &corev1.Pod{}
		always := corev1.ContainerRestartPolicyAlways
		for i := range qs {
			c := corev1.Container{Name: string(rune('a' + i)), Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: qs[i]},
			}}
			switch {
			case i == 0 || layout&(1<<i) == 0:
				pod.Spec.Containers = append(pod.Spec.Containers, c)
			default:
				if layout&(1<<(i+4)) != 0 {
					c.RestartPolicy = &always
				}
				pod.Spec.InitContainers = append(pod.Spec.InitContainers, c)
			}
		}
		c := podCalc{}
		c.prepare(pod)
		exact := c.aggregateNamed(corev1.ResourceCPU, specRequests)
		if c.exact {
			return
		}
		small, ok := c.aggregateSmall(fixedCPU, specRequests)
		if !ok {
			return
		}
		if small.set != exact.set || (small.set && cmpAmounts(small, exact) != 0) {
			t.Fatalf("aggregateSmall = %+v, aggregateNamed = %+v for %v", small, exact, pod.Spec)
		}
	})
}

// hugeExponent reports whether s is written with a decimal exponent beyond
// what a float64 can hold ("1E400"); a bare E is the exa suffix.
func hugeExponent(s string) bool {
	i := strings.LastIndexAny(s, "eE")
	if i < 0 || i == len(s)-1 {
		return false
	}
	e, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
	return err != nil || e > 400 || e < -400
}

func TestAmountOfOutOfRange(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{"1E222222117", "9223372036854775807"},
		{"-1E222222117", "-9223372036854775807"},
		{"1E300", "9223372036854775807"},
		{"0E99999999", "0"},
		{"E222222117", "0"},
		{"9E18", "9E18"}, // within range: exact
		{"100m", "100m"}, // within range: exact
		{"1n", "1n"},     // the finest a quantity holds
	}
	for _, tt := range tests {
		q := resource.MustParse(tt.in)
		before := q.DeepCopy()
		got := amountOf(&q).quantity()
		if want := resource.MustParse(tt.want); got.Cmp(want) != 0 {
			t.Errorf("amountOf(%s) = %s, want %s", tt.in, got.String(), want.String())
		}
		if q.Cmp(before) != 0 || q.String() != before.String() {
			t.Errorf("amountOf(%s) changed its input to %s", tt.in, q.String())
		}
	}
	// Values finer than a nano-unit cannot be parsed (they are rounded up),
	// but can be built.
	tiny := resource.NewScaledQuantity(1, -400)
	if got := amountOf(tiny).quantity(); got.Cmp(*resource.NewScaledQuantity(1, resource.Nano)) != 0 {
		t.Errorf("amountOf(1e-400) = %s, want 1n", got.String())
	}
	// A negative one stays negative, so that admission refuses it as
	// Kubernetes does ("quota usage is negative").
	negTiny := resource.NewScaledQuantity(-1, -400)
	if got := amountOf(negTiny).quantity(); got.Cmp(*resource.NewScaledQuantity(-1, resource.Nano)) != 0 {
		t.Errorf("amountOf(-1e-400) = %s, want -1n", got.String())
	}
}
