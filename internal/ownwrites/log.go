// Package ownwrites remembers the status writes a controller made that
// its informer may not have delivered yet, for both kinds of quota: the
// own-write log. See [Log].
package ownwrites

import (
	"slices"
	"sync"
	"time"

	"github.com/quotakit/quotakit/internal/isnil"
)

// MaxWrites bounds the writes remembered for one quota while the informer
// lags.
const MaxWrites = 16

// Object is a quota as cached or as written: what the log needs of it is
// its resourceVersion.
type Object interface {
	GetResourceVersion() string
}

// Log remembers, per quota (by key K), the statuses the controller wrote
// that its informer may not have delivered yet, when it last wrote each
// quota, and which quotas' last write conflicted. It is safe for
// concurrent use.
type Log[K comparable] struct {
	mu sync.Mutex
	// writes holds, per quota, the statuses the controller wrote that
	// the informer has not delivered yet.
	// guarded by mu
	writes map[K]*chain
	// conflicted holds the quotas whose last status write failed with a
	// conflict: the cached quota was stale.
	// guarded by mu
	conflicted map[K]struct{}
	// at holds, per quota, when the controller last wrote its status.
	// guarded by mu
	at map[K]time.Time
}

// chain is the controller's consecutive status writes of one quota: the
// resourceVersion the first was written over and those each produced,
// and the last version written.
type chain struct {
	rvs  []string
	last Object
}

// New returns an empty log.
func New[K comparable]() *Log[K] {
	return &Log[K]{writes: map[K]*chain{}, conflicted: map[K]struct{}{}, at: map[K]time.Time{}}
}

// Freshest returns the newer of cached, the informer's version of the
// quota with key, and the controller's own last write of it. While the
// informer shows a version the controller wrote over, or an earlier write
// of its own, the last write is newer. Any other version is newer than
// every write remembered (another writer would have made the controller's
// next write conflict), and so is the last write itself once delivered:
// then the writes are forgotten.
func (l *Log[K]) Freshest(key K, cached Object) Object {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.writes[key]
	if w == nil {
		return cached
	}
	if i := slices.Index(w.rvs, cached.GetResourceVersion()); i >= 0 && i < len(w.rvs)-1 {
		return w.last
	}
	delete(l.writes, key)
	return cached
}

// Own reports whether cached is a version of the quota with key that the
// controller wrote and the informer has not delivered before.
func (l *Log[K]) Own(key K, cached Object) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.writes[key]
	return w != nil && slices.Index(w.rvs, cached.GetResourceVersion()) > 0
}

// Wrote remembers that the status of the quota with key was written at
// now over version from, producing written (nil when the client did not
// return it).
func (l *Log[K]) Wrote(key K, from string, written Object, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.at[key] = now
	if from == "" || isnil.Value(written) || written.GetResourceVersion() == "" {
		// Without resourceVersions (some fake clients) versions cannot be
		// told apart: trust the cache.
		delete(l.writes, key)
		return
	}
	w := l.writes[key]
	if w == nil || w.rvs[len(w.rvs)-1] != from {
		w = &chain{rvs: []string{from}}
		l.writes[key] = w
	}
	w.rvs = append(w.rvs, written.GetResourceVersion())
	if len(w.rvs) > MaxWrites {
		w.rvs = slices.Delete(w.rvs, 0, len(w.rvs)-MaxWrites)
	}
	w.last = written
}

// LastWrite returns when the status of the quota with key was last
// written; zero if never.
func (l *Log[K]) LastWrite(key K) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.at[key]
}

// Conflict remembers that a write of the quota with key conflicted: what
// the controller wrote before is no longer the stored status, and the
// quota's next version is to be synced at once.
func (l *Log[K]) Conflict(key K) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.writes, key)
	l.conflicted[key] = struct{}{}
}

// TakeConflict reports whether the last write of the quota with key
// conflicted, and forgets it.
func (l *Log[K]) TakeConflict(key K) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.conflicted[key]
	delete(l.conflicted, key)
	return ok
}

// Forget forgets everything about the quota with key, which was deleted.
func (l *Log[K]) Forget(key K) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.writes, key)
	delete(l.conflicted, key)
	delete(l.at, key)
}
