package workqueue

// failureCounts counts the failures of items for the per-item rate
// limiters. It is an itemTable, as the queues' state is: a controller fails
// and forgets items all the time, and with that churn the limiter's Go map
// took about half of the CPU time of the rate-limited benchmark, most of it
// probing. Callers hash items with table.Hash before taking their lock.
//
// It is not safe for concurrent use; the zero value has no failures.
type failureCounts[T comparable] struct {
	t itemTable[T, int]
}

// add counts one more failure of item, whose hash is h, and returns the
// number of its failures before this one.
func (c *failureCounts[T]) add(item T, h uint32) int {
	slot, _ := c.t.add(item, h)
	n := c.t.at(slot)
	*n++
	return *n - 1
}

// get returns the number of failures of item, whose hash is h.
func (c *failureCounts[T]) get(item T, h uint32) int {
	if slot, ok := c.t.find(item, h); ok {
		return *c.t.at(slot)
	}
	return 0
}

// forget clears the failures of item, whose hash is h.
func (c *failureCounts[T]) forget(item T, h uint32) {
	if slot, ok := c.t.find(item, h); ok {
		c.t.remove(slot)
	}
}
