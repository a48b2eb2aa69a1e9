package cache

import "errors"

// DeltaType is the kind of change a [Delta] records.
type DeltaType string

// The change types a [DeltaFIFO] produces.
const (
	// Added: the object was created, as seen by a watch.
	Added DeltaType = "Added"
	// Updated: the object was modified, as seen by a watch.
	Updated DeltaType = "Updated"
	// Deleted: the object was deleted. Object is the final state from the
	// watch, or a [DeletedFinalStateUnknown] when a relist found it gone.
	Deleted DeltaType = "Deleted"
	// Replaced: the object was part of a relist. Produced instead of Sync
	// for relists when [DeltaFIFOOptions.EmitDeltaTypeReplaced] is set, so
	// that consumers can tell a relist from a periodic resync
	// (kubernetes#86015).
	Replaced DeltaType = "Replaced"
	// Sync: the object is re-delivered unchanged, by a periodic resync or
	// (without EmitDeltaTypeReplaced) by a relist.
	Sync DeltaType = "Sync"
)

// Delta is one change to one object.
type Delta struct {
	// Type is what happened to the object.
	Type DeltaType
	// Object is the object after the change; for a Deleted delta, its
	// last known state or a [DeletedFinalStateUnknown].
	Object any
}

// Deltas is the list of changes queued for one object, oldest first.
type Deltas []Delta

// ErrZeroLengthDeltas is returned when a key is asked of an empty [Deltas].
var ErrZeroLengthDeltas = errors.New("cache: zero-length Deltas")

// Oldest returns the oldest delta, or nil if d is empty.
func (d Deltas) Oldest() *Delta {
	if len(d) == 0 {
		return nil
	}
	return &d[0]
}

// Newest returns the newest delta, or nil if d is empty.
func (d Deltas) Newest() *Delta {
	if len(d) == 0 {
		return nil
	}
	return &d[len(d)-1]
}

// dedupDeltas merges the two newest deltas of d when they describe the same
// event. Only a pair of deletions is such an event: a watch deletion and a
// relist tombstone for the same object, in either order. The one with more
// information is kept: the watch's final state rather than the tombstone,
// and the older one when both are equal in that respect.
func dedupDeltas(d Deltas) Deltas {
	n := len(d)
	if n < 2 {
		return d
	}
	newer, older := d[n-1], d[n-2]
	if newer.Type != Deleted || older.Type != Deleted {
		return d
	}
	if isTombstone(older.Object) {
		d[n-2] = newer
	}
	d[n-1] = Delta{}
	return d[:n-1]
}

func isTombstone(obj any) bool {
	switch obj.(type) {
	case DeletedFinalStateUnknown, *DeletedFinalStateUnknown:
		return true
	}
	return false
}

// ErrFIFOClosed is returned by [DeltaFIFO.Pop] once the queue is closed and
// empty, and by every write to a closed queue.
var ErrFIFOClosed = errors.New("cache: DeltaFIFO: manipulating with closed queue")

// TransformFunc turns an object from the API into the object to store, for
// example to drop managedFields and save memory. It may modify obj in place
// and return it. It must be idempotent: a relist may hand it objects it has
// already transformed.
type TransformFunc func(obj any) (any, error)

// PopProcessFunc processes the deltas of one key popped from a [DeltaFIFO].
// isInInitialList reports whether they belong to the initial population
// (see [DeltaFIFO.HasSynced]).
type PopProcessFunc func(deltas Deltas, isInInitialList bool) error
