package mds

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/stripefs/stripefs/mds/dtx"
	"github.com/stripefs/stripefs/proto"
)

// Rename, link and unlink across MDTs, as distributed operations (see
// dne.go and package dtx). A name and the inode it names may live on
// different MDTs (a "remote entry", as in Lustre DNE): the entry lives
// with its directory, the link count with the inode. The MDT that holds
// the directory the client addressed coordinates: it reserves the names
// it owns, looks up what it needs from its peers without holding m.mu,
// and hands the participants their parts first; they check again what
// the coordinator saw (applyPart's strict mode), so a part that cannot be
// done is refused before anything changed.

// peerLookup asks the MDT that holds dir for name in it.
func (m *MDT) peerLookup(ctx context.Context, dir proto.FID, name string) (*proto.AttrReply, error) {
	c, err := m.peer(ctx, uint32(dir.MDT()))
	if err != nil {
		return nil, err
	}
	return invokePeer[proto.AttrReply](ctx, c, proto.MLookup, &proto.LookupReq{Parent: dir, Name: name})
}

// isAncestorAnywhere is isAncestor for a tree spread over MDTs: the ".."
// of a directory on another MDT is asked of that MDT. m.mu is not held.
//
// Like Lustre without its global rename lock, this does not stop two
// directory renames coordinated by different MDTs at the same instant
// from making a loop between them; each alone is refused.
func (m *MDT) isAncestorAnywhere(ctx context.Context, a, dir proto.FID) (bool, error) {
	for i := 0; i < 4096; i++ {
		if dir == a {
			return true, nil
		}
		if dir == proto.RootFID {
			return false, nil
		}
		if dir.MDT() == m.cfg.Index {
			n, err := m.getInode(dir)
			if err != nil {
				return false, err
			}
			dir = n.Parent
			continue
		}
		r, err := m.peerLookup(ctx, dir, "..")
		if err != nil {
			return false, fmt.Errorf("mdt%d: parent of %s: %w", m.cfg.Index, dir, err)
		}
		dir = r.Attr.FID
	}
	return false, fmt.Errorf("mdt%d: directory tree deeper than 4096 or looped: %w", m.cfg.Index, syscall.ELOOP)
}

// remoteUnlink removes a name here whose (non-directory) inode lives on
// another MDT: the entry goes here, a link there; the inode's MDT removes
// it at its last link, or keeps it while it is open. It runs as
// operation id (startOp); m.mu is not held.
func (m *MDT) remoteUnlink(ctx context.Context, r *proto.UnlinkReq, d *dirent, id dtx.OpID) (any, error) {
	t := now()
	rec := &dtx.Record{ID: id, Op: "unlink", Started: t, Updates: dtx.Unlink(r.Parent, r.Name, d.FID, d.Mode, t)}
	res, err := m.runTxn(ctx, rec, "unlink")
	if err != nil {
		return nil, err
	}
	reply := &proto.UnlinkReply{Parent: dirIn(res.own, r.Parent)}
	reply.Attr, _ = res.attrOf(d.FID)
	if len(res.destroy) > 0 {
		reply.Attr, reply.Destroy = res.destroy[0], true
	}
	return reply, nil
}

// remoteLink names here an inode that lives on another MDT, as operation
// id (startOp): the caller checked that the name is free and reserved it.
// m.mu is not held.
func (m *MDT) remoteLink(ctx context.Context, r *proto.LinkReq, id dtx.OpID) (any, error) {
	t := now()
	rec := &dtx.Record{ID: id, Op: "link", Started: t, Updates: dtx.Link(r.Parent, r.Name, r.FID, 0, t)}
	res, err := m.runTxn(ctx, rec, "link")
	if err != nil {
		return nil, err
	}
	a, _ := res.attrOf(r.FID)
	return &proto.AttrReply{Attr: a}, nil
}

// remoteRename renames when an entry, inode or ancestor involved lives on
// another MDT. m.mu is not held. A participant that finds a name changed
// since it was looked up refuses with ESTALE, and the rename is planned
// again.
func (m *MDT) remoteRename(ctx context.Context, r *proto.RenameReq) (any, error) {
	if r.Flags&proto.RenameExchange != 0 {
		// Swapping two entries on two MDTs, with two parent pointers
		// moving, is left out: EXDEV, which renameat2(RENAME_EXCHANGE)
		// callers must handle anyway (mv never asks for it).
		return nil, m.errorf("rename", r.SrcName, syscall.EXDEV)
	}
	for try := 0; ; try++ {
		reply, err := m.renameOnce(ctx, r)
		if !errors.Is(err, syscall.ESTALE) {
			return reply, err
		}
		if try == 3 {
			return nil, fmt.Errorf("mdt%d: rename %q: %v: %w", m.cfg.Index, r.SrcName, err, syscall.EBUSY)
		}
	}
}

