package mds

// The apply engine: one MDT's part of a cross-MDT operation, made from
// its record in one batch with the record itself (so a part is applied
// exactly once, and a restart finds what it owes).

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"syscall"

	"github.com/cockroachdb/pebble/v2"

	"github.com/stripefs/stripefs/mds/dtx"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// part is what one participant's part of a record reads and writes: its
// batch, and what the part changed so far. A plain Pebble batch cannot be
// read back, and one part may touch the same inode or name twice (a
// directory losing one subdirectory entry and gaining another, a name
// replaced by a rename).
type part struct {
	m       *MDT
	b       *pebble.Batch
	rec     *dtx.Record
	inodes  map[proto.FID]*inode // nil: deleted by this part
	dirents map[string]*dirent   // by direntKey; nil: deleted by this part
	// What the caller reports back: the inodes whose links this part
	// changed (after the change), and the files whose objects are to be
	// destroyed now (their last link went and nobody has them open).
	attrs   []proto.Attr
	destroy []proto.Attr
	// logged is rec as this part put it in the log: a coordinator pushes
	// these bytes rather than encoding rec again.
	logged []byte
}

func (p *part) inode(f proto.FID) (*inode, error) {
	if n, ok := p.inodes[f]; ok {
		if n == nil {
			return nil, fmt.Errorf("mdt%d: %s: inode %s: %w", p.m.cfg.Index, p.rec.ID, f, syscall.ENOENT)
		}
		return n, nil
	}
	return p.m.getInode(f)
}

// dirIn returns directory f as inodes (a part's) hold it, zero if they
// do not: a reply gives the client its parent so (proto.AttrReply).
func dirIn(inodes map[proto.FID]*inode, f proto.FID) proto.Attr {
	if n := inodes[f]; n != nil && n.isDir() {
		return n.Attr
	}
	return proto.Attr{}
}

func (p *part) putInode(n *inode) {
	p.inodes[n.Attr.FID] = n
	p.m.putInode(p.b, n)
}

func (p *part) deleteInode(f proto.FID) {
	p.inodes[f] = nil
	p.m.deleteInode(p.b, f)
}

func (p *part) dirent(dir proto.FID, name string) (*dirent, error) {
	if d, ok := p.dirents[string(direntKey(dir, name))]; ok {
		if d == nil {
			return nil, fmt.Errorf("mdt%d: %s/%q: %w", p.m.cfg.Index, dir, name, syscall.ENOENT)
		}
		return d, nil
	}
	return p.m.getDirent(dir, name)
}

func (p *part) setDirent(dir proto.FID, name string, d *dirent) {
	k := direntKey(dir, name)
	p.dirents[string(k)] = d
	if d == nil {
		p.b.Delete(k, nil)
	} else {
		p.b.Set(k, d.marshal(), nil)
		p.m.markFresh(k)
	}
}

