package configserve

// spentEntry is what the Server remembers of a served code.
type spentEntry struct {
	device Device
	run    string
}

// spentSet remembers up to a fixed number of served codes by digest,
// forgetting the oldest first. It is not safe for concurrent use.
type spentSet struct {
	m    map[digest]spentEntry
	ring []digest // insertion order; next is the slot to overwrite
	next int
	full bool
}

func newSpentSet(n int) spentSet {
	return spentSet{m: make(map[digest]spentEntry, n), ring: make([]digest, n)}
}

func (s *spentSet) get(d digest) (spentEntry, bool) {
	e, ok := s.m[d]
	return e, ok
}

func (s *spentSet) add(d digest, e spentEntry) {
	if _, ok := s.m[d]; ok {
		s.m[d] = e
		return
	}
	if s.full {
		delete(s.m, s.ring[s.next])
	}
	s.ring[s.next] = d
	s.m[d] = e
	s.next++
	if s.next == len(s.ring) {
		s.next = 0
		s.full = true
	}
}
