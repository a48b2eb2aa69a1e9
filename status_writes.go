package quotakit

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/quotakit/quotakit/clusterquota"
	"github.com/quotakit/quotakit/quota"
)

// writeInterval is the least time between two status writes of one quota
// that only release usage (lower status.used, limits unchanged). Each
// write of the controller's makes the write that admission is about to
// make over the version it read conflict, and kube-apiserver's plugin,
// which reads again from its own cache, may answer a creation 409 after
// its retries; during a burst of deletions, the releases of 100ms go out
// in one write. A write that raises a used value or changes the limits
// goes out at once, as does the first release after a quiet
// interval: a deletion's room reaches admission at most 100ms later.
const writeInterval = 100 * time.Millisecond

// putOff reports whether the status write of the quota ref, which
// releases only usage when releases, is put off because the last write
// was less than [writeInterval] ago; then the quota is synced again once
// the interval has passed, with what has changed meanwhile.
func (c *Controller) putOff(ref quotaRef, now time.Time, releases bool) bool {
	if !releases {
		return false
	}
	last := c.writes.LastWrite(ref)
	if last.IsZero() || now.Sub(last) >= writeInterval {
		return false
	}
	at := last.Add(writeInterval)
	c.changes.AddAfter(change{quota: ref, at: at.UnixNano()}, at.Sub(now))
	c.putOffs.Add(1)
	return true
}

// onlyReleases reports whether status next differs from cur only by
// lower used values.
func onlyReleases(cur, next corev1.ResourceQuotaStatus) bool {
	if !quota.Equals(cur.Hard, next.Hard) || cur.Used == nil || len(next.Used) != len(cur.Used) {
		return false
	}
	for name, q := range next.Used {
		if old, ok := cur.Used[name]; !ok || q.Cmp(old) > 0 {
			return false
		}
	}
	return true
}

// conflictError is a status write that conflicted: another writer
// (admission charging the quota) wrote since the version the controller
// read. It is expected under load, retried once the informer delivers the
// newer version, counted ([Controller.StatusConflicts]) and logged below
// error level.
type conflictError struct{ err error }

func (e *conflictError) Error() string { return e.err.Error() }
func (e *conflictError) Unwrap() error { return e.err }

// expected returns err as a *conflictError when it reports a conflict,
// so that the worker logs it below error level, and err otherwise.
func expected(err error) error {
	if err != nil && apierrors.IsConflict(err) {
		return &conflictError{err}
	}
	return err
}

// clusterOnlyReleases reports whether the status of ClusterQuota next
// differs from cur's only by lower used values: of the total, and of the
// namespaces, which may have left.
func clusterOnlyReleases(cur, next *clusterquota.ClusterQuota) bool {
	if !onlyReleases(cur.Status.Total, next.Status.Total) {
		return false
	}
	a, b := cur.Status.DeepCopy(), next.Status.DeepCopy()
	a.Total, b.Total, a.Namespaces, b.Namespaces = corev1.ResourceQuotaStatus{}, corev1.ResourceQuotaStatus{}, nil, nil
	return equality.Semantic.DeepEqual(a, b)
}
