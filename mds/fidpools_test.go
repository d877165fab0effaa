package mds

import (
	"testing"

	"github.com/stripefs/stripefs/proto"
)

// TestFIDPools: FIDs come out in order; a refill is asked for once when
// fewer than low are left, not again until it has landed, and never for
// low < 0.
func TestFIDPools(t *testing.T) {
	var p fidPools
	k := poolKey{1, proto.FIDPlain}
	if _, ok, _ := p.take(k, 4); ok {
		t.Fatal("an empty pool gave a FID")
	}
	fids := func(from, n uint32) (out []proto.FID) {
		for i := range n {
			out = append(out, proto.FID{Seq: 7, Oid: from + i})
		}
		return out
	}
	p.add(k, fids(1, 6), false)
	var refills []uint32
	for want := uint32(1); want <= 6; want++ {
		f, ok, refill := p.take(k, 4)
		if !ok || f.Oid != want {
			t.Fatalf("take %d: %v %v", want, f, ok)
		}
		if refill {
			refills = append(refills, want)
		}
	}
	if len(refills) != 1 || refills[0] != 3 { // after the third, 3 are left
		t.Fatalf("refills asked at %v, want once at 3", refills)
	}
	p.add(k, fids(10, 2), true)
	if _, _, refill := p.take(k, 4); !refill {
		t.Fatal("no refill asked for after the last one landed")
	}
	other := poolKey{0, proto.FIDPlain}
	p.add(other, fids(20, 1), false)
	if _, ok, refill := p.take(other, -1); !ok || refill {
		t.Fatalf("own pool: ok %v, refill %v", ok, refill)
	}
}
