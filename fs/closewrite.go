package fs

import (
	"context"
	"fmt"

	"github.com/stripefs/stripefs/layout"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// Data-on-MDT writes carried by the close (CloseReq.Write). A small file
// whose dirty data all goes to its MDT, in one write, is not flushed at
// close(2) (Flush): its release's close carries the write, so a new
// small file's open, write and close cost the round trips of an empty
// one's. The data is cached under the write lock as any other dirty
// data until then: another client's access calls the lock back, which
// flushes it first, and a release that never comes leaves it to the
// dirty-expiry flush. What close(2) can no longer report is the write's
// error; space for it was granted when it was cached (grant.go), and a
// client that knows its owner is over quota writes through.

// closeWrite is the write a close carries: the chunk taken out of the
// dirty set (it is in flushing while the close is on its way) and the
// ranges its DoM object gets.
type closeWrite struct {
	ch     *chunk
	p      piece
	ost    uint32
	objOff uint64 // where the object's part of the chunk starts in the object
	base   int64  // and in the chunk
}

// closeCarries returns the dirty chunk of st's file a close can carry,
// if that is all there is to flush: one chunk whose dirty ranges all go
// to the file's MDT in one write. Never without locks: nothing would
// then make another client's open see the data. st.mu is held.
func (c *Client) closeCarries(st *inodeState) (*chunk, piece, bool) {
	wb := &st.wb
	lay := st.layout
	if c.locks.off || c.opts.NoCloseWrite || wb.err != nil || len(wb.flushing) > 0 || len(wb.dirty) != 1 || lay.DoMEnd() == 0 {
		return nil, piece{}, false
	}
	for _, ch := range wb.dirty {
		ps := dirtyPieces(lay, wb.size, ch)
		if len(ps) != 1 || ps[0].m.Stripe == layout.NoObject || !proto.IsDoMOST(lay.OSTs[ps[0].m.Stripe]) {
			return nil, piece{}, false
		}
		if _, rest := nextBatch(ps[0].ranges); len(rest) > 0 {
			return nil, piece{}, false
		}
		return ch, ps[0], true
	}
	return nil, piece{}, false
}

// takeCloseWrite takes the chunk a close of st's file can carry out of
// its dirty set, or returns nil.
func (c *Client) takeCloseWrite(st *inodeState) *closeWrite {
	st.mu.Lock()
	defer st.mu.Unlock()
	ch, p, ok := c.closeCarries(st)
	if !ok {
		return nil
	}
	wb := &st.wb
	delete(wb.dirty, ch.idx)
	wb.flushing[ch.idx] = ch
	if st.ra.chunks[ch.idx] != nil {
		c.releaseRA(st, ch.idx)
	}
	return &closeWrite{ch: ch, p: p, ost: st.layout.OSTs[p.m.Stripe], objOff: p.m.ObjOff, base: int64(p.m.FileOff) - ch.idx*wb.size}
}

// closeWith sends req, a close of st's file, carrying cw. On success the
// chunk is done with; otherwise it is dirty again (the caller flushes it
// and closes apart: the MDT closed nothing).
func (c *Client) closeWith(ctx context.Context, st *inodeState, req *proto.CloseReq, cw *closeWrite, r *proto.CloseReply) error {
	obj := proto.ObjID{FID: st.fid, Stripe: uint32(cw.p.m.Stripe)}
	call, err := c.batchCall(ctx, st.fid, cw.ost, obj, cw.objOff, cw.base, cw.ch, cw.p.ranges)
	var w *proto.OWriteReq
	if err == nil {
		// A copy: the close may be replayed after the chunk's buffer
		// went back to its pool.
		var bulk []byte
		for _, b := range call.BulkOut {
			bulk = append(bulk, b...)
		}
		w = call.Req.(*proto.OWriteReq)
		w.SetSize, w.FileSize, w.Mtime = req.SetSize, req.Size, req.Mtime
		req.Write, req.Data = true, *w
		err = c.mdtCallBulk(ctx, st.fid, proto.MClose, req, r, [][]byte{bulk})
		req.Write, req.Data = false, proto.OWriteReq{}
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	wb := &st.wb
	delete(wb.flushing, cw.ch.idx)
	if err != nil {
		c.requeue(st, cw.ch)
	} else {
		c.freeChunk(st, cw.ch)
		// Reported before the chunk leaves flushing: a setattr of the
		// file's times waits for that (flushAll), and its reply must
		// not take this report for one that overtook it.
		c.sizeReported(st)
		c.counters.closeWrites.Add(1)
		c.noteGrant(cw.ost, &rpc.Call{Req: w, Resp: &r.Write})
		if r.Write.HasBlocks {
			c.noteBlocks(&r.Write.Attr, r.Write.Blocks)
		}
	}
	wb.done.Broadcast()
	c.memFreed()
	if err != nil {
		return fmt.Errorf("close %s with its write: %w", st.fid, err)
	}
	return nil
}

// A close that carries a file's last write leaves its data and size on
// the MDT, and the write lock then only makes other clients ask this
// one: a stat elsewhere glimpses it for the size, a read elsewhere calls
// it back. So the last close that carries the write also turns the lock
// into a read lock (CloseReq.Downgrade): this client keeps reading from
// its cache under it, the others read and cache beside it. (Lustre keeps
// the write lock; mdtest's stat and read phases run from another node
// then pay a callback per file.)

// startDowngrade picks st's write lock on all of the file for a close
// carrying st's write to turn into a read lock, and keeps new writes off
// it meanwhile: only at the last handle's close, with nothing else to
// write. nil: none.
func (c *Client) startDowngrade(st *inodeState) *heldLock {
	t := &c.locks
	if t.off {
		return nil
	}
	c.filesMu.Lock()
	last := st.refs == 1
	c.filesMu.Unlock()
	if !last {
		return nil
	}
	t.mu.Lock()
	var l *heldLock
	for _, x := range t.byRes[st.fid] {
		// In use, it may be writing data not yet in the dirty set.
		if x.covers(proto.LockPW, 0, proto.LockEOF) && x.users == 0 {
			l = x
			break
		}
	}
	if l != nil {
		l.downgrading = true
	}
	t.mu.Unlock()
	if l == nil {
		return nil
	}
	// Written before the mark and not carried: it needs the write lock.
	st.mu.Lock()
	clean := len(st.wb.dirty) == 0 && len(st.wb.flushing) == 1
	st.mu.Unlock()
	if !clean {
		c.endDowngrade(l, false)
		return nil
	}
	return l
}

// endDowngrade ends l's downgrade: a read lock now if the MDT made it one
// and no cancel began meanwhile (a cancel gives up whatever the MDT
// holds).
func (c *Client) endDowngrade(l *heldLock, made bool) {
	t := &c.locks
	t.mu.Lock()
	defer t.mu.Unlock()
	l.downgrading = false
	if made && !l.cancelling && t.byID[l.d.ID] == l {
		l.d.Mode = proto.LockPR
		t.downgrades.Add(1)
	}
}
