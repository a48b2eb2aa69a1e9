package cache

import (
	"math/rand/v2"
	"testing"
)

// TestIDSet_MatchesMap runs random adds and removes against idSet and a
// map, including the dense, consecutive ids a keyTable hands out.
func TestIDSet_MatchesMap(t *testing.T) {
	for _, span := range []int32{2, 64, 5000} {
		r := rand.New(rand.NewPCG(uint64(span), 3))
		var set idSet
		model := map[int32]bool{}
		for step := range 20000 {
			id := r.Int32N(span)
			if r.IntN(3) == 0 {
				set.remove(id)
				delete(model, id)
			} else {
				set.add(id)
				model[id] = true
			}
			if set.len() != len(model) {
				t.Fatalf("span %d step %d: len() = %d, want %d", span, step, set.len(), len(model))
			}
		}
		for id := range span {
			if set.has(id) != model[id] {
				t.Errorf("span %d: has(%d) = %v, want %v", span, id, set.has(id), model[id])
			}
		}
		seen := map[int32]bool{}
		set.each(func(id int32) {
			if seen[id] || !model[id] {
				t.Errorf("span %d: each visited %d (again: %v, member: %v)", span, id, seen[id], model[id])
			}
			seen[id] = true
		})
		if len(seen) != len(model) {
			t.Errorf("span %d: each visited %d ids, want %d", span, len(seen), len(model))
		}
	}
	var empty idSet
	empty.remove(3)
	if empty.has(3) || empty.len() != 0 {
		t.Error("zero idSet is not empty")
	}
}
