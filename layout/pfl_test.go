package layout

import (
	"math/rand"
	"testing"

	"github.com/stripefs/stripefs/proto"
)

const mib = 1 << 20

// pfl is -E 1M -c 1 -E 8M -c 2 -S 1M -E -1 -c 3 -S 2M over 4 OSTs, the
// first two components instantiated.
func pfl(all bool) proto.Layout {
	l := proto.Layout{Comps: []proto.Comp{
		{Start: 0, End: mib, StripeSize: mib, StripeCount: 1, FirstOST: -1},
		{Start: mib, End: 8 * mib, StripeSize: mib, StripeCount: 2, FirstOST: -1},
		{Start: 8 * mib, End: proto.ExtentEOF, StripeSize: 2 * mib, StripeCount: 3, FirstOST: -1},
	}}
	end := uint64(8 * mib)
	if all {
		end = proto.ExtentEOF
	}
	return l.InstantiateTo(end, 4, 0, 0)
}

func TestMapComposite(t *testing.T) {
	tests := []struct {
		name string
		l    proto.Layout
		off  uint64
		n    int
		want []Chunk
	}{
		{"first component", pfl(false), 100, 1000, []Chunk{{0, 100, 100, 1000}}},
		{"across the first end", pfl(false), mib - 10, 20, []Chunk{{0, mib - 10, mib - 10, 10}, {2, mib, 0, 10}}},
		// The second component's striping counts the file's units: unit 1
		// (at 1 MiB) is its stripe 1, the file's object 2, and unit 2 its
		// stripe 0, object 1, in its second row.
		{"second component, first stripe", pfl(false), 2*mib + 5, 10, []Chunk{{1, 2*mib + 5, mib + 5, 10}}},
		{"not instantiated", pfl(false), 8*mib - 1, 2, []Chunk{{2, 8*mib - 1, 4*mib - 1, 1}, {NoObject, 8 * mib, 0, 1}}},
		// The third component's unit 4 (2 MiB units) is its stripe 1:
		// object 3+1, in its second row.
		{"third component", pfl(true), 8*mib + 3, 4, []Chunk{{4, 8*mib + 3, 2*mib + 3, 4}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Map(tc.l, tc.off, tc.n)
			if len(got) != len(tc.want) {
				t.Fatalf("Map = %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("chunk %d = %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
	// Past the last component's end: no object.
	l := pfl(false)
	l.Comps = l.Comps[:2]
	if got := Map(l, 8*mib-1, 3); len(got) != 2 || got[1].Stripe != NoObject || got[1].Len != 2 {
		t.Errorf("past the end: %+v", got)
	}
}

// TestCompositeSizes checks ObjectSize, FileEnd and ObjectRange against a
// byte-by-byte model of where Map puts each byte.
func TestCompositeSizes(t *testing.T) {
	l := pfl(true)
	// Shrink the units so the model stays small: 64 KiB units, ends at
	// 64 KiB and 512 KiB.
	const K = 64 << 10
	l.Comps[0].End, l.Comps[1].Start, l.Comps[1].End, l.Comps[2].Start = K, K, 8*K, 8*K
	l.Comps[0].StripeSize, l.Comps[1].StripeSize, l.Comps[2].StripeSize = K, K, 2*K
	l = l.InstantiateTo(proto.ExtentEOF, 4, 0, 0)
	rng := rand.New(rand.NewSource(1))
	for range 40 {
		size := uint64(rng.Intn(40 * K))
		// the model: each object's end and the largest file end it implies
		ends := make([]uint64, len(l.OSTs))
		for _, ch := range Map(l, 0, int(size)) {
			if ch.Stripe == NoObject {
				t.Fatalf("size %d: a chunk without object in an instantiated layout: %+v", size, ch)
			}
			ends[ch.Stripe] = max(ends[ch.Stripe], ch.ObjOff+uint64(ch.Len))
		}
		for s := range ends {
			if got := ObjectSize(l, size, s); got != ends[s] {
				t.Fatalf("size %d: ObjectSize(stripe %d) = %d, model %d", size, s, got, ends[s])
			}
			if fe := FileEnd(l, s, ends[s]); ends[s] != 0 && (fe > size || fe == 0) {
				t.Fatalf("size %d: FileEnd(stripe %d, %d) = %d", size, s, ends[s], fe)
			}
		}
		// The largest FileEnd over the objects is the size.
		var fileEnd uint64
		for s := range ends {
			fileEnd = max(fileEnd, FileEnd(l, s, ends[s]))
		}
		if fileEnd != size {
			t.Fatalf("size %d: objects imply %d", size, fileEnd)
		}
		// ObjectRange of [a, b) covers exactly the object bytes Map puts there.
		a := uint64(rng.Intn(int(size) + 1))
		for s := range ends {
			from, to := ObjectRange(l, a, size, s)
			lo, hi := ^uint64(0), uint64(0)
			for _, ch := range Map(l, a, int(size-a)) {
				if ch.Stripe == s {
					lo, hi = min(lo, ch.ObjOff), max(hi, ch.ObjOff+uint64(ch.Len))
				}
			}
			if hi == 0 {
				if to > from {
					t.Fatalf("[%d, %d) stripe %d: range [%d, %d), Map puts nothing there", a, size, s, from, to)
				}
				continue
			}
			if from > lo || to != hi {
				t.Fatalf("[%d, %d) stripe %d: range [%d, %d), Map puts [%d, %d)", a, size, s, from, to, lo, hi)
			}
		}
	}
}
