package layout

import (
	"math/rand"
	"testing"

	"github.com/stripefs/stripefs/proto"
)

func lay(ss, sc uint32) proto.Layout { return proto.Layout{StripeSize: ss, StripeCount: sc} }

func TestMap(t *testing.T) {
	const K = 64 << 10
	tests := []struct {
		name string
		l    proto.Layout
		off  uint64
		n    int
		want []Chunk
	}{
		{"one stripe", lay(K, 1), 100, 3 * K, []Chunk{{0, 100, 100, 3 * K}}},
		{"inside unit", lay(K, 4), 10, 20, []Chunk{{0, 10, 10, 20}}},
		{"across units", lay(K, 2), K - 10, 30, []Chunk{{0, K - 10, K - 10, 10}, {1, K, 0, 20}}},
		{"second row", lay(K, 2), 2*K + 5, 10, []Chunk{{0, 2*K + 5, K + 5, 10}}},
		{"whole row and a bit", lay(K, 3), 0, 3*K + 1, []Chunk{{0, 0, 0, K}, {1, K, 0, K}, {2, 2 * K, 0, K}, {0, 3 * K, K, 1}}},
		{"empty", lay(K, 3), 7, 0, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Map(tc.l, tc.off, tc.n)
			if len(got) != len(tc.want) {
				t.Fatalf("Map = %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("chunk %d = %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

// TestObjectSizeAgainstMap checks ObjectSize and FileEnd against a byte-by-
// byte model built with Map, over random layouts and sizes.
func TestObjectSizeAgainstMap(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for iter := 0; iter < 300; iter++ {
		l := lay(uint32(1+rng.Intn(4))*16, uint32(1+rng.Intn(5)))
		size := uint64(rng.Intn(2000))
		want := make([]uint64, l.StripeCount)
		for _, c := range Map(l, 0, int(size)) {
			want[c.Stripe] = max(want[c.Stripe], c.ObjOff+uint64(c.Len))
		}
		var end uint64
		for s := range want {
			if got := ObjectSize(l, size, s); got != want[s] {
				t.Fatalf("layout %+v size %d stripe %d: ObjectSize %d, want %d", l, size, s, got, want[s])
			}
			end = max(end, FileEnd(l, s, want[s]))
		}
		if end != size {
			t.Fatalf("layout %+v size %d: FileEnd max %d", l, size, end)
		}
	}
}
