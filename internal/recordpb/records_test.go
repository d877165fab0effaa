package recordpb

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"
)

func randomRecords(rng *rand.Rand) []interface {
	proto.Message
	MarshalVT() ([]byte, error)
} {
	fid := func() *FID {
		if rng.IntN(4) == 0 {
			return nil
		}
		return &FID{Seq: rng.Uint64(), Oid: rng.Uint32(), Ver: rng.Uint32()}
	}
	raw := func() []byte {
		b := make([]byte, rng.IntN(3)*40)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	lay := func() *Layout {
		l := &Layout{StripeSize: rng.Uint32(), StripeCount: rng.Uint32(), FirstOst: int32(rng.Uint32()), EcData: rng.Uint32(), EcParity: rng.Uint32()}
		for range rng.IntN(4) {
			l.Osts = append(l.Osts, rng.Uint32())
		}
		for range rng.IntN(3) {
			l.Comps = append(l.Comps, &Component{Start: rng.Uint64(), End: rng.Uint64(), FirstOst: -1, Inst: rng.IntN(2) == 0})
		}
		return l
	}
	rec := &Record{Id: &OpID{Coord: rng.Uint32(), Epoch: rng.Uint32(), Seq: rng.Uint64()}, Op: "mkdir", Started: rng.Int64() - rng.Int64()}
	for range rng.IntN(4) {
		rec.Updates = append(rec.Updates, &Update{Kind: "create_inode", Mdt: rng.Uint32(), Fid: fid(), Parent: fid(), Name: raw(),
			Mode: rng.Uint32(), Delta: int32(rng.Uint32()), Time: rng.Int64(), Inode: raw()})
	}
	return []interface {
		proto.Message
		MarshalVT() ([]byte, error)
	}{
		&Inode{Fid: fid(), Mode: rng.Uint32(), Size: rng.Uint64(), Atime: -rng.Int64(), Layout: lay(), Acl: raw(), Parent: fid(),
			Target: raw(), DefLayout: lay(), DefDir: &DirLayout{Set: true, Index: -1, Count: rng.Uint32()}, DefAcl: raw()},
		&Dirent{Fid: fid(), Mode: rng.Uint32()},
		rec,
		&Object{Owner: &Owner{Uid: rng.Uint32(), Gid: rng.Uint32(), Projid: rng.Uint32()}, Bytes: rng.Uint64(), Size: rng.Uint64()},
		&Grant{Grant: rng.Uint64()},
	}
}

// TestVTMatchesStandard: vtprotobuf's marshallers write the bytes the
// standard library writes, and read back what it wrote, so a record is
// readable by any protocol buffers implementation.
func TestVTMatchesStandard(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 500; i++ {
		for _, m := range randomRecords(rng) {
			vt, err := m.MarshalVT()
			if err != nil {
				t.Fatal(err)
			}
			std, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(vt, std) {
				t.Fatalf("%T %d: vtprotobuf wrote %x, the standard library %x", m, i, vt, std)
			}
			back := m.ProtoReflect().New().Interface()
			if err := back.(interface{ UnmarshalVT([]byte) error }).UnmarshalVT(std); err != nil || !proto.Equal(back, m) {
				t.Fatalf("%T %d: read back %v (%v), want %v", m, i, back, err, m)
			}
		}
	}
}
