package workqueue

import "github.com/quotakit/quotakit/internal/table"

// failureCounts counts the failures of items for the per-item rate
// limiters. It indexes records in a slab with the shared table, as the
// queues do: a controller fails and forgets items all the time, and with
// that churn the limiter's Go map took about half of the CPU time of the
// rate-limited benchmark, most of it probing. Callers hash items with
// table.Hash before taking their lock.
//
// It is not safe for concurrent use; the zero value has no failures.
type failureCounts[T comparable] struct {
	index table.Table[T]
	recs  slab[failure[T]]
}

// failure is an item and its number of failures, at least 1.
type failure[T comparable] struct {
	item T
	n    int
}

// failureKeys is how failureCounts.index reads the items of its records.
type failureKeys[T comparable] slab[failure[T]]

// Key returns the item in slot.
func (k *failureKeys[T]) Key(slot int32) T { return (*slab[failure[T]])(k).at(slot).item }

// Hash returns the hash of the item in slot.
func (k *failureKeys[T]) Hash(slot int32) uint32 { return *(*slab[failure[T]])(k).hash(slot) }

func (c *failureCounts[T]) keys() *failureKeys[T] { return (*failureKeys[T])(&c.recs) }

// add counts one more failure of item, whose hash is h, and returns the
// number of its failures before this one.
func (c *failureCounts[T]) add(item T, h uint32) int {
	slot, ok := c.index.Find(h, item, c.keys())
	if !ok {
		slot = c.recs.alloc()
		c.recs.at(slot).item = item
		*c.recs.hash(slot) = h
		c.index.Insert(h, slot, c.keys())
	}
	f := c.recs.at(slot)
	f.n++
	return f.n - 1
}

// get returns the number of failures of item, whose hash is h.
func (c *failureCounts[T]) get(item T, h uint32) int {
	if slot, ok := c.index.Find(h, item, c.keys()); ok {
		return c.recs.at(slot).n
	}
	return 0
}

// forget clears the failures of item, whose hash is h.
func (c *failureCounts[T]) forget(item T, h uint32) {
	if slot, ok := c.index.Find(h, item, c.keys()); ok {
		c.index.Delete(h, slot, c.keys())
		c.recs.free(slot)
	}
}
