package mds

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/stripefs/stripefs/mds/dtx"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
	"github.com/stripefs/stripefs/wire"
)

// The distributed namespace: directories on another MDT than their
// parent's. The parent's MDT coordinates; see package dtx for the protocol
// and why it needs no disk sync on the reply path. This file is its I/O.

const (
	pTxn       = 'T' // T opid → dtx.Record (this MDT's copy of the whole operation)
	pWatermark = 'W' // W coord epoch → highest cancelled sequence
)

var keyEpoch = []byte("Mepoch")

func txnKey(id dtx.OpID) []byte {
	b := []byte{pTxn}
	b = binary.BigEndian.AppendUint32(b, id.Coord)
	b = binary.BigEndian.AppendUint32(b, id.Epoch)
	return binary.BigEndian.AppendUint64(b, id.Seq)
}

func watermarkKey(coord, epoch uint32) []byte {
	b := binary.BigEndian.AppendUint32([]byte{pWatermark}, coord)
	return binary.BigEndian.AppendUint32(b, epoch)
}

func toWire(id dtx.OpID) proto.TxnID {
	return proto.TxnID{Coord: id.Coord, Epoch: id.Epoch, Seq: id.Seq}
}
func fromWire(id proto.TxnID) dtx.OpID {
	return dtx.OpID{Coord: id.Coord, Epoch: id.Epoch, Seq: id.Seq}
}

// loadEpoch starts a new epoch: sequences of the previous run that never
// reached the disk are then never reused.
func (m *MDT) loadEpoch() error {
	var e uint32
	if v, closer, err := m.db.Get(keyEpoch); err == nil {
		if len(v) == 4 {
			e = binary.BigEndian.Uint32(v)
		}
		closer.Close()
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return err
	}
	m.epoch = e + 1
	b := m.db.NewBatch()
	b.Set(keyEpoch, binary.BigEndian.AppendUint32(nil, m.epoch), nil)
	return m.write(b, pebble.Sync)
}

func (m *MDT) registerDNE() {
	rpc.HandleFunc(m.Srv, proto.MTxnApply, m.txnApply)
	rpc.HandleFunc(m.Srv, proto.MTxnApplyBatch, m.txnApplyBatch)
	rpc.HandleFunc(m.Srv, proto.MTxnStatus, m.txnStatus)
	rpc.HandleFunc(m.Srv, proto.MTxnRedo, m.txnRedo)
	rpc.HandleFunc(m.Srv, proto.MTxnCancel, m.txnCancel)
	rpc.HandleFunc(m.Srv, proto.MSetParam, m.setParam)
	rpc.HandleFunc(m.Srv, proto.MTxnList, m.txnList)
	m.Srv.Counters = func() []rpc.Counter {
		rs := int64(0)
		if m.remoteSync.Load() {
			rs = 1
		}
		return []rpc.Counter{
			{Name: "remote_sync", Value: rs},
			{Name: "remote_sync_commits", Value: m.ctr.remoteSyncCommits.Load()},
			{Name: "dtx_started", Value: m.ctr.dtxStarted.Load()},
			{Name: "dtx_redone", Value: m.ctr.dtxRedone.Load()},
			{Name: "dtx_cancelled", Value: m.ctr.dtxCancelled.Load()},
			{Name: "enospc_reserve", Value: m.space.refused.Load()},
			{Name: "disk_at_reserve_now", Value: b2i(m.space.atReserve())},
			{Name: "store_failed_now", Value: b2i(m.guard.Err() != nil)},
			{Name: "dtx_pending", Value: m.ctr.dtxPending.Load()},
			{Name: "dtx_dependency_syncs", Value: m.ctr.dtxDepSyncs.Load()},
			{Name: "inodes", Value: m.inodes.Load()},
			{Name: "resends_reconstructed", Value: m.ctr.resends.Load()},
			{Name: "mkdir_remote_async", Value: m.grants.async.Load()},
			{Name: "fid_grants_given", Value: m.grants.given.Load()},
			{Name: "txn_pulls", Value: m.grants.pulls.Load()},
		}
	}
}

