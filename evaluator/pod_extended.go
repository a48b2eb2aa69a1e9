package evaluator

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Hugepages and extended resources: names a pod may request besides cpu,
// memory and ephemeral-storage. They are rare, so the calculator looks for
// them only when a request list has other names, and computes them on the
// exact path.

// dynAmount is a hugepages or extended resource request of a pod.
type dynAmount struct {
	name corev1.ResourceName
	// extended is true for an extended resource (charged only as
	// requests.<name>), false for hugepages (charged under both names).
	extended bool
	value    amount
}

// findDynamic collects into c.dyn the hugepages and extended resource names
// of every request list the formula may read. A name listed here that turns
// out to be in no list the formula uses comes out unset and is not charged,
// so scanning a superset is harmless.
func (c *podCalc) findDynamic() {
	for j, cs := range [2][]corev1.Container{c.pod.Spec.Containers, c.pod.Spec.InitContainers} {
		for i := range cs {
			lists, _, _ := c.resolve(&cs[i], j == 1)
			c.scanDynamic(lists[specRequests])
			if !c.requestsFromSpec {
				c.scanDynamic(lists[allocatedRequests])
				c.scanDynamic(lists[actuatedRequests])
			}
		}
	}
	if !c.opts.DisablePodLevelResources && c.pod.Spec.Resources != nil {
		c.scanDynamic(c.pod.Spec.Resources.Requests)
	}
	c.scanDynamic(c.pod.Spec.Overhead)
}

func (c *podCalc) scanDynamic(rl corev1.ResourceList) {
	if len(rl) == 0 {
		return
	}
	for name := range rl {
		switch name {
		case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage:
			continue
		}
		var extended bool
		switch {
		case strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix):
		case c.isExtended(name):
			extended = true
		default:
			continue
		}
		if !c.hasDynamic(name) {
			c.dyn = append(c.dyn, dynAmount{name: name, extended: extended})
		}
	}
}

func (c *podCalc) hasDynamic(name corev1.ResourceName) bool {
	for i := range c.dyn {
		if c.dyn[i].name == name {
			return true
		}
	}
	return false
}

func (c *podCalc) isExtended(name corev1.ResourceName) bool {
	if v, ok := c.extended[name]; ok {
		return v
	}
	v := isDRAExtendedResourceName(name)
	// The cache lives as long as the pooled podCalc; bound it so that
	// pods with ever new names cannot grow it without limit.
	if c.extended == nil || len(c.extended) >= maxExtendedCache {
		c.extended = make(map[corev1.ResourceName]bool)
	}
	c.extended[name] = v
	return v
}

// maxExtendedCache bounds podCalc.extended.
const maxExtendedCache = 256

// deviceClassPrefix names the implicit extended resource of a DRA device
// class (resource.k8s.io's ResourceDeviceClassPrefix).
const deviceClassPrefix = "deviceclass.resource.kubernetes.io/"

// isDRAExtendedResourceName reports whether a container request of name is
// charged as requests.<name>: an extended resource (a domain-qualified name
// outside *kubernetes.io/ that stays a qualified name with "requests."
// prepended) or a device class's implicit extended resource.
func isDRAExtendedResourceName(name corev1.ResourceName) bool {
	if strings.HasPrefix(string(name), deviceClassPrefix) {
		return true
	}
	if isNativeResource(name) || strings.HasPrefix(string(name), corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix+string(name))) == 0
}

// isNativeResource reports whether name is in the kubernetes.io namespace:
// unqualified, or containing "kubernetes.io/" anywhere (Kubernetes checks
// with Contains, not HasPrefix).
func isNativeResource(name corev1.ResourceName) bool {
	return !strings.Contains(string(name), "/") || strings.Contains(string(name), corev1.ResourceDefaultNamespacePrefix)
}
