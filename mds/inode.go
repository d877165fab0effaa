package mds

import (
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/wire"
)

// inode is the value stored under an inode key.
type inode struct {
	Attr proto.Attr
	// Parent is a directory's parent, used to refuse moving a directory
	// into its own subtree and to answer "..".
	Parent proto.FID
	// Target is a symlink's target.
	Target string
	// DefLayout is a directory's default layout for new files.
	DefLayout proto.Layout
	// DefDir is a directory's default for new subdirectories
	// (setdirstripe -D): which MDT they go to, striped over how many.
	DefDir DirLayout
	// DefACL is a directory's default ACL (system.posix_acl_default in
	// Linux's xattr form), which its new entries inherit (perm.CreateACL).
	DefACL string
}

// DirLayout places directories: on MDT Index, or spread round-robin over
// the MDTs when Index is -1. Set says a default exists.
type DirLayout struct {
	Set   bool
	Index int32
	Count uint32 // stripe count: more than 1 makes new subdirectories striped
}

type dirent struct {
	FID  proto.FID
	Mode uint32 // type bits only
}

// seqState is the FID allocator's persistent position.
type seqState struct {
	Seq     uint64
	NextOid uint32
}

// encode is the stored form of the MDT's state records (client table,
// FID sequence, cluster map, quota owners, format marker), which keep
// package wire's codec; inodes, entries and update-log records are
// protocol buffers (records.go).
func encode(v any) []byte { return wire.Marshal(nil, v) }

func (n *inode) isDir() bool { return n.Attr.Mode&sIFMT == sIFDIR }

const (
	sIFMT   = 0o170000
	sIFDIR  = 0o040000
	sIFREG  = 0o100000
	sIFLNK  = 0o120000
	sISGID  = 0o2000
	sISVTX  = 0o1000
	nameMax = 255
	// xattrMax bounds one extended attribute value, as ext4's block size.
	xattrMax = 64 << 10
)
