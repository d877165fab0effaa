package mds

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/stripefs/stripefs/layout"
	"github.com/stripefs/stripefs/mds/dtx"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
	"github.com/stripefs/stripefs/wire"
)

// Striped directories (Lustre DNE2). A striped directory is a master
// inode, which holds its attributes and its layout (proto.LMV) and no
// entries, and COUNT stripes, ordinary directory inodes on COUNT
// different MDTs that hold the entries: a name lives in the stripe its
// hash picks (layout.DirStripe). The master lives with stripe 0. Clients
// route every name operation straight to the stripe; the master's FID
// says it is striped (proto.FID.IsStripedDir), so plain directories cost
// nothing. A stripe's Parent is its master, and subdirectories created in
// a stripe name the master as theirs, so ".." is the same whichever
// stripe holds an entry.
//
// mkdir and rmdir of a striped directory are one distributed transaction
// (dne.go) over the parent's MDT and every stripe's. Their FIDs are
// known before it starts: each MDT hands out FIDs of its striped-object
// sequences in durably reserved blocks (fidreserve.go), so a FID that a
// record carries to another MDT can never be handed out again after a
// crash, and the coordinator keeps a pool of them (no extra round trip
// per mkdir, one synced reservation per block). rmdir first
// freezes every stripe (checked empty, new entries held back), so that
// the transaction cannot fail half-way on a stripe that is not empty.

const (
	// freezeLease is how long a stripe stays frozen unless thawed: longer
	// than a coordinator keeps resending a part to an absent participant
	// (30 s), so a stripe whose removal has begun elsewhere takes no entry
	// before its part is applied or rolled forward.
	freezeLease = 2 * time.Minute
)

func (m *MDT) registerStriped() {
	rpc.HandleFunc(m.Srv, proto.MStripeFreeze, func(ctx context.Context, r *proto.StripeFreezeReq) (any, error) {
		m.mu.Lock()
		defer m.mu.Unlock()
		return &proto.Empty{}, m.freezeLocked(r.FIDs, r.Freeze)
	})
}

// getLMV reads the layout stored with a striped directory's master or
// stripe here.
func (m *MDT) getLMV(f proto.FID) (*proto.LMV, error) {
	v, closer, err := m.db.Get(xattrKey(f, proto.LMVXattr))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, fmt.Errorf("mdt%d: striped directory %s has no layout: %w", m.cfg.Index, f, syscall.ENOENT)
	}
	if err != nil {
		return nil, fmt.Errorf("mdt%d: layout of %s: %v: %w", m.cfg.Index, f, err, syscall.EIO)
	}
	defer closer.Close()
	l := new(proto.LMV)
	if err := wire.Unmarshal(v, l); err != nil {
		return nil, fmt.Errorf("mdt%d: layout of %s corrupt: %v: %w", m.cfg.Index, f, err, syscall.EIO)
	}
	return l, nil
}

// fetchLMV reads a master's layout wherever the master lives.
func (m *MDT) fetchLMV(ctx context.Context, master proto.FID) (*proto.LMV, error) {
	if master.MDT() == m.cfg.Index {
		return m.getLMV(master)
	}
	c, err := m.peer(ctx, uint32(master.MDT()))
	if err != nil {
		return nil, err
	}
	r, err := invokePeer[proto.XattrReply](ctx, c, proto.MGetxattr, &proto.XattrReq{FID: master, Name: proto.LMVXattr})
	if err != nil {
		return nil, fmt.Errorf("mdt%d: layout of %s: %w", m.cfg.Index, master, err)
	}
	l := new(proto.LMV)
	if err := wire.Unmarshal(r.Value, l); err != nil {
		return nil, fmt.Errorf("mdt%d: layout of %s corrupt: %v: %w", m.cfg.Index, master, err, syscall.EIO)
	}
	return l, nil
}

// dirParentOf is what a directory created or moved into dir names as its
// parent: the master when dir is a stripe.
func dirParentOf(dir *inode) proto.FID {
	if dir.Attr.FID.IsDirStripe() {
		return dir.Parent
	}
	return dir.Attr.FID
}

// checkStripeName refuses a new entry in the wrong place: a master holds
// none, and a stripe only the names that hash to it. Only a client with a
// wrong idea of the layout sends such a request.
func (m *MDT) checkStripeName(op string, dir proto.FID, name string) error {
	switch {
	case dir.IsStripedDir():
		return fmt.Errorf("mdt%d: %s %q: %s is a striped directory; its entries live in its stripes: %w",
			m.cfg.Index, op, name, dir, syscall.EREMCHG)
	case dir.IsDirStripe():
		l, err := m.getLMV(dir)
		if err != nil {
			return err
		}
		if s := layout.DirStripe(name, len(l.Stripes)); s != int(l.Index) {
			return fmt.Errorf("mdt%d: %s %q: the name belongs to stripe %d, not %d: %w",
				m.cfg.Index, op, name, s, l.Index, syscall.EREMCHG)
		}
	}
	return nil
}

