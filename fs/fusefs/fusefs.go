// Package fusefs maps FUSE requests onto the stripefs client library. It
// uses go-fuse's raw API with node ids equal to FID-derived inode numbers:
// the daemon keeps no inode table, so its memory does not grow with the
// number of files the kernel has looked up, and any inode number the
// kernel (or nfsd, through a file handle) presents can be resolved.
package fusefs

import (
	"context"
	"encoding/json"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/hanwen/go-fuse/v2/splice"

	"github.com/stripefs/stripefs/fs"
	"github.com/stripefs/stripefs/proto"
)

// Options tune the kernel's caches and the mount's application locks.
type Options struct {
	EntryTimeout time.Duration
	AttrTimeout  time.Duration
	// LockedTimeout is how long the kernel may keep a name, or a regular
	// file's attributes, while the client holds the lock that guards it
	// (the lock's callback drops it sooner), when longer than the two
	// above (zero: never longer); a zero EntryTimeout or AttrTimeout
	// still caches nothing.
	// Lustre keeps them for as long as the lock: a bound only limits
	// what a lost callback could leave stale.
	LockedTimeout time.Duration
	Flock         FlockMode // flock.go
}

// DefaultLockedTimeout is a mount's Options.LockedTimeout unless set
// (DefaultMountOptions).
const DefaultLockedTimeout = time.Minute

// FS is a fuse.RawFileSystem over an fs.Client.
type FS struct {
	fuse.RawFileSystem // ENOSYS for what is not implemented here
	nodes
	c    *fs.Client
	opts Options

	mu      sync.Mutex
	handles map[uint64]any // *fs.File or *dirHandle
	nextFh  atomic.Uint64

	notify    *notifier // the kernel's caches under the client's locks (notify.go)
	flockMode FlockMode
	// lockOwners are the POSIX lock owners that took locks through each
	// open file handle (flock.go).
	lockOwners map[uint64]map[uint64]bool
	groups     groupsCache // callers' supplementary groups (cred.go)
	reqs       requests    // being served, for a takeover (takeover.go)
	gate       waitGate    // blocking lock waits, which a takeover moves (lockwait.go)
	ns         namespace   // this mount's directory changes (readdir.go)
	// request is the size of a FUSE request as the kernel agreed to it
	// (requestsize.go), which a successor must read whole.
	request int
}

// New returns the FUSE mapping of c. The kernel asks for a directory's
// attributes after each change in it: c answers from the change's reply
// for as long as the kernel would have kept them (fs.Client.KeepDirAttrs).
func New(c *fs.Client, opts Options) *FS {
	c.KeepDirAttrs(opts.AttrTimeout)
	f := &FS{RawFileSystem: fuse.NewDefaultRawFileSystem(), nodes: nodes{c.Root()}, c: c, opts: opts, handles: map[uint64]any{},
		flockMode: opts.Flock, lockOwners: map[uint64]map[uint64]bool{}}
	f.notify = newNotifier(nodes{c.Root()}, f.lockedTimeout(opts.EntryTimeout))
	c.SetInvalidator(f.notify, max(f.lockedTimeout(opts.EntryTimeout), f.lockedTimeout(opts.AttrTimeout)))
	f.gate.init()
	return f
}

// attrOut is what the kernel is told of a's attributes, and how long it
// may keep them: a regular file's only as the client keeps them under
// its Update lock (fs.Client.KeptAttr; their size and mtime change with
// other clients' writes), never a reply's own, which may be older than
// the lock held now; a directory's and the rest's for the mount's
// timeout, as close-to-open filesystems keep them.
func (f *FS) attrOut(a *proto.Attr) (*proto.Attr, time.Duration) {
	if a.Mode&syscall.S_IFMT != syscall.S_IFREG || !f.c.Coherent() {
		return a, f.opts.AttrTimeout
	}
	if k, ok := f.c.KeptAttr(a.FID); ok {
		return k, f.lockedTimeout(f.opts.AttrTimeout)
	}
	return a, 0
}

// lockedTimeout is how long the kernel may keep what a held lock guards,
// given the mount's timeout for it (Options.LockedTimeout).
func (f *FS) lockedTimeout(base time.Duration) time.Duration {
	if base <= 0 || !f.c.Coherent() {
		return base
	}
	return max(base, f.opts.LockedTimeout)
}

