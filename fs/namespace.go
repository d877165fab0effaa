package fs

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/stripefs/stripefs/layout"
	"github.com/stripefs/stripefs/proto"
	"golang.org/x/sync/errgroup"
)

// Lookup finds name in dir.
func (c *Client) Lookup(ctx context.Context, dir proto.FID, name string) (*proto.Attr, error) {
	var r proto.AttrReply
	stamp := c.attrStamp()
	holder, err := c.route(ctx, dir, name)
	if err != nil {
		return nil, err
	}
	req := &proto.LookupReq{Parent: holder, Name: name, Want: c.wantBits(proto.FID{}, proto.LockLookup|proto.LockUpdate)}
	if err := c.mdtCall(ctx, holder, proto.MLookup, req, &r); err != nil {
		return nil, err
	}
	c.noteAttrLock(uint32(holder.MDT()), r.Attr.FID, &r.Attr, r.Lock)
	if r.Remote || r.Attr.FID.IsStripedDir() { // another MDT, or stripes, have the attributes
		return c.Getattr(ctx, r.Attr.FID)
	}
	c.overlay(&r.Attr, stamp)
	return &r.Attr, nil
}

// Parent returns the attributes of directory dir's parent (the root's
// parent is the root), wherever the two live: the MDT that holds dir
// answers ".." and, for a parent on another MDT, the client asks that one.
// A non-directory has no single parent: ENOTDIR.
func (c *Client) Parent(ctx context.Context, dir proto.FID) (*proto.Attr, error) {
	if dir == c.Root() {
		return c.Getattr(ctx, dir)
	}
	return c.Lookup(ctx, dir, "..")
}

// Getattr returns fid's attributes, with the size and mtime of writes this
// client has not yet reported to the MDT.
func (c *Client) Getattr(ctx context.Context, fid proto.FID) (*proto.Attr, error) {
	var r proto.AttrReply
	stamp := c.attrStamp()
	if fid.IsStripedDir() {
		a, err := c.getattrStriped(ctx, fid)
		if err != nil {
			return nil, err
		}
		return a, nil
	}
	if a, ok := c.dirs.take(fid); ok {
		c.counters.dirAttrHits.Add(1)
		return &a, nil
	}
	if a, ok := c.cachedAttr(fid); ok {
		c.counters.fileAttrHits.Add(1)
		return a, nil
	}
	if err := c.mdtCall(ctx, fid, proto.MGetattr, &proto.GetattrReq{FID: fid, Want: c.wantBits(fid, proto.LockUpdate)}, &r); err != nil {
		return nil, err
	}
	c.noteAttrLock(uint32(fid.MDT()), fid, &r.Attr, r.Lock)
	c.overlay(&r.Attr, stamp)
	return &r.Attr, nil
}

// SetAttr is a setattr request; Valid says which fields apply.
type SetAttr = proto.SetattrReq

// Setattr changes attributes. A size change also cuts or extends the OST
// objects, and the objects are cut before the MDT learns the new size, so
// a crash in between never lets old data reappear past the end.
func (c *Client) Setattr(ctx context.Context, req *SetAttr) (*proto.Attr, error) {
	if req.Valid&(proto.SetMode|proto.SetUid|proto.SetGid) != 0 {
		defer c.dropXattrs(req.FID) // a chmod rewrites the ACL's mask
	}
	stamp := c.attrStamp()
	a, err := c.setattr(ctx, req, &stamp)
	if err != nil {
		return nil, err
	}
	c.overlay(a, stamp)
	return a, nil
}

