package layout

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"testing"
)

func TestDirStripe(t *testing.T) {
	// Fixed values: the mapping is on disk (which MDT holds a name), so it
	// must never change. fnv1a64("a") = 0xaf63dc4c8601ec8c.
	tests := []struct {
		name  string
		count int
		want  int
	}{
		{"a", 1, 0},
		{"a", 2, 0},
		{"a", 3, 0xaf63dc4c8601ec8c % 3},
		{"b", 2, 0xaf63df4c8601f1a5 % 2},
		{"f0", 0, 0},
		{"anything", -1, 0},
	}
	for _, tc := range tests {
		if got := DirStripe(tc.name, tc.count); got != tc.want {
			t.Errorf("DirStripe(%q, %d) = %d, want %d", tc.name, tc.count, got, tc.want)
		}
	}
	// Names spread over every stripe, roughly evenly.
	for _, count := range []int{2, 3, 4, 7} {
		n := make([]int, count)
		for i := 0; i < 7000; i++ {
			s := DirStripe(fmt.Sprintf("f%d", i), count)
			if s < 0 || s >= count {
				t.Fatalf("stripe %d of %d", s, count)
			}
			n[s]++
		}
		for s, k := range n {
			if k < 7000/count*8/10 {
				t.Errorf("count %d: stripe %d got %d of 7000 names", count, s, k)
			}
		}
	}
}

// stripeCookie is what an MDT gives an entry: its 63-bit FNV hash kept
// clear of 0..2 (mds.nameHash).
func stripeCookie(name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	v := h.Sum64() >> 1
	if v < 3 {
		v += 3
	}
	return v
}

func TestDirCookie(t *testing.T) {
	tests := []struct {
		stripe int
		c      uint64
		want   uint64
	}{
		{0, 1, 1}, // "."
		{0, 2, 2}, // ".."
		{0, 3, 3},
		{0, 1<<63 - 1, 1<<54 - 1 + 3},
		{1, 3, 1<<55 + 3},
		{1, 1 << 9, 1<<55 + 1 + 3},
		{255, 1<<63 - 1, 255<<55 | (1<<54 - 1 + 3)},
	}
	for _, tc := range tests {
		got := DirCookie(tc.stripe, tc.c)
		if got != tc.want {
			t.Errorf("DirCookie(%d, %#x) = %#x, want %#x", tc.stripe, tc.c, got, tc.want)
		}
		if got>>63 != 0 {
			t.Errorf("DirCookie(%d, %#x) = %#x has the sign bit", tc.stripe, tc.c, got)
		}
	}
	splits := []struct {
		c      uint64
		stripe int
		after  uint64
	}{
		{0, 0, 0},
		{1, 0, 1},
		{2, 0, 2},
		{3, 0, 1<<9 - 1},
		{1 << 55, 1, 2},   // no entry: the stripe's start
		{1<<55 + 2, 1, 2}, // likewise
		{1<<55 + 4, 1, 1<<10 - 1},
	}
	for _, tc := range splits {
		s, a := SplitDirCookie(tc.c)
		if s != tc.stripe || a != tc.after {
			t.Errorf("SplitDirCookie(%#x) = %d, %#x, want %d, %#x", tc.c, s, a, tc.stripe, tc.after)
		}
	}
}

// TestDirCookieResume checks the property readdir relies on: resuming a
// stripe after an entry's directory cookie returns exactly the entries
// whose cookies are greater, and cookies grow along a whole walk.
func TestDirCookieResume(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20000; i++ {
		stripe := rng.IntN(256)
		a, b := stripeCookie(fmt.Sprint("x", rng.Uint64())), stripeCookie(fmt.Sprint("y", rng.Uint64()))
		ca := DirCookie(stripe, a)
		s, after := SplitDirCookie(ca)
		if s != stripe {
			t.Fatalf("cookie %#x of stripe %d splits to stripe %d", ca, stripe, s)
		}
		if after < a {
			t.Fatalf("resuming after %#x would return it again (after=%#x)", a, after)
		}
		cb := DirCookie(stripe, b)
		if (b > after) != (cb > ca) {
			t.Fatalf("entry %#x (cookie %#x) vs resume after %#x (cookie %#x): stripe returns %v, cookie order says %v",
				b, cb, a, ca, b > after, cb > ca)
		}
		if stripe < 255 && DirCookie(stripe+1, 3) <= DirCookie(stripe, 1<<63-1) {
			t.Fatalf("stripe %d's cookies overlap the next stripe's", stripe)
		}
	}
}
