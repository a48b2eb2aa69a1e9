package evaluator

import (
	"math"

	"k8s.io/apimachinery/pkg/api/resource"
)

// amount is one resource value inside the pod usage computation, or the
// absence of one. Kubernetes distinguishes "no key" from "zero": a container
// that requests cpu: 0 makes the pod's requests.cpu key exist, and a maximum
// taken against a missing key takes the other side even when it is negative.
// So every amount carries set, and the helpers below treat an unset amount as
// missing rather than as zero.
//
// The value is kept as int64 milli-units, which holds every real request
// exactly (up to about 9.2e15 units: 8 PiB of memory, 9 trillion CPUs) and
// makes sums and comparisons a few instructions with no allocation. A value
// that is finer than a milli-unit or too large, or a sum that overflows, moves
// to an exact resource.Quantity (big) and stays there.
type amount struct {
	milli int64
	// big holds the exact value when it does not fit milli. A big quantity
	// is never mutated once stored: every operation that produces a new
	// value makes a new one.
	big *resource.Quantity
	// format is the format the result prints in, chosen as
	// resource.Quantity's Add and component-helpers' maximum choose it: a
	// sum keeps the format of its first non-zero term, a maximum takes the
	// format of the value that won. Results then print as Kubernetes prints
	// them ("1536Mi", not "1610612736"; "2G", not "1953125Ki").
	format amountFormat
	set    bool
}

// amountFormat is a resource.Format in one byte, which keeps amount at 24 bytes.
type amountFormat uint8

const (
	formatDecimalSI amountFormat = iota
	formatBinarySI
	formatDecimalExponent
)

func formatOf(f resource.Format) amountFormat {
	switch f {
	case resource.BinarySI:
		return formatBinarySI
	case resource.DecimalExponent:
		return formatDecimalExponent
	}
	return formatDecimalSI
}

func (f amountFormat) resourceFormat() resource.Format {
	switch f {
	case formatBinarySI:
		return resource.BinarySI
	case formatDecimalExponent:
		return resource.DecimalExponent
	}
	return resource.DecimalSI
}

// amountOf converts q exactly, unless q is out of range (see
// [capOutOfRange]).
func amountOf(q *resource.Quantity) amount {
	f := formatOf(q.Format)
	if q.IsZero() {
		// Also a zero written with a huge exponent ("0E99999999"), which
		// the conversions below would take time proportional to.
		return amount{format: f, set: true}
	}
	// Whole numbers ("2", "512Mi", "1G") convert without a division. For a
	// non-zero value AsInt64 gives up within 19 steps of its exponent.
	if v, ok := q.AsInt64(); ok && v <= math.MaxInt64/1000 && v >= math.MinInt64/1000 {
		return amount{milli: v * 1000, format: f, set: true}
	}
	if c, ok := capOutOfRange(q); ok {
		return amount{big: c, format: f, set: true}
	}
	m := q.MilliValue()
	var back resource.Quantity
	back.SetMilli(m)
	if q.Cmp(back) == 0 {
		return amount{milli: m, format: f, set: true}
	}
	c := q.DeepCopy()
	return amount{big: &c, format: f, set: true}
}

// capOutOfRange returns, for a non-zero q beyond the bounds of a quantity, a
// new value it is capped to, in q's format: ±(2^63-1) units for a huge
// magnitude, and ±1 nano-unit for a value too fine to represent; and false
// for a q within range. It reads q without changing it, in constant time.
//
// The Quantity API documents that no quantity may exceed 2^63-1 in
// magnitude and that finer ones are rounded up; resource.ParseQuantity
// nevertheless accepts values such as "1E222222117", and exact arithmetic on
// them takes time and memory proportional to the exponent (minutes, for that
// one), which a pod spec must not be able to cost an evaluator.
func capOutOfRange(q *resource.Quantity) (*resource.Quantity, bool) {
	f := q.AsApproximateFloat64()
	switch {
	case math.IsNaN(f):
		return nil, false // not reachable for a non-zero q
	case f >= 9.2e18 || math.IsInf(f, 1):
		return resource.NewQuantity(math.MaxInt64, q.Format), true
	case f <= -9.2e18 || math.IsInf(f, -1):
		return resource.NewQuantity(-math.MaxInt64, q.Format), true
	case f == 0 && q.Sign() > 0, f > 0 && f < 1e-9:
		c := resource.NewScaledQuantity(1, resource.Nano)
		c.Format = q.Format
		return c, true
	case f == 0, f < 0 && f > -1e-9:
		// Negative, and too fine: one nano-unit below zero, so that the
		// usage stays negative and admission refuses it as Kubernetes
		// does.
		c := resource.NewScaledQuantity(-1, resource.Nano)
		c.Format = q.Format
		return c, true
	}
	return nil, false
}

