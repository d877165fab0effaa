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
//
// The frontend may hand the bytes on to its kernel's page cache (File.
// OpenData), so that the read costs no FUSE round trip either: the read
// lock's loss drops those pages like any data the lock covers, and this
// client's own writes and truncates through the kernel drop them in the
// kernel itself (a direct write invalidates the pages it overlaps).

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
	return gen, t.coveringLocked(fid, proto.LockPR, 0, proto.LockEOF), true
}

// keepOpenData keeps the bytes of an open's reply r as st's first chunk,
// under the read lock the reply granted or the lock held (askData), if
// nothing changed data here since gen. It returns the bytes kept and that
// lock, or nils.
func (c *Client) keepOpenData(st *inodeState, r *proto.AttrReply, gen uint64, held *heldLock) (kept []byte, under *heldLock) {
	defer c.trimLRU()
	l := held
	if r.Data.ID != 0 {
		l = c.takeDataLock(st, r.Data, &r.Attr)
		if l == nil || r.Data.Mode != proto.LockPR || r.Data.End != proto.LockEOF || r.Data.Start != 0 {
			return nil, nil
		}
	}
	if l == nil || len(r.Bytes) == 0 {
		return nil, nil
	}
	ch := &raChunk{ready: closedReady, data: append([]byte(nil), r.Bytes...), given: true}
	ch.refs.Store(1) // the map's
	st.mu.Lock()
	size := st.wb.size
	if c.dataGen.Load() != gen || st.size != uint64(len(ch.data)) || int64(len(ch.data)) > size ||
		st.ra.chunks[0] != nil || len(st.wb.dirty) > 0 || len(st.wb.flushing) > 0 || c.raBytes.Load()+size > c.opts.MaxReadAheadTotal {
		st.mu.Unlock()
		return nil, nil
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
		return nil, nil
	}
	return ch.data, l
}

// closedReady is the ready channel of a chunk that came with its data.
var closedReady = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// OpenData is all of the file's data as this open received it (a
// read-only open of a small Data-on-MDT file), for a frontend whose
// kernel may keep it in its page cache; nil when the open brought none or
// the client did not keep it. The bytes are the client's: read, never
// change them. The client keeps them under a read lock on all of the
// file, whose loss drops the kernel's pages of the file
// (Invalidator.InvalidateData) as for any data a lock covers. A frontend
// that gives its kernel the bytes asks OpenDataHeld afterwards.
func (f *File) OpenData() []byte { return f.openData }

// OpenDataHeld reports whether the lock OpenData's bytes are kept under
// is still held. A callback that came before the frontend gave the bytes
// to its kernel dropped none of them: on false the frontend drops them
// itself. True answers are counted (open_data_cached). The handle lets go
// of the bytes then: OpenData is nil after it.
func (f *File) OpenDataHeld() bool {
	held := f.openData != nil && f.c.locks.stillHeld(f.openLock)
	f.openData, f.openLock = nil, nil
	if held {
		f.c.counters.openDataCached.Add(1)
	}
	return held
}
