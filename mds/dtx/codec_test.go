package dtx

import (
	"math/rand/v2"
	"testing"

	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/wire"
	"github.com/stripefs/stripefs/wire/wiretest"
)

// reflected is Record without its codec: wire encodes it by reflection.
type reflected Record

func randomRecord(rng *rand.Rand) *Record {
	str := func() string {
		kinds := []string{"", CreateInode, ClientDone, "x", string(make([]byte, rng.IntN(300)))}
		return kinds[rng.IntN(len(kinds))]
	}
	fid := func() proto.FID { return proto.FID{Seq: rng.Uint64(), Oid: rng.Uint32(), Ver: rng.Uint32()} }
	r := &Record{ID: OpID{Coord: rng.Uint32(), Epoch: rng.Uint32(), Seq: rng.Uint64()}, Op: str(), Started: rng.Int64() - rng.Int64()}
	for range rng.IntN(5) {
		u := Update{Kind: str(), MDT: rng.Uint32(), FID: fid(), Parent: fid(), Name: str(), Mode: rng.Uint32(),
			Delta: int32(rng.Uint32()), Time: rng.Int64() - rng.Int64()}
		if n := rng.IntN(3); n > 0 {
			u.Inode = make([]byte, n*100)
			for i := range u.Inode {
				u.Inode[i] = byte(rng.Uint32())
			}
		}
		r.Updates = append(r.Updates, u)
	}
	return r
}

// TestCodecMatchesReflection: the hand-written codec writes the bytes
// reflection writes, reads back what reflection reads, and fails where
// reflection fails, on whole, cut and corrupted encodings.
func TestCodecMatchesReflection(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2000; i++ {
		if err := wiretest.Same(rng, randomRecord(rng), (*reflected)(nil)); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
}

func BenchmarkRecordCodec(b *testing.B) {
	// A remote mkdir's record.
	f, parent := proto.FID{Seq: 0x200000401, Oid: 77}, proto.FID{Seq: 0x200000400, Oid: 5}
	r := &Record{ID: OpID{Coord: 0, Epoch: 3, Seq: 12345}, Op: "mkdir", Started: 1764530000000000000, Updates: []Update{
		{Kind: CreateInode, MDT: 1, FID: f, Inode: make([]byte, 180)},
		{Kind: InsertDirent, MDT: 0, Parent: parent, Name: "mdtest.dir.0.123", FID: f, Mode: 0o040000},
		{Kind: ParentLink, MDT: 0, Parent: parent, Delta: 1, Time: 1764530000000000000},
		Done(0, "0123456789abcdef0123456789abcdef", 4242, 1764530000000000000),
	}}
	for _, c := range []struct {
		name string
		v    any
		into func() any
	}{{"hand", r, func() any { return new(Record) }}, {"reflection", (*reflected)(r), func() any { return new(reflected) }}} {
		b.Run(c.name, func(b *testing.B) {
			buf := wire.Marshal(nil, c.v)
			b.ReportAllocs()
			for b.Loop() {
				wire.Marshal(make([]byte, 0, 512), c.v)
				if err := wire.Unmarshal(buf, c.into()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// FuzzRecordCodec: on any input the hand-written decoder and reflection
// agree, on the error and on the record.
func FuzzRecordCodec(f *testing.F) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 8 {
		f.Add(wire.Marshal(nil, randomRecord(rng)))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if err := wiretest.SameDecoding(in, (*Record)(nil), (*reflected)(nil)); err != nil {
			t.Fatal(err)
		}
	})
}