// untilStop returns parent, also cancelled when the MDT stops: a closing
// MDT must not wait for an absent peer.
func (m *MDT) untilStop(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	go func() {
		select {
		case <-m.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// peer returns a connection to another MDT.
func (m *MDT) peer(ctx context.Context, idx uint32) (*rpc.Client, error) {
	m.peerMu.Lock()
	defer m.peerMu.Unlock()
	if c := m.peers[idx]; c != nil {
		return c, nil
	}
	cfg, err := m.config(ctx)
	if err != nil {
		return nil, err
	}
	for _, t := range cfg.MDTs {
		if t.Index == idx {
			c := rpc.NewClient(t.Addr, m.Srv.Name)
			c.Role = rpc.RoleServer
			c.RetryFor = 30 * time.Second
			c.Direct = true // a peer in this process (stripefs up) runs our calls in our goroutine
			m.peers[idx] = c
			return c, nil
		}
	}
	return nil, fmt.Errorf("mdt%d: mdt%d is not in the cluster map: %w", m.cfg.Index, idx, syscall.EIO)
}

func (m *MDT) numMDTs(ctx context.Context) int {
	cfg, err := m.config(ctx)
	if err != nil {
		return 1
	}
	n := 0
	for _, t := range cfg.MDTs {
		n = max(n, int(t.Index)+1)
	}
	return n
}

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
		p.b.Set(k, encode(d), nil)
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
			if err := wire.Unmarshal(u.Inode, n); err != nil {
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
		raw = encode(rec)
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
	if err := wire.Unmarshal(b, rec); err != nil {
		return nil, fmt.Errorf("bad record: %v: %w", err, syscall.EINVAL)
	}
	if err := rec.Validate(); err != nil {
		return nil, fmt.Errorf("%v: %w", err, syscall.EINVAL)
	}
	return rec, nil
}

// txnApply is a participant's half of a distributed operation. With a
// check (rmdir, rename, link, unlink) its part is applied strictly: see
// applyPart.
func (m *MDT) txnApply(ctx context.Context, r *proto.TxnApplyReq) (any, error) {
	rec, err := decodeRecord(r.RecordBytes)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	reply, err := m.applyRecordLocked(rec, r.RecordBytes, r.Check)
	if err != nil {
		return nil, err
	}
	// The coordinator takes the record back as this MDT completed it
	// (the FIDs it allocated, the types it knows).
	if reply.RecordBytes == nil {
		reply.RecordBytes = encode(rec)
	}
	return reply, nil
}

// txnApplyBatch is txnApply for the records a coordinator pushes in the
// background (mkdir_async.go), in their order. A record that fails is
// logged and left to the coordinator's sweeper, which redoes it. Each
// record's part is built in a batch of its own, so one that fails leaves
// nothing, and the push is committed once: a Pebble commit per record
// was a third of the participant's work in a remote mkdir storm.
func (m *MDT) txnApplyBatch(ctx context.Context, r *proto.TxnApplyBatchReq) (any, error) {
	if len(r.Records) > maxPushBatch {
		return nil, fmt.Errorf("mdt%d: txn_apply_batch of %d records: %w", m.cfg.Index, len(r.Records), syscall.EINVAL)
	}
	recs := make([]*dtx.Record, len(r.Records))
	for i, b := range r.Records {
		rec, err := decodeRecord(b)
		if err != nil {
			return nil, err
		}
		recs[i] = rec
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	all := m.db.NewBatchWithSize(len(r.Records) * 1024)
	seen := make(map[dtx.OpID]bool, len(recs)) // not in the index before the commit
	n := 0
	for i, rec := range recs {
		if seen[rec.ID] {
			continue
		}
		seen[rec.ID] = true
		b := m.db.NewBatch()
		if _, err := m.applyRecordTo(b, rec, r.Records[i], ""); err != nil {
			m.logf(slog.LevelWarn, "%s %s pushed by mdt%d: %v (its sweeper redoes it)", rec.Op, rec.ID, rec.ID.Coord, err)
			continue
		}
		if b.Empty() {
			b.Close() // applied before
			continue
		}
		if err := all.Apply(b, nil); err != nil {
			m.discard(b)
			m.discard(all)
			return nil, fmt.Errorf("mdt%d: txn_apply_batch: %v: %w", m.cfg.Index, err, syscall.EIO)
		}
		m.quotaMerge(b, all)
		b.Close()
		n++
	}
	if n == 0 {
		m.discard(all)
		return &proto.Empty{}, nil
	}
	if err := m.commitTxn(all); err != nil {
		return nil, err
	}
	m.ctr.dtxPending.Add(int64(n))
	return &proto.Empty{}, nil
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
			if err := wire.Unmarshal(u.Inode, n); err != nil {
				m.discard(b)
				return nil, fmt.Errorf("mdt%d: %s: %v: %w", m.cfg.Index, rec.ID, err, syscall.EINVAL)
			}
			if n.Attr.FID.IsZero() {
				if n.Attr.FID, err = m.allocFID(b); err != nil {
					m.discard(b)
					return nil, err
				}
				u.Inode = encode(n)
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

func (m *MDT) txnStatus(ctx context.Context, r *proto.TxnStatusReq) (any, error) {
	if len(r.IDs) > 4096 {
		return nil, fmt.Errorf("mdt%d: txn status of %d ops: %w", m.cfg.Index, len(r.IDs), syscall.EINVAL)
	}
	out := &proto.TxnStatusReply{Applied: make([]bool, len(r.IDs)), Cancelled: make([]bool, len(r.IDs))}
	for i, w := range r.IDs {
		id := fromWire(w)
		has := m.hasRecord(id)
		out.Applied[i] = dtx.Applied(has, m.watermark(id.Coord, id.Epoch), id)
		out.Cancelled[i] = out.Applied[i] && !has
	}
	// The sync comes after the look: a part applied between a sync and
	// the look would be reported durable while it is not, its record
	// cancelled, and a crash here would lose it for good.
	if r.Sync {
		if err := m.Sync(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// txnRedo applies this MDT's part of a record it lost in a crash.
func (m *MDT) txnRedo(ctx context.Context, r *proto.TxnRedoReq) (any, error) {
	rec, err := decodeRecord(r.RecordBytes)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.applied(rec.ID) {
		return &proto.Empty{}, nil
	}
	if _, busy := m.running[rec.ID]; busy {
		// A participant holds its part before we commit ours: that is the
		// normal order, not a lost part. If we fail, a later ask redoes it.
		return nil, fmt.Errorf("mdt%d: redo %s: still running here: %w", m.cfg.Index, rec.ID, syscall.EAGAIN)
	}
	b := m.db.NewBatch()
	if _, err := m.applyPart(b, rec, r.RecordBytes, true, false); err != nil {
		m.discard(b)
		return nil, err
	}
	if err := m.commit(b, true); err != nil {
		return nil, err
	}
	m.ctr.dtxRedone.Add(1)
	m.ctr.dtxPending.Add(1)
	m.logf(slog.LevelInfo, "recovery: redid my part of %s %s", rec.Op, rec.ID)
	return &proto.Empty{}, nil
}

// txnCancel drops records every participant holds durably. Cancels come
// from the coordinator in sequence order, so the watermark stays exact.
func (m *MDT) txnCancel(ctx context.Context, r *proto.TxnCancelReq) (any, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.db.NewBatch()
	m.cancelInBatch(b, r.IDs)
	return &proto.Empty{}, m.commit(b, false)
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

func (m *MDT) setParam(ctx context.Context, r *proto.SetParamReq) (any, error) {
	switch r.Name {
	case "remote_sync", "mdt.remote_sync":
		v, err := strconv.ParseBool(r.Value)
		if err != nil {
			return nil, fmt.Errorf("mdt%d: remote_sync=%q: %w", m.cfg.Index, r.Value, syscall.EINVAL)
		}
		m.remoteSync.Store(v)
		m.logf(slog.LevelInfo, "remote_sync=%v", v)
		return &proto.Empty{}, nil
	}
	return nil, fmt.Errorf("mdt%d: unknown parameter %q: %w", m.cfg.Index, r.Name, syscall.EINVAL)
}

// txnResult is what the parts of an operation report.
type txnResult struct {
	attr    proto.Attr   // the created inode (mkdir), the removed directory (rmdir)
	attrs   []proto.Attr // inodes whose links changed, after the change
	destroy []proto.Attr // files whose last link went: their objects go
	// own are the inodes the coordinator's part changed, after the
	// change (dirIn).
	own map[proto.FID]*inode
}

// attrOf returns f's attributes as the operation left them.
func (r *txnResult) attrOf(f proto.FID) (proto.Attr, bool) {
	for i := len(r.attrs) - 1; i >= 0; i-- {
		if r.attrs[i].FID == f {
			return r.attrs[i], true
		}
	}
	return proto.Attr{}, false
}

// runTxn executes a distributed operation as its coordinator: remote parts
// first, then ours. The names it creates or removes are reserved meanwhile
// (m.mu is not held across RPCs: two MDTs coordinating towards each other
// must not deadlock). check is the precondition for the remote part.
func (m *MDT) runTxn(ctx context.Context, rec *dtx.Record, check string) (*txnResult, error) {
	noteCaller(ctx, rec)
	res := &txnResult{}
	m.ctr.dtxStarted.Add(1)
	id := rec.ID
	// What our part needs must be durable before a peer holds the record.
	m.mu.Lock()
	m.running[id] = struct{}{}
	defer func() {
		m.mu.Lock()
		delete(m.running, id)
		m.mu.Unlock()
	}()
	var err error
	if m.needsSync(rec) {
		err = m.syncLocked()
	}
	m.mu.Unlock()
	if err != nil {
		return nil, err
	}
	for _, p := range rec.Participants() {
		if p == uint32(m.cfg.Index) {
			continue
		}
		if err := m.flushPushes(ctx, p); err != nil {
			return nil, err
		}
		c, err := m.peer(ctx, p)
		if err != nil {
			return nil, err
		}
		// A participant recognises a part it already applied by the record.
		r, err := invokePeer[proto.TxnApplyReply](ctx, c, proto.MTxnApply, &proto.TxnApplyReq{RecordBytes: encode(rec), Check: check})
		if err != nil {
			var errno syscall.Errno
			if errors.As(err, &errno) {
				return nil, err
			}
			return nil, fmt.Errorf("mdt%d: %s on mdt%d: %v: %w", m.cfg.Index, rec.Op, p, err, syscall.EIO)
		}
		if rec, err = decodeRecord(r.RecordBytes); err != nil {
			return nil, err
		}
		res.attr = r.Attr
		res.attrs = append(res.attrs, r.Attrs...)
		res.destroy = append(res.destroy, r.Destroy...)
	}
	m.hooks.beforeOwnPart()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.applied(rec.ID) {
		return res, nil // a participant's recovery already redid our part
	}
	b := m.newBatch(ctx)
	p, err := m.applyPart(b, rec, nil, false, false)
	if err != nil {
		m.discard(b)
		return nil, err
	}
	if err := m.commitTxn(b); err != nil {
		return nil, err
	}
	m.recs.keep(rec) // for the sweeper
	m.ctr.dtxPending.Add(1)
	res.attrs = append(res.attrs, p.attrs...)
	res.destroy = append(res.destroy, p.destroy...)
	res.own = p.inodes
	return res, nil
}

// invokePeer is rpc.Invoke for a call to another MDT, sent again under
// the same XID while the connection breaks before the reply (the peer
// restarting), for up to the client's RetryFor: a peer's restart then
// costs a client's request a wait, not EIO. Only for methods a peer may
// receive twice: reads, and changes it recognises or that waste nothing
// but a reservation.
func invokePeer[Resp any](ctx context.Context, c *rpc.Client, method uint16, req any) (*Resp, error) {
	resp := new(Resp)
	call := &rpc.Call{Method: method, Req: req, Resp: resp}
	if err := rpc.DoResending(ctx, c, call, c.RetryFor, nil); err != nil {
		return nil, err
	}
	return resp, nil
}

// noteCaller adds to rec that the client request of ctx is done
// (resend.go): a coordinator whose own part did not reach its disk
// before a crash redoes it from a peer's log, and must then answer the
// client's resend of the request from that, not do it again (EEXIST).
func noteCaller(ctx context.Context, rec *dtx.Record) {
	if c, ok := rpc.CallerFrom(ctx); ok {
		rec.Updates = append(rec.Updates, dtx.Done(rec.ID.Coord, c.Client, c.XID, time.Now().UnixNano()))
	}
}

// reserve marks a name as being created or removed by a distributed
// operation; m.mu is held.
func (m *MDT) reserve(dir proto.FID, name string) error {
	k := string(direntKey(dir, name))
	if _, busy := m.pending[k]; busy {
		return m.errorf("namespace", name, syscall.EBUSY)
	}
	m.pending[k] = struct{}{}
	return nil
}

// startOp begins a distributed operation on name in dir, which this MDT
// coordinates: it reserves the name and takes the operation's ID. m.mu is
// held on entry and released whatever happens; done gives the name back.
func (m *MDT) startOp(dir proto.FID, name string) (id dtx.OpID, done func(), err error) {
	defer m.mu.Unlock()
	if err := m.reserve(dir, name); err != nil {
		return dtx.OpID{}, nil, err
	}
	return m.nextOpID(), func() { m.release(dir, name) }, nil
}

func (m *MDT) release(dir proto.FID, name string) {
	m.mu.Lock()
	delete(m.pending, string(direntKey(dir, name)))
	m.mu.Unlock()
}

func (m *MDT) nextOpID() dtx.OpID {
	m.opSeq++
	return dtx.OpID{Coord: uint32(m.cfg.Index), Epoch: m.epoch, Seq: m.opSeq}
}

// remoteMkdir creates a directory on MDT target under a parent here.
// m.mu is held on entry and released. With remote_sync the participant
// applies its part before the coordinator does and both sync, as the
// field report's patch did; otherwise remoteMkdirAsync (mkdir_async.go).
func (m *MDT) remoteMkdir(ctx context.Context, r *proto.MkdirReq, dir *inode, target uint32) (any, error) {
	if !m.remoteSync.Load() {
		return m.remoteMkdirAsync(ctx, r, dir, target)
	}
	id, done, err := m.startOp(r.Parent, r.Name)
	if err != nil {
		return nil, err
	}
	defer done()
	t := now()
	child := newRemoteDir(r, dir, m.cred(ctx), t)
	rec := &dtx.Record{ID: id, Op: "mkdir", Started: t, Updates: []dtx.Update{
		{Kind: dtx.CreateInode, MDT: target, Inode: encode(child)},
		{Kind: dtx.InsertDirent, MDT: uint32(m.cfg.Index), Parent: r.Parent, Name: r.Name, Mode: sIFDIR},
		{Kind: dtx.ParentLink, MDT: uint32(m.cfg.Index), Parent: r.Parent, Delta: 1, Time: t},
	}}
	res, err := m.runTxn(ctx, rec, "")
	if err != nil {
		return nil, err
	}
	return &proto.AttrReply{Attr: res.attr, Parent: dirIn(res.own, r.Parent)}, nil
}

// newRemoteDir is the inode of a directory made by r under dir on another
// MDT; its FID is the participant's to fill in, or a granted one.
func newRemoteDir(r *proto.MkdirReq, dir *inode, c *rpc.Cred, t int64) *inode {
	n := &inode{Parent: dirParentOf(dir), DefLayout: dir.DefLayout, DefDir: dir.DefDir}
	n.Attr, n.DefACL = newOwner(dir, sIFDIR|r.Mode&0o7777, r.Umask, c)
	n.Attr.Nlink, n.Attr.Atime, n.Attr.Mtime, n.Attr.Ctime = 2, t, t, t
	return n
}

// remoteRmdir removes a directory that lives on another MDT. m.mu is held
// on entry and released. unlink has refused it to a plain unlink.
func (m *MDT) remoteRmdir(ctx context.Context, r *proto.UnlinkReq, d *dirent) (any, error) {
	id, done, err := m.startOp(r.Parent, r.Name)
	if err != nil {
		return nil, err
	}
	defer done()
	t := now()
	rec := &dtx.Record{ID: id, Op: "rmdir", Started: t, Updates: []dtx.Update{
		{Kind: dtx.DeleteInode, MDT: uint32(d.FID.MDT()), FID: d.FID},
		{Kind: dtx.DeleteDirent, MDT: uint32(m.cfg.Index), Parent: r.Parent, Name: r.Name, FID: d.FID},
		{Kind: dtx.ParentLink, MDT: uint32(m.cfg.Index), Parent: r.Parent, Delta: -1, Time: t},
	}}
	res, err := m.runTxn(ctx, rec, "rmdir")
	if err != nil {
		return nil, err
	}
	attr := res.attr
	attr.Nlink = 0
	return &proto.UnlinkReply{Attr: attr, Parent: dirIn(res.own, r.Parent)}, nil
}

// sweeper makes distributed operations finish: it drives records this MDT
// coordinates to cancellation once every part is durable, redoes parts a
// crashed participant lost, and asks coordinators about records they may
// have lost. At start it is the recovery.
func (m *MDT) sweeper() {
	defer m.wg.Done()
	t := time.NewTicker(max(2*m.cfg.CommitInterval, 10*time.Millisecond))
	defer t.Stop()
	for {
		m.sweep()
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
	}
}

func (m *MDT) records() []*dtx.Record {
	return m.recordsOf(func(uint32) bool { return true })
}

// recordsOf returns the update records this MDT holds whose coordinator
// is one that want accepts; the others are not decoded.
// recordsOf returns the records held whose coordinator want accepts, in
// order. Which exist comes from the index (iterating over the keys
// walked every cancelled record's tombstone since the last compaction),
// decoded ones too.
func (m *MDT) recordsOf(want func(coord uint32) bool) []*dtx.Record {
	ids := m.recs.ids(want)
	out := make([]*dtx.Record, 0, len(ids))
	for _, id := range ids {
		if rec := m.recs.record(id); rec != nil {
			out = append(out, rec)
			continue
		}
		v, closer, err := m.db.Get(txnKey(id))
		if err != nil {
			continue // cancelled since the index was read
		}
		rec, err := decodeRecord(v)
		closer.Close()
		if err != nil {
			m.logf(slog.LevelWarn, "skipping corrupt update record %s: %v", id, err)
			continue
		}
		m.recs.keep(rec)
		out = append(out, rec)
	}
	return out
}

func (m *MDT) sweep() {
	if m.hooks.syncsHeld() {
		return
	}
	ctx, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	ctx, stopped := m.untilStop(ctx)
	defer stopped()
	self := uint32(m.cfg.Index)
	// Records held as a participant only matter once TxnAskAfter old:
	// they are read a few times in that span, not at every sweep. The
	// first sweep reads them all: at start it is the recovery.
	if time.Since(m.lastAsk) >= m.cfg.TxnAskAfter/4 {
		m.lastAsk = time.Now()
		for _, r := range m.recordsOf(func(coord uint32) bool { return coord != self }) {
			m.askCoordinator(ctx, r)
		}
	}
	// Records this MDT coordinates, in order: status of every part.
	mine := m.recordsOf(func(coord uint32) bool { return coord == self })
	if len(mine) == 0 {
		return
	}
	slices.SortFunc(mine, func(a, b *dtx.Record) int {
		if a.ID.Less(b.ID) {
			return -1
		}
		return 1
	})
	if err := m.Sync(); err != nil {
		return
	}
	durable := map[uint32][]bool{self: nil}
	for _, p := range dtx.ParticipantsOf(mine) {
		if p == self {
			continue
		}
		ids := make([]proto.TxnID, len(mine))
		for i, r := range mine {
			ids[i] = toWire(r.ID)
		}
		c, err := m.peer(ctx, p)
		if err != nil {
			return
		}
		st, err := rpc.Invoke[proto.TxnStatusReply](ctx, c, proto.MTxnStatus, &proto.TxnStatusReq{IDs: ids, Sync: true})
		if err != nil || len(st.Applied) != len(ids) {
			return // a participant is away: try again later, in order
		}
		durable[p] = st.Applied
	}
	// Every lost part is redone at once (after a participant's crash
	// there are many: one redo per sweep left a namespace dangling for
	// seconds); a part lost a moment ago most likely has its push still
	// on the way.
	plan := dtx.PlanSweep(self, mine, durable, func(r *dtx.Record) bool {
		return time.Since(time.Unix(0, r.Started)) < 5*m.cfg.CommitInterval || m.pushesHeld()
	})
	for _, rd := range plan.Redo {
		for _, p := range rd.To {
			if c, err := m.peer(ctx, p); err == nil {
				_, _ = rpc.Invoke[proto.Empty](ctx, c, proto.MTxnRedo, &proto.TxnRedoReq{RecordBytes: encode(rd.Rec)})
			}
		}
	}
	if len(plan.Cancel) == 0 {
		return
	}
	for p, ids := range plan.CancelAt {
		c, err := m.peer(ctx, p)
		if err != nil {
			return
		}
		if _, err := rpc.Invoke[proto.Empty](ctx, c, proto.MTxnCancel, &proto.TxnCancelReq{IDs: wireIDs(ids)}); err != nil {
			return
		}
	}
	cancel := wireIDs(plan.Cancel)
	m.mu.Lock()
	b := m.db.NewBatch()
	m.cancelInBatch(b, cancel)
	err := m.commit(b, false)
	m.mu.Unlock()
	if err == nil {
		m.ctr.dtxCancelled.Add(int64(len(cancel)))
	}
}

// askCoordinator handles a record this MDT holds as a participant: if the
// coordinator lost its part in a crash, it is redone there (roll
// forward); the coordinator then drives the cancel.
func (m *MDT) askCoordinator(ctx context.Context, r *dtx.Record) {
	if time.Since(time.Unix(0, r.Started)) < m.cfg.TxnAskAfter {
		return // the coordinator is most likely still at it
	}
	c, err := m.peer(ctx, r.ID.Coord)
	if err != nil {
		return
	}
	st, err := rpc.Invoke[proto.TxnStatusReply](ctx, c, proto.MTxnStatus, &proto.TxnStatusReq{IDs: []proto.TxnID{toWire(r.ID)}})
	if err != nil || len(st.Applied) != 1 || len(st.Cancelled) != 1 {
		return
	}
	switch {
	case st.Cancelled[0]:
		// The coordinator finished it, and we lost its cancel in a crash.
		m.mu.Lock()
		b := m.db.NewBatch()
		m.cancelInBatch(b, []proto.TxnID{toWire(r.ID)})
		_ = m.commit(b, false)
		m.mu.Unlock()
	case !st.Applied[0]:
		_, _ = rpc.Invoke[proto.Empty](ctx, c, proto.MTxnRedo, &proto.TxnRedoReq{RecordBytes: encode(r)})
	}
}

// wireIDs is ids as the wire carries them.
func wireIDs(ids []dtx.OpID) []proto.TxnID {
	out := make([]proto.TxnID, len(ids))
	for i, id := range ids {
		out[i] = toWire(id)
	}
	return out
}

func (m *MDT) txnList(ctx context.Context, r *proto.TxnListReq) (any, error) {
	out := &proto.TxnListReply{}
	for _, rec := range m.records() {
		if slices.Contains(rec.Participants(), r.MDT) {
			out.Records = append(out.Records, encode(rec))
		}
	}
	return out, nil
}

// recoverFromPeers runs once at start: it gathers the records other MDTs
// hold in which this MDT takes part and redoes the parts this MDT lost, in
// operation order, before clients are served (their replays come after
// the update logs, as in Lustre's recovery). Peers that stay away longer
// than the recovery window are left to the sweepers.
func (m *MDT) recoverFromPeers() {
	if m.epoch <= 1 {
		return // a new MDT has nothing to recover
	}
	deadline := time.Now().Add(m.cfg.RecoveryWindow)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	ctx, cancelStop := m.untilStop(ctx)
	defer cancelStop()
	self := uint32(m.cfg.Index)
	var recs []*dtx.Record
	n := m.numMDTs(ctx)
	for p := 0; p < n; p++ {
		if uint32(p) == self {
			continue
		}
		wait := rpc.NewBackoff(100*time.Millisecond, time.Second)
		for ctx.Err() == nil {
			c, err := m.peer(ctx, uint32(p))
			if err == nil {
				var r *proto.TxnListReply
				if r, err = rpc.Invoke[proto.TxnListReply](ctx, c, proto.MTxnList, &proto.TxnListReq{MDT: self}); err == nil {
					for _, b := range r.Records {
						if rec, err := decodeRecord(b); err == nil {
							recs = append(recs, rec)
						}
					}
					break
				}
			}
			_ = wait.Wait(ctx)
		}
	}
	slices.SortFunc(recs, func(a, b *dtx.Record) int {
		if a.ID.Less(b.ID) {
			return -1
		}
		return 1
	})
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, rec := range recs {
		if m.applied(rec.ID) {
			continue
		}
		b := m.db.NewBatch()
		if _, err := m.applyPart(b, rec, nil, true, false); err != nil {
			m.discard(b)
			m.logf(slog.LevelWarn, "recovery: %s %s: %v", rec.Op, rec.ID, err)
			continue
		}
		if err := m.commit(b, true); err != nil {
			m.logf(slog.LevelWarn, "recovery: %s %s: %v", rec.Op, rec.ID, err)
			continue
		}
		m.ctr.dtxRedone.Add(1)
		m.ctr.dtxPending.Add(1)
		m.logf(slog.LevelInfo, "recovery: redid my part of %s %s from a peer's log", rec.Op, rec.ID)
	}
}

// peerMethods are what servers call on an MDT (the update-log protocol,
// FID reservations, stripe freezes, the MGS) and the tools' stats and
// tunables: recovery gates and the pull of records that clients' requests
// may need never hold or wrap them, since peers recover too.
var peerMethods = map[uint16]bool{proto.MTxnApply: true, proto.MTxnApplyBatch: true, proto.MTxnStatus: true, proto.MTxnRedo: true,
	proto.MTxnCancel: true, proto.MTxnList: true, proto.MTxnPull: true, proto.MReserveFIDs: true,
	proto.MStripeFreeze: true, proto.MSetParam: true, proto.GConfig: true, proto.GRegister: true,
	rpc.MethodStats: true, proto.MLockRevoke: true}

// wrapMethods wraps the handler of every registered method not in skip.
func (m *MDT) wrapMethods(skip map[uint16]bool, wrap func(rpc.Handler) rpc.Handler) {
	for method := uint16(1); method < 256; method++ {
		if skip[method] {
			continue
		}
		m.Srv.Wrap(method, func(next rpc.Handler) rpc.Handler {
			if next == nil {
				return nil
			}
			return wrap(next)
		})
	}
}

// gateRecovery holds client requests until recovery is over (or its
// window has passed); requests between MDTs pass, since peers recover too.
func (m *MDT) gateRecovery() {
	m.wrapMethods(peerMethods, func(next rpc.Handler) rpc.Handler {
		return func(ctx context.Context, r *rpc.Request) (rpc.Reply, error) {
			select {
			case <-m.recovered:
			case <-ctx.Done():
				return rpc.Reply{}, ctx.Err()
			}
			return next(ctx, r)
		}
	})
}