// setattr sends req; stamp is when its request left, for the overlay of
// the reply (moved past the flushes it waits for).
func (c *Client) setattr(ctx context.Context, req *SetAttr, stamp *uint64) (*proto.Attr, error) {
	var r proto.AttrReply
	var st *inodeState // the open file whose size this sets; its mu held
	if req.Valid&proto.SetSize != 0 {
		c.dataGen.Add(1) // before the cut leaves: an open's data on its way predates it (opendata.go)
		st = c.openState(req.FID)
		// A size change takes the whole file from every other client: they
		// flush what they wrote before the cut, and forget what they knew
		// of the size.
		lst := st
		if lst == nil {
			lst = &inodeState{fid: req.FID}
			lst.initWriteback()
		}
		_, release, err := c.dataLock(ctx, lst, proto.LockPW, 0, proto.LockEOF)
		if err != nil {
			return nil, err
		}
		defer release()
		if st != nil {
			// Cached data goes out first, so the cut applies to it too.
			if err := c.flushAll(st); err != nil {
				return nil, err
			}
			st.mu.Lock() // no write may change the size meanwhile
			defer st.mu.Unlock()
		}
		stamp := c.attrStamp()
		if err := c.mdtCall(ctx, req.FID, proto.MGetattr, &proto.GetattrReq{FID: req.FID}, &r); err != nil {
			return nil, err
		}
		cur := r.Attr
		if st != nil {
			st.overlayLocked(&cur, stamp)
		}
		switch cur.Mode & syscall.S_IFMT {
		case syscall.S_IFREG:
		case syscall.S_IFDIR:
			return nil, syscall.EISDIR
		default:
			return nil, syscall.EINVAL
		}
		if req.Size < cur.Size {
			if err := c.punch(ctx, &cur, req.Size); err != nil {
				return nil, err
			}
			if st != nil {
				st.ecEnd = min(st.ecEnd, req.Size)
			}
		}
		if st != nil {
			st.size = req.Size
			st.dirty = false
			c.dropReadahead(st, 0)
		}
	}
	const times = proto.SetAtime | proto.SetMtime | proto.SetAtimeNow | proto.SetMtimeNow
	var timed *inodeState // an open file whose times this sets
	if st == nil && req.Valid&times != 0 {
		if timed = c.openState(req.FID); timed != nil {
			// This client's writes report their mtime with their data
			// or close (closewrite.go), and the MDT keeps the later of
			// its mtime and a report's: sent and landed first, and none
			// composed until the time is set here (timed.mu held over
			// the call), they cannot come after it and undo it.
			if err := c.flushAll(timed); err != nil {
				return nil, err
			}
			timed.mu.Lock()
			if err := c.waitReports(ctx, timed); err != nil {
				timed.mu.Unlock()
				return nil, err
			}
		}
	}
	// As late as it can be: a release that ended since Setattr began
	// reported its size and mtime before this leaves, and the reply must
	// not have them laid over it (closedSizes) — they would undo a time
	// set here.
	*stamp = c.attrStamp()
	err := c.mdtCall(ctx, req.FID, proto.MSetattr, req, &r)
	if timed != nil {
		if err == nil {
			timed.mtime = r.Attr.Mtime // what a later size report carries, unless a write comes after
		}
		timed.mu.Unlock()
	}
	if err != nil {
		return nil, err
	}
	if st != nil {
		// The cut is the file's latest change: the mtime it set, not the
		// last write's, is what this client's overlay shows from now on
		// (pjdfstest open/00.t 43: mtime and ctime after O_TRUNC).
		st.mtime = r.Attr.Mtime
		c.sizeReported(st)
		if req.Valid&proto.SetSize != 0 {
			st.cut = st.reported
		}
	}
	if req.FID.IsStripedDir() {
		// Times set on purpose (touch -d, tar) reach the stripes too, or
		// the latest stripe's would show through mergeStripes.
		if req.Valid&times != 0 {
			err := c.eachStripe(ctx, req.FID, func(ctx context.Context, s proto.FID) error {
				sr := proto.SetattrReq{FID: s, Valid: req.Valid & times, Atime: req.Atime, Mtime: req.Mtime}
				return c.mdtCall(ctx, s, proto.MSetattr, &sr, &proto.AttrReply{})
			})
			if err != nil {
				return nil, err
			}
		}
		if err := c.mergeStripes(ctx, &r.Attr); err != nil {
			return nil, err
		}
	}
	return &r.Attr, nil
}

