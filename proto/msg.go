package proto

import (
	"fmt"
	"strings"
)

// Method numbers. MDT methods are below 64, OST methods from 64, cluster
// (MGS) methods from 128. A number is never reused for another meaning.
const (
	MLookup uint16 = 1 + iota
	MGetattr
	MSetattr
	MCreate
	MMkdir
	MSymlink
	MReadlink
	MUnlink
	MRename
	MLink
	MReaddir
	MGetxattr
	MSetxattr
	MListxattr
	MRemovexattr
	MStatfs
	MOpen
	MClose
	MSync
	_ // retired: an orphan listing never served; the number stays taken
	_ // retired: a destroy confirmation never sent; the number stays taken
	MTxnApply
	MTxnStatus
	MTxnRedo
	MTxnCancel
	MSetParam
	MTxnList
	MQuotaLimits   // MDT0: every quota limit (quota master)
	MQuotaAcquire  // MDT0: a slave target's allowance for one id
	MQuotaGet      // any MDT: its inode usage of one quota
	MOwner         // a file's owner for block quota (uid, gid, projid)
	MScanInodes    // fsck: page through every inode
	MScanDirents   // fsck: page through every directory entry
	MFsckFix       // fsck --repair: one repair
	MTxnPull       // between MDTs: the record that creates a FID, if the asker coordinates one
	MReserveFIDs   // between MDTs: FIDs of the answering MDT for the asker's mkdirs there
	MStripeFreeze  // hold back entries of a striped directory being removed
	MTxnApplyBatch // between MDTs: parts a coordinator pushes after replying (async remote mkdir)
)

const (
	OWrite uint16 = 64 + iota
	ORead
	OPunch
	OGetattr
	ODestroy
	OStatfs
	OSync
	OList
	OQuotaGet  // block usage of one quota and the OST's space accounting
	OSetParam  // run-time tunables (lctl set_param)
	OFallocate // allocate, punch or zero a range of an object (fallocate(2))
	OCopy      // copy a range of another object into one here (copy_file_range(2))
)

const (
	GConfig uint16 = 128 + iota
	GRegister
)

// MethodName is the short name stats print for m.
func MethodName(m uint16) string {
	if n, ok := methodNames[m]; ok {
		return n
	}
	return "unknown"
}

var methodNames = map[uint16]string{
	MLookup: "lookup", MGetattr: "getattr", MSetattr: "setattr", MCreate: "create",
	MMkdir: "mkdir", MSymlink: "symlink", MReadlink: "readlink", MUnlink: "unlink",
	MRename: "rename", MLink: "link", MReaddir: "readdir", MGetxattr: "getxattr",
	MSetxattr: "setxattr", MListxattr: "listxattr", MRemovexattr: "removexattr",
	MStatfs: "statfs", MOpen: "open", MClose: "close", MSync: "sync",
	MTxnApply: "txn_apply", MTxnStatus: "txn_status", MTxnRedo: "txn_redo", MTxnCancel: "txn_cancel", MSetParam: "set_param", MTxnList: "txn_list",
	MTxnPull:     "txn_pull",
	MReserveFIDs: "reserve_fids", MStripeFreeze: "stripe_freeze", MTxnApplyBatch: "txn_apply_batch",
	MScanInodes: "scan_inodes", MScanDirents: "scan_dirents", MFsckFix: "fsck_fix",
	MQuotaLimits: "quota_limits", MQuotaAcquire: "quota_acquire", MQuotaGet: "quota_get", MOwner: "owner",
	OWrite: "ost_write", ORead: "ost_read", OPunch: "ost_punch", OGetattr: "ost_getattr",
	ODestroy: "ost_destroy", OStatfs: "ost_statfs", OSync: "ost_sync", OList: "ost_list",
	OQuotaGet: "ost_quota_get", OSetParam: "ost_set_param", OFallocate: "ost_fallocate",
	OCopy:   "ost_copy",
	GConfig: "mgs_config", GRegister: "mgs_register",
}

// Attr is an inode's attributes as the MDT keeps them. Times are
// nanoseconds since the epoch.
type Attr struct {
	FID                 FID
	Mode                uint32 // type and permission bits, as st_mode
	Nlink               uint32
	Uid, Gid            uint32
	Rdev                uint32
	Size                uint64
	Atime, Mtime, Ctime int64
	Layout              Layout // regular files: where the data lives
	// ACL is the access ACL beyond the mode (system.posix_acl_access in
	// Linux's xattr form, package perm); empty when the mode says all.
	ACL string
}

