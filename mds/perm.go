package mds

import (
	"context"
	"fmt"
	"syscall"

	"github.com/stripefs/stripefs/nodemap"
	"github.com/stripefs/stripefs/perm"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// Permissions. The MDT checks every operation itself (package perm
// decides) with the credential the request carries, so that a client
// without the kernel's default_permissions, or a program speaking the
// protocol itself, gets the answers a local filesystem would give. The
// credential is the client's to state (ids are trusted, as Lustre trusts
// them), after its nodemap squashes them; what a client does on its own
// (flushes, lock traffic) carries none and acts as the client's root.

// cred is the user the request of ctx acts for.
func (m *MDT) cred(ctx context.Context) *rpc.Cred {
	p := rpc.PeerFrom(ctx)
	c := p.Cred
	if c == nil {
		c = perm.Root
	}
	if p.Role != rpc.RoleClient {
		return c // servers, admin tools, and calls made in this process
	}
	return m.squash(p, c)
}

// squash applies the nodemap of p's group to c (nodemaps.go).
func (m *MDT) squash(p rpc.Caller, c *rpc.Cred) *rpc.Cred {
	pol := m.nodemaps.Policy(p)
	return nodemap.Squash(&pol, c)
}

// denied wraps a refusal with what was refused.
func (m *MDT) denied(op string, what any, c *rpc.Cred, err error) error {
	return fmt.Errorf("mdt%d: %s %v by uid %d: %w", m.cfg.Index, op, what, c.Uid, err)
}

// writerKey is a client's open-for-write handles on one file: they let
// the client write the file (size from writes, truncate, write locks)
// whatever its mode says now, as an open descriptor does.
type writerKey struct {
	client string
	fid    proto.FID
}

// noteWriter counts (delta +1) or drops (-1) a write open of fid by the
// client of ctx.
func (m *MDT) noteWriter(ctx context.Context, fid proto.FID, delta int) {
	c := rpc.PeerFrom(ctx).Client
	if c == "" {
		return
	}
	m.writersMu.Lock()
	defer m.writersMu.Unlock()
	k := writerKey{c, fid}
	if n := m.writers[k] + delta; n > 0 {
		m.writers[k] = n
	} else {
		delete(m.writers, k)
	}
}

// forgetWriters drops a client's write opens (it was evicted or left).
func (m *MDT) forgetWriters(client string) {
	m.writersMu.Lock()
	defer m.writersMu.Unlock()
	for k := range m.writers {
		if k.client == client {
			delete(m.writers, k)
		}
	}
}

// mayWrite reports whether the request of ctx may write a: the client
// has it open for writing, or the caller's credential lets it.
func (m *MDT) mayWrite(ctx context.Context, a *proto.Attr, c *rpc.Cred) bool {
	if p := rpc.PeerFrom(ctx); p.Client != "" {
		m.writersMu.Lock()
		n := m.writers[writerKey{p.Client, a.FID}]
		m.writersMu.Unlock()
		if n > 0 {
			return true
		}
	}
	return perm.Access(a, c, perm.Write) == nil
}

// attrAnywhere reads fid's attributes, here or from its MDT. m.mu must
// not be held: a peer may take its time.
func (m *MDT) attrAnywhere(ctx context.Context, fid proto.FID) (proto.Attr, error) {
	if fid.MDT() == m.cfg.Index {
		n, err := m.getInode(fid)
		if err != nil {
			return proto.Attr{}, err
		}
		return n.Attr, nil
	}
	c, err := m.peer(ctx, uint32(fid.MDT()))
	if err != nil {
		return proto.Attr{}, err
	}
	r, err := invokePeer[proto.AttrReply](ctx, c, proto.MGetattr, &proto.GetattrReq{FID: fid})
	if err != nil {
		return proto.Attr{}, fmt.Errorf("mdt%d: attributes of %s: %w", m.cfg.Index, fid, err)
	}
	return r.Attr, nil
}

// stickyVictim reads, before m.mu is taken, the attributes of what name
// in a sticky dir leads to when that lives on another MDT: removing it
// depends on its owner. nil when the check needs nothing from afar.
func (m *MDT) stickyVictim(ctx context.Context, dir proto.FID, name string) (*proto.Attr, error) {
	n, err := m.getInode(dir)
	if err != nil || n.Attr.Mode&sISVTX == 0 || perm.IsRoot(m.cred(ctx)) {
		return nil, nil
	}
	d, err := m.getDirent(dir, name)
	if err != nil || d.FID.MDT() == m.cfg.Index {
		return nil, nil
	}
	a, err := m.attrAnywhere(ctx, d.FID)
	if err != nil {
		return nil, err
	}
	return &a, nil
}

// victimAttr is the attributes of fid for a sticky directory's check:
// read here, or what stickyVictim read from afar (an error when the name
// changed meanwhile). m.mu is held.
func (m *MDT) victimAttr(fid proto.FID, remote *proto.Attr) (*proto.Attr, error) {
	if fid.MDT() == m.cfg.Index {
		n, err := m.getInode(fid)
		if err != nil {
			return nil, err
		}
		return &n.Attr, nil
	}
	if remote == nil || remote.FID != fid {
		return nil, fmt.Errorf("mdt%d: %s changed during the check", m.cfg.Index, fid)
	}
	return remote, nil
}

// checkRename applies perm.Rename to a rename some of whose directories
// and inodes live on other MDTs, reading only what the check needs (the
// owners of what a sticky directory loses, the moved directory's mode).
// m.mu is not held.
func (m *MDT) checkRename(ctx context.Context, r *proto.RenameReq, src, dst *dirent) error {
	c := m.cred(ctx)
	if perm.IsRoot(c) {
		return nil
	}
	sdir, err := m.attrAnywhere(ctx, r.SrcParent)
	if err != nil {
		return err
	}
	ddir := sdir
	if r.DstParent != r.SrcParent {
		if ddir, err = m.attrAnywhere(ctx, r.DstParent); err != nil {
			return err
		}
	}
	srcA := proto.Attr{FID: src.FID, Mode: src.Mode}
	if sdir.Mode&sISVTX != 0 || src.Mode == sIFDIR && r.DstParent != r.SrcParent {
		if srcA, err = m.attrAnywhere(ctx, src.FID); err != nil {
			return err
		}
	}
	var dstA *proto.Attr
	if dst != nil {
		dstA = &proto.Attr{FID: dst.FID, Mode: dst.Mode}
		if ddir.Mode&sISVTX != 0 {
			a, err := m.attrAnywhere(ctx, dst.FID)
			if err != nil {
				return err
			}
			dstA = &a
		}
	}
	if err := perm.Rename(&sdir, &srcA, &ddir, dstA, c); err != nil {
		return m.denied("rename", r.SrcName, c, err)
	}
	return nil
}

// mayLock checks a data lock's mode against the caller's rights: a write
// lock lets its holder report sizes the MDT takes (its LVB), so only a
// writer may have one.
func (m *MDT) mayLock(ctx context.Context, l *proto.LockDesc) error {
	if l.Kind != proto.LockExtent || l.Mode != proto.LockPW {
		return nil
	}
	if err := m.writable(ctx, "write lock on", l.Res); err != nil {
		return err
	}
	n, err := m.getInode(l.Res)
	if err != nil {
		return err
	}
	if c := m.cred(ctx); !m.mayWrite(ctx, &n.Attr, c) {
		return m.denied("write lock on", l.Res, c, syscall.EACCES)
	}
	return nil
}
