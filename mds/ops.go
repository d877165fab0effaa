package mds

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/stripefs/stripefs/mds/dtx"
	"github.com/stripefs/stripefs/perm"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

func (m *MDT) register() {
	s := m.Srv
	rpc.HandleFunc(s, proto.MLookup, m.lookup)
	rpc.HandleFunc(s, proto.MGetattr, m.getattr)
	rpc.HandleFunc(s, proto.MSetattr, m.setattr)
	rpc.HandleFunc(s, proto.MCreate, m.create)
	rpc.HandleFunc(s, proto.MMkdir, withGrant(m, m.mkdir))
	rpc.HandleFunc(s, proto.MSymlink, withGrant(m, m.symlink))
	rpc.HandleFunc(s, proto.MReadlink, m.readlink)
	rpc.HandleFunc(s, proto.MUnlink, m.unlink)
	rpc.HandleFunc(s, proto.MRename, m.rename)
	rpc.HandleFunc(s, proto.MLink, withGrant(m, m.link))
	rpc.HandleFunc(s, proto.MReaddir, m.readdir)
	rpc.HandleFunc(s, proto.MGetxattr, m.getxattr)
	rpc.HandleFunc(s, proto.MSetxattr, m.setxattr)
	rpc.HandleFunc(s, proto.MListxattr, m.listxattr)
	rpc.HandleFunc(s, proto.MRemovexattr, m.removexattr)
	rpc.HandleFunc(s, proto.MStatfs, m.statfs)
	rpc.HandleFunc(s, proto.MOpen, m.open)
	rpc.HandleFunc(s, proto.MClose, m.close)
	rpc.HandleFunc(s, proto.MLayoutIntent, m.layoutIntent)
	rpc.HandleFunc(s, proto.MSync, func(ctx context.Context, _ *proto.SyncReq) (any, error) {
		if err := m.flushAllPushes(ctx); err != nil {
			return nil, err
		}
		return &proto.Empty{}, m.Sync()
	})
}

func (m *MDT) errorf(op string, name string, errno syscall.Errno) error {
	return fmt.Errorf("mdt%d: %s %q: %w", m.cfg.Index, op, name, errno)
}

// checkName refuses names no directory may hold.
func (m *MDT) checkName(op, name string) error {
	switch {
	case name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00"):
		return m.errorf(op, name, syscall.EINVAL)
	case len(name) > nameMax:
		return m.errorf(op, name, syscall.ENAMETOOLONG)
	}
	return nil
}

func now() int64 { return time.Now().UnixNano() }

func (m *MDT) lookup(ctx context.Context, r *proto.LookupReq) (any, error) {
	if len(r.Name) > nameMax {
		return nil, m.errorf("lookup", r.Name, syscall.ENAMETOOLONG)
	}
	if err := m.inFileset(ctx, r.Parent); err != nil {
		return nil, err
	}
	gen := m.commits.Load() // before the entry is read (grantEntry)
	dir, err := m.getDir(r.Parent)
	if err != nil {
		return nil, err
	}
	if c := m.cred(ctx); perm.Access(&dir.Attr, c, perm.Exec) != nil {
		return nil, m.denied("lookup", r.Name, c, syscall.EACCES)
	}
	var fid proto.FID
	mode := uint32(sIFDIR)
	switch r.Name {
	case ".":
		fid = r.Parent
	case "..":
		p, err := m.getInode(r.Parent)
		if err != nil {
			return nil, err
		}
		fid = p.Parent
		if r.Parent == m.policy(ctx).FilesetFID {
			fid = r.Parent // a fileset's root is its clients' root: ".." leads nowhere above
		}
	default:
		d, err := m.getDirent(r.Parent, r.Name)
		if err != nil {
			return nil, err
		}
		fid, mode = d.FID, d.Mode
	}
	want := r.Want
	if r.Name == "." || r.Name == ".." {
		want = 0 // not an entry of the directory: nothing to guard
	}
	if fid.MDT() != m.cfg.Index {
		// A remote directory, or a remote entry of a file (a cross-MDT
		// link or rename): its MDT has the attributes; the entry is ours
		// to guard.
		return &proto.AttrReply{Attr: proto.Attr{FID: fid, Mode: mode}, Remote: true,
			Lock: m.grantEntry(ctx, fid, want, gen, m.entryLeadsTo(r.Parent, r.Name, fid))}, nil
	}
	// The lock first, then the inode: a change that calls the lock back
	// is made after the grant, so what is read below is never older than
	// what the lock lets the client keep.
	g := m.grantEntry(ctx, fid, want, gen, m.entryLeadsTo(r.Parent, r.Name, fid))
	mark := m.locks.Merged()
	n, err := m.getInode(fid)
	if err != nil {
		return nil, err
	}
	stored := n.Attr
	m.glimpse(ctx, &n.Attr, mark)
	return m.withBlocks(&proto.AttrReply{Attr: n.Attr, Lock: g}, stored), nil
}

func (m *MDT) getattr(ctx context.Context, r *proto.GetattrReq) (any, error) {
	g := m.grantMeta(ctx, r.FID, r.Want)
	mark := m.locks.Merged()
	n, err := m.getInode(r.FID)
	if err != nil {
		return nil, err
	}
	stored := n.Attr
	m.glimpse(ctx, &n.Attr, mark)
	return m.withBlocks(&proto.AttrReply{Attr: n.Attr, Lock: g}, stored), nil
}