type LookupReq struct {
	Parent FID
	Name   string
	// Want asks for metadata locks (LockLookup, LockUpdate) on the inode
	// found, granted with the reply if nothing conflicts.
	Want uint8
}

type GetattrReq struct {
	FID  FID
	Want uint8 // as LookupReq's
}

// AttrReply carries attributes. Remote says the inode lives on another
// MDT (a remote directory's entry, or its ".."): only Attr.FID and the type
// bits of Attr.Mode are set, and the client asks that MDT for the rest.
type AttrReply struct {
	Attr   Attr
	Remote bool
	// Parent is the directory an entry was made in, as the change left it
	// (zero FID: not given). The kernel drops a directory's attributes
	// when an entry comes or goes in it, and asks for them again before
	// the next lookup there; the client answers that from this.
	Parent Attr
	// Lock is the metadata lock granted on Attr.FID (LookupReq.Want).
	Lock LockGrant
	// A create of a regular file says who its blocks are charged to
	// (HasOwner), and one that opens it for writing, with locks wanted,
	// grants a write lock on all of it (Data; no other client can hold
	// one yet): the first write needs neither an owner RPC nor a lock
	// enqueue.
	HasOwner bool
	Owner    Owner
	Data     LockDesc
	// Bytes are the file's data from offset 0 to its size, which an open
	// asked for (OpenReq.ReadData), under the read lock in Data.
	Bytes []byte
	// HasBlocks: Blocks is the file's allocated 512-byte blocks, which the
	// MDT knows when it holds all of the file's data (Data-on-MDT), so a
	// stat asks no other target.
	HasBlocks bool
	Blocks    uint64
}

// Setattr valid bits.
const (
	SetMode uint32 = 1 << iota
	SetUid
	SetGid
	SetSize
	SetAtime
	SetMtime
	SetCtime
	SetAtimeNow
	SetMtimeNow
)

type SetattrReq struct {
	FID                 FID
	Valid               uint32
	Mode, Uid, Gid      uint32
	Size                uint64
	Atime, Mtime, Ctime int64
	// Sync asks the MDT to commit before replying (fsync).
	Sync bool
	// FromWrites marks a size and mtime that the client's writes made
	// (a flush or fsync, not a truncate): they only ever grow the file's.
	FromWrites bool
}

type CreateReq struct {
	Parent FID
	Name   string
	Mode   uint32 // with the type bits: S_IFREG, S_IFIFO, S_IFSOCK, S_IFCHR, S_IFBLK
	Rdev   uint32
	Excl   bool
	// Open counts an open on the new file (create+open in one RPC), with
	// the open's Flags (O_WRONLY…).
	Open  bool
	Flags uint32
	// Layout, if set, overrides the directory default.
	Layout Layout
	// Want asks for metadata locks on the new inode.
	Want uint8
	// Umask is the creator's, for the MDT to apply unless the directory
	// has a default ACL (which replaces it); zero when Mode has it applied.
	Umask uint32
}

type MkdirReq struct {
	Parent FID
	Name   string
	Mode   uint32
	Umask  uint32 // as CreateReq.Umask
	// MDT places the new directory: -1 follows the parent's default
	// directory layout (its own MDT when it has none).
	MDT int32
	// Want asks for metadata locks on the new inode.
	Want uint8
}

type SymlinkReq struct {
	Parent FID
	Name   string
	Target string
	Want   uint8 // metadata locks on the new inode
}

type ReadlinkReply struct{ Target string }

type UnlinkReq struct {
	Parent FID
	Name   string
	Dir    bool // rmdir
}

// UnlinkReply tells the client what went away. When Destroy is set the
// last link of a file that nobody holds open is gone: its OST objects are
// to be destroyed, by the client (what a crash leaves is fsck's).
type UnlinkReply struct {
	Attr    Attr
	Destroy bool
	Parent  Attr // as AttrReply's
}

// Rename flags, as renameat2.
const (
	RenameNoReplace uint32 = 1
	RenameExchange  uint32 = 2
)

type RenameReq struct {
	SrcParent FID
	SrcName   string
	DstParent FID
	DstName   string
	Flags     uint32
}

type RenameReply struct {
	// Replaced is the inode the rename unlinked at the destination, if any.
	Replaced    Attr
	HasReplaced bool
	Destroy     bool
}

type LinkReq struct {
	FID    FID
	Parent FID
	Name   string
	Want   uint8 // metadata locks on the inode, for its new entry
}

