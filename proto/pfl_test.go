package proto

import (
	"errors"
	"strings"
	"syscall"
	"testing"
)

const mib = 1 << 20

func TestParseComposite(t *testing.T) {
	plain := Layout{StripeSize: mib, StripeCount: 1, FirstOST: -1}
	l, err := ParseLayout("extent=0-1048576 stripe_count=1\nextent=1048576-67108864 stripe_count=2 stripe_size=4194304; extent=67108864-EOF stripe_count=-1", plain)
	if err != nil {
		t.Fatal(err)
	}
	want := []Comp{
		{Start: 0, End: mib, StripeSize: mib, StripeCount: 1, FirstOST: -1},
		{Start: mib, End: 64 * mib, StripeSize: 4 * mib, StripeCount: 2, FirstOST: -1},
		{Start: 64 * mib, End: ExtentEOF, StripeSize: 4 * mib, StripeCount: AllOSTs, FirstOST: -1}, // size from the one before
	}
	if len(l.Comps) != len(want) {
		t.Fatalf("components %+v", l.Comps)
	}
	for i := range want {
		if l.Comps[i] != want[i] {
			t.Errorf("component %d = %+v, want %+v", i, l.Comps[i], want[i])
		}
	}
	if err := l.Validate(4); err != nil {
		t.Fatalf("valid layout refused: %v", err)
	}
	if !l.IsSet() || l.IsEC() || l.InstEnd() != 0 || l.End() != ExtentEOF {
		t.Errorf("uninstantiated: set %v ec %v inst end %d end %d", l.IsSet(), l.IsEC(), l.InstEnd(), l.End())
	}

	f := l.Instantiate(4, 1, 0) // the first component only, at OST 1
	if f.InstEnd() != mib || len(f.OSTs) != 1 || f.OSTs[0] != 1 || f.StripeCount != 1 || f.CheckFile() != nil || len(l.OSTs) != 0 {
		t.Fatalf("instantiated first: %+v (%v); base %+v", f, f.CheckFile(), l)
	}
	g := f.InstantiateTo(64*mib+1, 4, 1, 0)
	if g.InstEnd() != ExtentEOF || g.StripeCount != 1+2+4 || g.Comps[1].Base != 1 || g.Comps[2].Base != 3 || g.CheckFile() != nil {
		t.Fatalf("instantiated all: %+v (%v)", g, g.CheckFile())
	}
	if len(f.OSTs) != 1 || f.Comps[1].Inst {
		t.Errorf("InstantiateTo changed the layout it was called on: %+v", f)
	}
	if g.CompOf(0) != 0 || g.CompOf(2) != 1 || g.CompOf(6) != 2 || g.CompOf(7) != -1 {
		t.Errorf("CompOf: %d %d %d %d", g.CompOf(0), g.CompOf(2), g.CompOf(6), g.CompOf(7))
	}

	// The xattr form round-trips, objects left to the MDT.
	back, err := ParseLayout(g.String(), Layout{})
	if err != nil {
		t.Fatalf("parse %q: %v", g, err)
	}
	for i := range back.Comps {
		c, w := back.Comps[i], g.Comps[i]
		if c.Start != w.Start || c.End != w.End || c.StripeSize != w.StripeSize || c.StripeCount != w.StripeCount || c.FirstOST != w.FirstOST || c.Inst {
			t.Errorf("round trip component %d: %+v, want the extent and striping of %+v", i, c, w)
		}
	}
	if !strings.Contains(g.String(), "extent=67108864-EOF") || !strings.Contains(g.String(), "osts=3,0,1,2") {
		t.Errorf("String = %q", g)
	}

	// A plain value over a composite base starts from its first component.
	p, err := ParseLayout("stripe_count=3", g)
	if err != nil || p.IsComposite() || p.StripeCount != 3 || p.StripeSize != mib {
		t.Errorf("plain over composite: %+v %v", p, err)
	}
}