func (m *MDT) renameOnce(ctx context.Context, r *proto.RenameReq) (*proto.RenameReply, error) {
	self := m.cfg.Index
	dstLocal := r.DstParent.MDT() == self
	var reserved [][2]any
	defer func() {
		for _, k := range reserved {
			m.release(k[0].(proto.FID), k[1].(string))
		}
	}()
	m.mu.Lock()
	locked := true
	unlock := func() {
		if locked {
			m.mu.Unlock()
			locked = false
		}
	}
	defer unlock()
	sd, err := m.getDirent(r.SrcParent, r.SrcName)
	if err != nil {
		return nil, err
	}
	if err := m.reserve(r.SrcParent, r.SrcName); err != nil {
		return nil, err
	}
	reserved = append(reserved, [2]any{r.SrcParent, r.SrcName})
	var dst *dirent
	if dstLocal {
		if _, err := m.getDir(r.DstParent); err != nil {
			return nil, err
		}
		if r.DstParent != r.SrcParent || r.DstName != r.SrcName {
			if err := m.reserve(r.DstParent, r.DstName); err != nil {
				return nil, err
			}
			reserved = append(reserved, [2]any{r.DstParent, r.DstName})
		}
		if dst, err = m.getDirent(r.DstParent, r.DstName); errors.Is(err, syscall.ENOENT) {
			dst = nil
		} else if err != nil {
			return nil, err
		}
	}
	id := m.nextOpID()
	unlock()

	if !dstLocal {
		a, err := m.peerLookup(ctx, r.DstParent, r.DstName)
		switch {
		case err == nil:
			dst = &dirent{FID: a.Attr.FID, Mode: a.Attr.Mode & sIFMT}
		case errors.Is(err, syscall.ENOENT):
			// Free, unless the directory itself is gone: then its MDT
			// refuses the insert.
		default:
			return nil, err
		}
	}
	if err := m.checkRename(ctx, r, sd, dst); err != nil {
		return nil, err
	}
	reply := &proto.RenameReply{}
	srcDir := sd.Mode == sIFDIR
	if dst != nil {
		if r.Flags&proto.RenameNoReplace != 0 {
			return nil, m.errorf("rename", r.DstName, syscall.EEXIST)
		}
		if dst.FID == sd.FID {
			return reply, nil // two links to one inode: POSIX says do nothing
		}
		dstDir := dst.Mode == sIFDIR
		if srcDir && !dstDir {
			return nil, m.errorf("rename", r.DstName, syscall.ENOTDIR)
		}
		if !srcDir && dstDir {
			return nil, m.errorf("rename", r.DstName, syscall.EISDIR)
		}
		if dstDir {
			if in, err := m.isAncestorAnywhere(ctx, dst.FID, r.SrcParent); err != nil {
				return nil, err
			} else if in {
				return nil, m.errorf("rename", r.DstName, syscall.ENOTEMPTY)
			}
		}
	}
	if srcDir && r.DstParent != r.SrcParent {
		if in, err := m.isAncestorAnywhere(ctx, sd.FID, r.DstParent); err != nil {
			return nil, err
		} else if in {
			return nil, m.errorf("rename", r.SrcName, syscall.EINVAL)
		}
	}
	if dst != nil && dst.Mode == sIFDIR && dst.FID.MDT() == self {
		// This MDT removes the replaced directory last, after the other
		// parts are done: it must still be empty then. New entries in it
		// are refused meanwhile (prepareCreate), as after the rename.
		m.mu.Lock()
		n, err := m.getInode(dst.FID)
		if err == nil {
			err = m.checkRemovable("rename", r.DstName, n, true)
		}
		if err == nil {
			err = m.reserve(dst.FID, "")
		}
		m.mu.Unlock()
		if err != nil {
			return nil, err
		}
		reserved = append(reserved, [2]any{dst.FID, ""})
	}
	t := now()
	plan := dtx.RenamePlan{SrcParent: r.SrcParent, SrcName: r.SrcName, DstParent: r.DstParent, DstName: r.DstName,
		Src: sd.FID, SrcMode: sd.Mode, Time: t}
	if dst != nil {
		plan.Dst, plan.DstMode = dst.FID, dst.Mode
	}
	rec := &dtx.Record{ID: id, Op: "rename", Started: t, Updates: dtx.Rename(plan)}
	res, err := m.runTxn(ctx, rec, "rename")
	if err != nil {
		return nil, err
	}
	if dst != nil {
		reply.HasReplaced = true
		reply.Replaced, _ = res.attrOf(dst.FID)
		if len(res.destroy) > 0 {
			reply.Replaced, reply.Destroy = res.destroy[0], true
		}
	}
	return reply, nil
}