func (m *MDT) setattr(ctx context.Context, r *proto.SetattrReq) (any, error) {
	reply, err := m.setattrHere(ctx, r)
	if err == nil && r.FID.IsStripedDir() && r.Valid&(proto.SetMode|proto.SetUid|proto.SetGid) != 0 {
		err = m.setStripesOwner(ctx, r.FID, reply.(*proto.AttrReply).Attr)
	}
	return reply, err
}

func (m *MDT) setattrHere(ctx context.Context, r *proto.SetattrReq) (any, error) {
	if err := m.writable(ctx, "setattr", r.FID); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.getInode(r.FID)
	if err != nil {
		return nil, err
	}
	a := &n.Attr
	c := m.cred(ctx)
	write := m.mayWrite(ctx, a, c)
	if r.FromWrites && !write {
		return nil, m.denied("setattr (size from writes)", r.FID, c, syscall.EACCES)
	}
	clear := uint32(0)
	if !r.FromWrites {
		if clear, err = perm.Setattr(a, r, c, write); err != nil {
			return nil, m.denied("setattr", r.FID, c, err)
		}
	}
	t := now()
	if r.Valid&proto.SetMode != 0 {
		a.Mode = a.Mode&sIFMT | r.Mode&^sIFMT
	}
	a.Mode &^= clear
	if r.Valid&proto.SetMode != 0 {
		chmodACL(n)
	}
	if r.Valid&proto.SetUid != 0 {
		a.Uid = r.Uid
	}
	if r.Valid&proto.SetGid != 0 {
		a.Gid = r.Gid
	}
	if r.FromWrites {
		// What a writer's flush or fsync reports: only ever more.
		if r.Valid&^(proto.SetSize|proto.SetMtime) != 0 || a.Mode&sIFMT != sIFREG {
			return nil, m.errorf("setattr", r.FID.String(), syscall.EINVAL)
		}
		if !mergeWrites(a, r.Size, r.Mtime) && !r.Sync {
			return &proto.AttrReply{Attr: n.Attr}, nil
		}
		b := m.newBatch(ctx)
		m.putInode(b, n)
		if err := m.commit(b, r.Sync); err != nil {
			return nil, err
		}
		return &proto.AttrReply{Attr: n.Attr}, nil
	}
	if r.Valid&proto.SetSize != 0 {
		if n.isDir() {
			return nil, m.errorf("truncate", r.FID.String(), syscall.EISDIR)
		}
		if a.Mode&sIFMT != sIFREG {
			return nil, m.errorf("truncate", r.FID.String(), syscall.EINVAL)
		}
		a.Size = r.Size
		a.Mtime = t
	}
	if r.Valid&proto.SetAtime != 0 {
		a.Atime = r.Atime
	}
	if r.Valid&proto.SetAtimeNow != 0 {
		a.Atime = t
	}
	if r.Valid&proto.SetMtime != 0 {
		a.Mtime = r.Mtime
	}
	if r.Valid&proto.SetMtimeNow != 0 {
		a.Mtime = t
	}
	a.Ctime = t
	if r.Valid&proto.SetCtime != 0 {
		a.Ctime = r.Ctime
	}
	b := m.newBatch(ctx)
	m.putInode(b, n)
	if err := m.commit(b, r.Sync); err != nil {
		return nil, err
	}
	return &proto.AttrReply{Attr: n.Attr}, nil
}

// newChild prepares a new inode in dir: FID, owner (perm.NewOwner: a
// setgid directory passes on its group, and to subdirectories its
// setgid bit) and times.
func (m *MDT) newChild(ctx context.Context, b *pebble.Batch, dir *inode, mode, umask uint32) (*inode, error) {
	fid, err := m.childFID(ctx, b)
	if err != nil {
		return nil, err
	}
	t := now()
	n := &inode{}
	n.Attr, n.DefACL = newOwner(dir, mode, umask, m.cred(ctx))
	n.Attr.FID, n.Attr.Nlink, n.Attr.Atime, n.Attr.Mtime, n.Attr.Ctime = fid, 1, t, t, t
	if err := m.quotaNewChild(b, dir, n); err != nil {
		return nil, err
	}
	return n, nil
}

// linkInto adds name → child to dir in b and touches dir.
func (m *MDT) linkInto(b *pebble.Batch, dir *inode, name string, child *inode) {
	m.markFresh(direntKey(dir.Attr.FID, name))
	b.Set(direntKey(dir.Attr.FID, name), (&dirent{FID: child.Attr.FID, Mode: child.Attr.Mode & sIFMT}).marshal(), nil)
	t := now()
	dir.Attr.Mtime, dir.Attr.Ctime = t, t
	if child.isDir() {
		dir.Attr.Nlink++
	}
	m.putInode(b, dir)
}

