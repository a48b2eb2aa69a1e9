package clusterquota

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Selects reports whether cq applies to ns: whether ns matches every part
// of spec.selector that is set. The label part is a label selector over
// ns's labels; the annotation part matches when ns has every annotation
// it names with exactly the value it gives (an annotation required to be
// "" must be present with the empty value).
//
// A selector that restricts nothing selects nothing: with neither part
// set, or only parts that are set but empty (a label selector without
// requirements, an empty annotation map), Selects returns false. This is
// stricter than a bare label selector, where empty means everything, and
// matches OpenShift, whose validation rejects such a quota; [Validate]
// rejects it too. A cluster quota can therefore never apply to every
// namespace by accident.
//
// A label selector that cannot be converted (an unknown operator, a value
// that is no label value) is an error, never a panic and never a silent
// "no". Such a quota is invalid, and [ValidateSpec] says so: the CRD
// refuses it, and one stored all the same (under a CRD from before that
// rule, or written to etcd directly) is skipped by quotakit's admission
// and controller, loudly (an error log, a metric, and the condition
// [ConditionValid] False with reason [ReasonInvalidSpec] on the quota),
// and limits nothing while it is invalid. That is the lesser harm: the
// error would otherwise fail every request in every namespace the
// caller checks, not only those of the tenant the quota was meant for.
// Callers should therefore validate a quota with [ValidateSpec] before
// they ask it what it selects, and treat an error here as a reason to
// skip the quota, never to fail requests. A nil cq or ns is an error too.
func (cq *ClusterQuota) Selects(ns *corev1.Namespace) (bool, error) {
	if cq == nil {
		return false, errors.New("clusterquota: Selects: nil ClusterQuota")
	}
	if ns == nil {
		return false, fmt.Errorf("clusterquota: ClusterQuota %q: Selects: nil Namespace", cq.Name)
	}
	sel := &cq.Spec.Selector
	restricted := false
	if ls := sel.LabelSelector; ls != nil && !isEmptyLabelSelector(ls) {
		restricted = true
		s, err := metav1.LabelSelectorAsSelector(ls)
		if err != nil {
			return false, fmt.Errorf("clusterquota: ClusterQuota %q: spec.selector.labels: %w", cq.Name, err)
		}
		if !s.Matches(labels.Set(ns.Labels)) {
			return false, nil
		}
	}
	if len(sel.AnnotationSelector) > 0 {
		restricted = true
		for k, want := range sel.AnnotationSelector {
			if got, ok := ns.Annotations[k]; !ok || got != want {
				return false, nil
			}
		}
	}
	return restricted, nil
}

// isEmptyLabelSelector reports whether ls has no requirement, so that as a
// label selector it would select everything.
func isEmptyLabelSelector(ls *metav1.LabelSelector) bool {
	return len(ls.MatchLabels) == 0 && len(ls.MatchExpressions) == 0
}

// matcher is a ClusterQuota's selector compiled once, for an [Index]: it
// answers what [ClusterQuota.Selects] answers, without building the label
// selector again for each namespace.
type matcher struct {
	// none is set for a selector that restricts nothing: it selects
	// nothing, as Selects says.
	none        bool
	labels      labels.Selector // nil: no label part
	annotations map[string]string
}

// compile returns the matcher of cq's selector, or the error Selects
// would return for it.
func compile(cq *ClusterQuota) (matcher, error) {
	sel := &cq.Spec.Selector
	var m matcher
	if ls := sel.LabelSelector; ls != nil && !isEmptyLabelSelector(ls) {
		s, err := metav1.LabelSelectorAsSelector(ls)
		if err != nil {
			return matcher{}, fmt.Errorf("clusterquota: ClusterQuota %q: spec.selector.labels: %w", cq.Name, err)
		}
		m.labels = s
	}
	if len(sel.AnnotationSelector) > 0 {
		m.annotations = sel.AnnotationSelector
	}
	m.none = m.labels == nil && m.annotations == nil
	return m, nil
}

// matches reports whether a namespace with these labels and annotations
// is selected.
func (m *matcher) matches(nsLabels, nsAnnotations map[string]string) bool {
	if m.none {
		return false
	}
	if m.labels != nil && !m.labels.Matches(labels.Set(nsLabels)) {
		return false
	}
	for k, want := range m.annotations {
		if got, ok := nsAnnotations[k]; !ok || got != want {
			return false
		}
	}
	return true
}

// anchorKey names a label (or, with annotation set, an annotation) of
// namespaces.
type anchorKey struct {
	annotation bool
	name       string
}

// anchorOf returns a label or annotation that every namespace cq selects
// carries with one of values: the [Index] looks a namespace's quotas up
// by it, and checks only those. A selector that requires no value of any
// key (only NotIn, Exists, DoesNotExist) has none: ok is false, and the
// quota is checked against every namespace. The choice prefers an exact
// label, then the In requirement with the fewest values, then an exact
// annotation, the first key in order among equals, so that a quota's
// anchor does not depend on map order.
func anchorOf(sel *ClusterQuotaSelector) (key anchorKey, values []string, ok bool) {
	if ls := sel.LabelSelector; ls != nil {
		if len(ls.MatchLabels) > 0 {
			k := slices.Min(slices.Collect(maps.Keys(ls.MatchLabels)))
			return anchorKey{name: k}, []string{ls.MatchLabels[k]}, true
		}
		for _, req := range ls.MatchExpressions {
			if req.Operator != metav1.LabelSelectorOpIn || len(req.Values) == 0 {
				continue
			}
			if !ok || len(req.Values) < len(values) || (len(req.Values) == len(values) && req.Key < key.name) {
				key, values, ok = anchorKey{name: req.Key}, slices.Compact(slices.Sorted(slices.Values(req.Values))), true
			}
		}
		if ok {
			return key, values, true
		}
	}
	if len(sel.AnnotationSelector) > 0 {
		k := slices.Min(slices.Collect(maps.Keys(sel.AnnotationSelector)))
		return anchorKey{annotation: true, name: k}, []string{sel.AnnotationSelector[k]}, true
	}
	return anchorKey{}, nil, false
}