// applyPart applies this MDT's updates of rec and stores rec, in b.
//
// strict is a participant's first application (txnApply with a check):
// every precondition the coordinator saw is verified again here, under
// m.mu, and a failure leaves nothing applied. Participants apply before
// the coordinator, so a rename whose target changed meanwhile fails
// cleanly rather than half done. A name that is no longer as planned is
// ESTALE (the coordinator plans again).
//
// A redo (recovery rolling an operation forward on an MDT that lost its
// part) checks each update against what the MDT holds now, since local
// operations acknowledged before the crash may have been lost with it:
// an entry is only removed if it still names the operation's inode, a
// name taken meanwhile gets the recovered inode linked as
// NAME.recovered-FID (as fsck uses lost+found), a parent's link count
// moves only with an entry that really moved, and a directory that is
// no longer empty is not removed (fsck then finds it unnamed).
//
// known are inodes the caller read under the hold of m.mu it still has:
// the part starts from them instead of reading them again. raw, if the
// caller has it, is rec's encoding (as received and not changed since).
func (m *MDT) applyPart(b *pebble.Batch, rec *dtx.Record, raw []byte, redo, strict bool, known ...*inode) (*part, error) {
	p := &part{m: m, b: b, rec: rec, inodes: map[proto.FID]*inode{}, dirents: map[string]*dirent{}}
	for _, n := range known {
		p.inodes[n.Attr.FID] = n
	}
	type entry struct {
		parent, fid proto.FID
		name        string
	}
	skipEntry := map[entry]bool{}
	skipLink := map[proto.FID]bool{} // records without tied link updates (mkdir, rmdir)
	stale := func(what string) error {
		return fmt.Errorf("mdt%d: %s %s: %s changed meanwhile: %w", m.cfg.Index, rec.Op, rec.ID, what, syscall.ESTALE)
	}
	for u := range rec.Part(uint32(m.cfg.Index)) {
		switch u.Kind {
		case dtx.CreateInode:
			n := new(inode)
			if err := unmarshalInode(u.Inode, n); err != nil {
				return nil, fmt.Errorf("mdt%d: %s: bad inode: %v: %w", m.cfg.Index, rec.ID, err, syscall.EINVAL)
			}
			// An inode that exists already is kept, redo or not: a FID
			// names one object only, and a mkdir replayed with its first
			// FID (replayedFID) finds its directory here if the first push
			// arrived before the coordinator lost the record.
			if _, err := p.inode(n.Attr.FID); err == nil {
				continue
			}
			m.newInode(b, n)
			p.inodes[n.Attr.FID] = n
		case dtx.DeleteInode:
			n, err := p.inode(u.FID)
			if err != nil {
				if redo {
					continue
				}
				return nil, err
			}
			// Even the coordinator's own part checks: a directory that
			// gained an entry through another MDT's operation since it was
			// planned is kept (unnamed: fsck links it into lost+found)
			// rather than removed with what it now holds.
			if err := m.checkRemovable(rec.Op, u.FID.String(), n, true); err != nil {
				if strict {
					return nil, err
				}
				m.logf(slog.LevelWarn, "%s %s: keeping %s: %v", rec.Op, rec.ID, u.FID, err)
				continue
			}
			n.Attr.Nlink = 0
			p.attrs = append(p.attrs, n.Attr)
			p.deleteInode(u.FID)
		case dtx.InsertDirent:
			name := u.Name
			if redo || strict {
				if _, busy := m.pending[string(direntKey(u.Parent, ""))]; strict && busy {
					return nil, stale(fmt.Sprintf("%s (being replaced)", u.Parent))
				}
				if d, err := p.dirent(u.Parent, name); err == nil {
					if strict {
						return nil, stale(fmt.Sprintf("%s/%q", u.Parent, u.Name))
					}
					if d.FID == u.FID {
						skipEntry[entry{u.Parent, u.FID, u.Name}] = true
						skipLink[u.Parent] = true
						continue
					}
					name = fmt.Sprintf("%s.recovered-%x-%x", u.Name, u.FID.Seq, u.FID.Oid)
					m.logf(slog.LevelInfo, "recovery: %s/%q is taken; linking %s as %q", u.Parent, u.Name, u.FID, name)
				}
			}
			p.setDirent(u.Parent, name, &dirent{FID: u.FID, Mode: u.Mode})
		case dtx.DeleteDirent:
			if redo || strict {
				if d, err := p.dirent(u.Parent, u.Name); err != nil || d.FID != u.FID {
					if strict {
						return nil, stale(fmt.Sprintf("%s/%q", u.Parent, u.Name))
					}
					skipEntry[entry{u.Parent, u.FID, u.Name}] = true
					skipLink[u.Parent] = true
					continue
				}
			}
			p.setDirent(u.Parent, u.Name, nil)
		case dtx.SetXattr:
			b.Set(xattrKey(u.FID, u.Name), u.Inode, nil)
		case dtx.ParentLink:
			if u.FID.IsZero() && skipLink[u.Parent] || !u.FID.IsZero() && skipEntry[entry{u.Parent, u.FID, u.Name}] {
				continue
			}
			dir, err := p.inode(u.Parent)
			if err != nil {
				if redo {
					continue
				}
				return nil, err
			}
			dir.Attr.Nlink = uint32(max(int64(dir.Attr.Nlink)+int64(u.Delta), 0))
			dir.Attr.Mtime, dir.Attr.Ctime = u.Time, u.Time
			p.putInode(dir)
		case dtx.InodeLink:
			n, err := p.inode(u.FID)
			if err != nil {
				if strict && u.Delta > 0 {
					return nil, fmt.Errorf("mdt%d: link %s: %w", m.cfg.Index, u.FID, syscall.ENOENT)
				}
				continue // an entry whose inode is gone: the entry still goes
			}
			if strict && u.Delta > 0 {
				switch {
				case n.isDir():
					return nil, fmt.Errorf("mdt%d: link %s: a directory: %w", m.cfg.Index, u.FID, syscall.EPERM)
				case n.Attr.Nlink == 0:
					return nil, fmt.Errorf("mdt%d: link %s: unlinked: %w", m.cfg.Index, u.FID, syscall.ENOENT)
				case n.Attr.Nlink >= 65000:
					return nil, fmt.Errorf("mdt%d: link %s: %w", m.cfg.Index, u.FID, syscall.EMLINK)
				}
			}
			n.Attr.Nlink = uint32(max(int64(n.Attr.Nlink)+int64(u.Delta), 0))
			n.Attr.Ctime = u.Time
			p.attrs = append(p.attrs, n.Attr)
			if u.Delta >= 0 || n.Attr.Nlink > 0 || n.isDir() {
				p.putInode(n)
				continue
			}
			// The last link went: as the local unlink (dropLink), an open
			// file stays as an orphan until its last close.
			if m.opens[u.FID] > 0 {
				p.putInode(n)
				b.Set(orphanKey(u.FID), nil, nil)
				continue
			}
			p.deleteInode(u.FID)
			if n.Attr.Mode&sIFMT == sIFREG {
				p.destroy = append(p.destroy, n.Attr)
			}
		case dtx.ClientDone:
			// The first application's batch has it already (newBatch).
			if redo {
				xid, _ := dtx.DoneXID(u)
				b.Set(doneKey(rpc.Caller{Client: u.Name, XID: xid}), binary.BigEndian.AppendUint64(nil, uint64(u.Time)), nil)
			}
		case dtx.SetParent:
			n, err := p.inode(u.FID)
			if err == nil && !n.isDir() {
				err = fmt.Errorf("mdt%d: %s: %w", m.cfg.Index, u.FID, syscall.ENOTDIR)
			}
			if err != nil {
				if strict {
					return nil, err
				}
				continue
			}
			n.Parent = u.Parent
			n.Attr.Ctime = u.Time
			p.attrs = append(p.attrs, n.Attr)
			p.putInode(n)
		}
	}
	if raw == nil {
		raw = rec.Marshal()
	}
	p.logged = raw
	b.Set(txnKey(rec.ID), raw, nil)
	return p, nil
}