// prepareCreate checks that dir can take a new entry name, and that the
// caller may add it. m.mu is held; it is let go meanwhile if a striped
// rmdir froze dir.
func (m *MDT) prepareCreate(ctx context.Context, op string, parent proto.FID, name string) (*inode, error) {
	if err := m.checkName(op, name); err != nil {
		return nil, err
	}
	if err := m.writable(ctx, op, name); err != nil {
		return nil, err
	}
	if err := m.space.room(op, name); err != nil {
		return nil, err
	}
	m.waitThawLocked(parent)
	if err := m.checkStripeName(op, parent, name); err != nil {
		return nil, err
	}
	dir, err := m.getDir(parent)
	if err != nil {
		return nil, err
	}
	if dir.Attr.Nlink == 0 {
		return nil, m.errorf(op, name, syscall.ENOENT) // directory was removed
	}
	if c := m.cred(ctx); perm.Create(&dir.Attr, c) != nil {
		return nil, m.denied(op, name, c, syscall.EACCES)
	}
	if _, busy := m.pending[string(direntKey(parent, ""))]; busy {
		return nil, m.errorf(op, name, syscall.ENOENT) // a rename is replacing it
	}
	if _, busy := m.pending[string(direntKey(parent, name))]; busy {
		return nil, m.errorf(op, name, syscall.EEXIST) // a distributed operation has the name
	}
	return dir, nil
}

func (m *MDT) create(ctx context.Context, r *proto.CreateReq) (any, error) {
	switch r.Mode & sIFMT {
	case sIFREG, syscall.S_IFIFO, syscall.S_IFSOCK, syscall.S_IFCHR, syscall.S_IFBLK:
	case 0:
		r.Mode |= sIFREG
	default:
		return nil, m.errorf("create", r.Name, syscall.EINVAL)
	}
	if err := m.inFileset(ctx, r.Parent); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, err := m.prepareCreate(ctx, "create", r.Parent, r.Name)
	if err != nil {
		return nil, err
	}
	if d, err := m.getDirent(r.Parent, r.Name); err == nil {
		if r.Excl || d.Mode != sIFREG || !r.Open {
			return nil, m.errorf("create", r.Name, syscall.EEXIST)
		}
		n, err := m.getInode(d.FID) // lost a race with another creator: open it
		if err != nil {
			return nil, err
		}
		if c := m.cred(ctx); perm.Access(&n.Attr, c, perm.Open(r.Flags)) != nil {
			return nil, m.denied("open", r.Name, c, syscall.EACCES)
		}
		m.opens[n.Attr.FID]++
		if perm.Writes(r.Flags) {
			m.noteWriter(ctx, n.Attr.FID, 1)
		}
		return &proto.AttrReply{Attr: n.Attr}, nil
	} else if !errors.Is(err, syscall.ENOENT) {
		return nil, err
	}
	b := m.newBatch(ctx)
	n, err := m.newChild(ctx, b, dir, r.Mode, r.Umask)
	if err != nil {
		return nil, err
	}
	n.Attr.Rdev = r.Rdev
	if r.Mode&sIFMT == sIFREG {
		if first, ok := firstAttr(ctx); ok && first.FID == n.Attr.FID && m.layoutFits(ctx, first.Layout) {
			// A replayed create keeps the objects its data went to.
			n.Attr.Layout = first.Layout
		} else if n.Attr.Layout, err = m.chooseLayout(ctx, dir, r.Layout); err != nil {
			return nil, err
		}
	}
	m.newInode(b, n)
	m.linkInto(b, dir, r.Name, n)
	if err := m.commit(b, false); err != nil {
		return nil, err
	}
	if r.Open {
		m.opens[n.Attr.FID]++
		if perm.Writes(r.Flags) {
			m.noteWriter(ctx, n.Attr.FID, 1) // the creator writes, whatever the mode
		}
	}
	// Granted under m.mu, before any change another client could make
	// to the new name's inode: the attributes below are the lock's.
	reply := &proto.AttrReply{Attr: n.Attr, Parent: dir.Attr, Lock: m.grantMeta(ctx, n.Attr.FID, r.Want)}
	if n.Attr.Mode&sIFMT == sIFREG {
		reply.HasOwner, reply.Owner = true, proto.Owner{Uid: n.Attr.Uid, Gid: n.Attr.Gid, Projid: m.projid(dir.Attr.FID)}
		if c, ok := rpc.CallerFrom(ctx); ok && r.Open && r.Want != 0 && perm.Writes(r.Flags) {
			reply.Data = m.locks.TryWrite(c.Client, c.Name, n.Attr.FID)
		}
	}
	return reply, nil
}

// layoutFits reports whether l, a layout this MDT gave out before a
// restart, is still a valid one for this filesystem's OSTs.
func (m *MDT) layoutFits(ctx context.Context, l proto.Layout) bool {
	cfg, err := m.config(ctx)
	if err != nil || len(l.OSTs) == 0 || l.CheckFile() != nil {
		return false
	}
	n := numOSTs(cfg)
	for _, o := range l.OSTs {
		if proto.IsDoMOST(o) && proto.DoMIndex(o) != uint32(m.cfg.Index) || !proto.IsDoMOST(o) && int(o) >= n {
			return false
		}
	}
	return true
}

