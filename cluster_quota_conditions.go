package quotakit

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/quotakit/quotakit/clusterquota"
)

// What the controller says of each ClusterQuota besides its usage: the
// conditions of its status (see [clusterquota.ConditionValid] and
// [clusterquota.ConditionNamespacesEnforced]), a log line at error level
// when one turns bad, and the counts behind [Controller.InvalidClusterQuotas]
// and [Controller.UnenforcedClusterQuotas].

// namesInMessage is how many namespaces a NamespacesEnforced message
// names before it only counts them.
const namesInMessage = 5

// setValidity sets q's Valid condition from err, [clusterquota.ValidateSpec]'s
// verdict on it, and its observedGeneration, and keeps the count of
// invalid quotas. A quota turning invalid is logged at error level.
func (c *Controller) setValidity(ctx context.Context, q *clusterquota.ClusterQuota, err error, now time.Time) {
	cond := metav1.Condition{
		Type:               clusterquota.ConditionValid,
		Status:             metav1.ConditionTrue,
		ObservedGeneration: q.Generation,
		Reason:             clusterquota.ReasonValid,
		Message:            "The spec is valid.",
		LastTransitionTime: metav1.NewTime(now),
	}
	if err != nil {
		cond.Status, cond.Reason = metav1.ConditionFalse, clusterquota.ReasonInvalidSpec
		cond.Message = "The quota limits nothing until its spec is fixed: " + err.Error()
	}
	c.setCondition(ctx, q, cond)
	c.problems.mark(&c.problems.invalid, q.Name, err != nil)
}

// setEnforcement sets q's NamespacesEnforced condition from the
// namespaces it selects that Options.EnforcedNamespaces does not match
// (Unknown without that option), and keeps the count of such quotas.
func (c *Controller) setEnforcement(ctx context.Context, q *clusterquota.ClusterQuota, unenforced []string, now time.Time) {
	cond := metav1.Condition{
		Type:               clusterquota.ConditionNamespacesEnforced,
		Status:             metav1.ConditionTrue,
		ObservedGeneration: q.Generation,
		Reason:             clusterquota.ReasonAllEnforced,
		Message:            "Admission checks every namespace the quota selects.",
		LastTransitionTime: metav1.NewTime(now),
	}
	switch {
	case c.opts.EnforcedNamespaces == nil:
		cond.Status, cond.Reason = metav1.ConditionUnknown, clusterquota.ReasonEnforcementUnknown
		cond.Message = "The controller was not told which namespaces admission enforces (Options.EnforcedNamespaces)."
	case len(unenforced) > 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, clusterquota.ReasonNamespacesNotEnforced
		named := unenforced[:min(len(unenforced), namesInMessage)]
		cond.Message = fmt.Sprintf("%d selected namespaces are counted in the total but their requests are never checked, so the quota is not the limit it seems: %s",
			len(unenforced), strings.Join(named, ", "))
		if len(unenforced) > len(named) {
			cond.Message += ", …"
		}
	}
	c.setCondition(ctx, q, cond)
	c.problems.mark(&c.problems.unenforced, q.Name, len(unenforced) > 0 && c.opts.EnforcedNamespaces != nil)
}

// setCondition sets cond in q's status (keeping its transition time when
// its status does not change) and observedGeneration, and logs at error
// level a condition that turns False.
func (c *Controller) setCondition(ctx context.Context, q *clusterquota.ClusterQuota, cond metav1.Condition) {
	// A copy: SetStatusCondition changes the condition found in place.
	var old *metav1.Condition
	if found := meta.FindStatusCondition(q.Status.Conditions, cond.Type); found != nil {
		prev := *found
		old = &prev
	}
	meta.SetStatusCondition(&q.Status.Conditions, cond)
	q.Status.ObservedGeneration = q.Generation
	turned := old == nil || old.Status != cond.Status || old.Reason != cond.Reason
	if !turned {
		return
	}
	if cond.Status == metav1.ConditionFalse {
		logr.FromContextOrDiscard(ctx).Error(nil, "cluster quota "+cond.Reason, "clusterQuota", q.Name, "condition", cond.Type, "message", cond.Message)
	}
	c.recordTransition(q, old, cond)
}

