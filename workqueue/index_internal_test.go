package workqueue

// A white-box test: itemIndex is internal, and its deletion, which shifts
// cells back across the end of the table, is easy to get subtly wrong and
// hard to reach through the queue's API alone.

import (
	"math/rand/v2"
	"testing"
)

func TestItemIndexAgainstMap(t *testing.T) {
	rnd := rand.New(rand.NewPCG(7, 11))
	for round := range 200 {
		var x itemIndex
		x.resize(16)
		model := map[int32]uint32{} // slot -> tag
		next := int32(0)
		for range 500 {
			if len(model) > 0 && rnd.IntN(2) == 0 {
				// Remove a random present slot.
				var slot int32
				for slot = range model {
					break
				}
				x.remove(x.cellOf(model[slot], slot))
				delete(model, slot)
			} else {
				// Few distinct tags, all near the end of the table, so
				// that probe runs collide and wrap around.
				tag := uint32(rnd.IntN(6)) + uint32(len(x.cells)-4)
				cell := int(tag) & (len(x.cells) - 1)
				for x.cells[cell] != 0 {
					cell = (cell + 1) & (len(x.cells) - 1)
				}
				x.insert(cell, tag, next)
				model[next] = tag
				next++
			}
			if x.n != len(model) {
				t.Fatalf("round %d: n = %d, want %d", round, x.n, len(model))
			}
			if 2*x.n > len(x.cells) {
				t.Fatalf("round %d: %d entries in %d cells, want at most half full", round, x.n, len(x.cells))
			}
			for slot, tag := range model {
				// cellOf loops forever when slot is unreachable from
				// its home cell; check reachability explicitly.
				mask := len(x.cells) - 1
				want := uint64(tag)<<32 | uint64(slot+1)
				found := false
				for i := int(tag) & mask; x.cells[i] != 0; i = (i + 1) & mask {
					if x.cells[i] == want {
						found = true
						break
					}
				}
				if !found {
					t.Fatalf("round %d: slot %d (tag %d) unreachable from its home cell", round, slot, tag)
				}
			}
		}
	}
}