// chooseLayout instantiates a new file's layout: the request's, else the
// directory's default, else the filesystem default, spread round-robin
// over the OSTs when no first OST is asked for.
func (m *MDT) chooseLayout(ctx context.Context, dir *inode, req proto.Layout) (proto.Layout, error) {
	cfg, err := m.config(ctx)
	if err != nil {
		return proto.Layout{}, err
	}
	nOST := numOSTs(cfg)
	if nOST == 0 {
		return proto.Layout{}, fmt.Errorf("mdt%d: no OST has registered yet: %w", m.cfg.Index, syscall.ENOSPC)
	}
	l := cfg.Default
	if dir.DefLayout.IsSet() {
		l = dir.DefLayout
	}
	if req.IsSet() {
		l = req
	}
	// A default wider than the OSTs there are shrinks to them; an
	// erasure-coded one cannot (a row needs its K+M OSTs): Validate says so.
	if !l.IsEC() && !l.IsComposite() && (l.StripeCount == proto.AllOSTs || l.StripeCount > uint32(nOST) && !req.IsSet()) {
		l.StripeCount = uint32(nOST)
	}
	if len(l.OSTs) == 0 {
		l = l.Instantiate(nOST, int(m.rr.Add(1)-1), uint32(m.cfg.Index))
	}
	if err := l.Validate(nOST); err != nil {
		return proto.Layout{}, fmt.Errorf("mdt%d: layout: %w", m.cfg.Index, err)
	}
	if err := l.CheckDoMMax(m.domMax()); err != nil {
		return proto.Layout{}, fmt.Errorf("mdt%d: layout: %w", m.cfg.Index, err)
	}
	return l, nil
}

func (m *MDT) mkdir(ctx context.Context, r *proto.MkdirReq) (any, error) {
	return m.mkdirStriped(ctx, r, 0)
}

// mkdirStriped is mkdir with a stripe count: 0 follows the parent's
// default, 1 is a plain directory, more a striped one (stripedir.go).
func (m *MDT) mkdirStriped(ctx context.Context, r *proto.MkdirReq, count int) (any, error) {
	if err := m.inFileset(ctx, r.Parent); err != nil {
		return nil, err
	}
	h := m.holdNS()
	defer h.unlock()
	dir, err := m.prepareCreate(ctx, "mkdir", r.Parent, r.Name)
	if err != nil {
		return nil, err
	}
	if err := m.nameFree(r.Parent, r.Name, "mkdir"); err != nil {
		return nil, err
	}
	if _, busy := m.pending[string(direntKey(r.Parent, r.Name))]; busy {
		return nil, m.errorf("mkdir", r.Name, syscall.EEXIST)
	}
	if count == 0 && dir.DefDir.Set {
		count = int(max(dir.DefDir.Count, 1))
	}
	target, err := m.mkdirTarget(ctx, dir, r.MDT)
	if err != nil {
		return nil, err
	}
	remoteSync := m.remoteSync.Load()
	if count <= 1 && target != uint32(m.cfg.Index) && !remoteSync {
		// With a FID in the pool, the usual case, the whole mkdir is
		// done under this hold of m.mu, and dir as read is still right.
		if fid, ok := m.pooledRemoteFID(ctx, target); ok {
			return m.remoteMkdirAsync(ctx, r, dir, target, fid, []*inode{dir})
		}
	}
	if count > 1 || target != uint32(m.cfg.Index) {
		// A distributed mkdir: its name is reserved, and m.mu let go for
		// the RPCs to the other MDTs.
		var id dtx.OpID
		if count > 1 || remoteSync {
			if id, err = m.startOp(r.Parent, r.Name); err != nil {
				return nil, err
			}
		} else if err := m.reserve(r.Parent, r.Name); err != nil { // remoteMkdirAsync takes its ID as it commits
			return nil, err
		}
		h.unlock()
		defer m.release(r.Parent, r.Name)
		switch {
		case count > 1:
			return m.stripedMkdir(ctx, r, dir, id, target, count)
		case remoteSync:
			return m.remoteMkdirSync(ctx, r, dir, id, target)
		default:
			return m.remoteMkdirUnpooled(ctx, r, dir, target)
		}
	}
	b := m.newBatch(ctx)
	n, err := m.newChild(ctx, b, dir, sIFDIR|r.Mode&0o7777, r.Umask)
	if err != nil {
		return nil, err
	}
	n.Attr.Nlink = 2
	n.Parent = dirParentOf(dir)
	n.DefLayout = dir.DefLayout
	n.DefDir = dir.DefDir
	m.newInode(b, n)
	m.linkInto(b, dir, r.Name, n)
	if err := m.commit(b, false); err != nil {
		return nil, err
	}
	return &proto.AttrReply{Attr: n.Attr, Parent: dir.Attr}, nil
}

// nsHold is a namespace handler's hold of m.mu. A handler that turns out
// to need a distributed operation reserves the name (startOp) and lets
// the hold go before the operation's RPCs: unlock may be called again,
// so the handler also defers it.
type nsHold struct {
	mu   *sync.Mutex
	held bool
}

// holdNS takes m.mu for a namespace handler.
func (m *MDT) holdNS() nsHold {
	m.mu.Lock()
	return nsHold{mu: &m.mu, held: true}
}

func (h *nsHold) unlock() {
	if h.held {
		h.held = false
		h.mu.Unlock()
	}
}

// nameFree says whether dir has no entry name (EEXIST for op if it has).
func (m *MDT) nameFree(dir proto.FID, name, op string) error {
	if _, err := m.getDirent(dir, name); err == nil {
		return m.errorf(op, name, syscall.EEXIST)
	} else if !errors.Is(err, syscall.ENOENT) {
		return err
	}
	return nil
}

