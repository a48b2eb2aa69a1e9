package evaluator

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// podTotals sums podUsage values.
type podTotals struct {
	count, pods int64
	requests    [numFixed]amount
	limits      [numFixed]amount
	// dyn owns its names: they are the pods' own strings, not copies.
	dyn []dynAmount
}

func (t *podTotals) add(u *podUsage) {
	t.count++
	if !u.eligible {
		return
	}
	t.pods++
	t.addAmounts(&u.requests, &u.limits, u.dyn)
}

func (t *podTotals) addAmounts(requests, limits *[numFixed]amount, dyn []dynAmount) {
	for i := range requests {
		t.requests[i] = addAmounts(t.requests[i], requests[i])
		t.limits[i] = addAmounts(t.limits[i], limits[i])
	}
	for i := range dyn {
		d := &dyn[i]
		if !d.value.set {
			continue
		}
		j := slices.IndexFunc(t.dyn, func(e dynAmount) bool { return e.name == d.name })
		if j < 0 {
			t.dyn = append(t.dyn, dynAmount{name: d.name, extended: d.extended})
			j = len(t.dyn) - 1
		}
		t.dyn[j].value = addAmounts(t.dyn[j].value, d.value)
	}
}

// resourceList returns the totals under their quota names, with a zero for
// every name of zeros that nothing charged.
func (t *podTotals) resourceList(zeros []corev1.ResourceName) corev1.ResourceList {
	rl := make(corev1.ResourceList, len(zeros)+len(podResourceNames)+2*len(t.dyn))
	for _, name := range zeros {
		rl[name] = resource.Quantity{Format: resource.DecimalSI}
	}
	if t.count > 0 {
		rl[podCountName] = countAmount(t.count).quantity()
	}
	if t.pods > 0 {
		rl[corev1.ResourcePods] = countAmount(t.pods).quantity()
	}
	for i := range t.requests {
		if t.requests[i].set {
			rl[fixedNames[i]] = t.requests[i].quantity()
			rl[requestNames[i]] = t.requests[i].quantity()
		}
		if t.limits[i].set {
			rl[limitNames[i]] = t.limits[i].quantity()
		}
	}
	for i := range t.dyn {
		d := &t.dyn[i]
		if !d.extended {
			rl[d.name] = d.value.quantity()
		}
		rl[corev1.DefaultResourceRequestsPrefix+d.name] = d.value.quantity()
	}
	return rl
}