func (f *FS) String() string { return "stripefs" }

// nodes converts between FUSE node ids and FIDs: the root (the
// filesystem's, or a fileset's that a nodemap gives the client) is node 1
// by FUSE's rule, every other node its inode number.
type nodes struct{ root proto.FID }

func (n nodes) nodeFID(node uint64) proto.FID {
	if node == fuse.FUSE_ROOT_ID {
		return n.root
	}
	return proto.FIDFromIno(node)
}

func (n nodes) nodeID(fid proto.FID) uint64 {
	if fid == n.root {
		return fuse.FUSE_ROOT_ID
	}
	return fid.Ino()
}

func status(err error) fuse.Status { return fuse.Status(fs.AnswerErrno(err)) }

// ctx is the context of one request. The kernel's interrupts are not
// passed on: Go programs get a signal (SIGURG, for preemption) every few
// milliseconds, and failing a create with EINTR after the MDT has done it
// would be worse than finishing it. A server that stays away is bounded by
// the client's retry limit instead.

func (n nodes) fillAttr(a *proto.Attr, out *fuse.Attr) {
	out.Ino = n.nodeID(a.FID)
	out.Size = a.Size
	out.Blocks = (a.Size + 511) / 512
	out.Mode = a.Mode
	out.Nlink = a.Nlink
	out.Uid, out.Gid = a.Uid, a.Gid
	out.Rdev = a.Rdev
	out.Atime, out.Atimensec = uint64(a.Atime/1e9), uint32(a.Atime%1e9)
	out.Mtime, out.Mtimensec = uint64(a.Mtime/1e9), uint32(a.Mtime%1e9)
	out.Ctime, out.Ctimensec = uint64(a.Ctime/1e9), uint32(a.Ctime%1e9)
	out.Blksize = 4096
	if a.Layout.StripeSize > 0 {
		out.Blksize = a.Layout.StripeSize
	}
}

// fillEntry answers a lookup of name in parent: the kernel may keep the
// name only while the client holds the inode's Lookup lock.
func (f *FS) fillEntry(parent uint64, name string, a *proto.Attr, out *fuse.EntryOut) {
	out.NodeId = f.nodeID(a.FID)
	// The kernel puts (node id, generation) into the file handles it gives
	// nfsd and name_to_handle_at, and refuses a handle whose generation
	// differs from the inode's. Both halves come from the FID, so a handle
	// outlives remounts and server restarts.
	out.Generation = uint64(a.FID.Ver)
	a, at := f.attrOut(a)
	f.fillAttr(a, &out.Attr)
	known := f.fillBlocks(nil, a, &out.Attr)
	held := f.c.Caches(a.FID)
	var et time.Duration
	if name != "." && name != ".." && held&proto.LockLookup != 0 {
		et = f.lockedTimeout(f.opts.EntryTimeout)
		if f.c.Coherent() {
			f.notify.cached(a.FID, parent, name)
		}
	}
	out.SetEntryTimeout(et)
	if known {
		out.SetAttrTimeout(at)
	} else {
		out.SetAttrTimeout(0) // the kernel asks again, and GetAttr measures the blocks
	}
}

// fillBlocks sets out's st_blocks to what a's objects take on the OSTs
// (fs.Client.Blocks): measured with ctx if not known and ctx is set;
// false when left as the size's estimate.
func (f *FS) fillBlocks(ctx context.Context, a *proto.Attr, out *fuse.Attr) bool {
	if b, ok := f.c.Blocks(a); ok {
		out.Blocks = b
		return true
	}
	if ctx == nil {
		return false
	}
	out.Blocks = f.c.MeasureBlocks(ctx, a)
	return true
}

func (f *FS) addHandle(h any) uint64 {
	fh := f.nextFh.Add(1)
	f.mu.Lock()
	f.handles[fh] = h
	f.mu.Unlock()
	return fh
}

func (f *FS) handle(fh uint64) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.handles[fh]
}

func (f *FS) dropHandle(fh uint64) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.handles[fh]
	delete(f.handles, fh)
	return h
}

func (f *FS) file(fh uint64) (*fs.File, fuse.Status) {
	if file, ok := f.handle(fh).(*fs.File); ok {
		return file, fuse.OK
	}
	return nil, fuse.EBADF
}