func (m *MDT) symlink(ctx context.Context, r *proto.SymlinkReq) (any, error) {
	if len(r.Target) == 0 || len(r.Target) >= 4096 {
		return nil, m.errorf("symlink", r.Name, syscall.ENAMETOOLONG)
	}
	if err := m.inFileset(ctx, r.Parent); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, err := m.prepareCreate(ctx, "symlink", r.Parent, r.Name)
	if err != nil {
		return nil, err
	}
	if err := m.nameFree(r.Parent, r.Name, "symlink"); err != nil {
		return nil, err
	}
	b := m.newBatch(ctx)
	n, err := m.newChild(ctx, b, dir, sIFLNK|0o777, 0)
	if err != nil {
		return nil, err
	}
	n.Target = r.Target
	n.Attr.Size = uint64(len(r.Target))
	m.newInode(b, n)
	m.linkInto(b, dir, r.Name, n)
	if err := m.commit(b, false); err != nil {
		return nil, err
	}
	return &proto.AttrReply{Attr: n.Attr, Parent: dir.Attr}, nil
}

func (m *MDT) readlink(ctx context.Context, r *proto.GetattrReq) (any, error) {
	n, err := m.getInode(r.FID)
	if err != nil {
		return nil, err
	}
	if n.Attr.Mode&sIFMT != sIFLNK {
		return nil, m.errorf("readlink", r.FID.String(), syscall.EINVAL)
	}
	return &proto.ReadlinkReply{Target: n.Target}, nil
}

// dropLink removes one link to n in b. It reports whether the file's data
// is to be destroyed now (last link of a file nobody has open); an open
// file becomes an orphan until its last close.
func (m *MDT) dropLink(b *pebble.Batch, n *inode) (destroy bool) {
	t := now()
	n.Attr.Ctime = t
	if n.isDir() {
		n.Attr.Nlink = 0
	} else if n.Attr.Nlink > 0 {
		n.Attr.Nlink--
	}
	if n.Attr.Nlink > 0 {
		m.putInode(b, n)
		return false
	}
	if m.opens[n.Attr.FID] > 0 {
		m.putInode(b, n)
		b.Set(orphanKey(n.Attr.FID), nil, nil)
		return false
	}
	m.deleteInode(b, n.Attr.FID)
	return n.Attr.Mode&sIFMT == sIFREG
}

func (m *MDT) unlink(ctx context.Context, r *proto.UnlinkReq) (any, error) {
	op := "unlink"
	if r.Dir {
		op = "rmdir"
	}
	if err := m.checkName(op, r.Name); err != nil {
		return nil, err
	}
	if err := m.writable(ctx, op, r.Name); err != nil {
		return nil, err
	}
	if err := m.inFileset(ctx, r.Parent); err != nil {
		return nil, err
	}
	remoteVictim, err := m.stickyVictim(ctx, r.Parent, r.Name)
	if err != nil {
		return nil, err
	}
	h := m.holdNS()
	defer h.unlock()
	dir, err := m.getDir(r.Parent)
	if err != nil {
		return nil, err
	}
	c := m.cred(ctx)
	if err := perm.Create(&dir.Attr, c); err != nil {
		return nil, m.denied(op, r.Name, c, err)
	}
	d, err := m.direntFor(ctx, r.Parent, r.Name)
	if err != nil {
		return nil, err
	}
	if !changeLocked(ctx, d.FID) {
		return nil, errRelock
	}
	if dir.Attr.Mode&sISVTX != 0 && !perm.IsRoot(c) {
		victim, err := m.victimAttr(d.FID, remoteVictim)
		if err != nil {
			return nil, m.errorf(op, r.Name, syscall.EBUSY)
		}
		if err := perm.Remove(&dir.Attr, victim, c); err != nil {
			return nil, m.denied(op, r.Name, c, err)
		}
	}
	if _, busy := m.pending[string(direntKey(r.Parent, r.Name))]; busy {
		return nil, m.errorf(op, r.Name, syscall.EBUSY)
	}
	remote := d.FID.MDT() != m.cfg.Index
	if (d.FID.IsStripedDir() || remote && d.Mode == sIFDIR) && !r.Dir {
		return nil, m.errorf("unlink", r.Name, syscall.EISDIR)
	}
	if remote && d.Mode != sIFDIR && r.Dir {
		return nil, m.errorf("rmdir", r.Name, syscall.ENOTDIR)
	}
	if d.FID.IsStripedDir() || remote {
		// A distributed removal: its name is reserved, and m.mu let go
		// for the RPCs to the other MDTs.
		id, err := m.startOp(r.Parent, r.Name)
		if err != nil {
			return nil, err
		}
		h.unlock()
		defer m.release(r.Parent, r.Name)
		switch {
		case d.FID.IsStripedDir():
			return m.stripedRmdir(ctx, r, d, id)
		case d.Mode == sIFDIR:
			return m.remoteRmdir(ctx, r, d, id)
		default:
			return m.remoteUnlink(ctx, r, d, id)
		}
	}
	n, err := m.getInode(d.FID)
	if err != nil {
		return nil, err
	}
	if err := m.checkRemovable(op, r.Name, n, r.Dir); err != nil {
		return nil, err
	}
	b := m.newBatch(ctx)
	b.Delete(direntKey(r.Parent, r.Name), nil)
	t := now()
	dir.Attr.Mtime, dir.Attr.Ctime = t, t
	if n.isDir() {
		dir.Attr.Nlink--
	}
	m.putInode(b, dir)
	destroy := m.dropLink(b, n)
	if err := m.commit(b, false); err != nil {
		return nil, err
	}
	return &proto.UnlinkReply{Attr: n.Attr, Destroy: destroy, Parent: dir.Attr}, nil
}

