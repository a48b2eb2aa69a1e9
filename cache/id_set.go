package cache

import "github.com/quotakit/quotakit/internal/table"

// idSet is a set of keyTable entry ids: the objects indexed under one
// indexed value. It is a [table.Table] whose refs are the ids themselves,
// so it costs 5 bytes per slot at up to 3/4 load, and 64 bytes for an
// empty set; a map[int32]struct{} costs about as much per member of a large
// set, but a map header and a whole group even for the one-member sets
// that unique indexes (by name, by UID) are made of. It is not safe for
// concurrent use; the zero value is empty.
type idSet struct {
	t table.Table[int32]
}

// ids is the owner of an idSet's table: an id is its own key.
type ids struct{}

// Key returns id itself.
func (ids) Key(id int32) int32 { return id }

// Hash returns the hash of id: Fibonacci hashing, which is cheap, a
// bijection (equal hashes mean equal ids), and spreads the consecutive ids
// a keyTable hands out over the top bits the table uses.
func (ids) Hash(id int32) uint32 { return uint32(id) * 0x9E3779B1 }

func (s *idSet) len() int { return s.t.Len() }

func (s *idSet) add(id int32) {
	h := ids{}.Hash(id)
	if _, ok := s.t.Find(h, id, ids{}); !ok {
		s.t.Insert(h, id, ids{})
	}
}

func (s *idSet) remove(id int32) { s.t.Delete(ids{}.Hash(id), id, ids{}) }

func (s *idSet) has(id int32) bool {
	_, ok := s.t.Find(ids{}.Hash(id), id, ids{})
	return ok
}

// each calls fn for every member.
func (s *idSet) each(fn func(id int32)) { s.t.Each(fn) }