// commitTxn commits a batch holding a distributed part: no sync unless
// remote_sync asks for the old behaviour.
func (m *MDT) commitTxn(b *pebble.Batch) error {
	sync := m.remoteSync.Load()
	if sync {
		m.ctr.remoteSyncCommits.Add(1)
	}
	return m.commit(b, sync)
}

func decodeRecord(b []byte) (*dtx.Record, error) {
	rec := new(dtx.Record)
	if err := rec.Unmarshal(b); err != nil {
		return nil, fmt.Errorf("bad record: %v: %w", err, syscall.EINVAL)
	}
	if err := rec.Validate(); err != nil {
		return nil, fmt.Errorf("%v: %w", err, syscall.EINVAL)
	}
	return rec, nil
}

// applyRecordLocked applies this MDT's part of rec, first checking
// precondition check if any, and completes rec with what only this MDT
// knows; m.mu is held.
func (m *MDT) applyRecordLocked(rec *dtx.Record, raw []byte, check string) (*proto.TxnApplyReply, error) {
	b := m.db.NewBatch()
	reply, err := m.applyRecordTo(b, rec, raw, check)
	if err != nil {
		return nil, err
	}
	if b.Empty() {
		b.Close()
		return reply, nil
	}
	if err := m.commitTxn(b); err != nil {
		return nil, err
	}
	m.ctr.dtxPending.Add(1)
	return reply, nil
}

