package cache

import "math/bits"

// idSet is a set of keyTable entry ids: the objects indexed under one
// indexed value. It is an open-addressing table of id+1 (0 marks an empty
// slot) with linear probing, at most 3/4 full, so it costs 4 bytes per slot
// where a map[int32]struct{} costs about four times as much per member. It
// is not safe for concurrent use; the zero value is empty.
type idSet struct {
	slots []int32
	n     int
}

func (s *idSet) len() int { return s.n }

// home returns the preferred slot of id: Fibonacci hashing, which spreads
// the consecutive ids a keyTable hands out.
func (s *idSet) home(id int32) int {
	shift := 32 - bits.TrailingZeros32(uint32(len(s.slots)))
	return int((uint32(id) * 0x9E3779B1) >> shift)
}

func (s *idSet) add(id int32) {
	if (s.n+1)*4 > len(s.slots)*3 {
		s.grow()
	}
	mask := len(s.slots) - 1
	i := s.home(id)
	for ; s.slots[i] != 0; i = (i + 1) & mask {
		if s.slots[i] == id+1 {
			return
		}
	}
	s.slots[i] = id + 1
	s.n++
}

func (s *idSet) grow() {
	old := s.slots
	size := 2 * len(old)
	if size < 2 {
		size = 2
	}
	s.slots = make([]int32, size)
	mask := size - 1
	for _, v := range old {
		if v == 0 {
			continue
		}
		i := s.home(v - 1)
		for s.slots[i] != 0 {
			i = (i + 1) & mask
		}
		s.slots[i] = v
	}
}

func (s *idSet) remove(id int32) {
	if s.n == 0 {
		return
	}
	mask := len(s.slots) - 1
	i := s.home(id)
	for ; s.slots[i] != id+1; i = (i + 1) & mask {
		if s.slots[i] == 0 {
			return
		}
	}
	// Backward-shift deletion, as in keyTable.delete.
	for j := (i + 1) & mask; s.slots[j] != 0; j = (j + 1) & mask {
		k := s.home(s.slots[j] - 1)
		if (j > i && (k <= i || k > j)) || (j < i && k <= i && k > j) {
			s.slots[i] = s.slots[j]
			i = j
		}
	}
	s.slots[i] = 0
	s.n--
}

func (s *idSet) has(id int32) bool {
	if s.n == 0 {
		return false
	}
	mask := len(s.slots) - 1
	for i := s.home(id); s.slots[i] != 0; i = (i + 1) & mask {
		if s.slots[i] == id+1 {
			return true
		}
	}
	return false
}

// each calls fn for every member.
func (s *idSet) each(fn func(id int32)) {
	for _, v := range s.slots {
		if v != 0 {
			fn(v - 1)
		}
	}
}
