package mds

// The coordinator: a client's mkdir or rmdir of a directory on another
// MDT than its parent's, run as a cross-MDT operation (dtx.Record).

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/stripefs/stripefs/mds/dtx"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

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
		r, err := invokePeer[proto.TxnApplyReply](ctx, c, proto.MTxnApply, &proto.TxnApplyReq{RecordBytes: rec.Marshal(), Check: check})
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
	p, err := m.commitOwnPart(ctx, rec)
	if err != nil {
		return nil, err
	}
	res.attrs = append(res.attrs, p.attrs...)
	res.destroy = append(res.destroy, p.destroy...)
	res.own = p.inodes
	return res, nil
}

// commitOwnPart applies and commits this MDT's part of rec, which it
// coordinates, and keeps the record for the sweeper. known are inodes
// read under this hold of m.mu (applyPart). m.mu is held.
func (m *MDT) commitOwnPart(ctx context.Context, rec *dtx.Record, known ...*inode) (*part, error) {
	b := m.newBatch(ctx)
	p, err := m.applyPart(b, rec, nil, false, false, known...)
	if err != nil {
		m.discard(b)
		return nil, err
	}
	if err := m.commitTxn(b); err != nil {
		return nil, err
	}
	m.recs.keep(rec) // for the sweeper
	m.ctr.dtxPending.Add(1)
	return p, nil
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
// held. The caller lets m.mu go before the operation's RPCs (runTxn) and
// gives the name back (release) when the operation is over.
func (m *MDT) startOp(dir proto.FID, name string) (dtx.OpID, error) {
	if err := m.reserve(dir, name); err != nil {
		return dtx.OpID{}, err
	}
	return m.nextOpID(), nil
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

// remoteMkdirSync creates a directory on MDT target under a parent here
// as operation id (startOp), with remote_sync: the participant applies
// its part before the coordinator does and both sync, as the field
// report's patch did; otherwise remoteMkdirAsync (mkdir_async.go). m.mu
// is not held.
func (m *MDT) remoteMkdirSync(ctx context.Context, r *proto.MkdirReq, dir *inode, id dtx.OpID, target uint32) (any, error) {
	t := now()
	child := newRemoteDir(r, dir, m.cred(ctx), t)
	rec := &dtx.Record{ID: id, Op: "mkdir", Started: t, Updates: []dtx.Update{
		{Kind: dtx.CreateInode, MDT: target, Inode: child.marshal()},
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

// remoteRmdir removes a directory that lives on another MDT, as
// operation id (startOp). m.mu is not held. unlink has refused it to a
// plain unlink.
func (m *MDT) remoteRmdir(ctx context.Context, r *proto.UnlinkReq, d *dirent, id dtx.OpID) (any, error) {
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
