package evaluator

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/quotakit/quotakit/generic"
)

// deviceClassMap is what the claim evaluator knows of DeviceClasses: which
// class backs each extended resource name, and which explicit extended
// resource name each class declares. Kubernetes keeps the same two maps in
// an event-driven cache (ExtendedResourceCache of
// k8s.io/dynamic-resource-allocation); here they are computed from a list
// of the current classes whenever a method needs them, so that the
// evaluator holds no state of its own and its answer depends on the
// classes that exist, not on the order their events arrived in.
//
// A nil *deviceClassMap knows no class, as Kubernetes' cache does before
// its DeviceClass informer has synced.
type deviceClassMap struct {
	// byName maps an extended resource name to the class that backs it:
	// every class's implicit deviceclass.resource.kubernetes.io/<class>,
	// and each explicit spec.extendedResourceName to the class that wins
	// the clash rule (see newDeviceClassMap).
	byName map[corev1.ResourceName]*resourcev1.DeviceClass
	// explicit maps a class name to its own non-empty
	// spec.extendedResourceName, whether or not it won that name.
	explicit map[string]string
}

// newDeviceClassMap indexes classes. Objects that are not
// *resourcev1.DeviceClass, and nil classes, are errors: a mapping computed
// from part of the classes would charge claims wrongly without anyone
// knowing.
//
// Two classes may declare the same spec.extendedResourceName (validation
// does not forbid it; it happens while migrating from one class to
// another). The name then belongs to the class with the newer
// creationTimestamp, and on equal timestamps to the lexically smaller
// class name, which is the rule Kubernetes' cache applies. Both classes
// still declare the name: a claim on devices of either is charged under
// it, as in Kubernetes.
func newDeviceClassMap(objs []runtime.Object) (*deviceClassMap, error) {
	m := &deviceClassMap{
		byName:   make(map[corev1.ResourceName]*resourcev1.DeviceClass, len(objs)),
		explicit: make(map[string]string),
	}
	for _, obj := range objs {
		class, ok := obj.(*resourcev1.DeviceClass)
		if !ok || class == nil {
			return nil, fmt.Errorf("evaluator: device classes: expected *v1.DeviceClass, got %T", obj)
		}
		m.byName[corev1.ResourceName(resourcev1.ResourceDeviceClassPrefix+class.Name)] = class
		// An empty name is not a valid extended resource name; Kubernetes
		// records it, but it can never be looked up, so it is skipped.
		if class.Spec.ExtendedResourceName == nil || *class.Spec.ExtendedResourceName == "" {
			continue
		}
		ext := *class.Spec.ExtendedResourceName
		m.explicit[class.Name] = ext
		if owner, ok := m.byName[corev1.ResourceName(ext)]; !ok || winsExtendedName(class, owner) {
			m.byName[corev1.ResourceName(ext)] = class
		}
	}
	return m, nil
}

// winsExtendedName reports whether class a takes an explicit extended
// resource name from class b: a is newer, or as old with a smaller name.
func winsExtendedName(a, b *resourcev1.DeviceClass) bool {
	switch a.CreationTimestamp.Compare(b.CreationTimestamp.Time) {
	case 1:
		return true
	case 0:
		return a.Name < b.Name
	}
	return false
}

// classFor returns the class backing the extended resource name, or nil.
func (m *deviceClassMap) classFor(name corev1.ResourceName) *resourcev1.DeviceClass {
	if m == nil {
		return nil
	}
	return m.byName[name]
}

// extendedName returns the explicit extended resource name class
// declares, or "".
func (m *deviceClassMap) extendedName(class string) string {
	if m == nil {
		return ""
	}
	return m.explicit[class]
}

// deviceClassLister lists DeviceClasses for the claim evaluator. A nil
// list function means no DeviceClass is known (an evaluator built without
// listers); the map is then nil.
type deviceClassLister generic.ListFuncByNamespace

// load lists the classes, cluster-scoped and so under namespace "", and
// indexes them.
func (l deviceClassLister) load() (*deviceClassMap, error) {
	if l == nil {
		return nil, nil
	}
	objs, err := l("")
	if err != nil {
		return nil, fmt.Errorf("evaluator: listing device classes: %w", err)
	}
	return newDeviceClassMap(objs)
}

// needsDeviceClasses reports whether matching name may depend on the
// DeviceClasses: it has the shape of an extended resource quota name
// (requests.<name> of a non-native name, or of a class's implicit name).
// Quotas on cpu, memory and the like never make the evaluator list
// DeviceClasses.
func needsDeviceClasses(name corev1.ResourceName) bool {
	return isExtendedResourceNameForQuota(name)
}
