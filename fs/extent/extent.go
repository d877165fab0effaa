// Package extent keeps sets of byte ranges: which parts of a buffer hold
// data written since the last flush. It is pure: no I/O, no locking.
package extent

// Range is the half-open byte range [Start, End).
type Range struct{ Start, End int64 }

// Len is the number of bytes in r.
func (r Range) Len() int64 { return r.End - r.Start }

// Set is a set of bytes, kept as sorted, disjoint, non-adjacent ranges:
// writes that touch or overlap merge into one range whatever their order.
type Set struct{ r []Range }

// Add adds [start, end) to the set.
func (s *Set) Add(start, end int64) {
	if start >= end {
		return
	}
	// First range that could merge: the first whose End >= start.
	i := 0
	for i < len(s.r) && s.r[i].End < start {
		i++
	}
	j := i
	for j < len(s.r) && s.r[j].Start <= end {
		start = min(start, s.r[j].Start)
		end = max(end, s.r[j].End)
		j++
	}
	s.r = append(s.r[:i], append([]Range{{start, end}}, s.r[j:]...)...)
}

// Covers reports whether every byte of [start, end) is in the set.
func (s *Set) Covers(start, end int64) bool {
	for _, r := range s.r {
		if r.Start <= start && end <= r.End {
			return true
		}
	}
	return start >= end
}

// Ranges returns the ranges in order. The slice must not be modified.
func (s *Set) Ranges() []Range { return s.r }

// Bytes is the number of bytes in the set.
func (s *Set) Bytes() int64 {
	var n int64
	for _, r := range s.r {
		n += r.Len()
	}
	return n
}

// Empty reports whether the set holds no byte.
func (s *Set) Empty() bool { return len(s.r) == 0 }

// TruncateAt removes every byte at or after end.
func (s *Set) TruncateAt(end int64) {
	out := s.r[:0]
	for _, r := range s.r {
		if r.Start >= end {
			break
		}
		r.End = min(r.End, end)
		out = append(out, r)
	}
	s.r = out
}

// Subtract returns the parts of [start, end) not in the set.
func (s *Set) Subtract(start, end int64) []Range {
	var out []Range
	for _, r := range s.r {
		if r.End <= start {
			continue
		}
		if r.Start >= end {
			break
		}
		if r.Start > start {
			out = append(out, Range{start, r.Start})
		}
		start = max(start, r.End)
	}
	if start < end {
		out = append(out, Range{start, end})
	}
	return out
}
