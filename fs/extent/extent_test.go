package extent

import (
	"math/rand"
	"testing"
)

// model is a flat bitmap: the obviously right answer.
type model []bool

func (m model) add(s, e int64) {
	for i := s; i < e; i++ {
		m[i] = true
	}
}

func (m model) ranges() []Range {
	var out []Range
	for i := 0; i < len(m); {
		if !m[i] {
			i++
			continue
		}
		j := i
		for j < len(m) && m[j] {
			j++
		}
		out = append(out, Range{int64(i), int64(j)})
		i = j
	}
	return out
}

func TestSetAgainstBitmap(t *testing.T) {
	for seed := int64(0); seed < 500; seed++ {
		rng := rand.New(rand.NewSource(seed))
		const n = 200
		m := make(model, n)
		var s Set
		for op := 0; op < 30; op++ {
			a, b := rng.Int63n(n), rng.Int63n(n+1)
			if a > b {
				a, b = b, a
			}
			if rng.Intn(8) == 0 {
				s.TruncateAt(a)
				for i := a; i < n; i++ {
					m[i] = false
				}
				continue
			}
			s.Add(a, b)
			m.add(a, b)
			want := m.ranges()
			got := s.Ranges()
			if len(got) != len(want) {
				t.Fatalf("seed %d op %d: %v, want %v", seed, op, got, want)
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("seed %d op %d: %v, want %v", seed, op, got, want)
				}
			}
			c, d := rng.Int63n(n), rng.Int63n(n+1)
			if c > d {
				c, d = d, c
			}
			all := true
			var missing int64
			for i := c; i < d; i++ {
				all = all && m[i]
				if !m[i] {
					missing++
				}
			}
			if s.Covers(c, d) != all {
				t.Fatalf("seed %d: Covers(%d,%d)=%v, want %v (set %v)", seed, c, d, !all, all, got)
			}
			var sub int64
			for _, r := range s.Subtract(c, d) {
				sub += r.Len()
				for i := r.Start; i < r.End; i++ {
					if m[i] {
						t.Fatalf("seed %d: Subtract(%d,%d) returned a set byte %d", seed, c, d, i)
					}
				}
			}
			if sub != missing {
				t.Fatalf("seed %d: Subtract(%d,%d) has %d bytes, want %d", seed, c, d, sub, missing)
			}
		}
	}
}