// checkRemovable applies unlink/rmdir's type rules and rmdir's emptiness.
func (m *MDT) checkRemovable(op, name string, n *inode, wantDir bool) error {
	switch {
	case wantDir && !n.isDir():
		return m.errorf(op, name, syscall.ENOTDIR)
	case !wantDir && n.isDir():
		return m.errorf(op, name, syscall.EISDIR)
	case n.isDir():
		// A name a distributed operation is creating in it counts.
		prefix := string(direntPrefix(n.Attr.FID))
		for k := range m.pending {
			if strings.HasPrefix(k, prefix) && len(k) > len(prefix)+8 {
				return m.errorf(op, name, syscall.ENOTEMPTY)
			}
		}
		empty, err := m.dirEmpty(n.Attr.FID)
		if err != nil {
			return fmt.Errorf("mdt%d: %s %q: %v: %w", m.cfg.Index, op, name, err, syscall.EIO)
		}
		if !empty {
			return m.errorf(op, name, syscall.ENOTEMPTY)
		}
	}
	return nil
}

// isAncestor reports whether a is dir or one of dir's ancestors.
func (m *MDT) isAncestor(a, dir proto.FID) (bool, error) {
	for i := 0; i < 4096; i++ {
		if dir == a {
			return true, nil
		}
		if dir == proto.RootFID {
			return false, nil
		}
		n, err := m.getInode(dir)
		if err != nil {
			return false, err
		}
		dir = n.Parent
	}
	return false, fmt.Errorf("mdt%d: directory tree deeper than 4096 or looped: %w", m.cfg.Index, syscall.ELOOP)
}

func (m *MDT) rename(ctx context.Context, r *proto.RenameReq) (any, error) {
	if err := m.checkName("rename", r.SrcName); err != nil {
		return nil, err
	}
	if err := m.checkName("rename", r.DstName); err != nil {
		return nil, err
	}
	if r.Flags&^(proto.RenameNoReplace|proto.RenameExchange) != 0 ||
		r.Flags == proto.RenameNoReplace|proto.RenameExchange {
		return nil, m.errorf("rename", r.SrcName, syscall.EINVAL)
	}
	if err := m.writable(ctx, "rename", r.SrcName); err != nil {
		return nil, err
	}
	if err := m.inFileset(ctx, r.SrcParent, r.DstParent); err != nil {
		return nil, err
	}
	h := m.holdNS()
	defer h.unlock()
	// Anything on another MDT (the destination directory, either inode,
	// an ancestor on the way up) makes it a distributed rename.
	remote := func() (any, error) {
		h.unlock()
		return m.remoteRename(ctx, r)
	}
	m.waitThawLocked(r.SrcParent, r.DstParent)
	if r.DstParent.MDT() == m.cfg.Index { // the MDT that holds it checks a remote one
		if err := m.checkStripeName("rename", r.DstParent, r.DstName); err != nil {
			return nil, err
		}
	}
	sdir, err := m.getDir(r.SrcParent)
	if err != nil {
		return nil, err
	}
	if r.DstParent.MDT() != m.cfg.Index {
		return remote()
	}
	ddir := sdir
	if r.DstParent != r.SrcParent {
		if ddir, err = m.getDir(r.DstParent); err != nil {
			return nil, err
		}
	}
	sd, err := m.direntFor(ctx, r.SrcParent, r.SrcName)
	if err != nil {
		return nil, err
	}
	for _, k := range [][]byte{direntKey(r.SrcParent, r.SrcName), direntKey(r.DstParent, r.DstName), direntKey(r.DstParent, "")} {
		if _, busy := m.pending[string(k)]; busy {
			return nil, m.errorf("rename", r.SrcName, syscall.EBUSY) // a distributed operation has it
		}
	}
	if !changeLocked(ctx, sd.FID) {
		return nil, errRelock
	}
	if sd.FID.MDT() != m.cfg.Index {
		return remote()
	}
	src, err := m.getInode(sd.FID)
	if err != nil {
		return nil, err
	}
	if src.isDir() && r.DstParent != r.SrcParent {
		if in, err := m.isAncestor(src.Attr.FID, r.DstParent); errors.Is(err, syscall.EXDEV) {
			return remote()
		} else if err != nil {
			return nil, err
		} else if in {
			return nil, m.errorf("rename", r.SrcName, syscall.EINVAL)
		}
	}
	var dst *inode
	if dd, err := m.getDirent(r.DstParent, r.DstName); err == nil {
		if !changeLocked(ctx, dd.FID) {
			return nil, errRelock
		}
		if dd.FID.MDT() != m.cfg.Index {
			return remote()
		}
		if dst, err = m.getInode(dd.FID); err != nil {
			return nil, err
		}
	} else if !errors.Is(err, syscall.ENOENT) {
		return nil, err
	}
	c := m.cred(ctx)
	var dstAttr *proto.Attr
	if dst != nil {
		dstAttr = &dst.Attr
	}
	err = perm.Rename(&sdir.Attr, &src.Attr, &ddir.Attr, dstAttr, c)
	if err == nil && r.Flags&proto.RenameExchange != 0 && dst != nil {
		err = perm.Rename(&ddir.Attr, &dst.Attr, &sdir.Attr, &src.Attr, c)
	}
	if err != nil {
		return nil, m.denied("rename", r.SrcName, c, err)
	}
	if r.Flags&proto.RenameExchange != 0 {
		return m.exchange(ctx, r, sdir, ddir, src, dst)
	}
	reply := &proto.RenameReply{}
	if dst != nil {
		if r.Flags&proto.RenameNoReplace != 0 {
			return nil, m.errorf("rename", r.DstName, syscall.EEXIST)
		}
		if dst.Attr.FID == src.Attr.FID {
			return reply, nil // two links to one inode: POSIX says do nothing
		}
		if src.isDir() && !dst.isDir() {
			return nil, m.errorf("rename", r.DstName, syscall.ENOTDIR)
		}
		if !src.isDir() && dst.isDir() {
			return nil, m.errorf("rename", r.DstName, syscall.EISDIR)
		}
		if dst.isDir() {
			if in, err := m.isAncestor(dst.Attr.FID, r.SrcParent); errors.Is(err, syscall.EXDEV) {
				return remote()
			} else if err != nil {
				return nil, err
			} else if in {
				return nil, m.errorf("rename", r.DstName, syscall.ENOTEMPTY)
			}
		}
		if err := m.checkRemovable("rename", r.DstName, dst, dst.isDir()); err != nil {
			return nil, err
		}
	}
	b := m.newBatch(ctx)
	t := now()
	b.Delete(direntKey(r.SrcParent, r.SrcName), nil)
	b.Set(direntKey(r.DstParent, r.DstName), (&dirent{FID: src.Attr.FID, Mode: src.Attr.Mode & sIFMT}).marshal(), nil)
	m.markFresh(direntKey(r.DstParent, r.DstName))
	if dst != nil {
		reply.Replaced, reply.HasReplaced = dst.Attr, true
		reply.Destroy = m.dropLink(b, dst)
		if dst.isDir() {
			ddir.Attr.Nlink--
		}
	}
	if src.isDir() && sdir != ddir {
		sdir.Attr.Nlink--
		ddir.Attr.Nlink++
		src.Parent = dirParentOf(ddir)
	}
	src.Attr.Ctime = t
	m.putInode(b, src)
	sdir.Attr.Mtime, sdir.Attr.Ctime = t, t
	ddir.Attr.Mtime, ddir.Attr.Ctime = t, t
	m.putInode(b, sdir)
	if ddir != sdir {
		m.putInode(b, ddir)
	}
	if err := m.commit(b, false); err != nil {
		return nil, err
	}
	return reply, nil
}