// Lookup resolves a name; no negative entries are cached, so a name
// created by another client is seen at once.
//
// The VFS never asks a filesystem for "." or "..": those names arrive only
// from the kernel's export operations (FUSE_EXPORT_SUPPORT), which decode a
// file handle into any node id, cached or not. "." is the node itself —
// a file as often as a directory, so it is a getattr, not a directory
// lookup — and ".." is a directory's parent, asked while the kernel
// reconnects a directory to the root (nfsd, open_by_handle_at).
func (f *FS) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	c, stop := f.ctx(cancel, h)
	defer stop()
	var a *proto.Attr
	var err error
	switch fid := f.nodeFID(h.NodeId); name {
	case ".":
		a, err = f.c.Getattr(c, fid)
	case "..":
		a, err = f.c.Parent(c, fid)
	default:
		a, err = f.c.Lookup(c, fid, name)
	}
	if err != nil {
		return status(err)
	}
	f.fillEntry(h.NodeId, name, a, out)
	return fuse.OK
}

// Forget needs no work: no per-node state is kept.
func (f *FS) Forget(nodeid, nlookup uint64) {}

func (f *FS) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	c, stop := f.ctx(cancel, &in.InHeader)
	defer stop()
	a, err := f.c.Getattr(c, f.nodeFID(in.NodeId))
	if err != nil {
		return status(err)
	}
	a, at := f.attrOut(a)
	f.fillAttr(a, &out.Attr)
	f.fillBlocks(c, a, &out.Attr)
	out.SetTimeout(at)
	return fuse.OK
}

func (f *FS) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	c, stop := f.ctx(cancel, &in.InHeader)
	defer stop()
	req := &fs.SetAttr{FID: f.nodeFID(in.NodeId)}
	if m, ok := in.GetMode(); ok {
		req.Valid |= proto.SetMode
		req.Mode = m
	}
	if uid, ok := in.GetUID(); ok {
		req.Valid |= proto.SetUid
		req.Uid = uid
	}
	if gid, ok := in.GetGID(); ok {
		req.Valid |= proto.SetGid
		req.Gid = gid
	}
	if sz, ok := in.GetSize(); ok {
		req.Valid |= proto.SetSize
		req.Size = sz
	}
	if in.Valid&fuse.FATTR_ATIME_NOW != 0 {
		req.Valid |= proto.SetAtimeNow
	} else if t, ok := in.GetATime(); ok {
		req.Valid |= proto.SetAtime
		req.Atime = t.UnixNano()
	}
	if in.Valid&fuse.FATTR_MTIME_NOW != 0 {
		req.Valid |= proto.SetMtimeNow
	} else if t, ok := in.GetMTime(); ok {
		req.Valid |= proto.SetMtime
		req.Mtime = t.UnixNano()
	}
	if t, ok := in.GetCTime(); ok {
		req.Valid |= proto.SetCtime
		req.Ctime = t.UnixNano()
	}
	a, err := f.c.Setattr(c, req)
	if err != nil {
		return status(err)
	}
	a, at := f.attrOut(a)
	f.fillAttr(a, &out.Attr)
	f.fillBlocks(c, a, &out.Attr)
	out.SetTimeout(at)
	return fuse.OK
}

func (f *FS) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	c, stop := f.ctx(cancel, &in.InHeader)
	defer stop()
	f.nsChanged() // readdir.go
	a, _, err := f.c.Create(fs.WithUmask(c, in.Umask), f.nodeFID(in.NodeId), name, in.Mode, in.Rdev, true, false, 0)
	if err != nil {
		return status(err)
	}
	f.fillEntry(in.NodeId, name, a, out)
	return fuse.OK
}

func (f *FS) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	c, stop := f.ctx(cancel, &in.InHeader)
	defer stop()
	f.nsChanged() // readdir.go
	a, err := f.c.Mkdir(fs.WithUmask(c, in.Umask), f.nodeFID(in.NodeId), name, in.Mode)
	if err != nil {
		return status(err)
	}
	f.fillEntry(in.NodeId, name, a, out)
	return fuse.OK
}

func (f *FS) Unlink(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	c, stop := f.ctx(cancel, h)
	defer stop()
	f.nsChanged() // readdir.go
	err := f.c.Unlink(c, f.nodeFID(h.NodeId), name)
	if err == nil {
		f.notify.removed(h.NodeId, name)
	}
	return status(err)
}

