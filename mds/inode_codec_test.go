package mds

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/wire"
)

// reflectedInode is inode without its codec: wire encodes it by reflection.
type reflectedInode inode

func randomInode(rng *rand.Rand) *inode {
	fid := func() proto.FID { return proto.FID{Seq: rng.Uint64(), Oid: rng.Uint32(), Ver: rng.Uint32()} }
	lay := func() proto.Layout {
		l := proto.Layout{StripeSize: rng.Uint32(), StripeCount: rng.Uint32(), FirstOST: int32(rng.Uint32()),
			ECData: uint16(rng.Uint32()), ECParity: uint16(rng.Uint32())}
		for range rng.IntN(4) {
			l.OSTs = append(l.OSTs, rng.Uint32())
		}
		return l
	}
	return &inode{
		Attr: proto.Attr{FID: fid(), Mode: rng.Uint32(), Nlink: rng.Uint32(), Uid: rng.Uint32(), Gid: rng.Uint32(), Rdev: rng.Uint32(),
			Size: rng.Uint64(), Atime: rng.Int64() - rng.Int64(), Mtime: rng.Int64(), Ctime: -rng.Int64(), Layout: lay()},
		Parent: fid(), Target: string(make([]byte, rng.IntN(3)*100)), DefLayout: lay(),
		DefDir: DirLayout{Set: rng.IntN(2) == 0, Index: int32(rng.Uint32()), Count: rng.Uint32()},
	}
}

// TestInodeCodecMatchesReflection: the hand-written codec writes the
// bytes reflection writes, reads back what reflection reads, and fails
// where reflection fails, on whole, cut and corrupted encodings.
func TestInodeCodecMatchesReflection(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2000; i++ {
		n := randomInode(rng)
		fast, slow := wire.Marshal(nil, n), wire.Marshal(nil, (*reflectedInode)(n))
		if !bytes.Equal(fast, slow) {
			t.Fatalf("inode %d: encodings differ\n fast %x\n slow %x", i, fast, slow)
		}
		bad := bytes.Clone(fast)
		bad[rng.IntN(len(bad))] ^= byte(1 + rng.IntN(255))
		for _, in := range [][]byte{fast, fast[:rng.IntN(len(fast)+1)], append(bytes.Clone(fast), 0), bad} {
			checkInodeDecoders(t, in)
		}
		var back inode
		if err := wire.Unmarshal(fast, &back); err != nil || !reflect.DeepEqual(&back, n) {
			t.Fatalf("inode %d: round trip: %v\n %+v\n %+v", i, err, &back, n)
		}
	}
}

func checkInodeDecoders(t *testing.T, in []byte) {
	t.Helper()
	var a inode
	var b reflectedInode
	errA, errB := wire.Unmarshal(in, &a), wire.Unmarshal(in, &b)
	if (errA == nil) != (errB == nil) {
		t.Fatalf("codec says %v, reflection %v, on %x", errA, errB, in)
	}
	if errA == nil && !reflect.DeepEqual(a, inode(b)) {
		t.Fatalf("decodings differ\n %+v\n %+v", a, inode(b))
	}
}

// FuzzInodeCodec: on any input the two decoders agree.
func FuzzInodeCodec(f *testing.F) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 8 {
		f.Add(wire.Marshal(nil, randomInode(rng)))
	}
	f.Fuzz(checkInodeDecoders)
}
