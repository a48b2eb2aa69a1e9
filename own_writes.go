package quotakit

import (
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// maxOwnWrites bounds the writes remembered for one quota while the
// informer lags.
const maxOwnWrites = 16

// writeLog remembers what the controller wrote of each quota's status
// that its ResourceQuota informer may not have delivered yet, when it last
// wrote each, and which quotas' last write conflicted. It is safe for
// concurrent use.
type writeLog struct {
	mu sync.Mutex
	// writes holds, per quota key, the statuses the controller wrote
	// that the informer has not delivered yet.
	// guarded by mu
	writes map[string]*ownWrites
	// conflicted holds the keys of quotas whose last status write failed
	// with a conflict: the cached quota was stale.
	// guarded by mu
	conflicted map[string]struct{}
	// at holds, per quota key, when the controller last wrote its status.
	// guarded by mu
	at map[string]time.Time
}

// ownWrites are the controller's consecutive status writes of one quota:
// the resourceVersion each was written over and the one it produced, and
// the last version written.
type ownWrites struct {
	rvs  []string
	last *corev1.ResourceQuota
}

func newWriteLog() *writeLog {
	return &writeLog{writes: map[string]*ownWrites{}, conflicted: map[string]struct{}{}, at: map[string]time.Time{}}
}

// freshest returns the newer of rq, the cached quota with key, and the
// controller's own last write of it. While the informer shows a version
// the controller wrote over, or an earlier write of its own, the last
// write is newer. Any other version is newer than every write remembered
// (another writer would have made the controller's next write conflict),
// and so is the last write itself once delivered: then the writes are
// forgotten.
func (l *writeLog) freshest(key string, rq *corev1.ResourceQuota) *corev1.ResourceQuota {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.writes[key]
	if w == nil {
		return rq
	}
	if i := slices.Index(w.rvs, rq.ResourceVersion); i >= 0 && i < len(w.rvs)-1 {
		return w.last
	}
	delete(l.writes, key)
	return rq
}

// own reports whether rq is a version of the quota with key that the
// controller wrote and the informer has not delivered before.
func (l *writeLog) own(key string, rq *corev1.ResourceQuota) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.writes[key]
	return w != nil && slices.Index(w.rvs, rq.ResourceVersion) > 0
}

// wrote remembers that the status of the quota with key was written at
// now over version from, producing written (nil when the client did not
// return it).
func (l *writeLog) wrote(key, from string, written *corev1.ResourceQuota, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.at[key] = now
	if from == "" || written == nil || written.ResourceVersion == "" {
		// Without resourceVersions (some fake clients) versions cannot be
		// told apart: trust the cache.
		delete(l.writes, key)
		return
	}
	w := l.writes[key]
	if w == nil || w.rvs[len(w.rvs)-1] != from {
		w = &ownWrites{rvs: []string{from}}
		l.writes[key] = w
	}
	w.rvs = append(w.rvs, written.ResourceVersion)
	if len(w.rvs) > maxOwnWrites {
		w.rvs = slices.Delete(w.rvs, 0, len(w.rvs)-maxOwnWrites)
	}
	w.last = written
}

// stamp remembers that the status of the quota with key was written at
// now, for a kind of quota whose writes are not logged here (a
// ClusterQuota).
func (l *writeLog) stamp(key string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.at[key] = now
}

// lastWrite returns when the status of the quota with key was last
// written; zero if never.
func (l *writeLog) lastWrite(key string) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.at[key]
}

// conflict remembers that a write of the quota with key conflicted: what
// the controller wrote before is no longer the stored status, and the
// quota's next version is to be synced at once.
func (l *writeLog) conflict(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.writes, key)
	l.conflicted[key] = struct{}{}
}

// takeConflict reports whether the last write of the quota with key
// conflicted, and forgets it.
func (l *writeLog) takeConflict(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.conflicted[key]
	delete(l.conflicted, key)
	return ok
}

// forget forgets everything about the quota with key, which was deleted.
func (l *writeLog) forget(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.writes, key)
	delete(l.conflicted, key)
	delete(l.at, key)
}