// waitThawLocked waits, with m.mu released meanwhile, until none of dirs
// is frozen by a striped rmdir. m.mu is held.
func (m *MDT) waitThawLocked(dirs ...proto.FID) {
	for len(m.frozen) > 0 {
		busy := false
		for _, d := range dirs {
			if until, ok := m.frozen[d]; ok && time.Now().Before(until) {
				busy = true
			}
		}
		if !busy {
			return
		}
		m.mu.Unlock()
		time.Sleep(time.Millisecond)
		m.mu.Lock()
	}
}

// freezeLocked freezes (every one checked empty first, else none is) or
// thaws stripes. m.mu is held.
func (m *MDT) freezeLocked(fids []proto.FID, freeze bool) error {
	if !freeze {
		for _, f := range fids {
			delete(m.frozen, f)
		}
		return nil
	}
	t := time.Now()
	for f, until := range m.frozen { // leases a crashed coordinator left
		if !t.Before(until) {
			delete(m.frozen, f)
		}
	}
	for _, f := range fids {
		if until, ok := m.frozen[f]; ok && t.Before(until) {
			return m.errorf("rmdir", f.String(), syscall.EBUSY)
		}
		if _, err := m.getDir(f); err != nil {
			return err
		}
		if err := m.checkRemovable("rmdir", f.String(), &inode{Attr: proto.Attr{FID: f, Mode: sIFDIR}}, true); err != nil {
			return err
		}
	}
	for _, f := range fids {
		m.frozen[f] = t.Add(freezeLease)
	}
	return nil
}

func (m *MDT) freezeOn(ctx context.Context, mdt uint32, fids []proto.FID, freeze bool) error {
	if mdt == uint32(m.cfg.Index) {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.freezeLocked(fids, freeze)
	}
	c, err := m.peer(ctx, mdt)
	if err != nil {
		return err
	}
	_, err = invokePeer[proto.Empty](ctx, c, proto.MStripeFreeze, &proto.StripeFreezeReq{FIDs: fids, Freeze: freeze})
	return err
}

// stripedMkdir creates a directory striped over count MDTs from first,
// its master with stripe 0, named in dir here, as operation id (startOp).
// m.mu is not held.
func (m *MDT) stripedMkdir(ctx context.Context, r *proto.MkdirReq, dir *inode, id dtx.OpID, first uint32, count int) (any, error) {
	n := m.numMDTs(ctx)
	if count < 1 || count > n {
		return nil, fmt.Errorf("mdt%d: mkdir %q: stripe count %d, but there are %d MDTs: %w", m.cfg.Index, r.Name, count, n, syscall.EINVAL)
	}
	t := now()
	attr, defACL := newOwner(dir, sIFDIR|r.Mode&0o7777, r.Umask, m.cred(ctx))
	attr.Nlink, attr.Atime, attr.Mtime, attr.Ctime = 2, t, t, t
	parent, defLayout, defDir := dirParentOf(dir), dir.DefLayout, dir.DefDir

	master, err := m.takeFID(ctx, first, proto.FIDStripedMaster)
	if err != nil {
		return nil, err
	}
	l := proto.LMV{Master: master, Index: -1, Hash: layout.DirHashFNV1a64}
	for i := 0; i < count; i++ {
		f, err := m.takeFID(ctx, (first+uint32(i))%uint32(n), proto.FIDDirStripe)
		if err != nil {
			return nil, err
		}
		l.Stripes = append(l.Stripes, f)
	}
	mi := &inode{Attr: attr, Parent: parent, DefLayout: defLayout, DefDir: defDir, DefACL: defACL}
	mi.Attr.FID = master
	rec := &dtx.Record{ID: id, Op: "mkdir_striped", Started: t, Updates: []dtx.Update{
		{Kind: dtx.CreateInode, MDT: first, FID: master, Inode: mi.marshal()},
		{Kind: dtx.SetXattr, MDT: first, FID: master, Name: proto.LMVXattr, Inode: encode(&l)},
	}}
	for i, f := range l.Stripes {
		si := &inode{Attr: attr, Parent: master, DefLayout: defLayout, DefDir: defDir, DefACL: defACL}
		si.Attr.FID = f
		sl := l
		sl.Index = int32(i)
		rec.Updates = append(rec.Updates,
			dtx.Update{Kind: dtx.CreateInode, MDT: uint32(f.MDT()), FID: f, Inode: si.marshal()},
			dtx.Update{Kind: dtx.SetXattr, MDT: uint32(f.MDT()), FID: f, Name: proto.LMVXattr, Inode: encode(&sl)})
	}
	rec.Updates = append(rec.Updates,
		dtx.Update{Kind: dtx.InsertDirent, MDT: uint32(m.cfg.Index), Parent: r.Parent, Name: r.Name, FID: master, Mode: sIFDIR},
		dtx.Update{Kind: dtx.ParentLink, MDT: uint32(m.cfg.Index), Parent: r.Parent, Delta: 1, Time: t})
	if _, err := m.runTxn(ctx, rec, ""); err != nil {
		return nil, err
	}
	return &proto.AttrReply{Attr: mi.Attr}, nil
}

