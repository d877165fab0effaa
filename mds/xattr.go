package mds

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/cockroachdb/pebble/v2"

	"github.com/stripefs/stripefs/perm"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

const (
	xattrCreate  = 1 // XATTR_CREATE
	xattrReplace = 2 // XATTR_REPLACE
)

func (m *MDT) getxattr(ctx context.Context, r *proto.XattrReq) (any, error) {
	n, err := m.getInode(r.FID)
	if err != nil {
		return nil, err
	}
	if c := m.cred(ctx); !internalXattr(r.Name) {
		if err := perm.GetXattr(&n.Attr, r.Name, c); err != nil {
			return nil, m.denied("getxattr", r.Name, c, err)
		}
	}
	if isACLXattr(r.Name) {
		return aclXattr(n, r.Name)
	}
	switch r.Name {
	case DirXattr:
		if !n.isDir() {
			return nil, syscall.ENODATA
		}
		if r.FID.IsStripedDir() {
			l, err := m.getLMV(r.FID)
			if err != nil {
				return nil, err
			}
			return &proto.XattrReply{Value: []byte(lmvString(l))}, nil
		}
		return &proto.XattrReply{Value: []byte(fmt.Sprintf("mdt_index=%d mdt_count=1 fid=%s", r.FID.MDT(), r.FID))}, nil
	case DirDefaultXattr:
		if !n.DefDir.Set {
			return nil, syscall.ENODATA
		}
		return &proto.XattrReply{Value: []byte(n.DefDir.String())}, nil
	}
	if r.Name == proto.LayoutXattr {
		l, ok := layoutOf(n)
		if !ok {
			return nil, syscall.ENODATA
		}
		v := l.String()
		if !n.isDir() {
			v += " fid=" + n.Attr.FID.String()
		}
		return &proto.XattrReply{Value: []byte(v)}, nil
	}
	v, closer, err := m.db.Get(xattrKey(r.FID, r.Name))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, syscall.ENODATA
	}
	if err != nil {
		return nil, fmt.Errorf("mdt%d: getxattr %q: %v: %w", m.cfg.Index, r.Name, err, syscall.EIO)
	}
	defer closer.Close()
	return &proto.XattrReply{Value: append([]byte(nil), v...)}, nil
}

func (m *MDT) setxattr(ctx context.Context, r *proto.XattrReq) (any, error) {
	switch {
	case r.Name == "" || len(r.Name) > nameMax:
		return nil, m.errorf("setxattr", r.Name, syscall.ERANGE)
	case len(r.Value) > xattrMax:
		return nil, m.errorf("setxattr", r.Name, syscall.E2BIG)
	case r.Flags&^(xattrCreate|xattrReplace) != 0:
		return nil, m.errorf("setxattr", r.Name, syscall.EINVAL)
	case internalXattr(r.Name):
		return nil, m.errorf("setxattr", r.Name, syscall.EPERM)
	}
	if err := m.writable(ctx, "setxattr", r.Name); err != nil {
		return nil, err
	}
	if err := m.space.room("setxattr", r.Name); err != nil {
		return nil, err
	}
	if r.Name == MkdirXattr {
		return &proto.Empty{}, m.mkdirXattr(ctx, r.FID, string(r.Value))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.getInode(r.FID)
	if err != nil {
		return nil, err
	}
	if c := m.cred(ctx); r.Name != DirXattr {
		if err := perm.SetXattr(&n.Attr, r.Name, c); err != nil {
			return nil, m.denied("setxattr", r.Name, c, err)
		}
	}
	if isACLXattr(r.Name) {
		return &proto.Empty{}, m.aclChange(ctx, n, r, false)
	}
	switch r.Name {
	case proto.LayoutXattr:
		return &proto.Empty{}, m.setLayout(ctx, n, string(r.Value))
	case DirDefaultXattr:
		return &proto.Empty{}, m.setDirDefault(ctx, n, string(r.Value))
	case DirXattr:
		return nil, m.errorf("setxattr", r.Name, syscall.EPERM) // a directory moves only by rename
	}
	_, closer, err := m.db.Get(xattrKey(r.FID, r.Name))
	exists := err == nil
	if exists {
		closer.Close()
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return nil, fmt.Errorf("mdt%d: setxattr %q: %v: %w", m.cfg.Index, r.Name, err, syscall.EIO)
	}
	if r.Flags&xattrCreate != 0 && exists {
		return nil, m.errorf("setxattr", r.Name, syscall.EEXIST)
	}
	if r.Flags&xattrReplace != 0 && !exists {
		return nil, m.errorf("setxattr", r.Name, syscall.ENODATA)
	}
	b := m.newBatch(ctx)
	b.Set(xattrKey(r.FID, r.Name), r.Value, nil)
	n.Attr.Ctime = now()
	m.putInode(b, n)
	return &proto.Empty{}, m.commit(b, false)
}

func (m *MDT) listxattr(ctx context.Context, r *proto.XattrReq) (any, error) {
	n, err := m.getInode(r.FID)
	if err != nil {
		return nil, err
	}
	p := xattrPrefix(r.FID)
	it, err := m.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		return nil, fmt.Errorf("mdt%d: listxattr: %v: %w", m.cfg.Index, err, syscall.EIO)
	}
	defer it.Close()
	out := &proto.XattrReply{}
	root := perm.IsRoot(m.cred(ctx))
	if _, ok := layoutOf(n); ok {
		out.Names = append(out.Names, proto.LayoutXattr)
	}
	if n.DefDir.Set {
		out.Names = append(out.Names, DirDefaultXattr)
	}
	out.Names = append(out.Names, aclNames(n)...)
	for ok := it.First(); ok; ok = it.Next() {
		name := string(it.Key()[len(p):])
		if !internalXattr(name) && (root || !strings.HasPrefix(name, perm.TrustedPrefix)) {
			out.Names = append(out.Names, name)
		}
	}
	return out, nil
}

