package layout

import (
	"slices"
	"testing"

	"github.com/stripefs/stripefs/proto"
)

// pflEC is -E 2M -c 2 -S 1M -E END --ec 2+1 -S 1M [-E -1 -c 1] over 4
// OSTs, instantiated to inst: the erasure-coded component's objects are
// the file's stripes 2 to 4, its rows 2 MiB from file offset 2M.
func pflEC(end, inst uint64) proto.Layout {
	comps := []proto.Comp{
		{Start: 0, End: 2 * mib, StripeSize: mib, StripeCount: 2, FirstOST: -1},
		{Start: 2 * mib, End: end, StripeSize: mib, StripeCount: 3, FirstOST: -1, ECData: 2, ECParity: 1},
	}
	if end != proto.ExtentEOF {
		comps = append(comps, proto.Comp{Start: end, End: proto.ExtentEOF, StripeSize: mib, StripeCount: 1, FirstOST: -1})
	}
	return proto.Layout{Comps: comps}.InstantiateTo(inst, 4, 0, 0)
}

func TestECPart(t *testing.T) {
	if err := pflEC(proto.ExtentEOF, proto.ExtentEOF).Validate(4); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		l           proto.Layout
		ok, inst    bool
		base        int
		start, end  uint64
		hasRow      map[uint64]bool
		size        uint64
		first, past uint64 // Rows(size)
	}{
		{"plain ec is all of it", proto.Layout{StripeSize: mib, StripeCount: 3, ECData: 2, ECParity: 1, OSTs: []uint32{0, 1, 2}}, true, true, 0, 0, proto.ExtentEOF,
			map[uint64]bool{0: true, 9: true}, 5 * mib, 0, 3},
		{"plain striping has none", proto.Layout{StripeSize: mib, StripeCount: 2, OSTs: []uint32{0, 1}}, false, false, 0, 0, 0, nil, 0, 0, 0},
		{"last component", pflEC(proto.ExtentEOF, proto.ExtentEOF), true, true, 2, 2 * mib, proto.ExtentEOF,
			map[uint64]bool{0: false, 1: true, 100: true}, 2*mib + 100, 1, 2},
		{"last component, size below it", pflEC(proto.ExtentEOF, proto.ExtentEOF), true, true, 2, 2 * mib, proto.ExtentEOF, nil, mib, 1, 1},
		{"not instantiated", pflEC(proto.ExtentEOF, 2*mib), true, false, 0, 2 * mib, proto.ExtentEOF, map[uint64]bool{1: true}, 0, 1, 1},
		{"middle component", pflEC(6*mib, proto.ExtentEOF), true, true, 2, 2 * mib, 6 * mib,
			map[uint64]bool{0: false, 1: true, 2: true, 3: false}, 10 * mib, 1, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ep, ok := ECPartOf(tc.l)
			if ok != tc.ok {
				t.Fatalf("ok %v", ok)
			}
			if !ok {
				return
			}
			if ep.Instantiated() != tc.inst || tc.inst && ep.Base != tc.base || ep.Start != tc.start || ep.End != tc.end {
				t.Fatalf("part %+v", ep)
			}
			for r, want := range tc.hasRow {
				if ep.HasRow(r) != want {
					t.Errorf("HasRow(%d) = %v", r, !want)
				}
			}
			if f, p := ep.Rows(tc.size); f != tc.first || p != tc.past {
				t.Errorf("Rows(%d) = %d, %d; want %d, %d", tc.size, f, p, tc.first, tc.past)
			}
		})
	}
}

// TestECComponentArithmetic: an erasure-coded component's rows are the
// file's, on its own objects (the file's stripes from Base), which hold
// nothing below its start.
func TestECComponentArithmetic(t *testing.T) {
	l := pflEC(proto.ExtentEOF, proto.ExtentEOF)
	// Row 1 ([2M, 4M)): data unit 0 on the part's object 1 (stripe 3),
	// unit 1 on object 2 (stripe 4), parity on object 0 (stripe 2), each
	// at object offset 1M.
	maps := []struct {
		off  uint64
		n    int
		want []Chunk
	}{
		{2 * mib, 100, []Chunk{{3, 2 * mib, mib, 100}}},
		{2*mib - 10, 20, []Chunk{{1, 2*mib - 10, mib - 10, 10}, {3, 2 * mib, mib, 10}}},
		{3*mib + 5, mib, []Chunk{{4, 3*mib + 5, mib + 5, mib - 5}, {4, 4 * mib, 2 * mib, 5}}}, // row 2 starts on the part's object 2 too
	}
	for _, tc := range maps {
		if got := Map(l, tc.off, tc.n); !slices.Equal(got, tc.want) {
			t.Errorf("Map(%d, %d) = %+v, want %+v", tc.off, tc.n, got, tc.want)
		}
	}
	sizes := []struct {
		size    uint64
		stripe  int
		objSize uint64
		end     uint64 // FileEnd of that object size
	}{
		{2*mib + 100, 3, mib + 100, 2*mib + 100}, // data unit 0 of row 1
		{2*mib + 100, 2, mib + 100, 2*mib + 100}, // its parity: as long as the row's first unit
		{2*mib + 100, 4, 0, 0},                   // unit 1 of row 1 empty, and nothing below
		{2 * mib, 2, 0, 0},                       // a size at the component's start: no bytes in it
		{4 * mib, 4, 2 * mib, 4 * mib},
	}
	for _, tc := range sizes {
		got := ObjectSize(l, tc.size, tc.stripe)
		if got != tc.objSize {
			t.Errorf("ObjectSize(%d, stripe %d) = %d, want %d", tc.size, tc.stripe, got, tc.objSize)
		}
		if e := FileEnd(l, tc.stripe, got); e != tc.end {
			t.Errorf("FileEnd(stripe %d, %d) = %d, want %d", tc.stripe, got, e, tc.end)
		}
	}
}
