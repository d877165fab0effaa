// Package proto holds what clients and servers agree on: identifiers, the
// method numbers and the request and reply messages of every RPC. Servers
// and clients both import it; neither imports the other.
package proto

import (
	"encoding/binary"
	"fmt"
)

// FID is a 128-bit file identifier, as in Lustre: a sequence, an object id
// within it, and a version. Each MDT owns the sequences whose top bits are
// its index, so a FID names its MDT without a lookup (no FLDB needed).
type FID struct {
	Seq uint64
	Oid uint32
	Ver uint32
}

const (
	// seqMDTShift places the MDT index inside a sequence number. Sequences
	// stay below 2^32 so that Ino can be reversed into the FID.
	seqMDTShift = 24
	// MaxMDTs is the number of MDT indexes a sequence can name.
	MaxMDTs = 256
	// MaxLocalSeq is the last sequence an MDT may allocate.
	MaxLocalSeq = 1<<seqMDTShift - 1
)

// RootFID is the filesystem root, always on MDT0.
var RootFID = FID{Seq: MDTSeq(0, 1), Oid: 1}

// MDTSeq returns the n-th sequence owned by MDT mdt.
func MDTSeq(mdt int, n uint64) uint64 { return uint64(mdt)<<seqMDTShift | n }

// MDT is the index of the MDT that owns f.
func (f FID) MDT() int { return int(f.Seq >> seqMDTShift) }

// IsZero reports whether f is unset.
func (f FID) IsZero() bool { return f == FID{} }

// Ino is the inode number f shows through FUSE and NFS. It is a bijection
// with FIDs of version 0, so it is stable across mounts and restarts and an
// inode number alone finds the file again (what NFS file handles need).
func (f FID) Ino() uint64 { return f.Seq<<32 | uint64(f.Oid) }

// FIDFromIno reverses Ino.
func FIDFromIno(ino uint64) FID { return FID{Seq: ino >> 32, Oid: uint32(ino)} }

func (f FID) String() string { return fmt.Sprintf("[%#x:%#x:%#x]", f.Seq, f.Oid, f.Ver) }

// Key is f as 16 big-endian bytes, so keys sort by sequence then id.
func (f FID) Key() [16]byte {
	var k [16]byte
	binary.BigEndian.PutUint64(k[0:], f.Seq)
	binary.BigEndian.PutUint32(k[8:], f.Oid)
	binary.BigEndian.PutUint32(k[12:], f.Ver)
	return k
}

// FIDFromKey reverses Key.
func FIDFromKey(k []byte) (FID, error) {
	if len(k) < 16 {
		return FID{}, fmt.Errorf("fid key of %d bytes", len(k))
	}
	return FID{Seq: binary.BigEndian.Uint64(k), Oid: binary.BigEndian.Uint32(k[8:]), Ver: binary.BigEndian.Uint32(k[12:])}, nil
}

// ObjID names one OST object: stripe Stripe of file FID. Objects need no
// allocation round trip at create time: their names follow from the layout.
type ObjID struct {
	FID    FID
	Stripe uint32
}

func (o ObjID) String() string { return fmt.Sprintf("%s/%d", o.FID, o.Stripe) }

// Striped directories take their FIDs from the last two sequences of
// each MDT, so a FID alone says whether it names a striped directory's
// master (whose entries the client finds by hashing names over its
// stripes) or one of its stripes: a plain directory costs no extra
// lookup, and an inode number the kernel or an NFS handle presents still
// resolves without a table. Plain allocation stops before them.
const (
	StripedSeqLocal = MaxLocalSeq     // masters of striped directories
	StripeSeqLocal  = MaxLocalSeq - 1 // their stripes
	LastPlainSeq    = MaxLocalSeq - 2 // the last sequence of everything else
)

// IsStripedDir reports whether f is the master of a striped directory.
func (f FID) IsStripedDir() bool { return f.Seq&MaxLocalSeq == StripedSeqLocal }

// IsDirStripe reports whether f is one stripe of a striped directory.
func (f FID) IsDirStripe() bool { return f.Seq&MaxLocalSeq == StripeSeqLocal }
