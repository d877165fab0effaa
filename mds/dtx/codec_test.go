package dtx

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/stripefs/stripefs/proto"
)

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

// TestCodecRoundTrip: every record reads back as written, and no cut of
// its bytes reads back as it (a cut record is an error or a shorter one).
func TestCodecRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2000; i++ {
		r := randomRecord(rng)
		b := r.Marshal()
		var got Record
		if err := got.Unmarshal(b); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if !reflect.DeepEqual(&got, normalized(r)) {
			t.Fatalf("record %d:\n got %+v\nwant %+v", i, got, r)
		}
		if len(b) > 0 {
			cut := rng.IntN(len(b))
			var c Record
			if c.Unmarshal(b[:cut]) == nil && reflect.DeepEqual(&c, normalized(r)) {
				t.Fatalf("record %d cut at %d of %d reads back whole", i, cut, len(b))
			}
		}
	}
}

// normalized is r as decoding gives it back: empty byte slices are nil.
func normalized(r *Record) *Record {
	c := *r
	c.Updates = nil
	for _, u := range r.Updates {
		if len(u.Inode) == 0 {
			u.Inode = nil
		}
		c.Updates = append(c.Updates, u)
	}
	return &c
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
	buf := r.Marshal()
	b.ReportAllocs()
	for b.Loop() {
		r.Marshal()
		var got Record
		if err := got.Unmarshal(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzRecordCodec: any input is refused or read as a record whose bytes
// read back as the same record.
func FuzzRecordCodec(f *testing.F) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 8 {
		f.Add(randomRecord(rng).Marshal())
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var r Record
		if r.Unmarshal(in) != nil {
			return
		}
		var again Record
		if err := again.Unmarshal(r.Marshal()); err != nil || !reflect.DeepEqual(again, r) {
			t.Fatalf("%+v read back as %+v %v", r, again, err)
		}
	})
}
