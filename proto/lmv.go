package proto

// LMV is a striped directory's layout (Lustre's lmv_mds_md), stored on
// its master and on each stripe: entries live in the stripes, stripe i on
// MDT Stripes[i].MDT(), and a name belongs to the stripe its hash picks
// (layout.DirStripe).
type LMV struct {
	Master FID
	// Index is the stripe this copy is stored on; -1 on the master.
	Index   int32
	Hash    string // hash type, layout.DirHashFNV1a64
	Stripes []FID
}

// LMVXattr is the internal extended attribute holding the encoded LMV.
// Its name starts with a NUL byte, which no name from the kernel can, so
// users can neither see nor set it; the client reads it to route by name.
const LMVXattr = "\x00lmv"

// DirDefaultXattr holds a directory's default layout for new
// subdirectories (lfs setdirstripe -D): "mdt_index=-1 mdt_count=2".
const DirDefaultXattr = "lustre.lmv.default"

// MReserveFIDs asks an MDT for FIDs that another MDT's distributed mkdir
// will create there (ReserveFIDsReq): the coordinator then names the new
// objects itself and needs no answer from their MDT first.
type ReserveFIDsReq struct {
	Kind  uint8 // FIDPlain, FIDStripedMaster or FIDDirStripe
	N     uint32
	Coord uint32 // the asking MDT
}

// Kinds of FID an MDT reserves for another.
const (
	FIDPlain         uint8 = iota // an ordinary inode's: remote mkdir
	FIDStripedMaster              // a striped directory's master
	FIDDirStripe                  // a stripe of one
)

type ReserveFIDsReply struct{ FIDs []FID }

// StripeFreezeReq asks an MDT to hold back new entries in the given
// stripes of a striped directory being removed, once each is checked
// empty (Freeze), or to let them go again.
type StripeFreezeReq struct {
	FIDs   []FID
	Freeze bool
}