// SetServer gives the mapping the server it is mounted with, whose
// notify calls drop the kernel's caches when the client's locks go.
func (f *FS) SetServer(srv *fuse.Server) { f.notify.srv.Store(srv) }

func (f *FS) Rmdir(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	c, stop := f.ctx(cancel, h)
	defer stop()
	f.nsChanged() // readdir.go
	err := f.c.Rmdir(c, f.nodeFID(h.NodeId), name)
	if err == nil {
		f.notify.removed(h.NodeId, name)
	}
	return status(err)
}

func (f *FS) Rename(cancel <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	c, stop := f.ctx(cancel, &in.InHeader)
	defer stop()
	f.nsChanged() // readdir.go
	err := f.c.Rename(c, f.nodeFID(in.NodeId), oldName, f.nodeFID(in.Newdir), newName, in.Flags)
	if err == nil {
		f.notify.renamed(in.NodeId, oldName, in.Newdir, newName, in.Flags&proto.RenameExchange != 0)
	}
	return status(err)
}

func (f *FS) Link(cancel <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	c, stop := f.ctx(cancel, &in.InHeader)
	defer stop()
	f.nsChanged() // readdir.go
	a, err := f.c.Link(c, f.nodeFID(in.Oldnodeid), f.nodeFID(in.NodeId), name)
	if err != nil {
		return status(err)
	}
	f.fillEntry(in.NodeId, name, a, out)
	return fuse.OK
}

func (f *FS) Symlink(cancel <-chan struct{}, h *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	c, stop := f.ctx(cancel, h)
	defer stop()
	f.nsChanged() // readdir.go
	a, err := f.c.Symlink(c, f.nodeFID(h.NodeId), name, target)
	if err != nil {
		return status(err)
	}
	f.fillEntry(h.NodeId, name, a, out)
	return fuse.OK
}

func (f *FS) Readlink(cancel <-chan struct{}, h *fuse.InHeader) ([]byte, fuse.Status) {
	c, stop := f.ctx(cancel, h)
	defer stop()
	t, err := f.c.Readlink(c, f.nodeFID(h.NodeId))
	if err != nil {
		return nil, status(err)
	}
	return []byte(t), fuse.OK
}

// GetXAttr also answers the mount's virtual attributes (client counters,
// MGS address) on every path, the way lctl reads a client's parameters.
const securityCapability = "security.capability"

func (f *FS) GetXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	c, stop := f.ctx(cancel, h)
	defer stop()
	var v []byte
	var err error
	switch attr {
	case securityCapability:
		// The kernel asks before every write whether to drop file
		// capabilities; stripefs keeps none, and saying so here saves
		// that write an MDT round trip.
		return 0, fuse.ENOATTR
	case fs.ClientXattr:
		v, err = json.Marshal(f.c.Report())
	case fs.MGSXattr:
		v = []byte(f.c.MGS())
	case fs.KeyFileXattr:
		v = []byte(f.c.KeyFile())
	default:
		v, err = f.c.Getxattr(c, f.nodeFID(h.NodeId), attr)
	}
	if err != nil {
		return 0, status(err)
	}
	if len(v) > len(dest) {
		return uint32(len(v)), fuse.ERANGE
	}
	return uint32(copy(dest, v)), fuse.OK
}

func (f *FS) ListXAttr(cancel <-chan struct{}, h *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	c, stop := f.ctx(cancel, h)
	defer stop()
	names, err := f.c.Listxattr(c, f.nodeFID(h.NodeId))
	if err != nil {
		return 0, status(err)
	}
	var b []byte
	for _, n := range names {
		b = append(append(b, n...), 0)
	}
	if len(b) > len(dest) {
		return uint32(len(b)), fuse.ERANGE
	}
	return uint32(copy(dest, b)), fuse.OK
}

func (f *FS) SetXAttr(cancel <-chan struct{}, in *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	c, stop := f.ctx(cancel, &in.InHeader)
	defer stop()
	if attr == securityCapability {
		return fuse.Status(syscall.EOPNOTSUPP) // GetXAttr would not show it
	}
	return status(f.c.Setxattr(c, f.nodeFID(in.NodeId), attr, data, in.Flags))
}

