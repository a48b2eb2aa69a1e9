package table_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/quotakit/quotakit/internal/table"
)

// owner stores keys under refs the way the table's users do: a slab of
// keys, with freed refs reused.
type owner struct {
	keys []string
	free []int32
	tab  table.Table[string]
	// hash is the owner's hash function; tests choose bad ones on purpose.
	hash func(string) uint32
}

// Key and Hash make *owner a table.Owner.
func (o *owner) Key(ref int32) string  { return o.keys[ref] }
func (o *owner) Hash(ref int32) uint32 { return o.hash(o.keys[ref]) }

func (o *owner) find(k string) (int32, bool) { return o.tab.Find(o.hash(k), k, o) }

func (o *owner) insert(k string) int32 {
	var ref int32
	if n := len(o.free); n > 0 {
		ref, o.free = o.free[n-1], o.free[:n-1]
		o.keys[ref] = k
	} else {
		ref = int32(len(o.keys))
		o.keys = append(o.keys, k)
	}
	o.tab.Insert(o.hash(k), ref, o)
	return ref
}

func (o *owner) delete(k string) (int32, bool) {
	ref, ok := o.find(k)
	if !ok {
		return -1, false
	}
	if !o.tab.Delete(o.hash(k), ref, o) {
		panic("Delete of a found ref failed")
	}
	o.keys[ref] = ""
	o.free = append(o.free, ref)
	return ref, true
}

// TestTableMatchesMap runs random inserts and deletes against a Table and a
// map. The hash functions include ones with a handful of values, all in the
// top cells of the table, so that probe runs collide, wrap around the end
// of the table and are cut by deletions.
func TestTableMatchesMap(t *testing.T) {
	hashes := map[string]func(string) uint32{
		"maphash": table.Hash[string],
		"six values near the end": func(k string) uint32 {
			return 0xFFFFFFFF - uint32(len(k)%6)
		},
		"constant": func(string) uint32 { return 7 },
	}
	for name, hash := range hashes {
		for _, keys := range []int{3, 40, 2000} {
			t.Run(fmt.Sprintf("%s/%d keys", name, keys), func(t *testing.T) {
				r := rand.New(rand.NewPCG(uint64(keys), 5))
				if name != "maphash" && keys > 100 {
					t.Skip("every probe is linear in the table's size")
				}
				o := &owner{hash: hash}
				model := map[string]int32{}
				for step := range 20000 {
					k := fmt.Sprint("k", r.IntN(keys), "-", r.IntN(2)*1000)
					if r.IntN(3) == 0 {
						ref, ok := o.delete(k)
						want, wantOK := model[k]
						if ok != wantOK || (ok && ref != want) {
							t.Fatalf("step %d: delete(%s) = %d, %v, want %d, %v", step, k, ref, ok, want, wantOK)
						}
						delete(model, k)
					} else if _, ok := o.find(k); !ok {
						model[k] = o.insert(k)
					}
					if o.tab.Len() != len(model) {
						t.Fatalf("step %d: Len() = %d, want %d", step, o.tab.Len(), len(model))
					}
				}
				for k, want := range model {
					if got, ok := o.find(k); !ok || got != want {
						t.Errorf("Find(%s) = %d, %v, want %d, true", k, got, ok, want)
					}
				}
				seen := map[int32]bool{}
				o.tab.Each(func(ref int32) {
					if seen[ref] || model[o.keys[ref]] != ref {
						t.Errorf("Each visited ref %d (key %q) twice or wrongly", ref, o.keys[ref])
					}
					seen[ref] = true
				})
				if len(seen) != len(model) {
					t.Errorf("Each visited %d refs, want %d", len(seen), len(model))
				}
			})
		}
	}
}

// ids is the Owner of a set of int32s, each its own key and ref.
type ids struct{}

func (ids) Key(ref int32) int32   { return ref }
func (ids) Hash(ref int32) uint32 { return table.Hash(ref) }

func TestTableZeroValue(t *testing.T) {
	var tab table.Table[int32]
	var o ids
	if _, ok := tab.Find(1, 1, o); ok {
		t.Error("Find on the zero Table found something")
	}
	if tab.Delete(1, 1, o) {
		t.Error("Delete on the zero Table reported success")
	}
	tab.Each(func(int32) { t.Error("Each on the zero Table visited a ref") })
	tab.Insert(o.Hash(0), 0, o) // ref 0 is an ordinary ref
	if ref, ok := tab.Find(o.Hash(0), 0, o); !ok || ref != 0 {
		t.Errorf("Find(0) = %d, %v, want 0, true", ref, ok)
	}
	if tab.Delete(o.Hash(0), 1, o) {
		t.Error("Delete of an absent ref under a present hash reported success")
	}
}

func TestTableNegativeRefPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Insert(-1) did not panic")
		}
	}()
	var tab table.Table[int32]
	tab.Insert(0, -1, ids{})
}

// BenchmarkTableVsMap compares a Table with refs into a slab of keys, as
// the cache's key table uses it, against a builtin map from key to ref, for
// a cycle of lookups, inserts and deletes over 100k keys shaped like object
// keys.
func BenchmarkTableVsMap(b *testing.B) {
	const n = 100_000
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("namespace-%d/object-%d", i%97, i)
	}
	b.Run("table", func(b *testing.B) {
		o := &owner{hash: table.Hash[string]}
		b.ReportAllocs()
		for b.Loop() {
			for _, k := range keys {
				if _, ok := o.find(k); !ok {
					o.insert(k)
				}
			}
			for _, k := range keys {
				o.find(k)
			}
			for _, k := range keys {
				o.delete(k)
			}
		}
	})
	b.Run("map", func(b *testing.B) {
		m := map[string]int32{}
		var slab []string
		var free []int32
		b.ReportAllocs()
		for b.Loop() {
			for _, k := range keys {
				if _, ok := m[k]; !ok {
					var ref int32
					if l := len(free); l > 0 {
						ref, free = free[l-1], free[:l-1]
						slab[ref] = k
					} else {
						ref = int32(len(slab))
						slab = append(slab, k)
					}
					m[k] = ref
				}
			}
			for _, k := range keys {
				_ = m[k]
			}
			for _, k := range keys {
				if ref, ok := m[k]; ok {
					delete(m, k)
					slab[ref] = ""
					free = append(free, ref)
				}
			}
		}
	})
}