// applyRecordTo is applyRecordLocked up to the commit of b, which it
// leaves empty when rec was applied here before, and discards on error.
// raw is rec as received.
func (m *MDT) applyRecordTo(b *pebble.Batch, rec *dtx.Record, raw []byte, check string) (*proto.TxnApplyReply, error) {
	var err error
	if m.applied(rec.ID) {
		// A resend, or a background push that the sweeper's redo (and
		// cancel) overtook: applying it again could bring back an inode
		// removed since.
		return &proto.TxnApplyReply{}, nil
	}
	for u := range rec.Part(uint32(m.cfg.Index)) {
		// A name put into a directory here (a rename or link from another
		// MDT) must be in the stripe it hashes to, as for a local create.
		if u.Kind == dtx.InsertDirent {
			if err := m.checkStripeName(rec.Op, u.Parent, u.Name); err != nil {
				m.discard(b)
				return nil, err
			}
		}
	}
	reply := &proto.TxnApplyReply{}
	for i := range rec.Updates {
		u := &rec.Updates[i]
		if u.MDT != uint32(m.cfg.Index) {
			continue
		}
		switch u.Kind {
		case dtx.CreateInode:
			// The new directory's FID comes from this MDT's sequence,
			// unless the coordinator took it from a reserved block.
			n := new(inode)
			if err := unmarshalInode(u.Inode, n); err != nil {
				m.discard(b)
				return nil, fmt.Errorf("mdt%d: %s: %v: %w", m.cfg.Index, rec.ID, err, syscall.EINVAL)
			}
			if n.Attr.FID.IsZero() {
				if n.Attr.FID, err = m.allocFID(b); err != nil {
					m.discard(b)
					return nil, err
				}
				u.Inode = n.marshal()
				raw = nil // rec now says what only this MDT knew
			}
			u.FID = n.Attr.FID
			for j := range rec.Updates {
				if rec.Updates[j].Kind == dtx.InsertDirent && rec.Updates[j].FID.IsZero() {
					rec.Updates[j].FID = n.Attr.FID
				}
			}
			reply.Attr = n.Attr
		case dtx.InodeLink:
			// A new link's entry takes its type from the inode, which only
			// this MDT knows: the coordinator then stores it so.
			if u.Delta <= 0 {
				continue
			}
			n, err := m.getInode(u.FID)
			if err != nil {
				continue // applyPart says why
			}
			for j := range rec.Updates {
				if w := &rec.Updates[j]; w.Kind == dtx.InsertDirent && w.FID == u.FID && w.Mode == 0 {
					w.Mode = n.Attr.Mode & sIFMT
					raw = nil
				}
			}
		}
	}
	if m.needsSync(rec) {
		if err := m.syncLocked(); err != nil {
			m.discard(b)
			return nil, err
		}
	}
	p, err := m.applyPart(b, rec, raw, false, check != "")
	if err != nil {
		m.discard(b)
		return nil, err
	}
	reply.RecordBytes = p.logged
	if reply.Attr.FID.IsZero() && len(p.attrs) > 0 {
		reply.Attr = p.attrs[0]
	}
	reply.Attrs, reply.Destroy = p.attrs, p.destroy
	return reply, nil
}

// discard drops a batch that will not be committed.
func (m *MDT) discard(b *pebble.Batch) {
	m.quotaCommitted(b, false)
	b.Close()
}

func (m *MDT) hasRecord(id dtx.OpID) bool { return m.recs.has(id) }

func (m *MDT) watermark(coord, epoch uint32) uint64 { return m.recs.watermark(coord, epoch) }

func (m *MDT) applied(id dtx.OpID) bool {
	return dtx.Applied(m.hasRecord(id), m.watermark(id.Coord, id.Epoch), id)
}

func (m *MDT) cancelInBatch(b *pebble.Batch, ids []proto.TxnID) {
	marks := map[[2]uint32]uint64{}
	for _, w := range ids {
		id := fromWire(w)
		if m.hasRecord(id) {
			m.ctr.dtxPending.Add(-1)
		}
		b.Delete(txnKey(id), nil)
		k := [2]uint32{id.Coord, id.Epoch}
		marks[k] = max(marks[k], id.Seq, m.watermark(id.Coord, id.Epoch))
	}
	for k, seq := range marks {
		b.Set(watermarkKey(k[0], k[1]), binary.BigEndian.AppendUint64(nil, seq), nil)
	}
}