func (f *FS) RemoveXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string) fuse.Status {
	c, stop := f.ctx(cancel, h)
	defer stop()
	return status(f.c.Removexattr(c, f.nodeFID(h.NodeId), attr))
}

func (f *FS) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	c, stop := f.ctx(cancel, &in.InHeader)
	defer stop()
	f.nsChanged() // readdir.go
	excl := in.Flags&syscall.O_EXCL != 0
	a, file, err := f.c.Create(fs.WithUmask(c, in.Umask), f.nodeFID(in.NodeId), name, in.Mode, 0, excl, true, int(in.Flags))
	if err != nil {
		return status(err)
	}
	f.fillEntry(in.NodeId, name, a, &out.EntryOut)
	out.Fh = f.addHandle(file)
	out.OpenFlags = f.openFlags(in.Flags)
	return fuse.OK
}

// openFlags are what an open asks of the kernel: under locks, no page
// cache (the client caches file data itself, where other clients' writes
// can reach it), and parallel writes to one file. An O_DIRECT open goes
// around the page cache by itself, and its vectors keep the kernel's
// asynchronous direct I/O (FUSE_ASYNC_DIO: nfsd's two-request 1 MiB
// write in flight at once), which FOPEN_DIRECT_IO's synchronous path
// would lose.
func (f *FS) openFlags(flags uint32) uint32 {
	if !f.c.Coherent() || flags&syscall.O_DIRECT != 0 {
		return 0
	}
	return fuse.FOPEN_DIRECT_IO | fuse.FOPEN_PARALLEL_DIRECT_WRITES
}

func (f *FS) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	c, stop := f.ctx(cancel, &in.InHeader)
	defer stop()
	file, err := f.c.Open(c, f.nodeFID(in.NodeId), int(in.Flags))
	if err != nil {
		return status(err)
	}
	out.Fh = f.addHandle(file)
	out.OpenFlags = f.openFlags(in.Flags)
	if data := file.OpenData(); data != nil && out.OpenFlags&fuse.FOPEN_DIRECT_IO != 0 {
		out.OpenFlags = f.cacheOpenData(in.NodeId, file, data, out.OpenFlags)
	}
	return fuse.OK
}

// cacheOpenData gives the kernel's page cache all of a small file's data,
// which came with its open (fs.File.OpenData), and returns the flags that
// let this open read it there: the open's read(2) then costs no FUSE
// round trip (mdtest's read phase, a small file read whole). The pages
// are the client's read lock's, dropped with it as any data it covers;
// FOPEN_KEEP_CACHE keeps the kernel from dropping them as the open ends.
// Anything amiss leaves the open as others are, direct.
//
// This client's own writes through other handles call back none of its
// locks: the kernel drops the pages they overlap itself, as a direct
// write does since the kernel that offers DIRECT_IO_ALLOW_MMAP (6.6).
// An older kernel's opens stay direct.
func (f *FS) cacheOpenData(node uint64, file *fs.File, data []byte, flags uint32) uint32 {
	srv := f.notify.srv.Load()
	if srv == nil || srv.KernelSettings().Flags64()&fuse.CAP_DIRECT_IO_ALLOW_MMAP == 0 {
		return flags
	}
	if st := srv.InodeNotifyStoreCache(node, 0, data); !st.Ok() {
		srv.InodeNotify(node, 0, 0) // a part may be in
		return flags
	}
	if !file.OpenDataHeld() {
		srv.InodeNotify(node, 0, 0) // the lock went before the pages were in: nothing dropped them
		return flags
	}
	return fuse.FOPEN_KEEP_CACHE
}

func (f *FS) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	file, st := f.file(in.Fh)
	if !st.Ok() {
		return nil, st
	}
	c, stop := f.ctx(cancel, &in.InHeader)
	defer stop()
	v, err := file.ReadView(c, buf[:min(len(buf), int(in.Size))], int64(in.Offset))
	if err != nil {
		return nil, status(err)
	}
	if v.File != 0 {
		if v.Len <= copySmall {
			// One pread into go-fuse's buffer costs less than a splice
			// (the header into a pipe, the file into it, the pipe to
			// /dev/fuse, then draining it): a 4 KiB random read spent
			// 62% of the daemon's time there. The reply is a dataResult:
			// go-fuse tries, and undoes, a splice of any result that
			// has no Slices (fuse.ReadResultData), five syscalls lost.
			data, st := viewBytes(v, buf)
			v.Release()
			if !st.Ok() {
				return nil, st
			}
			return dataResult{fs.View{Data: data}}, fuse.OK
		}
		if v.Len+spliceSlack > splice.MaxPipeSize() {
			// go-fuse would fail to grow its pipe (pipe-max-size is 1 MiB
			// by default, a 1 MiB read and its header more), log it and
			// copy: copy without the attempt.
			return &fileCopy{v: v}, fuse.OK
		}
		return fileResult{v}, fuse.OK
	}
	return dataResult{v}, fuse.OK
}