// internalXattr reports names the MDT keeps for itself (proto.LMVXattr):
// no program sees or changes them.
func internalXattr(name string) bool { return strings.HasPrefix(name, "\x00") }

func (m *MDT) removexattr(ctx context.Context, r *proto.XattrReq) (any, error) {
	if internalXattr(r.Name) {
		return nil, m.errorf("removexattr", r.Name, syscall.EPERM)
	}
	if err := m.writable(ctx, "removexattr", r.Name); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.getInode(r.FID)
	if err != nil {
		return nil, err
	}
	if c := m.cred(ctx); r.Name != DirXattr {
		if err := perm.SetXattr(&n.Attr, r.Name, c); err != nil {
			return nil, m.denied("removexattr", r.Name, c, err)
		}
	}
	if isACLXattr(r.Name) {
		return &proto.Empty{}, m.aclChange(ctx, n, r, true)
	}
	if r.Name == DirDefaultXattr {
		if !n.DefDir.Set {
			return nil, syscall.ENODATA
		}
		n.DefDir = DirLayout{}
		b := m.newBatch(ctx)
		m.putInode(b, n)
		return &proto.Empty{}, m.commit(b, false)
	}
	if r.Name == proto.LayoutXattr {
		if !n.isDir() || !n.DefLayout.IsSet() {
			return nil, syscall.ENODATA
		}
		n.DefLayout = proto.Layout{}
		b := m.newBatch(ctx)
		m.putInode(b, n)
		return &proto.Empty{}, m.commit(b, false)
	}
	_, closer, err := m.db.Get(xattrKey(r.FID, r.Name))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, syscall.ENODATA
	} else if err != nil {
		return nil, fmt.Errorf("mdt%d: removexattr %q: %v: %w", m.cfg.Index, r.Name, err, syscall.EIO)
	}
	closer.Close()
	b := m.newBatch(ctx)
	b.Delete(xattrKey(r.FID, r.Name), nil)
	n.Attr.Ctime = now()
	m.putInode(b, n)
	return &proto.Empty{}, m.commit(b, false)
}

// open counts an open; the count keeps an unlinked file's inode (and so
// its data) until the last close.
func (m *MDT) open(ctx context.Context, r *proto.OpenReq) (any, error) {
	if perm.Writes(r.Flags) {
		if err := m.writable(ctx, "open", r.FID); err != nil {
			return nil, err
		}
	}
	g := m.grantMeta(ctx, r.FID, r.Want)
	mark := m.locks.Merged()
	m.mu.Lock()
	n, err := m.getInode(r.FID)
	if err != nil {
		m.mu.Unlock()
		return nil, err
	}
	if c := m.cred(ctx); perm.Access(&n.Attr, c, perm.Open(r.Flags)) != nil {
		m.mu.Unlock()
		return nil, m.denied("open", r.FID, c, syscall.EACCES)
	}
	if _, ok := rpc.CallerFrom(ctx); ok { // so a resent open is not counted twice
		if err := m.commit(m.newBatch(ctx), false); err != nil {
			m.mu.Unlock()
			return nil, err
		}
	}
	m.opens[r.FID]++
	if perm.Writes(r.Flags) {
		m.noteWriter(ctx, r.FID, 1)
	}
	m.mu.Unlock()
	m.glimpse(ctx, &n.Attr, mark) // without m.mu: it waits for other clients
	rep := &proto.AttrReply{Attr: n.Attr, Lock: g}
	if r.ReadData > 0 && !perm.Writes(r.Flags) {
		m.readOnOpen(ctx, min(r.ReadData, proto.MaxReadData), r.ReadDataHeld, rep) // dom.go
	}
	return rep, nil
}

