package mds

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"syscall"

	"github.com/stripefs/stripefs/ost"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
	"github.com/stripefs/stripefs/wire"
)

// Data-on-MDT: an MDT keeps the first component of the files whose
// layout says pattern=mdt (proto/dom.go) in an object store of the OST's
// kind beside its database (DataDir/dom), and serves the data methods
// (ost_write, ost_read, ost_punch ...) for them on its own connection. A
// small file's create, write, read and stat so never leave its MDT, its
// data stays under the MDT's extent locks like any other, and its blocks
// are charged to block quota by the store as an OST charges them (the
// store is a quota slave named mdtN-dom).

// openDoM opens the MDT's store of file data, unless the MDT keeps none
// (Config.DoMMax negative, or a database not on the disk).
func (m *MDT) openDoM() error {
	if m.cfg.DoMMax < 0 || m.cfg.FS != nil || m.cfg.DataDir == "" {
		return nil
	}
	cfg := ost.Config{Index: m.cfg.Index, DataDir: filepath.Join(m.cfg.DataDir, "dom"), Name: fmt.Sprintf("mdt%d-dom", m.cfg.Index),
		Nodemaps: m.nodemaps, Reserve: m.cfg.Reserve, InlineMax: max(cmp.Or(m.cfg.DoMInline, DefaultDoMInline), 0)}
	if m.quota.master != nil {
		cfg.QuotaMaster = m.quota.master
	} else {
		cfg.MGS = m.cfg.MGS
	}
	d, err := ost.Open(cfg)
	if err != nil {
		return fmt.Errorf("mdt%d: data-on-MDT store: %w", m.cfg.Index, err)
	}
	d.RegisterData(m.Srv)
	m.Srv.Wrap(proto.OWrite, m.sizeFromWrite)
	m.Srv.Wrap(proto.MClose, m.writeOnClose)
	m.dom = d
	return nil
}

// sizeFromWrite records the size and mtime a Data-on-MDT write carries
// (OWriteReq.SetSize) once its data is written, so a small file's flush
// is one round trip instead of a write and a setattr. Like a writer's
// LVB at cancel (lockStore.Merge), the change is the file's, not the
// request's: no transno of the caller, nothing to replay. A write the
// caller may not make to the inode, or any failure here, leaves the
// size alone (no SizeSet): the client then sends its setattr, which
// gives the error.
func (m *MDT) sizeFromWrite(next rpc.Handler) rpc.Handler {
	return func(ctx context.Context, r *rpc.Request) (rpc.Reply, error) {
		rep, err := next(ctx, r)
		var req proto.OWriteReq
		if err != nil || r.Decode(&req) != nil || !req.SetSize {
			return rep, err
		}
		out, ok := rep.Msg.(*proto.OWriteReply)
		if !ok {
			return rep, nil
		}
		a, err := m.mergeFromWrite(ctx, req.Obj.FID, req.FileSize, req.Mtime)
		if err != nil {
			m.logf(slog.LevelDebug, "size from a data-on-MDT write to %s: %v", req.Obj, err)
			return rep, nil
		}
		out.SizeSet = true
		ar := m.withBlocks(&proto.AttrReply{Attr: a}, a)
		out.Attr, out.Blocks, out.HasBlocks = a, ar.Blocks, ar.HasBlocks
		return rep, nil
	}
}

// writeOnClose serves the write a close carries (CloseReq.Write) before
// the close: through the ost_write handler, as the same caller's
// ost_write of it would be served (its permission, grant and quota
// checks, its size merge). A write that fails fails the close, which is
// not done then: the client sends its data and close again apart. A
// resent close writes again, which leaves the same bytes.
func (m *MDT) writeOnClose(next rpc.Handler) rpc.Handler {
	return func(ctx context.Context, r *rpc.Request) (rpc.Reply, error) {
		var req proto.CloseReq
		if err := r.Decode(&req); err != nil || !req.Write {
			return next(ctx, r)
		}
		if req.Data.Obj.FID != req.FID {
			return rpc.Reply{}, fmt.Errorf("mdt%d: close %s: it carries a write to %s: %w", m.cfg.Index, req.FID, req.Data.Obj, syscall.EINVAL)
		}
		write := m.Srv.Handler(proto.OWrite)
		wr := *r
		wr.Method, wr.Msg = proto.OWrite, wire.Marshal(nil, &req.Data)
		wrep, err := write(ctx, &wr)
		if wrep.Done != nil {
			defer wrep.Done()
		}
		if err != nil {
			return rpc.Reply{}, err
		}
		// The close itself decodes the request again and ignores Write.
		wr = *r
		wr.Bulk = nil
		rep, err := next(ctx, &wr)
		if err != nil {
			return rep, err
		}
		if out, ok := rep.Msg.(*proto.CloseReply); ok {
			if w, ok := wrep.Msg.(*proto.OWriteReply); ok {
				out.Write = *w
			}
		}
		return rep, nil
	}
}

