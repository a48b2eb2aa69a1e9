package clusterquota_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/quotakit/quotakit/clusterquota"
	"github.com/quotakit/quotakit/internal/cqcases"
)

// TestValidate runs the table of internal/cqcases, which the e2e module's
// crdvalidation test also runs through the CRD's validators.
func TestValidate(t *testing.T) {
	for _, tt := range cqcases.Cases() {
		t.Run(tt.Name, func(t *testing.T) {
			q := tt.Object()
			err := clusterquota.Validate(q)
			var got []cqcases.FieldErr
			if err != nil {
				var verr *clusterquota.ValidationError
				if !errors.As(err, &verr) {
					t.Fatalf("Validate() = %v, not a *ValidationError", err)
				}
				for i, fe := range verr.Errors {
					detail := fe.Detail
					if i < len(tt.Want) && tt.Want[i].Detail == cqcases.AnyDetail {
						detail = cqcases.AnyDetail
					}
					got = append(got, cqcases.FieldErr{Type: fe.Type, Field: fe.Field, Detail: detail})
				}
			}
			if diff := cmp.Diff(tt.Want, got); diff != "" {
				t.Errorf("Validate() errors (-want +got):\n%s\n%v", diff, err)
			}
		})
	}
}

func TestValidateNil(t *testing.T) {
	if err := clusterquota.Validate(nil); err == nil {
		t.Error("Validate(nil) = nil, want an error")
	}
}

func TestValidationErrorMessage(t *testing.T) {
	q := cqcases.Valid()
	q.Spec.Selector = clusterquota.ClusterQuotaSelector{}
	q.Spec.Quota.Hard = cqcases.RL("pods", "-1")
	err := clusterquota.Validate(q)
	const want = `clusterquota: ClusterQuota.quota.quotakit.io "team-a" is invalid: [spec.selector: Required value: must restrict the selected namespaces: set labels, annotations or both, spec.quota.hard[pods]: Invalid value: "-1": must be greater than or equal to 0]`
	if err == nil || err.Error() != want {
		t.Errorf("Validate() = %v\nwant %s", err, want)
	}
	var fe *field.Error
	if !errors.As(err, &fe) || !strings.HasPrefix(fe.Field, "spec.") {
		t.Errorf("errors.As(err, *field.Error) = %v", fe)
	}
}

// TestValidateHugeExponents: Validate takes time in proportion to the
// object's size, whatever the exponents of its quantities. Comparing
// 1e1000000 with anything by resource.Quantity.Cmp builds a number of a
// million digits, tens of milliseconds each: a quota of MaxResources
// such quantities would take seconds.
func TestValidateHugeExponents(t *testing.T) {
	q := cqcases.Valid()
	q.Spec.Quota.Hard = corev1.ResourceList{}
	for i, s := range slices.Repeat([]string{"1e1000000", "0e1000000", "-1e1000000", "0e-1000000"}, clusterquota.MaxResources/4) {
		q.Spec.Quota.Hard[corev1.ResourceName(fmt.Sprintf("count/r%d.example.com", i))] = resource.MustParse(s)
	}
	start := time.Now()
	err := clusterquota.Validate(q)
	took := time.Since(start)
	var verr *clusterquota.ValidationError
	if !errors.As(err, &verr) || len(verr.Errors) != clusterquota.MaxResources {
		t.Fatalf("Validate() = %v, want %d errors", err, clusterquota.MaxResources)
	}
	if took > time.Second {
		t.Errorf("Validate() took %v on %d quantities with huge exponents", took, clusterquota.MaxResources)
	}
}