// copySmall is the largest lent read answered by copying rather than
// splicing.
const copySmall = 64 << 10

// spliceSlack is what a spliced reply needs in its pipe beside the data:
// the reply header and the page go-fuse adds.
const spliceSlack = 8 << 10

// SpliceNeeds is the pipe size (fs.pipe-max-size) at which a read of
// request bytes, the largest a mount takes, can be spliced: the kernel
// sizes pipes in powers of two of pages (2 MiB for 1 MiB requests).
func SpliceNeeds(request int) int {
	n := os.Getpagesize()
	for n < request+spliceSlack {
		n <<= 1
	}
	return n
}

// dataResult answers a read with bytes the client may lend until the
// reply is written (a read-ahead chunk), without copying them into
// go-fuse's buffer.
type dataResult struct{ v fs.View }

func (r dataResult) Bytes([]byte) ([]byte, fuse.Status) { return r.v.Data, fuse.OK }
func (r dataResult) Slices() ([][]byte, fuse.Status)    { return [][]byte{r.v.Data}, fuse.OK }
func (r dataResult) Size() int                          { return len(r.v.Data) }
func (r dataResult) Done()                              { r.v.Release() }

// fileResult answers a read with a range of an object file the client
// lends (an OST in this process): go-fuse splices it to the kernel.
type fileResult struct{ v fs.View }

func (r fileResult) Seekable() (uintptr, int64, int)        { return r.v.File, r.v.Off, r.v.Len }
func (r fileResult) Size() int                              { return r.v.Len }
func (r fileResult) Done()                                  { r.v.Release() }
func (r fileResult) Bytes(buf []byte) ([]byte, fuse.Status) { return viewBytes(r.v, buf) }

// fileCopy answers a read with a range of a lent object file too large to
// splice, copied into a buffer of its own, which go-fuse writes as it is
// (Slices) rather than trying a splice first.
type fileCopy struct {
	v   fs.View
	buf *[]byte // filled on first use, from copyBufs
	st  fuse.Status
}

var copyBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1<<20); return &b }}

func (r *fileCopy) Slices() ([][]byte, fuse.Status) {
	if r.buf == nil {
		r.buf = copyBufs.Get().(*[]byte)
		b := *r.buf
		if cap(b) < r.v.Len {
			b = make([]byte, r.v.Len)
		}
		data, st := viewBytes(r.v, b[:r.v.Len])
		*r.buf, r.st = data, st
	}
	return [][]byte{*r.buf}, r.st
}
func (r *fileCopy) Size() int                              { return r.v.Len }
func (r *fileCopy) Bytes(buf []byte) ([]byte, fuse.Status) { return viewBytes(r.v, buf) }
func (r *fileCopy) Done() {
	r.v.Release()
	if r.buf != nil {
		copyBufs.Put(r.buf)
	}
}

// viewBytes copies a file view into buf, or a new buffer if buf is short.
func viewBytes(v fs.View, buf []byte) ([]byte, fuse.Status) {
	if len(buf) < v.Len {
		buf = make([]byte, v.Len)
	}
	n, err := v.CopyTo(buf)
	if err != nil {
		return nil, fuse.ToStatus(err)
	}
	return buf[:n], fuse.OK
}

// Fallocate is fallocate(2) on an open file (fs.File.Fallocate says
// which modes).
func (f *FS) Fallocate(cancel <-chan struct{}, in *fuse.FallocateIn) fuse.Status {
	file, st := f.file(in.Fh)
	if !st.Ok() {
		return st
	}
	c, stop := f.ctx(cancel, &in.InHeader)
	defer stop()
	return status(file.Fallocate(c, in.Mode, in.Offset, in.Length))
}

