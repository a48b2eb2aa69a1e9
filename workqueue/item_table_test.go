package workqueue

// A white-box test: itemTable is the queues' index, and the hashes it is
// given can be chosen to collide, which no test through the API can do.

import (
	"testing"
)

// FuzzItemTable adds and removes items, one per input byte, and checks the
// table against a map after every operation. The top bit of a byte chooses
// between add and remove, the rest the item. Hashes are taken from a small
// set with equal top bits, so that items share home cells, probe runs wrap
// around the end of the index, and removals shift cells back.
func FuzzItemTable(f *testing.F) {
	f.Add([]byte{1, 2, 3, 129, 4, 130, 131, 132})
	f.Add([]byte{0, 9, 18, 27, 36, 45, 54, 63, 72, 128, 137, 146, 0, 9})
	f.Fuzz(func(t *testing.T, ops []byte) {
		var tbl itemTable[int, int]
		model := map[int]int32{} // item -> slot
		hash := func(k int) uint32 {
			// Five home cells, the last at the very end of the index so
			// that its run wraps around, and three hashes per home.
			homes := [5]uint32{0, 1 << 30, 2 << 30, 3 << 30, 0xffff_fff0}
			return homes[k%5] | uint32(k%3)
		}
		for i, op := range ops {
			k := int(op & 127)
			h := hash(k)
			if op < 128 {
				slot, added := tbl.add(k, h)
				want, had := model[k]
				if added == had || (had && slot != want) {
					t.Fatalf("op %d: add(%d) = %d, %v; model has %d, %v", i, k, slot, added, want, had)
				}
				if added {
					if r := tbl.at(slot); *r != 0 {
						t.Fatalf("op %d: add(%d): record of new slot %d = %d, want 0", i, k, slot, *r)
					}
					*tbl.at(slot) = k + 1000
					model[k] = slot
				}
			} else if slot, ok := model[k]; ok {
				tbl.remove(slot)
				delete(model, k)
			}
			if got := tbl.len(); got != len(model) {
				t.Fatalf("op %d: len() = %d, want %d", i, got, len(model))
			}
			for item, slot := range model {
				got, ok := tbl.find(item, hash(item))
				if !ok || got != slot {
					t.Fatalf("op %d: find(%d) = %d, %v, want %d, true", i, item, got, ok, slot)
				}
				if tbl.Key(slot) != item || tbl.Hash(slot) != hash(item) || *tbl.at(slot) != item+1000 {
					t.Fatalf("op %d: slot %d holds %d (hash %#x, record %d), want %d", i, slot, tbl.Key(slot), tbl.Hash(slot), *tbl.at(slot), item)
				}
			}
			if _, ok := tbl.find(k, h); ok != hasKey(model, k) {
				t.Fatalf("op %d: find(%d) found = %v, want %v", i, k, ok, hasKey(model, k))
			}
		}
	})
}

func hasKey(m map[int]int32, k int) bool {
	_, ok := m[k]
	return ok
}

// TestItemTableReusesSlots checks that removed slots are handed out again,
// and from 0 once the table is empty.
func TestItemTableReusesSlots(t *testing.T) {
	var tbl itemTable[string, int]
	for i, k := range []string{"a", "b", "c"} {
		if slot, _ := tbl.add(k, uint32(i)); slot != int32(i) {
			t.Fatalf("add(%q) = slot %d, want %d", k, slot, i)
		}
	}
	b, _ := tbl.find("b", 1)
	tbl.remove(b)
	if slot, _ := tbl.add("d", 3); slot != b {
		t.Errorf("add after remove = slot %d, want the freed slot %d", slot, b)
	}
	for k, h := range map[string]uint32{"a": 0, "c": 2, "d": 3} {
		slot, ok := tbl.find(k, h)
		if !ok {
			t.Fatalf("find(%q) found nothing", k)
		}
		tbl.remove(slot)
	}
	if slot, _ := tbl.add("e", 4); slot != 0 {
		t.Errorf("add to emptied table = slot %d, want 0", slot)
	}
}
