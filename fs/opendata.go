package fs

import (
	"syscall"

	"github.com/stripefs/stripefs/proto"
)

// An open's data (Lustre's Data-on-MDT read-on-open). A read-only open
// of a file this client has no open state for asks its MDT for the data
// of a small Data-on-MDT file (OpenReq.ReadData); the MDT answers with
// the bytes and a read lock on all of the file, granted first. The client
// keeps the bytes as the file's first chunk, read ahead, under that lock:
// the read that follows the open (mdtest's read phase, a small config or
// source file) costs no round trip. Whatever would drop a chunk read ahead
// drops it: the lock's callback, this client's writes and truncates.
//
// A write of this client's own does not call its read lock back, and one
// may land while the open is on its way, after the MDT read the data. So
// the bytes are kept only if nothing that can change file data here (a
// write open, a truncate: dataGen) happened from before the request left
// until they are in place.

// askData reports whether an open of fid with flags asks for the file's
// data, the generation to check the reply against, and the data lock on
// all of the file this client holds already (nil: none; the MDT then
// grants one with the data).
func (c *Client) askData(fid proto.FID, flags int) (gen uint64, held *heldLock, ask bool) {
	if c.locks.off || flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&syscall.O_TRUNC != 0 {
		return 0, nil, false
	}
	gen = c.dataGen.Load()
	if c.openState(fid) != nil {
		return 0, nil, false
	}
	t := &c.locks
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, l := range t.byRes[fid] {
		if l.covers(proto.LockPR, 0, proto.LockEOF) {
			return gen, l, true
		}
	}
	return gen, nil, true
}

// keepOpenData keeps the bytes of an open's reply r as st's first chunk,
// under the read lock the reply granted or the lock held (askData), if
// nothing changed data here since gen.
func (c *Client) keepOpenData(st *inodeState, r *proto.AttrReply, gen uint64, held *heldLock) {
	defer c.trimLRU()
	l := held
	if r.Data.ID != 0 {
		l = c.takeDataLock(st, r.Data, &r.Attr)
		if l == nil || r.Data.Mode != proto.LockPR || r.Data.End != proto.LockEOF || r.Data.Start != 0 {
			return
		}
	}
	if l == nil || len(r.Bytes) == 0 {
		return
	}
	ch := &raChunk{ready: closedReady, data: append([]byte(nil), r.Bytes...), given: true}
	ch.refs.Store(1) // the map's
	st.mu.Lock()
	size := st.wb.size
	if c.dataGen.Load() != gen || st.size != uint64(len(ch.data)) || int64(len(ch.data)) > size ||
		st.ra.chunks[0] != nil || len(st.wb.dirty) > 0 || len(st.wb.flushing) > 0 || c.raBytes.Load()+size > c.opts.MaxReadAheadTotal {
		st.mu.Unlock()
		return
	}
	if st.ra.chunks == nil {
		st.ra.chunks = map[int64]*raChunk{}
	}
	st.ra.chunks[0] = ch
	c.raBytes.Add(size)
	st.mu.Unlock()
	c.counters.openDataKept.Add(1)
	// A callback that came before the chunk was in place dropped nothing:
	// it is dropped here.
	if !c.locks.stillHeld(l) {
		st.mu.Lock()
		if st.ra.chunks[0] == ch {
			c.releaseRA(st, 0)
		}
		st.mu.Unlock()
	}
}

// closedReady is the ready channel of a chunk that came with its data.
var closedReady = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()