// exchange swaps two entries (renameat2 RENAME_EXCHANGE).
func (m *MDT) exchange(ctx context.Context, r *proto.RenameReq, sdir, ddir, src, dst *inode) (any, error) {
	if dst == nil {
		return nil, m.errorf("rename", r.DstName, syscall.ENOENT)
	}
	if dst.isDir() && r.DstParent != r.SrcParent {
		if in, err := m.isAncestor(dst.Attr.FID, r.SrcParent); err != nil {
			return nil, err
		} else if in {
			return nil, m.errorf("rename", r.DstName, syscall.EINVAL)
		}
	}
	b := m.newBatch(ctx)
	t := now()
	b.Set(direntKey(r.SrcParent, r.SrcName), (&dirent{FID: dst.Attr.FID, Mode: dst.Attr.Mode & sIFMT}).marshal(), nil)
	b.Set(direntKey(r.DstParent, r.DstName), (&dirent{FID: src.Attr.FID, Mode: src.Attr.Mode & sIFMT}).marshal(), nil)
	m.markFresh(direntKey(r.SrcParent, r.SrcName))
	m.markFresh(direntKey(r.DstParent, r.DstName))
	if sdir != ddir {
		if src.isDir() {
			src.Parent = dirParentOf(ddir)
			sdir.Attr.Nlink--
			ddir.Attr.Nlink++
		}
		if dst.isDir() {
			dst.Parent = dirParentOf(sdir)
			ddir.Attr.Nlink--
			sdir.Attr.Nlink++
		}
	}
	src.Attr.Ctime, dst.Attr.Ctime = t, t
	m.putInode(b, src)
	m.putInode(b, dst)
	sdir.Attr.Mtime, sdir.Attr.Ctime = t, t
	ddir.Attr.Mtime, ddir.Attr.Ctime = t, t
	m.putInode(b, sdir)
	if ddir != sdir {
		m.putInode(b, ddir)
	}
	if err := m.commit(b, false); err != nil {
		return nil, err
	}
	return &proto.RenameReply{}, nil
}

