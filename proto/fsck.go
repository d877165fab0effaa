package proto

// Messages of stripefs fsck: it pages through every MDT's inodes and
// entries and every OST's objects, decides, and asks for repairs.

type ScanReq struct {
	After []byte // resume after this key (nil: from the start)
	Max   uint32
}

type ScanInode struct {
	Attr   Attr
	Parent FID  // directories
	Open   bool // unlinked but still open (an orphan by design)
	// Striped directories: a master lists its stripes; a stripe names its
	// master and its index (-1 elsewhere).
	Stripes     []FID
	Master      FID
	StripeIndex int32
}

type ScanInodesReply struct {
	Inodes []ScanInode
	Next   []byte // key to resume after
	EOF    bool
}

type ScanDirent struct {
	Parent FID
	Name   string
	FID    FID
	Mode   uint32
}

type ScanDirentsReply struct {
	Dirents []ScanDirent
	Next    []byte
	EOF     bool
}

// Repairs fsck can ask of an MDT.
//
// Each is conditional on what the scan saw, because the filesystem may be
// in use: an MDT refuses with ESTALE a repair whose object changed since.
const (
	FixDropDirent = "drop_dirent" // remove Parent/Name, if it still names FID (a missing inode)
	FixSetNlink   = "set_nlink"   // set FID's link count to Nlink, if it is still Have
	FixLinkLost   = "link_lost"   // link orphan FID into Parent (lost+found) as Name
)

type FsckFixReq struct {
	Action string
	Parent FID
	Name   string
	FID    FID
	Mode   uint32
	Nlink  uint32
	Have   uint32 // set_nlink: the link count the scan saw
}