// punch cuts every object of a to the share of size it holds. The row of
// an erasure-coded file that the cut falls in is then sealed again: its
// cut unit re-tagged and its parity recomputed (a crash in between leaves
// that row unable to rebuild a lost unit, EIO, never wrong).
func (c *Client) punch(ctx context.Context, a *proto.Attr, size uint64) error {
	lay := a.Layout
	ep, isEC := layout.ECPartOf(lay)
	if isEC {
		if err := lay.CheckFile(); err != nil {
			return err
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	for s, ost := range lay.OSTs {
		obj := proto.ObjID{FID: a.FID, Stripe: uint32(s)}
		objSize := layout.ObjectSize(lay, size, s)
		g.Go(func() error {
			return c.ostCall(gctx, ost, proto.OPunch, &proto.OPunchReq{Obj: obj, Size: objSize}, &proto.Empty{})
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if isEC && ep.Instantiated() && size%ep.Geometry().RowSize() != 0 {
		if r := size / ep.Geometry().RowSize(); ep.HasRow(r) {
			return c.resealRow(a.FID, ep, r, size)
		}
	}
	return nil
}

type umaskKey struct{}

// WithUmask gives Create and Mkdir the creator's umask, for the MDT to
// apply unless the directory has a default ACL, which replaces it (a
// frontend whose mode has the umask applied already leaves it out).
func WithUmask(ctx context.Context, umask uint32) context.Context {
	return context.WithValue(ctx, umaskKey{}, umask)
}

func umaskOf(ctx context.Context) uint32 {
	u, _ := ctx.Value(umaskKey{}).(uint32)
	return u
}

// Create makes a file (or a device, FIFO or socket) named name in dir.
// With open set the new file is opened in the same RPC and returned.
// The new file's owner is the credential of ctx (rpc.WithCred), its
// umask WithUmask's.
func (c *Client) Create(ctx context.Context, dir proto.FID, name string, mode, rdev uint32, excl bool, open bool, flags int) (*proto.Attr, *File, error) {
	dir, err := c.route(ctx, dir, name)
	if err != nil {
		return nil, nil, err
	}
	req := &proto.CreateReq{Parent: dir, Name: name, Mode: mode, Rdev: rdev, Excl: excl, Open: open, Flags: uint32(flags),
		Umask: umaskOf(ctx), Want: c.wantBits(proto.FID{}, proto.LockLookup|proto.LockUpdate)}
	var r proto.AttrReply
	stamp := c.attrStamp()
	if err := c.mdtCall(ctx, dir, proto.MCreate, req, &r); err != nil {
		return nil, nil, err
	}
	c.noteAttrLock(uint32(dir.MDT()), r.Attr.FID, &r.Attr, r.Lock)
	if r.HasOwner {
		c.noteOwner(r.Attr.FID, r.Owner)
	}
	a, err := c.replyAttr(ctx, &r)
	if err != nil || !open {
		return a, nil, err
	}
	c.overlay(a, stamp) // an O_CREAT open of an existing file: as Open
	f := c.newFile(a, flags, stamp)
	if r.Data.ID != 0 {
		c.noteDataLock(f.st, r.Data, a)
	}
	return a, f, nil
}

// Mkdir makes a directory, as Create for its owner and umask.
func (c *Client) Mkdir(ctx context.Context, dir proto.FID, name string, mode uint32) (*proto.Attr, error) {
	var r proto.AttrReply
	dir, err := c.route(ctx, dir, name)
	if err != nil {
		return nil, err
	}
	err = c.mdtCall(ctx, dir, proto.MMkdir, &proto.MkdirReq{Parent: dir, Name: name, Mode: mode, MDT: -1,
		Umask: umaskOf(ctx), Want: c.wantBits(proto.FID{}, proto.LockLookup|proto.LockUpdate)}, &r)
	if err != nil {
		return nil, err
	}
	c.noteAttrLock(uint32(dir.MDT()), r.Attr.FID, &r.Attr, r.Lock)
	return c.replyAttr(ctx, &r)
}

// replyAttr is what a create's reply gives, or, for a resend the MDT
// answered from the entry alone and whose inode is on another MDT (a
// remote mkdir), what that MDT has.
func (c *Client) replyAttr(ctx context.Context, r *proto.AttrReply) (*proto.Attr, error) {
	if r.Remote {
		return c.Getattr(ctx, r.Attr.FID)
	}
	return &r.Attr, nil
}

// Symlink makes a symbolic link to target.
func (c *Client) Symlink(ctx context.Context, dir proto.FID, name, target string) (*proto.Attr, error) {
	var r proto.AttrReply
	dir, err := c.route(ctx, dir, name)
	if err != nil {
		return nil, err
	}
	err = c.mdtCall(ctx, dir, proto.MSymlink, &proto.SymlinkReq{Parent: dir, Name: name, Target: target,
		Want: c.wantBits(proto.FID{}, proto.LockLookup|proto.LockUpdate)}, &r)
	if err != nil {
		return nil, err
	}
	c.noteAttrLock(uint32(dir.MDT()), r.Attr.FID, &r.Attr, r.Lock)
	return c.replyAttr(ctx, &r)
}

// Readlink returns a symlink's target.
func (c *Client) Readlink(ctx context.Context, fid proto.FID) (string, error) {
	var r proto.ReadlinkReply
	if err := c.mdtCall(ctx, fid, proto.MReadlink, &proto.GetattrReq{FID: fid}, &r); err != nil {
		return "", err
	}
	return r.Target, nil
}

// Unlink removes a non-directory entry.
func (c *Client) Unlink(ctx context.Context, dir proto.FID, name string) error {
	return c.remove(ctx, dir, name, false)
}

// Rmdir removes an empty directory.
func (c *Client) Rmdir(ctx context.Context, dir proto.FID, name string) error {
	return c.remove(ctx, dir, name, true)
}

func (c *Client) remove(ctx context.Context, dir proto.FID, name string, isDir bool) error {
	var r proto.UnlinkReply
	dir, err := c.route(ctx, dir, name)
	if err != nil {
		return err
	}
	if err := c.mdtCall(ctx, dir, proto.MUnlink, &proto.UnlinkReq{Parent: dir, Name: name, Dir: isDir}, &r); err != nil {
		return err
	}
	if r.Attr.Nlink == 0 && !r.Attr.FID.IsZero() {
		c.forgetLocks(r.Attr.FID, r.Destroy) // the MDT dropped them too
	}
	if r.Destroy {
		c.destroyObjects(r.Attr)
	}
	return nil
}

// destroyObjects removes a deleted file's objects in the background; a
// crash before it is done leaves orphan objects for fsck, never a dangling
// entry.
func (c *Client) destroyObjects(a proto.Attr) {
	c.bg.Add(1)
	c.counters.destroysNow.Add(1)
	go func() {
		defer c.bg.Done()
		defer c.counters.destroysNow.Add(-1)
		ctx, cancel := context.WithTimeout(context.Background(), c.opts.RetryFor)
		defer cancel()
		for s, ost := range a.Layout.OSTs {
			obj := proto.ObjID{FID: a.FID, Stripe: uint32(s)}
			_ = c.ostCall(ctx, ost, proto.ODestroy, &proto.ODestroyReq{Obj: obj}, &proto.Empty{})
		}
	}()
}

// Rename moves an entry, with renameat2's flags. Across MDTs it is a
// distributed operation on the servers; only RENAME_EXCHANGE across MDTs
// gives EXDEV. In striped directories the two names' stripes take the
// place of the directories: two names of one striped directory whose
// stripes live on different MDTs are a rename across MDTs, like two
// directories'.
func (c *Client) Rename(ctx context.Context, srcDir proto.FID, srcName string, dstDir proto.FID, dstName string, flags uint32) error {
	srcDir, err := c.route(ctx, srcDir, srcName)
	if err != nil {
		return err
	}
	if dstDir, err = c.route(ctx, dstDir, dstName); err != nil {
		return err
	}
	// The source stripe's (or directory's) MDT coordinates.
	req := &proto.RenameReq{SrcParent: srcDir, SrcName: srcName, DstParent: dstDir, DstName: dstName, Flags: flags}
	var r proto.RenameReply
	if err := c.mdtCall(ctx, srcDir, proto.MRename, req, &r); err != nil {
		return err
	}
	if r.Destroy {
		c.forgetLocks(r.Replaced.FID, true) // the MDT dropped them too
		c.destroyObjects(r.Replaced)
	}
	return nil
}

// Link adds a hard link to fid.
func (c *Client) Link(ctx context.Context, fid, dir proto.FID, name string) (*proto.Attr, error) {
	dir, err := c.route(ctx, dir, name)
	if err != nil {
		return nil, err
	}
	var r proto.AttrReply
	stamp := c.attrStamp()
	// dir's MDT coordinates; the inode may live on another (a remote entry).
	if err := c.mdtCall(ctx, dir, proto.MLink, &proto.LinkReq{FID: fid, Parent: dir, Name: name, Want: c.wantBits(proto.FID{}, proto.LockLookup)}, &r); err != nil {
		return nil, err
	}
	c.noteAttrLock(uint32(dir.MDT()), r.Attr.FID, &r.Attr, r.Lock)
	if r.Remote { // a resent link, answered from the entry
		return c.Getattr(ctx, r.Attr.FID)
	}
	c.overlay(&r.Attr, stamp)
	return &r.Attr, nil
}

// Readdir returns up to max entries of dir after cookie (0: from the
// start), and whether the directory ends there. Cookies stay valid while
// entries come and go.
func (c *Client) Readdir(ctx context.Context, dir proto.FID, cookie uint64, max int, plus bool) ([]proto.DirEnt, bool, error) {
	l, err := c.lmv(ctx, dir)
	if err != nil {
		return nil, false, err
	}
	var ents []proto.DirEnt
	var eof bool
	if l != nil {
		ents, eof, err = c.readdirStriped(ctx, l, cookie, max, plus)
	} else {
		ents, eof, err = c.readdirOne(ctx, dir, cookie, max, plus)
	}
	if err != nil {
		return nil, false, err
	}
	if plus {
		for i := range ents {
			if e := &ents[i]; e.Name != "." && e.Name != ".." && e.Attr.FID.IsStripedDir() {
				if err := c.mergeStripes(ctx, &e.Attr); err != nil {
					return nil, false, err
				}
			}
		}
	}
	return ents, eof, nil
}

// readdirOne reads one directory object: a plain directory or a stripe.
func (c *Client) readdirOne(ctx context.Context, dir proto.FID, cookie uint64, max int, plus bool) ([]proto.DirEnt, bool, error) {
	var r proto.ReaddirReply
	req := &proto.ReaddirReq{FID: dir, Cookie: cookie, Max: uint32(max), Plus: plus}
	if plus {
		req.Want = c.wantBits(proto.FID{}, proto.LockLookup|proto.LockUpdate)
	}
	since, stamp := c.fattrs.now(), c.attrStamp()
	if err := c.mdtCall(ctx, dir, proto.MReaddir, req, &r); err != nil {
		return nil, false, err
	}
	if plus {
		for i := range r.Entries {
			e := &r.Entries[i]
			c.noteAttrLock(uint32(dir.MDT()), e.FID, &e.Attr, e.Lock)
			if e.Attr.FID == e.FID {
				c.keepAttr(&e.Attr, e.Lock, 0, since, stamp) // read after its grant
			}
			if e.Attr.FID.IsZero() && e.Name != "." && e.Name != ".." && e.FID.MDT() != dir.MDT() {
				// An entry whose inode lives on another MDT: its MDT has
				// the attributes (a failure leaves them out, and the
				// kernel looks the entry up).
				if a, err := c.Getattr(ctx, e.FID); err == nil {
					e.Attr = *a
				}
				continue
			}
			c.overlay(&e.Attr, stamp)
		}
	}
	return r.Entries, r.EOF, nil
}

// Getxattr reads an extended attribute.
func (c *Client) Getxattr(ctx context.Context, fid proto.FID, name string) ([]byte, error) {
	if v, err, ok := c.cachedXattr(fid, name); ok {
		c.counters.xattrHits.Add(1)
		return v, err
	}
	held := c.locks.updateLock(fid) // before the RPC: its answer is good while this is held
	var r proto.XattrReply
	if err := c.mdtCall(ctx, fid, proto.MGetxattr, &proto.XattrReq{FID: fid, Name: name}, &r); err != nil {
		if Errno(err) == syscall.ENODATA {
			c.keepXattr(fid, name, nil, held)
		}
		return nil, err
	}
	c.keepXattr(fid, name, append([]byte{}, r.Value...), held) // non-nil: present, if empty
	return r.Value, nil
}

// Setxattr writes an extended attribute; flags are XATTR_CREATE/REPLACE.
// Setting LayoutXattr on a file this client has open re-reads the layout,
// and is refused once the handle has written data the MDT has not seen.
func (c *Client) Setxattr(ctx context.Context, fid proto.FID, name string, value []byte, flags uint32) error {
	defer c.dropXattrs(fid)
	if fid.IsStripedDir() {
		if name == mkdirXattr { // lfs mkdir -i/-c in a striped directory: where the name goes
			holder, err := c.route(ctx, fid, mkdirXattrName(value))
			if err != nil {
				return err
			}
			return c.mdtCall(ctx, holder, proto.MSetxattr, &proto.XattrReq{FID: holder, Name: name, Value: value, Flags: flags}, &proto.Empty{})
		}
		if stripedXattr(name) {
			err := c.eachStripe(ctx, fid, func(ctx context.Context, s proto.FID) error {
				return c.mdtCall(ctx, s, proto.MSetxattr, &proto.XattrReq{FID: s, Name: name, Value: value, Flags: flags}, &proto.Empty{})
			})
			if err != nil {
				return err
			}
		}
	}
	st := c.openState(fid)
	if name == proto.LayoutXattr && st != nil {
		st.mu.Lock()
		defer st.mu.Unlock()
		if st.size > 0 {
			return fmt.Errorf("fs: setstripe on %s: file has data: %w", fid, syscall.EINVAL)
		}
	}
	err := c.mdtCall(ctx, fid, proto.MSetxattr, &proto.XattrReq{FID: fid, Name: name, Value: value, Flags: flags}, &proto.Empty{})
	if err != nil || name != proto.LayoutXattr || st == nil {
		return err
	}
	var r proto.AttrReply
	if err := c.mdtCall(ctx, fid, proto.MGetattr, &proto.GetattrReq{FID: fid}, &r); err != nil {
		return err
	}
	st.layout = r.Attr.Layout
	st.initWriteback() // chunks follow the new stripe size; none holds data yet
	return nil
}

// Listxattr lists extended attribute names.
func (c *Client) Listxattr(ctx context.Context, fid proto.FID) ([]string, error) {
	var r proto.XattrReply
	if err := c.mdtCall(ctx, fid, proto.MListxattr, &proto.XattrReq{FID: fid}, &r); err != nil {
		return nil, err
	}
	return r.Names, nil
}

// Removexattr removes an extended attribute.
func (c *Client) Removexattr(ctx context.Context, fid proto.FID, name string) error {
	defer c.dropXattrs(fid)
	if fid.IsStripedDir() && stripedXattr(name) {
		err := c.eachStripe(ctx, fid, func(ctx context.Context, s proto.FID) error {
			err := c.mdtCall(ctx, s, proto.MRemovexattr, &proto.XattrReq{FID: s, Name: name}, &proto.Empty{})
			if Errno(err) == syscall.ENODATA {
				return nil
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	return c.mdtCall(ctx, fid, proto.MRemovexattr, &proto.XattrReq{FID: fid, Name: name}, &proto.Empty{})
}

// Statfs sums space over the OSTs and inodes over the MDTs.
func (c *Client) Statfs(ctx context.Context) (*proto.StatfsReply, error) {
	cfg := c.Config()
	var mu = make(chan struct{}, 1)
	sum := &proto.StatfsReply{}
	g, gctx := errgroup.WithContext(ctx)
	for _, t := range cfg.OSTs {
		g.Go(func() error {
			var r proto.StatfsReply
			if err := c.ostCall(gctx, t.Index, proto.OStatfs, &proto.Empty{}, &r); err != nil {
				return err
			}
			mu <- struct{}{}
			sum.Blocks += r.Blocks
			sum.Bfree += r.Bfree
			sum.Bavail += r.Bavail
			<-mu
			return nil
		})
	}
	for _, t := range cfg.MDTs {
		g.Go(func() error {
			var r proto.StatfsReply
			fid := proto.FID{Seq: proto.MDTSeq(int(t.Index), 1)}
			if err := c.mdtCall(gctx, fid, proto.MStatfs, &proto.Empty{}, &r); err != nil {
				return err
			}
			mu <- struct{}{}
			sum.Files += r.Files
			sum.Ffree += r.Ffree
			<-mu
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return sum, nil
}

// SyncMDT forces a commit on the MDT that owns fid.
func (c *Client) SyncMDT(ctx context.Context, fid proto.FID) error {
	return c.mdtCall(ctx, fid, proto.MSync, &proto.SyncReq{}, &proto.Empty{})
}

// SyncAllMDTs forces a commit on every MDT: a directory's fsync covers the
// MDTs its distributed operations touched, which may be any of them.
func (c *Client) SyncAllMDTs(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	for _, t := range c.Config().MDTs {
		fid := proto.FID{Seq: proto.MDTSeq(int(t.Index), 1)}
		g.Go(func() error { return c.SyncMDT(gctx, fid) })
	}
	return g.Wait()
}

func nowNs() int64 { return time.Now().UnixNano() }
