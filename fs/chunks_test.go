package fs

import (
	"slices"
	"testing"

	"github.com/stripefs/stripefs/fs/extent"
	"github.com/stripefs/stripefs/layout"
	"github.com/stripefs/stripefs/proto"
)

const kib, mib = 1 << 10, 1 << 20

// TestChunkSize: the write-back chunk divides every component's stripe
// size and end, but for a Data-on-MDT component's, which a chunk may
// straddle.
func TestChunkSize(t *testing.T) {
	parse := func(s string) proto.Layout {
		l, err := proto.ParseLayout(s, proto.Layout{StripeSize: mib, StripeCount: 1, FirstOST: -1})
		if err != nil {
			t.Fatal(err)
		}
		return l.Instantiate(4, 0, 0)
	}
	for _, tc := range []struct {
		layout string
		want   int64
	}{
		{"stripe_count=2 stripe_size=1048576", mib},
		{"stripe_size=8388608", maxRPC},
		{"extent=0-65536 stripe_size=65536;extent=65536-EOF stripe_size=1048576", 64 * kib},
		{"extent=0-65536 pattern=mdt;extent=65536-EOF stripe_size=1048576", mib},
		{"extent=0-1572864 pattern=mdt;extent=1572864-EOF stripe_size=524288", 512 * kib},
		{"extent=0-131072 pattern=mdt", 128 * kib},
	} {
		if got := chunkSize(parse(tc.layout)); got != tc.want {
			t.Errorf("%q: chunk size %d, want %d", tc.layout, got, tc.want)
		}
	}

	// The chunk across a 64 KiB DoM end: its dirty bytes go to the MDT's
	// object and the OST's, each at its own object offset.
	l := parse("extent=0-65536 pattern=mdt;extent=65536-EOF stripe_size=1048576").InstantiateTo(proto.ExtentEOF, 4, 0, 0)
	ch := &chunk{idx: 0}
	ch.dirty.Add(4*kib, 8*kib)
	ch.dirty.Add(60*kib, 70*kib)
	ch.dirty.Add(900*kib, 901*kib)
	ps := dirtyPieces(l, mib, ch)
	want := []piece{
		{m: layout.Chunk{Stripe: 0, FileOff: 0, ObjOff: 0, Len: 64 * kib}, ranges: []extent.Range{{Start: 4 * kib, End: 8 * kib}, {Start: 60 * kib, End: 64 * kib}}},
		{m: layout.Chunk{Stripe: 1, FileOff: 64 * kib, ObjOff: 64 * kib, Len: mib - 64*kib}, ranges: []extent.Range{{Start: 64 * kib, End: 70 * kib}, {Start: 900 * kib, End: 901 * kib}}},
	}
	if len(ps) != len(want) {
		t.Fatalf("pieces %+v", ps)
	}
	for i := range want {
		if ps[i].m != want[i].m || !slices.Equal(ps[i].ranges, want[i].ranges) {
			t.Errorf("piece %d = %+v, want %+v", i, ps[i], want[i])
		}
	}
	if !proto.IsDoMOST(l.OSTs[ps[0].m.Stripe]) || proto.IsDoMOST(l.OSTs[ps[1].m.Stripe]) {
		t.Errorf("objects of the pieces: %v", l.OSTs)
	}
	if osts, each := chunkCharge(l, mib, 0); len(osts) != 2 || each != mib {
		t.Errorf("charge of the chunk across the DoM end: %v %d", osts, each)
	}
}
