package cachetest

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
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

// fieldSet returns the field labels of obj that field selectors can use:
// metadata.name and metadata.namespace for every resource, and the
// apiserver's most used resource-specific ones for pods, secrets, nodes and
// namespaces.
func fieldSet(obj runtime.Object) fields.Set {
	m := metaOf(obj)
	set := fields.Set{"metadata.name": m.GetName(), "metadata.namespace": m.GetNamespace()}
	switch o := obj.(type) {
	case *corev1.Pod:
		set["spec.nodeName"] = o.Spec.NodeName
		set["spec.restartPolicy"] = string(o.Spec.RestartPolicy)
		set["spec.schedulerName"] = o.Spec.SchedulerName
		set["spec.serviceAccountName"] = o.Spec.ServiceAccountName
		set["spec.hostNetwork"] = strconv.FormatBool(o.Spec.HostNetwork)
		set["status.phase"] = string(o.Status.Phase)
		set["status.podIP"] = o.Status.PodIP
		set["status.nominatedNodeName"] = o.Status.NominatedNodeName
	case *corev1.Secret:
		set["type"] = string(o.Type)
	case *corev1.Node:
		set["spec.unschedulable"] = strconv.FormatBool(o.Spec.Unschedulable)
	case *corev1.Namespace:
		set["status.phase"] = string(o.Status.Phase)
	}
	return set
}

// newSelector parses the selectors of opts for resource r. Malformed
// selectors and field labels r does not support are 400 BadRequest, as in
// the apiserver.
func newSelector(r *resource, namespace string, opts metav1.ListOptions) (selector, error) {
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
		supported := fieldSet(r.newObject(0))
		for _, req := range f.Requirements() {
			if !supported.Has(req.Field) {
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
	if !s.field.Empty() && !s.field.Matches(fieldSet(obj)) {
		return false
	}
	return true
}

// filtered reports whether the selectors, not counting the namespace,
// restrict the selection; the apiserver omits remainingItemCount then.
func (s selector) filtered() bool {
	return !s.label.Empty() || !s.field.Empty()
}