type ReaddirReq struct {
	FID FID
	// Cookie is where to resume: 0 for the start, else the cookie of the
	// last entry already returned.
	Cookie uint64
	Max    uint32
	Plus   bool // return attributes too
	// Want asks, with Plus, for metadata locks on each entry's inode.
	Want uint8
}

type DirEnt struct {
	Name   string
	FID    FID
	Mode   uint32 // type bits
	Cookie uint64
	Attr   Attr      // when Plus
	Lock   LockGrant // ReaddirReq.Want
}

type ReaddirReply struct {
	Entries []DirEnt
	EOF     bool
}

type XattrReq struct {
	FID   FID
	Name  string
	Value []byte
	Flags uint32 // XATTR_CREATE / XATTR_REPLACE for set
}

type XattrReply struct {
	Value []byte
	Names []string
}

type StatfsReply struct {
	Blocks, Bfree, Bavail uint64 // bytes
	Files, Ffree          uint64
	// Flags are the target's state (StatfsReadOnly…), as lfs df shows
	// them.
	Flags uint32
	// Fsid names the host filesystem the target's data is on (statfs's
	// f_fsid), 0 when its space is its own (a capacity cap, a database
	// in memory): targets with one Fsid share their space, and a
	// summary counts it once.
	Fsid uint64
}

// StatfsReply.Flags, with the letters lfs df prints for them.
const (
	StatfsReadOnly uint32 = 1 << iota // R: the target refuses changes (its disk failed)
	StatfsNoSpace                     // S: out of space: its disk is down to its reserve
)

// FsidOf is a statfs's f_fsid (its two words) as one number.
func FsidOf(fsid [2]int32) uint64 {
	return uint64(uint32(fsid[0]))<<32 | uint64(uint32(fsid[1]))
}

type OpenReq struct {
	FID   FID
	Flags uint32
	Want  uint8 // as GetattrReq's
	// ReadData asks, with a read-only open, for the data of a
	// Data-on-MDT file of up to this many bytes with the reply (Lustre's
	// DoM read-on-open): AttrReply.Bytes, under the read lock in
	// AttrReply.Data. The MDT gives it when it holds all of the file's
	// data and can grant the lock at once.
	ReadData uint32
	// ReadDataHeld: the client holds a data lock on all of the file (its
	// create's write lock): the data comes without a lock of its own.
	ReadDataHeld bool
}

// MaxReadData bounds OpenReq.ReadData: the largest Data-on-MDT file an
// open's reply carries.
const MaxReadData = 64 << 10

type CloseReq struct {
	FID   FID
	Flags uint32 // the open's: a write open ends
	// SetSize carries size and mtime the client learned from its writes.
	SetSize bool
	Size    uint64
	Mtime   int64
	// Cancel gives locks back with the close, as MLockCancel would
	// (an unused write lock its create granted).
	Cancel LockCancelReq
	// Write, to the MDT that holds the file's data (Data-on-MDT), makes
	// the close carry the file's last write, Data, its bulk after the
	// message: written as an ost_write of it would be, then the close
	// done. A small new file's open, write and close so cost two round
	// trips, as an empty one's (Lustre's DoM writes are cached until the
	// close too). A write that fails fails the close, which is then not
	// done.
	Write bool
	Data  OWriteReq
	// Downgrade names the caller's write lock on all of the file, to be
	// turned into a read lock once the close and the write it carries
	// are done (the caller has no other data of the file to write): other
	// clients' stats then ask it nothing, their opens get the data with
	// a read lock of their own. Zero: none.
	Downgrade uint64
}

type CloseReply struct {
	Attr    Attr
	Destroy bool
	// Write is the reply of the write the close carried.
	Write OWriteReply
	// Downgraded: CloseReq.Downgrade's lock is a read lock now.
	Downgraded bool
}

type DestroyDoneReq struct{ FID FID }

type SyncReq struct{}

type Empty struct{}

// Target kinds in the cluster map.
const (
	KindMDT = "mdt"
	KindOST = "ost"
)

// TargetName is a target's name as Lustre writes it: MDT0000, OST001f.
func TargetName(kind string, index uint32) string {
	return fmt.Sprintf("%s%04x", strings.ToUpper(kind), index)
}

type Target struct {
	Kind  string
	Index uint32
	Addr  string
}

// Config is the cluster map MDT0 serves (the MGS role).
type Config struct {
	FSName  string
	MDTs    []Target
	OSTs    []Target
	Default Layout
}

type RegisterReq struct{ Target Target }

