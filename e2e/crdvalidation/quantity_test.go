package crdvalidation_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/quotakit/quotakit/clusterquota"
	"github.com/quotakit/quotakit/internal/cqcases"
)

// quotaJSON returns a valid ClusterQuota whose spec.quota.hard and
// status.total.used give requests.storage the raw JSON value v, exactly
// as a client might send it.
func quotaJSON(v string) string {
	return `{"apiVersion": "quota.quotakit.io/v1alpha1", "kind": "ClusterQuota",
		"metadata": {"name": "q"},
		"spec": {"selector": {"labels": {"matchLabels": {"team": "a"}}}, "quota": {"hard": {"requests.storage": ` + v + `}}},
		"status": {"total": {"used": {"requests.storage": ` + v + `}}}}`
}

// TestQuantitiesThroughCRD sends quantities as clients may write them,
// not only in Go's canonical form: integers, suffixes, exponents and
// lengths at and past the CRD's bounds. Each must be refused or accepted
// in spec and status alike, and quickly: a CEL rule that parsed
// 1e-99999999 would keep the API server busy for minutes.
func TestQuantitiesThroughCRD(t *testing.T) {
	s := newServer(t, loadCRD(t))
	tests := []struct {
		json   string
		accept bool
	}{
		{`10`, true},
		{`0`, true},
		{`9223372036854775807`, true},
		{`-3`, false},
		{`"10"`, true},
		{`"100Ei"`, true}, // ParseQuantity caps it at 2^63-1
		{`"8Ei"`, true},
		{`"9E"`, true},
		{`"9223372036854775807"`, true},
		{`"9223372036854775807.000"`, true},
		{`"9223372036854775807.001"`, false},
		{`"9223372036854775808"`, false},
		{`"10E"`, false},
		{`"1e19"`, false},
		{`"1e99"`, false},
		{`"0e99"`, true},
		{`"1e-99"`, true},
		{`"1e100"`, false},
		{`"0e100"`, false},
		{`"1e1000000"`, false},
		{`"0e1000000"`, false},
		{`"1e-99999999"`, false},
		{`"0.0000000000000000000000000000000000000000000000000000000000001"`, true}, // 63 characters
		{`"1` + strings.Repeat("0", 18) + `"`, true},
		{`"1` + strings.Repeat("0", 19) + `"`, false},
		{`"0.` + strings.Repeat("0", 61) + `1"`, true},  // 64 characters
		{`"0.` + strings.Repeat("0", 62) + `1"`, false}, // 65: too long
		{`"-1"`, false},
		{`"1.5Gi"`, true},
		{`"1Gb"`, false},
		{`""`, false},
		{`"1e1.5"`, false},
	}
	for _, tt := range tests {
		start := time.Now()
		v := s.validate(t, fromJSON(t, quotaJSON(tt.json)))
		took := time.Since(start)
		if accepted := len(v.create) == 0; accepted != tt.accept {
			t.Errorf("create with hard %s: accepted %v, want %v: %v", tt.json, accepted, tt.accept, v.create.ToAggregate())
		}
		if accepted := len(v.status) == 0; accepted != tt.accept {
			t.Errorf("status with used %s: accepted %v, want %v: %v", tt.json, accepted, tt.accept, v.status.ToAggregate())
		}
		if took > 2*time.Second {
			t.Errorf("validating %s took %v", tt.json, took)
		}
	}
}

// TestQuantityBoundAgrees draws quantities of every form around
// MaxQuantity and checks that the CRD and Validate agree on each: on its
// canonical form (what Go clients and the controller write), both must
// give the same verdict; on the form it was written in, whatever the CRD
// accepts, Validate must accept once the quantity is parsed.
func TestQuantityBoundAgrees(t *testing.T) {
	s := newServer(t, loadCRD(t))
	rng := rand.New(rand.NewPCG(29, 1))
	suffixes := []string{"", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"}
	const draws = 600
	agreed := map[bool]int{}
	for range draws {
		raw := drawQuantity(rng, suffixes)
		q, err := resource.ParseQuantity(raw)
		if err != nil {
			t.Fatalf("drew %q, which does not parse: %v", raw, err)
		}
		validates := validQuantity(q)

		canonical, err := json.Marshal(q)
		if err != nil {
			t.Fatal(err)
		}
		v := s.validate(t, fromJSON(t, quotaJSON(string(canonical))))
		if crd := len(v.errs()) == 0; crd != validates {
			t.Errorf("%s (canonical %s): Validate accepts: %v, the CRD: %v (%v)", raw, canonical, validates, crd, v.errs().ToAggregate())
		}
		agreed[validates]++

		v = s.validate(t, fromJSON(t, quotaJSON(fmt.Sprintf("%q", raw))))
		if len(v.errs()) == 0 && !validates {
			t.Errorf("%s as written: the CRD accepts it, Validate does not", raw)
		}
	}
	t.Logf("%d quantities in range and %d above, on which the CRD and Validate agree", agreed[true], agreed[false])
	if agreed[true] < draws/5 || agreed[false] < draws/5 {
		t.Errorf("the draws are lopsided: %v; draw closer to the bound", agreed)
	}
}

// validQuantity reports whether Validate accepts q as a hard limit and a
// usage.
func validQuantity(q resource.Quantity) bool {
	cq := cqcases.Valid()
	cq.Spec.Quota.Hard = corev1.ResourceList{corev1.ResourceRequestsStorage: q}
	cq.Status.Total.Used = corev1.ResourceList{corev1.ResourceRequestsStorage: q}
	return clusterquota.Validate(cq) == nil
}

// drawQuantity returns a quantity string near MaxQuantity: a mantissa of
// up to 21 digits, maybe with a fraction, and a suffix or an exponent
// that puts it within a few powers of ten of 2^63.
func drawQuantity(rng *rand.Rand, suffixes []string) string {
	var b strings.Builder
	digits := 1 + rng.IntN(21)
	for i := range digits {
		d := rng.IntN(10)
		if i == 0 && digits > 1 {
			d = 1 + rng.IntN(9)
		}
		b.WriteByte(byte('0' + d))
	}
	if rng.IntN(3) == 0 {
		b.WriteByte('.')
		for range rng.IntN(12) {
			b.WriteByte(byte('0' + rng.IntN(10)))
		}
	}
	// The magnitude so far is about 10^digits; aim the suffix at 10^19,
	// give or take a few powers of ten.
	aim := 19 - digits + rng.IntN(5) - 2
	if rng.IntN(2) == 0 {
		b.WriteString(fmt.Sprintf("e%d", aim))
		return b.String()
	}
	best, bestDist := "", 1<<30
	for _, sfx := range suffixes {
		if d := abs(exponentOf(sfx) - aim); d < bestDist || (d == bestDist && rng.IntN(2) == 0) {
			best, bestDist = sfx, d
		}
	}
	b.WriteString(best)
	return b.String()
}

// exponentOf returns the power of ten a suffix stands for, roughly.
func exponentOf(suffix string) int {
	exp := map[string]int{"": 0, "n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18,
		"Ki": 3, "Mi": 6, "Gi": 9, "Ti": 12, "Pi": 15, "Ei": 18}
	return exp[suffix]
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