// stripedRmdir removes a striped directory named in r.Parent here: every
// stripe frozen empty, then master, stripes and name in one transaction,
// as operation id (startOp). m.mu is not held.
func (m *MDT) stripedRmdir(ctx context.Context, r *proto.UnlinkReq, d *dirent, id dtx.OpID) (any, error) {
	l, err := m.fetchLMV(ctx, d.FID)
	if err != nil {
		return nil, err
	}
	byMDT := map[uint32][]proto.FID{uint32(d.FID.MDT()): {d.FID}}
	for _, f := range l.Stripes {
		byMDT[uint32(f.MDT())] = append(byMDT[uint32(f.MDT())], f)
	}
	mdts := make([]uint32, 0, len(byMDT))
	for k := range byMDT {
		mdts = append(mdts, k)
	}
	slices.Sort(mdts)
	var frozen []uint32
	thaw := func() {
		// With a context of its own: the request's may be over.
		tctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, k := range frozen {
			_ = m.freezeOn(tctx, k, byMDT[k], false)
		}
	}
	for _, k := range mdts {
		if err := m.freezeOn(ctx, k, byMDT[k], true); err != nil {
			thaw() // nothing was applied anywhere
			if errors.Is(err, syscall.ENOTEMPTY) {
				return nil, m.errorf("rmdir", r.Name, syscall.ENOTEMPTY)
			}
			return nil, fmt.Errorf("mdt%d: rmdir %q: stripes on mdt%d: %w", m.cfg.Index, r.Name, k, err)
		}
		frozen = append(frozen, k)
	}
	t := now()
	rec := &dtx.Record{ID: id, Op: "rmdir_striped", Started: t, Updates: []dtx.Update{
		{Kind: dtx.DeleteInode, MDT: uint32(d.FID.MDT()), FID: d.FID},
	}}
	for _, f := range l.Stripes {
		rec.Updates = append(rec.Updates, dtx.Update{Kind: dtx.DeleteInode, MDT: uint32(f.MDT()), FID: f})
	}
	rec.Updates = append(rec.Updates,
		dtx.Update{Kind: dtx.DeleteDirent, MDT: uint32(m.cfg.Index), Parent: r.Parent, Name: r.Name, FID: d.FID},
		dtx.Update{Kind: dtx.ParentLink, MDT: uint32(m.cfg.Index), Parent: r.Parent, Delta: -1, Time: t})
	if _, err := m.runTxn(ctx, rec, ""); err != nil {
		// Some parts may be applied, to be rolled forward on the others:
		// those stay frozen until then (or the lease ends).
		return nil, err
	}
	thaw()
	return &proto.UnlinkReply{Attr: proto.Attr{FID: d.FID, Mode: sIFDIR}}, nil
}

// lmvString is a striped directory's lustre.lmv value, in the keys of
// lfs getdirstripe: stripe i is "stripeI=MDT:FID".
func lmvString(l *proto.LMV) string {
	var sb strings.Builder
	first := 0
	if len(l.Stripes) > 0 {
		first = l.Stripes[0].MDT()
	}
	fmt.Fprintf(&sb, "lmv_stripe_count=%d lmv_stripe_offset=%d lmv_hash_type=%s mdt_index=%d fid=%s",
		len(l.Stripes), first, l.Hash, l.Master.MDT(), l.Master)
	for i, f := range l.Stripes {
		fmt.Fprintf(&sb, " stripe%d=%d:%s", i, f.MDT(), f)
	}
	return sb.String()
}

// setStripesOwner gives a striped directory's stripes the mode and owner
// its master has now: each stripe's MDT checks permissions on the stripe
// it holds (lookups, creates and readdir go to stripes).
func (m *MDT) setStripesOwner(ctx context.Context, master proto.FID, a proto.Attr) error {
	l, err := m.getLMV(master)
	if err != nil {
		return err
	}
	req := proto.SetattrReq{Valid: proto.SetMode | proto.SetUid | proto.SetGid, Mode: a.Mode, Uid: a.Uid, Gid: a.Gid}
	for _, f := range l.Stripes {
		req.FID = f
		if f.MDT() == m.cfg.Index {
			_, err = m.setattrHere(ctx, &req)
		} else {
			var c *rpc.Client
			if c, err = m.peer(ctx, uint32(f.MDT())); err == nil {
				_, err = invokePeer[proto.AttrReply](ctx, c, proto.MSetattr, &req)
			}
		}
		if err != nil {
			return fmt.Errorf("mdt%d: owner of stripe %s: %w", m.cfg.Index, f, err)
		}
	}
	return nil
}