// OST messages.

type OWriteReq struct {
	Obj ObjID
	Off uint64
	// Grant says who writes and for whom (quota.go).
	Grant WriteGrant
	// Tag, when not empty, is stored under (Obj, TagOff) once the data is
	// written, replacing the one there. Erasure-coded files label each
	// unit of a row with one (version and checksum, fs/EC.md); the OST
	// keeps it without interpreting it. A write may carry a tag and no
	// data.
	Tag    []byte
	TagOff uint64
	// NoCache says the data will not be read back soon (the parity of an
	// erasure-coded row): the OST may write it around its page cache.
	NoCache bool
	// Extents, when not empty, are the ranges of the object the bulk
	// fills, one after another (Lustre's niobufs): a chunk's scattered
	// small writes go in one RPC. Off is then unused; no Tag.
	Extents []Extent
	// SetSize, to an MDT that holds the object (Data-on-MDT), asks it to
	// raise the file's size and mtime to FileSize and Mtime once the data
	// is written, as a setattr from writes would: a writer's last flush
	// then reports its size in the same round trip (OWriteReply.SizeSet).
	SetSize  bool
	FileSize uint64
	Mtime    int64
	// Bulk data follows the message.
}

// Extent is a range of an object.
type Extent struct {
	Off uint64
	Len uint32
}

// MaxWriteExtents bounds the extents of one OWriteReq.
const MaxWriteExtents = 1024

// MaxTag bounds an OWriteReq tag.
const MaxTag = 8 << 10

type OWriteReply struct {
	Size  uint64
	Grant GrantReply
	// OverQuota: an id the object is charged to is so near its hard
	// limit here that the client's dirty data might pass it; the client
	// writes that owner's data through, so EDQUOT meets write() itself
	// (Lustre's OBD_BRW_OVER_*QUOTA).
	OverQuota bool
	// SizeSet: the MDT recorded the request's FileSize and Mtime.
	SizeSet bool
	// With SizeSet, the file's attributes as the write left them, and
	// (HasBlocks) its allocated 512-byte blocks when the MDT holds all of
	// its data: the writer's next stat needs no round trip.
	Attr      Attr
	Blocks    uint64
	HasBlocks bool
}

type OReadReq struct {
	Obj ObjID
	Off uint64
	Len uint32
	// MustExist fails the read with ENOENT when the object does not
	// exist, instead of reading a hole: erasure-coded reads tell a lost
	// object from one never written.
	MustExist bool
	// WantTag asks for the tag stored under (Obj, TagOff).
	WantTag bool
	TagOff  uint64
}

// OReadReply: the bulk holds the bytes read (short at the object's end).
type OReadReply struct {
	N    uint32
	Size uint64 // the object's size
	Tag  []byte // with WantTag: the stored tag, empty if none
}

type OPunchReq struct {
	Obj  ObjID
	Size uint64 // truncate the object to this size
}

// OFallocateReq is fallocate(2) on one object's range, which keeps the
// object's size whatever it does (the file's size is the MDT's).
type OFallocateReq struct {
	Obj      ObjID
	Off, Len uint64
	Mode     uint8 // FallocAllocate, FallocPunch, FallocZero
	Owner    Owner // whose quota new blocks are charged to
}

// OFallocateReq.Mode.
const (
	FallocAllocate uint8 = iota // allocate blocks; what they hold is unchanged (zeros where there were none)
	FallocPunch                 // free the blocks: the range reads as zeros
	FallocZero                  // zeros, allocated
)

// OCopyReq asks the OST of Obj to copy Len bytes from Src at SrcOff,
// an object on OST SrcOST (at SrcAddr; this OST itself when SrcOST is
// its index), to Obj at Off: copy_file_range without the data passing
// through the client. Where Src ends or has holes, Obj reads as zeros.
type OCopyReq struct {
	Obj     ObjID
	Off     uint64
	Src     ObjID
	SrcOff  uint64
	Len     uint32
	SrcOST  uint32
	SrcAddr string
	Owner   Owner // whose quota the written blocks are charged to
}

type OGetattrReq struct{ Obj ObjID }

type OGetattrReply struct {
	Exists bool
	Size   uint64
	Blocks uint64 // 512-byte blocks allocated
}

type ODestroyReq struct{ Obj ObjID }

type OSyncReq struct{ Objs []ObjID }

type OListReq struct {
	After ObjID
	Max   uint32
}

type OListReply struct {
	Objs []ObjID
	EOF  bool
}
