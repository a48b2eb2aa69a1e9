package admission

import "sync/atomic"

// Stats are an [Evaluator]'s counters since it was built, for metrics:
// with several replicas, or kube-apiserver's plugin and the controller
// writing the same quotas, conflicts are expected; retries that end in
// a denial are not.
type Stats struct {
	// Writes counts the status writes made: charges and the releases of
	// charges whose requests were not admitted.
	Writes int64
	// Conflicts counts the status writes that failed with a conflict:
	// another writer changed the quota first.
	Conflicts int64
	// Retries counts the times a batch re-read its quotas after a failed
	// write and checked its requests again.
	Retries int64
	// Exhausted counts the requests denied with a write error because
	// the writes kept failing after every retry.
	Exhausted int64
	// Released counts the writes that took back, from one quota, the
	// charges of requests that were not admitted (denied in a later
	// round, or given up by their caller); Unreleased the quotas whose
	// charges could not be taken back, which the quota controller
	// releases later.
	Released, Unreleased int64
}

// stats are the atomic counters behind [Stats].
type stats struct {
	writes, conflicts, retries, exhausted, released, unreleased atomic.Int64
}

// Stats returns the Evaluator's counters.
func (e *Evaluator) Stats() Stats {
	return Stats{
		Writes:     e.stats.writes.Load(),
		Conflicts:  e.stats.conflicts.Load(),
		Retries:    e.stats.retries.Load(),
		Exhausted:  e.stats.exhausted.Load(),
		Released:   e.stats.released.Load(),
		Unreleased: e.stats.unreleased.Load(),
	}
}
