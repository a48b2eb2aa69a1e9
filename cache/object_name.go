package cache

import (
	"k8s.io/apimachinery/pkg/types"
)

// ObjectName is the namespace and name of an object: the structured form of
// a [MetaNamespaceKeyFunc] key. The zero value names nothing.
type ObjectName struct {
	// Namespace is "" for a cluster-scoped object.
	Namespace string
	// Name is the object's name.
	Name string
}

// NewObjectName returns the ObjectName of namespace and name. Use an empty
// namespace for cluster-scoped objects.
func NewObjectName(namespace, name string) ObjectName {
	return ObjectName{Namespace: namespace, Name: name}
}

// ObjectToName returns the ObjectName of an API object. Objects without
// metadata yield an error wrapping [ErrNoMeta].
func ObjectToName(obj any) (ObjectName, error) {
	m, err := metaOf(obj)
	if err != nil {
		return ObjectName{}, err
	}
	return ObjectName{Namespace: m.GetNamespace(), Name: m.GetName()}, nil
}

// DeletionHandlingObjectToName is [ObjectToName] that also accepts a
// [DeletedFinalStateUnknown] and parses the key it carries.
func DeletionHandlingObjectToName(obj any) (ObjectName, error) {
	switch d := obj.(type) {
	case DeletedFinalStateUnknown:
		return ParseObjectName(d.Key)
	case *DeletedFinalStateUnknown:
		if d != nil {
			return ParseObjectName(d.Key)
		}
	}
	return ObjectToName(obj)
}

// ParseObjectName parses a key in the format of [ObjectName.String].
func ParseObjectName(str string) (ObjectName, error) {
	ns, name, err := SplitMetaNamespaceKey(str)
	if err != nil {
		return ObjectName{}, err
	}
	return ObjectName{Namespace: ns, Name: name}, nil
}

// NamespacedNameAsObjectName converts a types.NamespacedName.
func NamespacedNameAsObjectName(nn types.NamespacedName) ObjectName {
	return ObjectName{Namespace: nn.Namespace, Name: nn.Name}
}

// String returns the storage key: "namespace/name", or "name" when the
// namespace is empty. Unlike types.NamespacedName.String, a cluster-scoped
// name has no leading "/".
func (n ObjectName) String() string {
	return joinKey(n.Namespace, n.Name)
}

// Parts returns the namespace and name.
func (n ObjectName) Parts() (namespace, name string) {
	return n.Namespace, n.Name
}

// AsNamespacedName converts n to a types.NamespacedName.
func (n ObjectName) AsNamespacedName() types.NamespacedName {
	return types.NamespacedName{Namespace: n.Namespace, Name: n.Name}
}