func TestValidateComposite(t *testing.T) {
	comp := func(start, end uint64, ss, sc uint32) Comp {
		return Comp{Start: start, End: end, StripeSize: ss, StripeCount: sc, FirstOST: -1}
	}
	ec := func(start, end uint64, k, m uint16) Comp {
		return Comp{Start: start, End: end, StripeSize: mib, StripeCount: uint32(k + m), FirstOST: -1, ECData: k, ECParity: m}
	}
	tests := []struct {
		name  string
		comps []Comp
		err   string
	}{
		{"ok", []Comp{comp(0, mib, mib, 1), comp(mib, ExtentEOF, mib, AllOSTs)}, ""},
		{"ok without EOF", []Comp{comp(0, mib, mib, 1), comp(mib, 8*mib, mib, 2)}, ""},
		{"wider than the OSTs shrinks", []Comp{comp(0, mib, mib, 9)}, ""},
		{"not from 0", []Comp{comp(mib, 2*mib, mib, 1)}, "starts at 1048576, not where"},
		{"gap", []Comp{comp(0, mib, mib, 1), comp(2*mib, ExtentEOF, mib, 1)}, "without gaps or overlaps"},
		{"overlap", []Comp{comp(0, 2*mib, mib, 1), comp(mib, ExtentEOF, mib, 1)}, "without gaps or overlaps"},
		{"unordered", []Comp{comp(0, 4*mib, mib, 1), comp(4*mib, 2*mib, mib, 1)}, "is empty"},
		{"EOF not last", []Comp{comp(0, ExtentEOF, mib, 1), comp(ExtentEOF, ExtentEOF, mib, 1)}, "reaches EOF but is not the last"},
		{"end off the stripe size", []Comp{comp(0, mib, 4*mib, 1), comp(mib, ExtentEOF, mib, 1)}, "not a multiple of its stripe size"},
		{"bad stripe size", []Comp{comp(0, 96<<10, 96<<10, 1)}, "positive multiple of 64 KiB"},
		{"ec component", []Comp{comp(0, 2*mib, mib, 1), ec(2*mib, ExtentEOF, 2, 1)}, ""},
		{"ec component in the middle", []Comp{comp(0, 2*mib, mib, 1), ec(2*mib, 8*mib, 2, 1), comp(8*mib, ExtentEOF, mib, 1)}, ""},
		{"ec component off its rows", []Comp{comp(0, mib, mib, 1), ec(mib, ExtentEOF, 2, 1)}, "must start and end on its rows of 2097152 bytes"},
		{"ec component ends off its rows", []Comp{comp(0, 2*mib, mib, 1), ec(2*mib, 5*mib, 2, 1), comp(5*mib, ExtentEOF, mib, 1)}, "must start and end on its rows"},
		{"two ec components", []Comp{ec(0, 2*mib, 2, 1), ec(2*mib, ExtentEOF, 2, 1)}, "one erasure-coded component"},
		{"ec component wider than the OSTs", []Comp{comp(0, 4*mib, mib, 1), ec(4*mib, ExtentEOF, 4, 1)}, "needs 5 OSTs, the filesystem has 4"},
		{"ec component without parity", []Comp{comp(0, 2*mib, mib, 1), {Start: 2 * mib, End: ExtentEOF, StripeSize: mib, StripeCount: 2, FirstOST: -1, ECData: 2}}, "needs at least 1 parity unit"},
		{"too many", func() []Comp {
			var cs []Comp
			for i := range uint64(MaxComps + 1) {
				cs = append(cs, comp(i*mib, (i+1)*mib, mib, 1))
			}
			return cs
		}(), "at most 16"},
		{"first OST missing", []Comp{{Start: 0, End: ExtentEOF, StripeSize: mib, StripeCount: 1, FirstOST: 7}}, "first OST 7 does not exist"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := Layout{Comps: tc.comps}.normalized()
			err := l.Validate(4)
			if tc.err == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, syscall.EINVAL) {
				t.Fatalf("Validate = %v, want an EINVAL saying %q", err, tc.err)
			}
		})
	}
	// A damaged instantiated layout is EIO to a client.
	l := Layout{Comps: []Comp{comp(0, mib, mib, 1), comp(mib, ExtentEOF, mib, 2)}}.normalized().Instantiate(4, 0, 0)
	bad := l
	bad.Comps = append([]Comp{}, l.Comps...)
	bad.Comps[1].Inst, bad.Comps[1].Base, bad.Comps[1].StripeCount = true, 5, 2
	if err := bad.CheckFile(); !errors.Is(err, syscall.EIO) {
		t.Errorf("CheckFile of objects that do not add up = %v", err)
	}
	for _, s := range []string{"extent=0", "extent=a-b stripe_count=1", "stripe_count=1\nextent=0-EOF", "extent=0-EOF stripe_count=0x"} {
		if _, err := ParseLayout(s, Layout{}); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("ParseLayout(%q) = %v, want EINVAL", s, err)
		}
	}
}