func (f *FS) CopyFileRange(cancel <-chan struct{}, in *fuse.CopyFileRangeIn) (uint32, fuse.Status) {
	src, st := f.file(in.FhIn)
	if !st.Ok() {
		return 0, st
	}
	dst, st := f.file(in.FhOut)
	if !st.Ok() {
		return 0, st
	}
	c, stop := f.ctx(cancel, &in.InHeader)
	defer stop()
	n, err := dst.CopyRange(c, src, in.OffIn, in.OffOut, in.Len)
	return uint32(n), status(err)
}

func (f *FS) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	return f.Writev(cancel, in, [][]byte{data})
}

// Writev hands the kernel's scattered write buffers to the client as one
// vector, without gathering them first.
func (f *FS) Writev(cancel <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	file, st := f.file(in.Fh)
	if !st.Ok() {
		return 0, st
	}
	c, stop := f.ctx(cancel, &in.InHeader)
	defer stop()
	if in.Flags&syscall.O_APPEND != 0 && f.c.Coherent() {
		// The kernel chose the offset from its idea of the size, which
		// another client's append may have moved: the client appends at
		// the end it finds under its lock.
		n, _, err := file.Append(c, data)
		if err != nil {
			return 0, status(err)
		}
		return uint32(n), fuse.OK
	}
	n, err := file.WriteV(c, int64(in.Offset), data)
	if err != nil {
		return 0, status(err)
	}
	return uint32(n), fuse.OK
}

func (f *FS) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	file, st := f.file(in.Fh)
	if !st.Ok() {
		return st
	}
	c, stop := f.ctx(cancel, &in.InHeader)
	defer stop()
	// Any close by a process ends its POSIX locks on the file.
	f.releaseLocks(file, proto.FlockPOSIX, in.LockOwner)
	return status(file.Flush(c))
}

func (f *FS) Fsync(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	file, st := f.file(in.Fh)
	if !st.Ok() {
		return st
	}
	c, stop := f.ctx(cancel, &in.InHeader)
	defer stop()
	return status(file.Fsync(c))
}

func (f *FS) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	f.reqs.begin()
	defer f.reqDone()
	if file, ok := f.dropHandle(in.Fh).(*fs.File); ok {
		if in.ReleaseFlags&fuse.FUSE_RELEASE_FLOCK_UNLOCK != 0 {
			f.releaseLocks(file, proto.FlockBSD, in.LockOwner)
		}
		// OFD locks end with their open file, and the kernel names no
		// owner for them here: every POSIX owner that locked through the
		// handle is released (a process's own locks went at its close).
		for _, owner := range f.takeLockOwners(in.Fh) {
			f.releaseLocks(file, proto.FlockPOSIX, owner)
		}
		_ = file.Release(context.Background())
	}
}

func (f *FS) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	c, stop := f.ctx(cancel, &in.InHeader)
	defer stop()
	a, err := f.c.Getattr(c, f.nodeFID(in.NodeId))
	if err != nil {
		return status(err)
	}
	if a.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return fuse.ENOTDIR
	}
	out.Fh = f.addHandle(&dirHandle{fid: a.FID})
	return fuse.OK
}

func (f *FS) ReleaseDir(in *fuse.ReleaseIn) { f.dropHandle(in.Fh) }

func (f *FS) FsyncDir(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	c, stop := f.ctx(cancel, &in.InHeader)
	defer stop()
	return status(f.c.SyncAllMDTs(c))
}

// Access serves access(2) and chdir when the kernel does not check
// permissions itself (no_default_permissions).
func (f *FS) Access(cancel <-chan struct{}, in *fuse.AccessIn) fuse.Status {
	c, stop := f.ctx(cancel, &in.InHeader)
	defer stop()
	return status(f.c.Access(c, f.nodeFID(in.NodeId), in.Mask))
}

func (f *FS) StatFs(cancel <-chan struct{}, h *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	c, stop := f.ctx(cancel, h)
	defer stop()
	s, err := f.c.Statfs(c)
	if err != nil {
		return status(err)
	}
	const bs = 4096
	out.Bsize, out.Frsize = bs, bs
	out.Blocks, out.Bfree, out.Bavail = s.Blocks/bs, s.Bfree/bs, s.Bavail/bs
	out.Files, out.Ffree = s.Files, s.Ffree
	out.NameLen = 255
	return fuse.OK
}
