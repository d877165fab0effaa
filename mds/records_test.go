package mds

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/stripefs/stripefs/proto"
)

func randomInode(rng *rand.Rand) *inode {
	str := func() string { // not always UTF-8: ACLs are binary, names are bytes
		b := make([]byte, rng.IntN(3)*100)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return string(b)
	}
	fid := func() proto.FID { return proto.FID{Seq: rng.Uint64(), Oid: rng.Uint32(), Ver: rng.Uint32()} }
	lay := func() proto.Layout {
		l := proto.Layout{StripeSize: rng.Uint32(), StripeCount: rng.Uint32(), FirstOST: int32(rng.Uint32()),
			ECData: uint16(rng.Uint32()), ECParity: uint16(rng.Uint32())}
		for range rng.IntN(4) {
			l.OSTs = append(l.OSTs, rng.Uint32())
		}
		for range rng.IntN(3) {
			l.Comps = append(l.Comps, proto.Comp{Start: rng.Uint64(), End: rng.Uint64(), StripeSize: rng.Uint32(), StripeCount: rng.Uint32(),
				FirstOST: int32(rng.Uint32()), ECData: uint16(rng.Uint32()), ECParity: uint16(rng.Uint32()), Base: rng.Uint32(), Inst: rng.IntN(2) == 0})
		}
		return l
	}
	return &inode{
		Attr: proto.Attr{FID: fid(), Mode: rng.Uint32(), Nlink: rng.Uint32(), Uid: rng.Uint32(), Gid: rng.Uint32(), Rdev: rng.Uint32(),
			Size: rng.Uint64(), Atime: rng.Int64() - rng.Int64(), Mtime: rng.Int64(), Ctime: -rng.Int64(), Layout: lay(), ACL: str()},
		Parent: fid(), Target: str(), DefLayout: lay(), DefACL: str(),
		DefDir: DirLayout{Set: rng.IntN(2) == 0, Index: int32(rng.Uint32()), Count: rng.Uint32()},
	}
}

// TestInodeRoundTrip: every inode reads back as written, whatever its
// field values, and so does every directory entry.
func TestInodeRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2000; i++ {
		n := randomInode(rng)
		var got inode
		if err := unmarshalInode(n.marshal(), &got); err != nil {
			t.Fatalf("inode %d: %v", i, err)
		}
		if !reflect.DeepEqual(&got, n) {
			t.Fatalf("inode %d:\n got %+v\nwant %+v", i, got, *n)
		}
		d := dirent{FID: n.Parent, Mode: n.Attr.Mode}
		var gd dirent
		if err := unmarshalDirent(d.marshal(), &gd); err != nil || gd != d {
			t.Fatalf("entry %d: %+v read back as %+v %v", i, d, gd, err)
		}
	}
}

// FuzzInodeCodec: any input is refused or read as an inode whose bytes
// read back as the same inode.
func FuzzInodeCodec(f *testing.F) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 8 {
		f.Add(randomInode(rng).marshal())
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var n inode
		if unmarshalInode(in, &n) != nil {
			return
		}
		var again inode
		if err := unmarshalInode(n.marshal(), &again); err != nil || !reflect.DeepEqual(again, n) {
			t.Fatalf("%+v read back as %+v %v", n, again, err)
		}
	})
}

func BenchmarkInodeCodec(b *testing.B) {
	// A regular file striped over two OSTs, as a lookup reads it.
	n := &inode{Attr: proto.Attr{FID: proto.FID{Seq: 0x200000401, Oid: 77}, Mode: sIFREG | 0o644, Nlink: 1, Uid: 1000, Gid: 1000,
		Size: 3901, Atime: 1764530000000000000, Mtime: 1764530000000000000, Ctime: 1764530000000000000,
		Layout: proto.Layout{StripeSize: 1 << 20, StripeCount: 2, FirstOST: 1, OSTs: []uint32{1, 2}}},
		Parent: proto.FID{Seq: 0x200000400, Oid: 5}}
	buf := n.marshal()
	b.Run("marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			n.marshal()
		}
	})
	b.Run("unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var got inode
			if err := unmarshalInode(buf, &got); err != nil {
				b.Fatal(err)
			}
		}
	})
}