// recordTransition records an Event on q, through Options.Events, for
// a condition that turned: a Warning when it turns False, a Normal one
// when it turns True again after it was not. A condition that is True
// from the quota's first sync makes none, so that a controller's start
// does not make an Event per quota.
func (c *Controller) recordTransition(q *clusterquota.ClusterQuota, old *metav1.Condition, cond metav1.Condition) {
	if c.opts.Events == nil {
		return
	}
	kind := ""
	switch {
	case cond.Status == metav1.ConditionFalse:
		kind = corev1.EventTypeWarning
	case cond.Status == metav1.ConditionTrue && old != nil && old.Status != metav1.ConditionTrue:
		kind = corev1.EventTypeNormal
	default:
		return
	}
	// The kind set, so that a recorder whose scheme does not know
	// ClusterQuotas (client-go's) can still refer to it.
	ref := &clusterquota.ClusterQuota{
		TypeMeta:   metav1.TypeMeta{APIVersion: clusterquota.SchemeGroupVersion.String(), Kind: "ClusterQuota"},
		ObjectMeta: *q.ObjectMeta.DeepCopy(),
	}
	c.opts.Events.Eventf(ref, kind, cond.Reason, "%s", cond.Message)
}

// forgetProblems drops what is said of a deleted quota.
func (c *Controller) forgetProblems(name string) {
	c.problems.mark(&c.problems.invalid, name, false)
	c.problems.mark(&c.problems.unenforced, name, false)
}

// enforced reports whether admission enforces the namespace with these
// labels, as far as Options.EnforcedNamespaces tells.
func (c *Controller) enforced(nsLabels map[string]string) bool {
	return c.opts.EnforcedNamespaces == nil || c.opts.EnforcedNamespaces.Matches(labels.Set(nsLabels))
}

// invalid computes the next status of q, whose spec is invalid: its
// conditions only. Its total is not recounted, the charge book is not
// told, and its namespaces' ledger accounts are dropped; admission skips
// it meanwhile. The write is remembered as any status write: a sync
// before the informer shows it must see these conditions, not judge the
// quota anew (and record its Event again).
func (c *Controller) invalid(ctx context.Context, q *clusterquota.ClusterQuota, verr error) *computation {
	updated := q.DeepCopy()
	c.setValidity(ctx, updated, verr, time.Now())
	c.forgetClusterQuota(q.Name, []string{})
	return &computation{
		uncharged: true,
		next: func(corev1.ResourceList) (quotaObject, bool, bool) {
			return updated, !equality.Semantic.DeepEqual(updated.Status, q.Status), false
		},
	}
}

// InvalidClusterQuotas returns how many ClusterQuotas have an invalid
// spec: each limits nothing, is not recounted, and has its Valid
// condition False, until it is fixed.
func (c *Controller) InvalidClusterQuotas() int { return c.problems.count(&c.problems.invalid) }

// UnenforcedClusterQuotas returns how many ClusterQuotas select
// namespaces that Options.EnforcedNamespaces does not match: their totals
// count usage that admission never checks. Each has its
// NamespacesEnforced condition False. Always 0 without that option.
func (c *Controller) UnenforcedClusterQuotas() int { return c.problems.count(&c.problems.unenforced) }

// clusterProblems holds the names of the cluster quotas in each bad
// state. The zero value is ready; it is safe for concurrent use.
type clusterProblems struct {
	mu sync.Mutex
	// guarded by mu
	invalid, unenforced map[string]struct{}
}

// mark adds name to the set at *set when on, and removes it otherwise.
func (p *clusterProblems) mark(set *map[string]struct{}, name string, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !on {
		delete(*set, name)
		return
	}
	if *set == nil {
		*set = map[string]struct{}{}
	}
	(*set)[name] = struct{}{}
}

func (p *clusterProblems) count(set *map[string]struct{}) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(*set)
}
