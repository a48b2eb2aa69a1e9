package cachetest

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

// selector decides which objects a list or a watch sees: the namespace of
// the request and its label and field selectors.
type selector struct {
	namespace string // "" for all namespaces
	label     labels.Selector
	field     fields.Selector
}

// supportedField reports whether f is a field label every resource
// supports in the apiserver. Resource-specific ones (a pod's spec.nodeName)
// are not modelled and are rejected like unknown ones.
func supportedField(f string) bool {
	return f == "metadata.name" || f == "metadata.namespace"
}

// newSelector parses the selectors of opts. Malformed selectors and
// unsupported field labels are 400 BadRequest, as in the apiserver.
func newSelector(namespace string, opts metav1.ListOptions) (selector, error) {
	sel := selector{namespace: namespace, label: labels.Everything(), field: fields.Everything()}
	if opts.LabelSelector != "" {
		l, err := labels.Parse(opts.LabelSelector)
		if err != nil {
			return sel, badRequest("invalid label selector %q: %v", opts.LabelSelector, err)
		}
		sel.label = l
	}
	if opts.FieldSelector != "" {
		f, err := fields.ParseSelector(opts.FieldSelector)
		if err != nil {
			return sel, badRequest("invalid field selector %q: %v", opts.FieldSelector, err)
		}
		for _, req := range f.Requirements() {
			if !supportedField(req.Field) {
				return sel, badRequest("field label not supported: %s", req.Field)
			}
		}
		sel.field = f
	}
	return sel, nil
}

// matches reports whether obj is in the selection.
func (s selector) matches(obj runtime.Object) bool {
	m := metaOf(obj)
	if s.namespace != "" && m.GetNamespace() != s.namespace {
		return false
	}
	if !s.label.Empty() && !s.label.Matches(labels.Set(m.GetLabels())) {
		return false
	}
	if !s.field.Empty() && !s.field.Matches(fields.Set{"metadata.name": m.GetName(), "metadata.namespace": m.GetNamespace()}) {
		return false
	}
	return true
}

// filtered reports whether the selectors, not counting the namespace,
// restrict the selection; the apiserver omits remainingItemCount then.
func (s selector) filtered() bool {
	return !s.label.Empty() || !s.field.Empty()
}