// close drops an open, records the size and mtime the client's writes
// produced, finishes an orphan's removal on its last close, and then
// turns the write lock the client names into a read lock (a write the
// close carried is written by then: writeOnClose).
func (m *MDT) close(ctx context.Context, r *proto.CloseReq) (any, error) {
	reply, err := m.closeFile(ctx, r)
	if err == nil && r.Downgrade != 0 {
		c, _ := rpc.CallerFrom(ctx)
		reply.Downgraded = m.locks.Downgrade(c.Client, r.FID, r.Downgrade)
	}
	return reply, err
}

func (m *MDT) closeFile(ctx context.Context, r *proto.CloseReq) (*proto.CloseReply, error) {
	if len(r.Cancel.IDs) > 0 {
		// Locks given back with the close (an unused write lock a create
		// granted), as MLockCancel would.
		c, _ := rpc.CallerFrom(ctx)
		if err := m.locks.Cancel(c.Client, &r.Cancel); err != nil {
			return nil, err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.getInode(r.FID)
	if err != nil {
		return nil, err
	}
	if r.SetSize && !m.mayWrite(ctx, &n.Attr, m.cred(ctx)) {
		r.SetSize = false // not a writer: what it says it wrote is not taken
	}
	if c := m.opens[r.FID]; c > 1 {
		m.opens[r.FID] = c - 1
	} else {
		delete(m.opens, r.FID)
	}
	if perm.Writes(r.Flags) {
		m.noteWriter(ctx, r.FID, -1)
	}
	b := m.newBatch(ctx)
	if r.SetSize && !mergeWrites(&n.Attr, r.Size, r.Mtime) {
		// What the writes made is known already (a cancelled lock's LVB
		// reported it, or another writer went further): a size from
		// writes never shrinks the file.
		r.SetSize = false
	}
	reply := &proto.CloseReply{Attr: n.Attr}
	if n.Attr.Nlink == 0 && m.opens[r.FID] == 0 {
		m.deleteInode(b, r.FID)
		b.Delete(orphanKey(r.FID), nil)
		reply.Destroy = n.Attr.Mode&sIFMT == sIFREG
	} else if r.SetSize {
		m.putInode(b, n)
	} else {
		return reply, nil
	}
	if err := m.commit(b, false); err != nil {
		return nil, err
	}
	if reply.Destroy {
		// The last close of a removed file destroys it: the closer's
		// locks on it guard nothing now, and it forgets them too.
		c, _ := rpc.CallerFrom(ctx)
		m.locks.DropAll(c.Client, r.FID)
	}
	return reply, nil
}

// layoutOf is what LayoutXattr shows: a file's layout or a directory's
// default.
func layoutOf(n *inode) (proto.Layout, bool) {
	switch {
	case n.isDir():
		return n.DefLayout, n.DefLayout.IsSet()
	case n.Attr.Mode&sIFMT == sIFREG:
		return n.Attr.Layout, n.Attr.Layout.IsSet()
	}
	return proto.Layout{}, false
}

// setLayout applies a LayoutXattr write: a directory's default for new
// files, or the layout of a regular file that holds no data yet (as lfs
// setstripe, which only lays out files that are still empty). m.mu is held.
func (m *MDT) setLayout(ctx context.Context, n *inode, value string) error {
	cfg, err := m.config(ctx)
	if err != nil {
		return err
	}
	nOST := numOSTs(cfg)
	base := cfg.Default
	if cur, ok := layoutOf(n); ok {
		base = cur
	}
	l, err := proto.ParseLayout(value, base)
	if err != nil {
		return fmt.Errorf("mdt%d: setstripe: %w", m.cfg.Index, err)
	}
	if err := l.Validate(nOST); err != nil {
		return fmt.Errorf("mdt%d: setstripe: %w", m.cfg.Index, err)
	}
	if err := l.CheckDoMMax(m.domMax()); err != nil {
		return fmt.Errorf("mdt%d: setstripe: %w", m.cfg.Index, err)
	}
	switch {
	case n.isDir():
		n.DefLayout = l
	case n.Attr.Mode&sIFMT == sIFREG:
		if n.Attr.Size != 0 {
			return fmt.Errorf("mdt%d: setstripe on %s: file has data: %w", m.cfg.Index, n.Attr.FID, syscall.EINVAL)
		}
		if l.StripeCount == proto.AllOSTs && !l.IsComposite() {
			l.StripeCount = uint32(nOST)
		}
		n.Attr.Layout = l.Instantiate(nOST, int(m.rr.Add(1)-1), uint32(m.cfg.Index))
	default:
		return fmt.Errorf("mdt%d: setstripe on %s: not a file or directory: %w", m.cfg.Index, n.Attr.FID, syscall.EINVAL)
	}
	n.Attr.Ctime = now()
	b := m.newBatch(ctx)
	m.putInode(b, n)
	return m.commit(b, false)
}

func numOSTs(cfg *proto.Config) int {
	n := 0
	for _, t := range cfg.OSTs {
		n = max(n, int(t.Index)+1)
	}
	return n
}
