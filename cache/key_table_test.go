package cache

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestKeyTable_MatchesMap runs random puts and deletes against keyTable and
// a map, checking contents, lengths and id stability after every step.
func TestKeyTable_MatchesMap(t *testing.T) {
	for _, keys := range []int{3, 40, 2000} {
		t.Run(fmt.Sprint(keys, " keys"), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(keys), 1))
			var table keyTable[any]
			model := map[string]int{}
			ids := map[string]int32{}
			for step := range 20000 {
				key := fmt.Sprint("k", r.IntN(keys))
				if r.IntN(3) == 0 {
					id := table.delete(key)
					if _, ok := model[key]; ok != (id >= 0) {
						t.Fatalf("step %d: delete(%s) = %d, model has it: %v", step, key, id, ok)
					}
					if id >= 0 && id != ids[key] {
						t.Fatalf("step %d: delete(%s) returned id %d, stored under %d", step, key, id, ids[key])
					}
					delete(model, key)
					delete(ids, key)
				} else {
					id := table.put(key, step)
					if old, ok := ids[key]; ok && old != id {
						t.Fatalf("step %d: put(%s) moved it from id %d to %d", step, key, old, id)
					}
					model[key] = step
					ids[key] = id
				}
				if table.len() != len(model) {
					t.Fatalf("step %d: len() = %d, want %d", step, table.len(), len(model))
				}
			}
			seen := 0
			table.each(func(id int32, key string, obj any) {
				seen++
				if model[key] != obj || ids[key] != id {
					t.Errorf("each: %s = %v (id %d), want %v (id %d)", key, obj, id, model[key], ids[key])
				}
			})
			if seen != len(model) {
				t.Errorf("each visited %d entries, want %d", seen, len(model))
			}
			for key, want := range model {
				if _, got, ok := table.get(key); !ok || got != want {
					t.Errorf("get(%s) = %v, %v, want %v", key, got, ok, want)
				}
			}
			if _, _, ok := table.get("absent"); ok {
				t.Error("get(absent) found something")
			}
		})
	}
}

func TestKeyTable_ZeroValue(t *testing.T) {
	var table keyTable[any]
	if _, _, ok := table.get("x"); ok || table.delete("x") != -1 || table.len() != 0 {
		t.Fatal("zero keyTable is not empty")
	}
	table.put("", nil) // empty keys and nil objects are ordinary entries
	if _, obj, ok := table.get(""); !ok || obj != nil {
		t.Errorf("get(\"\") = %v, %v, want nil, true", obj, ok)
	}
}
