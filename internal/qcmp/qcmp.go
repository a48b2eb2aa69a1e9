// Package qcmp holds the go-cmp options quotakit's tests use to compare
// Kubernetes quantities, which must be compared as numbers: reflect-based
// equality says "100m" differs from "0.1".
package qcmp

import (
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Quantities returns an option that compares resource.Quantity values by
// number, ignoring their format and cached string form.
func Quantities() cmp.Option {
	return cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })
}