func (m *MDT) link(ctx context.Context, r *proto.LinkReq) (any, error) {
	if err := m.inFileset(ctx, r.Parent); err != nil {
		return nil, err
	}
	h := m.holdNS()
	defer h.unlock()
	dir, err := m.prepareCreate(ctx, "link", r.Parent, r.Name)
	if err != nil {
		return nil, err
	}
	if r.FID.MDT() != m.cfg.Index {
		if err := m.nameFree(r.Parent, r.Name, "link"); err != nil {
			return nil, err
		}
		id, err := m.startOp(r.Parent, r.Name)
		if err != nil {
			return nil, err
		}
		h.unlock()
		defer m.release(r.Parent, r.Name)
		return m.remoteLink(ctx, r, id)
	}
	n, err := m.getInode(r.FID)
	if err != nil {
		return nil, err
	}
	if n.isDir() {
		return nil, m.errorf("link", r.Name, syscall.EPERM)
	}
	if n.Attr.Nlink == 0 {
		return nil, m.errorf("link", r.Name, syscall.ENOENT)
	}
	if n.Attr.Nlink >= 65000 {
		return nil, m.errorf("link", r.Name, syscall.EMLINK)
	}
	if err := m.nameFree(r.Parent, r.Name, "link"); err != nil {
		return nil, err
	}
	b := m.newBatch(ctx)
	n.Attr.Nlink++
	n.Attr.Ctime = now()
	m.putInode(b, n)
	m.linkInto(b, dir, r.Name, n)
	if err := m.commit(b, false); err != nil {
		return nil, err
	}
	return &proto.AttrReply{Attr: n.Attr}, nil
}

// readdirMax bounds the entries of one reply.
const readdirMax = 4096

func (m *MDT) readdir(ctx context.Context, r *proto.ReaddirReq) (any, error) {
	if err := m.inFileset(ctx, r.FID); err != nil {
		return nil, err
	}
	gen := m.commits.Load() // before the entries are read (grantEntry)
	dir, err := m.getDir(r.FID)
	if err != nil {
		return nil, err
	}
	if c := m.cred(ctx); perm.Access(&dir.Attr, c, perm.Read) != nil {
		return nil, m.denied("readdir", r.FID, c, syscall.EACCES)
	}
	limit := int(min(max(r.Max, 1), readdirMax))
	out := &proto.ReaddirReply{}
	add := func(e proto.DirEnt) {
		if r.Plus {
			if e.Name != "." && e.Name != ".." {
				e.Lock = m.grantEntry(ctx, e.FID, r.Want, gen, m.entryLeadsTo(r.FID, e.Name, e.FID))
			}
			if n, err := m.getInode(e.FID); err == nil {
				e.Attr = n.Attr
			}
		}
		out.Entries = append(out.Entries, e)
	}
	self, parent := r.FID, dir.Parent
	if r.FID.IsDirStripe() && r.Cookie < 2 {
		// Stripe 0 gives a striped directory's "." and "..": its master,
		// which lives here, and the master's parent.
		self = dir.Parent
		if mi, err := m.getInode(self); err == nil {
			parent = mi.Parent
		}
	}
	if r.Cookie < 1 {
		add(proto.DirEnt{Name: ".", FID: self, Mode: sIFDIR, Cookie: 1})
	}
	if r.Cookie < 2 && len(out.Entries) < limit {
		add(proto.DirEnt{Name: "..", FID: parent, Mode: sIFDIR, Cookie: 2})
	}
	p := direntPrefix(r.FID)
	it, err := m.db.NewIter(&pebble.IterOptions{LowerBound: cookieKey(r.FID, max(r.Cookie+1, firstCookie)), UpperBound: prefixEnd(p)})
	if err != nil {
		return nil, fmt.Errorf("mdt%d: readdir: %v: %w", m.cfg.Index, err, syscall.EIO)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		if len(out.Entries) >= limit {
			return out, nil
		}
		k := it.Key()
		if len(k) < len(p)+8 {
			continue
		}
		var d dirent
		if err := unmarshalDirent(it.Value(), &d); err != nil {
			return nil, fmt.Errorf("mdt%d: readdir: corrupt entry: %v: %w", m.cfg.Index, err, syscall.EIO)
		}
		cookie := uint64(k[len(p)])<<56 | uint64(k[len(p)+1])<<48 | uint64(k[len(p)+2])<<40 | uint64(k[len(p)+3])<<32 |
			uint64(k[len(p)+4])<<24 | uint64(k[len(p)+5])<<16 | uint64(k[len(p)+6])<<8 | uint64(k[len(p)+7])
		add(proto.DirEnt{Name: string(k[len(p)+8:]), FID: d.FID, Mode: d.Mode, Cookie: cookie})
	}
	out.EOF = true
	return out, nil
}

func (m *MDT) statfs(ctx context.Context, r *proto.Empty) (any, error) {
	used := uint64(max(m.inodes.Load(), 0))
	free := uint64(1 << 32)
	out := &proto.StatfsReply{}
	var st syscall.Statfs_t
	if m.cfg.FS == nil && syscall.Statfs(m.cfg.DataDir, &st) == nil {
		// About one KiB of database per inode.
		free = st.Bavail * uint64(st.Bsize) / 1024
		// The space of the MDT's own disk, for stripefs df (the mount's
		// statfs counts the OSTs' only, as Lustre's does).
		bs := uint64(st.Bsize)
		out.Blocks, out.Bfree, out.Bavail = st.Blocks*bs, st.Bfree*bs, st.Bavail*bs
		out.Fsid = proto.FsidOf(st.Fsid.X__val)
	}
	out.Files, out.Ffree = used+free, free
	switch {
	case m.guard.NoSpace() || m.space.atReserve():
		out.Flags |= proto.StatfsNoSpace
	case m.guard.Err() != nil:
		out.Flags |= proto.StatfsReadOnly
	}
	return out, nil
}