// quantity returns a fresh resource.Quantity holding a, which must be set.
func (a amount) quantity() resource.Quantity {
	if a.big != nil {
		return a.big.DeepCopy()
	}
	f := a.format.resourceFormat()
	if a.milli%1000 == 0 {
		return *resource.NewQuantity(a.milli/1000, f)
	}
	return *resource.NewMilliQuantity(a.milli, f)
}

// isZero reports whether a is set to zero.
func (a amount) isZero() bool {
	if a.big != nil {
		return a.big.IsZero()
	}
	return a.milli == 0
}

// add sets a to a+b, where a missing side contributes nothing and the sum
// of two missing amounts is missing. As resource.Quantity's Add, the sum
// keeps a's format unless a is zero, and then takes b's. The common case,
// two small set amounts, is small enough to be inlined; the rest is
// addSlow.
func (a *amount) add(b *amount) {
	if a.set && b.set && a.big == nil && b.big == nil {
		s := a.milli + b.milli
		// Overflow happened iff both operands have the sign the sum lacks.
		if (a.milli^s)&(b.milli^s) >= 0 {
			a.format = sumFormat(a.milli, a.format, b.format)
			a.milli = s
			return
		}
	}
	a.addSlow(b)
}

func (a *amount) addSlow(b *amount) {
	switch {
	case !b.set:
	case !a.set:
		*a = *b
	default:
		q := a.quantity()
		q.Add(b.quantity())
		*a = amount{big: &q, format: formatOf(q.Format), set: true}
	}
}

// sumFormat is the format of a sum whose first term is a, in format af,
// and whose second is in format bf: resource.Quantity's Add keeps the
// receiver's format unless the receiver is zero.
func sumFormat(a int64, af, bf amountFormat) amountFormat {
	if a == 0 {
		return bf
	}
	return af
}

// max sets a to the larger of a and b; a missing side loses to any set
// one. On a tie a is kept, as Kubernetes keeps the value it already has.
func (a *amount) max(b *amount) {
	if b.set && (!a.set || a.big != nil || b.big != nil || b.milli > a.milli) {
		a.maxSlow(b)
	}
}

func (a *amount) maxSlow(b *amount) {
	if !a.set || cmpAmounts(*b, *a) > 0 {
		*a = *b
	}
}

// addAmounts returns a+b as [amount.add] computes it.
func addAmounts(a, b amount) amount {
	a.add(&b)
	return a
}

// maxAmounts returns the larger of a and b as [amount.max] computes it.
func maxAmounts(a, b amount) amount {
	a.max(&b)
	return a
}

// cmpAmounts compares two set amounts.
func cmpAmounts(a, b amount) int {
	if a.big == nil && b.big == nil {
		switch {
		case a.milli < b.milli:
			return -1
		case a.milli > b.milli:
			return 1
		}
		return 0
	}
	qa, qb := a.quantity(), b.quantity()
	return qa.Cmp(qb)
}

// countAmount is n whole units, as count/pods and pods are charged.
func countAmount(n int64) amount {
	if n > math.MaxInt64/1000 {
		q := resource.NewQuantity(n, resource.DecimalSI)
		return amount{big: q, set: true}
	}
	return amount{milli: n * 1000, set: true}
}
