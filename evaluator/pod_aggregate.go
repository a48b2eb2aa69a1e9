package evaluator

import (
	corev1 "k8s.io/api/core/v1"
)

// Aggregation of a pod's container amounts into what the pod requests and
// limits, by component-helpers' rules: containers plus sidecars, at least
// each init container plus the sidecars declared before it.

// aggregate applies the container formula to one resource read from one of
// the lists of every container: fixedNames[k], or name when k < 0.
func (c *podCalc) aggregate(k int, name corev1.ResourceName, list int) amount {
	if k >= 0 && !c.exact {
		if r, ok := c.aggregateSmall(k, list); ok {
			return r
		}
	}
	return c.aggregateNamed(name, list)
}

// aggregateNamed is aggregate of any resource with exact arithmetic,
// reading the maps again. It serves hugepages and extended resources and
// amounts too large or too fine for int64 milli-units.
func (c *podCalc) aggregateNamed(name corev1.ResourceName, list int) amount {
	var sum, sidecars, initMax amount
	for j, cs := range [2][]corev1.Container{c.pod.Spec.Containers, c.pod.Spec.InitContainers} {
		for i := range cs {
			lists, _, kind := c.resolve(&cs[i], j == 1)
			var v amount
			if rl := lists[list]; len(rl) > 0 {
				if q, ok := rl[name]; ok {
					v = amountOf(&q)
				}
			}
			switch kind {
			case regularContainer:
				sum.add(&v)
			case sidecarContainer:
				sum.add(&v)
				sidecars.add(&v)
				initMax.max(&sidecars)
			default:
				v.add(&sidecars)
				initMax.max(&v)
			}
		}
	}
	sum.max(&initMax)
	return sum
}

// aggregateSmall is aggregate of fixedNames[k] in plain int64 arithmetic
// over the amounts read by prepare (this loop is most of the work of
// summing a namespace). ok is false when a sum overflows; the caller then
// takes the exact path.
func (c *podCalc) aggregateSmall(k, list int) (r amount, ok bool) {
	// Each running value carries its format as amount.add and amount.max
	// would choose it. An unset value is 0 (containerAmounts starts
	// zeroed), and a sum starting from 0 takes its term's format.
	var (
		sum, sidecars, initMax          int64
		sumF, sidecarsF, initMaxF       amountFormat
		sumSet, sidecarsSet, initMaxSet bool
	)
	bit := uint8(1) << k
	for i := range c.amounts {
		a := &c.amounts[i]
		v, vf, set := a.milli[list][k], a.format[list][k], a.set[list]&bit != 0
		switch a.kind {
		case regularContainer:
			if set {
				sumF = sumFormat(sum, sumF, vf)
				if sum, ok = addInt64(sum, v); !ok {
					return amount{}, false
				}
				sumSet = true
			}
		case sidecarContainer:
			if set {
				sumF = sumFormat(sum, sumF, vf)
				if sum, ok = addInt64(sum, v); !ok {
					return amount{}, false
				}
				sidecarsF = sumFormat(sidecars, sidecarsF, vf)
				if sidecars, ok = addInt64(sidecars, v); !ok {
					return amount{}, false
				}
				sumSet, sidecarsSet = true, true
			}
			if sidecarsSet && (!initMaxSet || sidecars > initMax) {
				initMax, initMaxF, initMaxSet = sidecars, sidecarsF, true
			}
		default:
			if set || sidecarsSet {
				// The init container's own amount plus the sidecars
				// before it, in that order.
				if sidecarsSet {
					vf = sumFormat(v, vf, sidecarsF)
				}
				if v, ok = addInt64(v, sidecars); !ok {
					return amount{}, false
				}
				if !initMaxSet || v > initMax {
					initMax, initMaxF, initMaxSet = v, vf, true
				}
			}
		}
	}
	switch {
	case sumSet && (!initMaxSet || sum >= initMax):
		return amount{milli: sum, format: sumF, set: true}, true
	case initMaxSet:
		return amount{milli: initMax, format: initMaxF, set: true}, true
	}
	return amount{}, true
}

// addInt64 returns a+b and false when that overflows.
func addInt64(a, b int64) (int64, bool) {
	s := a + b
	return s, (a^s)&(b^s) >= 0
}

// request returns the pod's request of one resource, fixedNames[k] or name
// when k < 0.
func (c *podCalc) request(k int, name corev1.ResourceName) amount {
	var r amount
	switch {
	case c.requestsFromSpec:
		r = c.aggregate(k, name, specRequests)
	case c.infeasible:
		r = maxAmounts(c.aggregate(k, name, actuatedRequests), c.aggregate(k, name, allocatedRequests))
	default:
		r = maxAmounts(c.aggregate(k, name, specRequests), c.aggregate(k, name, actuatedRequests))
		r = maxAmounts(r, c.aggregate(k, name, allocatedRequests))
	}
	pod := c.pod
	if !c.opts.DisablePodLevelResources && pod.Spec.Resources != nil && isPodLevelResource(name) {
		if q, ok := pod.Spec.Resources.Requests[name]; ok {
			r = amountOf(&q)
		}
	}
	if len(pod.Spec.Overhead) > 0 {
		if q, ok := pod.Spec.Overhead[name]; ok {
			r = addAmounts(r, amountOf(&q))
		}
	}
	return r
}

// limit returns the pod's limit of fixedNames[k].
func (c *podCalc) limit(k int, name corev1.ResourceName) amount {
	var r amount
	switch {
	case c.limitsFromSpec:
		r = c.aggregate(k, name, specLimits)
	case c.infeasible:
		r = c.aggregate(k, name, actuatedLimits)
	default:
		r = maxAmounts(c.aggregate(k, name, specLimits), c.aggregate(k, name, actuatedLimits))
	}
	pod := c.pod
	if !c.opts.DisablePodLevelResources && pod.Spec.Resources != nil && isPodLevelResource(name) {
		if q, ok := pod.Spec.Resources.Limits[name]; ok {
			r = amountOf(&q)
		}
	}
	if r.set && len(pod.Spec.Overhead) > 0 && !r.isZero() {
		if q, ok := pod.Spec.Overhead[name]; ok {
			r = addAmounts(r, amountOf(&q))
		}
	}
	return r
}