// mergeFromWrite raises fid's size and mtime to what a write reports, if
// the caller may write the file, and returns the attributes it left.
func (m *MDT) mergeFromWrite(ctx context.Context, fid proto.FID, size uint64, mtime int64) (proto.Attr, error) {
	if err := m.writable(ctx, "setattr", fid); err != nil {
		return proto.Attr{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.getInode(fid)
	if err != nil {
		return proto.Attr{}, err
	}
	if n.Attr.Mode&sIFMT != sIFREG {
		return proto.Attr{}, m.errorf("setattr", fid.String(), syscall.EINVAL)
	}
	if c := m.cred(ctx); !m.mayWrite(ctx, &n.Attr, c) {
		return proto.Attr{}, m.denied("setattr (size from writes)", fid, c, syscall.EACCES)
	}
	if !mergeWrites(&n.Attr, size, mtime) {
		return n.Attr, nil
	}
	b := m.newBatch(context.Background())
	m.putInode(b, n)
	return n.Attr, m.commit(b, false)
}

// readOnOpen adds to a read-only open's reply the data of a small file
// whose data this MDT holds, with a read lock on all of it, if the lock
// can be granted at once (Lustre's DoM read-on-open): the read that
// follows the open then costs no round trip. The lock comes first, then
// the inode and the data: a writer after the grant calls the lock back
// before it changes either. A client that says it holds a data lock on
// all of the file (held) gets none: one more per file read would crowd
// its lock LRU (mdtest's read phase, after its creates).
func (m *MDT) readOnOpen(ctx context.Context, max uint32, held bool, rep *proto.AttrReply) {
	small := func(a proto.Attr) bool {
		l := a.Layout
		return a.Mode&sIFMT == sIFREG && a.Size > 0 && a.Size <= uint64(max) && a.Size <= l.DoMEnd() &&
			len(l.OSTs) == 1 && l.OSTs[0] == proto.DoMTarget(uint32(m.cfg.Index))
	}
	c, ok := rpc.CallerFrom(ctx)
	if m.dom == nil || !ok || !small(rep.Attr) {
		return
	}
	fid := rep.Attr.FID
	a := rep.Attr
	var d proto.LockDesc
	withdraw := func() {}
	if !held {
		if d = m.locks.TryRead(c.Client, c.Name, fid); d.ID == 0 {
			return
		}
		withdraw = func() { m.locks.Withdraw(d.ID) }
		// The open read the inode before the lock was granted: a writer
		// may have changed it in between. With the caller's own lock held
		// since before the open, no one else can have.
		n, err := m.getInode(fid)
		if err != nil || !small(n.Attr) {
			withdraw()
			return
		}
		a = n.Attr
	}
	buf := make([]byte, a.Size)
	if ok, err := m.dom.ReadInline(proto.ObjID{FID: fid}, buf); err != nil || !ok {
		withdraw()
		return
	}
	rep.Attr, rep.Data, rep.Bytes = a, d, buf
}

// domMax is the largest Data-on-MDT component this MDT accepts: 0 when it
// keeps no file data.
func (m *MDT) domMax() uint64 {
	if m.dom == nil {
		return 0
	}
	if m.cfg.DoMMax == 0 {
		return proto.DefaultDoMMax
	}
	return uint64(m.cfg.DoMMax)
}

// closeDoM closes the store after the MDT stopped serving.
func (m *MDT) closeDoM() {
	if m.dom != nil {
		if err := m.dom.Close(); err != nil {
			m.logf(slog.LevelWarn, "data-on-MDT store: close: %v", err)
		}
	}
}

// withBlocks adds to r the blocks of a file whose objects are all this
// MDT's (a Data-on-MDT file that has not grown past its MDT part), unless
// a writer's glimpse made r's size or mtime newer than stored: its data
// is not all here yet, and the client would keep the blocks for the
// attributes the flush leaves.
func (m *MDT) withBlocks(r *proto.AttrReply, stored proto.Attr) *proto.AttrReply {
	l := r.Attr.Layout
	if m.dom == nil || len(l.OSTs) != 1 || l.OSTs[0] != proto.DoMTarget(uint32(m.cfg.Index)) ||
		r.Attr.Size != stored.Size || r.Attr.Mtime != stored.Mtime {
		return r
	}
	r.Blocks, r.HasBlocks = m.dom.Blocks(proto.ObjID{FID: r.Attr.FID})
	return r
}

// domCounters are the Data-on-MDT store's statistics, named dom_*: its
// inline objects, grants and allocations.
func (m *MDT) domCounters() []rpc.Counter {
	if m.dom == nil {
		return nil
	}
	out := m.dom.Srv.Counters()
	for i := range out {
		out[i].Name = "dom_" + out[i].Name
	}
	return out
}
