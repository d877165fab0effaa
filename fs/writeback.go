package fs

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/stripefs/stripefs/fs/extent"
	"github.com/stripefs/stripefs/layout"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// The write-back cache. A file's dirty data is kept in chunks: aligned
// pieces of one stripe unit (the whole unit, or an equal part of a unit
// bigger than one RPC). A write copies its bytes into chunks and records
// them in the chunk's extent set, so contiguous writes merge whatever
// their sizes and whatever iovec boundaries they came with: alignment is
// judged on file offsets only. A chunk goes to its OST as soon as it is
// whole, in one RPC; partial chunks wait for fsync, close, memory pressure
// or age. Nothing is ever read in order to write.

// chunk is one aligned piece of a stripe unit held in memory.
type chunk struct {
	idx   int64  // chunk number: bytes [idx*size, (idx+1)*size) of the file
	buf   []byte // len = the file's chunk size
	dirty extent.Set
	born  time.Time
}

// writeback is a file's dirty state; guarded by inodeState.mu.
type writeback struct {
	size     int64 // chunk size
	dirty    map[int64]*chunk
	flushing map[int64]*chunk // sent or being sent; at most one per index
	held     int64            // buffer bytes of dirty and flushing chunks
	err      error            // first flush error not yet reported
	fails    int              // flushes that failed, ever
	lastErr  error            // the latest of them
	done     *sync.Cond       // signalled whenever a flush ends or a size report lands
}

// chunkSize is the largest multiple of 64 KiB that divides the stripe size
// and fits one RPC; for an erasure-coded file, a row (ec.go); for a
// composite one, that divides every component's stripe size and end too,
// so no chunk spans two objects (but across a Data-on-MDT component's
// end), unless it has an erasure-coded component: then a row of that, the
// unit its writes need whole, so that chunks elsewhere in the file may
// span objects (they are split by object when sent and fetched).
func chunkSize(l proto.Layout) int64 {
	if ep, ok := layout.ECPartOf(l); ok && l.CheckFile() == nil {
		return int64(ep.Geometry().RowSize())
	}
	// A Data-on-MDT component is left out: a chunk may straddle its end
	// (sendChunk and the read-ahead split such a chunk between the MDT's
	// object and the next component's), or a 64 KiB one would make every
	// chunk of the file 64 KiB.
	comps, start := l.Comps, int64(l.StripeSize)
	if l.DoMEnd() > 0 {
		comps, start = comps[1:], 0
		for _, cp := range comps {
			start = max(start, int64(cp.StripeSize))
		}
		if len(comps) == 0 {
			start = int64(l.StripeSize)
		}
	}
	divides := func(c int64) bool {
		if l.DoMEnd() == 0 && int64(l.StripeSize)%c != 0 {
			return false
		}
		for _, cp := range comps {
			if int64(cp.StripeSize)%c != 0 || cp.End != proto.ExtentEOF && cp.End%uint64(c) != 0 {
				return false
			}
		}
		return true
	}
	c := min(start, maxRPC)
	for c > proto.MinStripeSize && !divides(c) {
		c -= proto.MinStripeSize
	}
	return c
}

func (st *inodeState) initWriteback() {
	st.wb = writeback{size: chunkSize(st.layout), dirty: map[int64]*chunk{}, flushing: map[int64]*chunk{}}
	st.wb.done = sync.NewCond(&st.mu)
}

// bufPools recycles chunk buffers by size.
var bufPools sync.Map // int64 → *sync.Pool

func getBuf(size int64) []byte {
	p, _ := bufPools.LoadOrStore(size, &sync.Pool{New: func() any { b := make([]byte, size); return &b }})
	return *(p.(*sync.Pool).Get().(*[]byte))
}

func putBuf(b []byte) {
	if p, ok := bufPools.Load(int64(len(b))); ok {
		p.(*sync.Pool).Put(&b)
	}
}

// bufferWrite copies iovs (total bytes at off) into the file's chunks and
// starts sending the chunks it completed. st.mu is held.
func (c *Client) bufferWrite(st *inodeState, off int64, iovs [][]byte, total int) {
	wb := &st.wb
	pos := 0
	for pos < total {
		fileOff := off + int64(pos)
		idx := fileOff / wb.size
		in := fileOff % wb.size
		n := int(min(int64(total-pos), wb.size-in))
		if st.ra.chunks[idx] != nil {
			c.releaseRA(st, idx) // now stale
		}
		ch := wb.dirty[idx]
		if ch == nil {
			ch = &chunk{idx: idx, buf: getBuf(wb.size), born: time.Now()}
			wb.dirty[idx] = ch
			wb.held += wb.size
			c.addDirty(wb.size)
		}
		copyFrom(ch.buf[in:in+int64(n)], iovs, pos)
		ch.dirty.Add(in, in+int64(n))
		if ch.dirty.Covers(0, wb.size) {
			c.startFlush(st, ch)
		}
		pos += n
	}
}

// copyFrom fills dst with the bytes of the concatenated iovs from offset from.
func copyFrom(dst []byte, iovs [][]byte, from int) {
	for _, v := range iovs {
		if len(dst) == 0 {
			return
		}
		if from >= len(v) {
			from -= len(v)
			continue
		}
		n := copy(dst, v[from:])
		dst = dst[n:]
		from = 0
	}
}

// startFlush sends a dirty chunk unless an older version of it is still on
// its way (two in flight could land in either order); that one's
// completion starts this one. st.mu is held.
func (c *Client) startFlush(st *inodeState, ch *chunk) {
	wb := &st.wb
	if _, busy := wb.flushing[ch.idx]; busy {
		return
	}
	delete(wb.dirty, ch.idx)
	wb.flushing[ch.idx] = ch
	if st.ra.chunks[ch.idx] != nil {
		// Fetched while the chunk was dirty (a degraded read of an
		// erasure-coded row): stale once this lands.
		c.releaseRA(st, ch.idx)
	}
	c.inflight.Add(1)
	c.counters.flushes.Add(1)
	if ch.dirty.Covers(0, wb.size) {
		c.counters.fullFlushes.Add(1)
	}
	lay := st.layout
	var knownEnd uint64
	ep, isEC := ecRow(lay, ch.idx)
	if isEC {
		// The row's RMW must not take this flush's own data for data
		// already on the OSTs; later ones must.
		knownEnd = st.ecEnd
		if r := ch.dirty.Ranges(); len(r) > 0 {
			st.ecEnd = max(st.ecEnd, uint64(ch.idx*wb.size+r[len(r)-1].End))
		}
	}
	var su *sizeUpdate
	if st.dirty && len(wb.dirty) == 0 && len(wb.flushing) == 1 && lay.DoMEnd() > 0 && !isEC {
		su = &sizeUpdate{size: st.size, mtime: st.mtime} // sendChunk sends it if the chunk's data all goes to the MDT
	}
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		var err error
		if isEC {
			err = c.sendRow(context.Background(), st.fid, ep, ch, knownEnd)
		} else {
			err = c.sendChunk(context.Background(), st.fid, lay, wb.size, ch, su)
		}
		st.mu.Lock()
		defer st.mu.Unlock()
		c.inflight.Add(-1)
		delete(wb.flushing, ch.idx)
		if err == nil && su != nil && su.set && st.dirty && st.size == su.size && st.mtime == su.mtime {
			st.dirty = false // the MDT took the size with the data
			c.sizeReported(st)
		}
		if err != nil {
			if wb.err == nil {
				wb.err = err
			}
			wb.fails++
			wb.lastErr = err
			c.flushFailures.Add(1)
			c.requeue(st, ch)
		} else {
			c.freeChunk(st, ch)
		}
		if next := wb.dirty[ch.idx]; next != nil && err == nil && (next.dirty.Covers(0, wb.size) || st.flushAll > 0) {
			c.startFlush(st, next)
		}
		wb.done.Broadcast()
		c.memFreed()
	}()
}

// requeue keeps the data of a chunk whose flush failed, under any newer
// data written meanwhile, so a later fsync can retry it: data is dropped
// only when its last handle is released. st.mu is held.
func (c *Client) requeue(st *inodeState, old *chunk) {
	wb := &st.wb
	cur := wb.dirty[old.idx]
	if cur == nil {
		wb.dirty[old.idx] = old
		return
	}
	for _, r := range old.dirty.Ranges() {
		for _, gap := range cur.dirty.Subtract(r.Start, r.End) {
			copy(cur.buf[gap.Start:gap.End], old.buf[gap.Start:gap.End])
			cur.dirty.Add(gap.Start, gap.End)
		}
	}
	c.freeChunk(st, old)
}

// sizeUpdate is the size and mtime a file's last dirty chunk carries to
// its MDT when the MDT holds that chunk (Data-on-MDT): the flush then
// reports them without a setattr of its own. set says the MDT took them.
type sizeUpdate struct {
	size  uint64
	mtime int64
	set   bool
}

// chunkPieces is where chunk idx (of size bytes) of a file with layout
// lay lives: one object, but for a chunk that straddles the end of a
// Data-on-MDT component (chunkSize lets it), the MDT's object and an
// OST's (or no object yet).
func chunkPieces(lay proto.Layout, size, idx int64) []layout.Chunk {
	return layout.Map(lay, uint64(idx*size), int(size))
}

// piece is the part of a chunk's dirty ranges one object gets, as
// offsets in the chunk.
type piece struct {
	m      layout.Chunk
	ranges []extent.Range
}

// dirtyPieces splits ch's dirty ranges by the objects that hold them.
func dirtyPieces(lay proto.Layout, size int64, ch *chunk) []piece {
	var out []piece
	base := uint64(ch.idx * size)
	for _, m := range chunkPieces(lay, size, ch.idx) {
		lo, hi := int64(m.FileOff-base), int64(m.FileOff-base)+int64(m.Len)
		p := piece{m: m}
		for _, r := range ch.dirty.Ranges() {
			// A range is at most one RPC's bulk: the chunks of a file
			// with an erasure-coded component are its rows, larger than
			// one elsewhere in the file.
			for s, e := max(r.Start, lo), min(r.End, hi); s < e; s += maxRPC {
				p.ranges = append(p.ranges, extent.Range{Start: s, End: min(e, s+maxRPC)})
			}
		}
		if len(p.ranges) > 0 {
			out = append(out, p)
		}
	}
	return out
}

// sendChunk writes a chunk's dirty ranges to their object: one RPC for a
// whole chunk, its scattered ranges (random small writes) as the extents
// of one request, as Lustre's niobufs (a chunk across the end of a
// Data-on-MDT component, one such RPC to each side). su, if set, rides on
// the last request when every byte sent goes to the MDT.
func (c *Client) sendChunk(ctx context.Context, fid proto.FID, lay proto.Layout, size int64, ch *chunk, su *sizeUpdate) error {
	ps := dirtyPieces(lay, size, ch)
	for _, p := range ps {
		if p.m.Stripe == layout.NoObject {
			return fmt.Errorf("flush %s at %d: no object holds it (a component not instantiated): %w", fid, p.m.FileOff, syscall.EIO)
		}
		if !proto.IsDoMOST(lay.OSTs[p.m.Stripe]) {
			su = nil // the size must not reach the MDT before this data is written
		}
	}
	for i, p := range ps {
		var last *sizeUpdate
		if i == len(ps)-1 {
			last = su
		}
		if err := c.sendPiece(ctx, fid, lay, size, ch, p, last); err != nil {
			return err
		}
	}
	return nil
}

// sendPiece writes one object's part of a chunk.
func (c *Client) sendPiece(ctx context.Context, fid proto.FID, lay proto.Layout, size int64, ch *chunk, p piece, su *sizeUpdate) error {
	m := p.m
	base := int64(m.FileOff) - ch.idx*size // where the object's part starts in the chunk
	obj := proto.ObjID{FID: fid, Stripe: uint32(m.Stripe)}
	ost := lay.OSTs[m.Stripe]
	sem := c.ostSem(ost)
	sem <- struct{}{}
	defer func() { <-sem }()
	for ranges := p.ranges; len(ranges) > 0; {
		var batch []extent.Range
		batch, ranges = nextBatch(ranges)
		call, err := c.batchCall(ctx, fid, ost, obj, m.ObjOff, base, ch, batch)
		switch {
		case err != nil:
		case su != nil && len(ranges) == 0:
			err = c.sendSizing(ctx, fid, ost, call, su)
		default:
			err = c.ostDo(ctx, ost, call)
		}
		if err != nil {
			return fmt.Errorf("flush %s at %d: %w", fid, ch.idx*size+batch[0].Start, err)
		}
		c.noteGrant(ost, call)
	}
	return nil
}

// nextBatch splits off the ranges one write carries: at most
// MaxWriteExtents of them, and one RPC's bulk.
func nextBatch(ranges []extent.Range) (batch, rest []extent.Range) {
	n, bytes := 1, ranges[0].Len()
	for n < min(len(ranges), proto.MaxWriteExtents) && bytes+ranges[n].Len() <= maxRPC {
		bytes += ranges[n].Len()
		n++
	}
	return ranges[:n], ranges[n:]
}

// batchCall is the write of ranges batch of chunk ch to object obj, whose
// part of the chunk starts at chunk offset base and object offset objOff:
// one extent, or several (Lustre's niobufs). It carries owner and grant
// request (grant.go).
func (c *Client) batchCall(ctx context.Context, fid proto.FID, ost uint32, obj proto.ObjID, objOff uint64, base int64, ch *chunk, batch []extent.Range) (*rpc.Call, error) {
	call, err := c.writeCall(ctx, fid, ost, obj, objOff+uint64(batch[0].Start-base), ch.buf[batch[0].Start:batch[0].End])
	if err == nil && len(batch) > 1 {
		req := call.Req.(*proto.OWriteReq)
		call.BulkOut = call.BulkOut[:0]
		for _, r := range batch {
			req.Extents = append(req.Extents, proto.Extent{Off: objOff + uint64(r.Start-base), Len: uint32(r.Len())})
			call.BulkOut = append(call.BulkOut, ch.buf[r.Start:r.End])
		}
	}
	return call, err
}

// sendSizing sends a Data-on-MDT write that carries su, the file's size
// and mtime, to its MDT: a change of the file's attributes, whose reply
// says what they became (fileattrs.go, blocks.go).
func (c *Client) sendSizing(ctx context.Context, fid proto.FID, ost uint32, call *rpc.Call, su *sizeUpdate) error {
	req := call.Req.(*proto.OWriteReq)
	req.SetSize, req.FileSize, req.Mtime = true, su.size, su.mtime
	held, stamp := c.locks.heldUpdate(fid), c.attrStamp()
	changed := c.fattrs.changing(fid)
	err := c.ostDo(ctx, ost, call)
	r, ok := call.Resp.(*proto.OWriteReply)
	if err != nil || !ok || !r.SizeSet {
		changed(nil, 0, 0)
		return err
	}
	changed(&r.Attr, stamp, held)
	su.set = true
	if r.HasBlocks {
		c.noteBlocks(&r.Attr, r.Blocks)
	}
	return nil
}

// flushAll sends every dirty chunk and waits for all of them; it returns
// (and clears) the first flush error since the last report. After an error
// it stops starting flushes: the failed data stays cached for the next
// call to retry.
func (c *Client) flushAll(st *inodeState) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.flushAll++
	defer func() { st.flushAll-- }()
	wb := &st.wb
	for wb.err == nil && (len(wb.dirty) > 0 || len(wb.flushing) > 0) {
		for _, ch := range wb.dirty {
			c.startFlush(st, ch)
		}
		if len(wb.flushing) > 0 {
			wb.done.Wait()
		}
	}
	err := wb.err
	wb.err = nil
	return err
}

// flushRange sends the dirty chunks that hold bytes of [start, end) and
// waits for them (a lock that covers them is going); it returns and
// clears the first flush error, as flushAll does. Chunks that failed are
// dropped: without the lock they cannot be kept.
func (c *Client) flushRange(st *inodeState, start, end uint64) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	wb := &st.wb
	first, last := int64(start)/wb.size, int64(-1)
	if end != proto.LockEOF {
		last = (int64(end) - 1) / wb.size
	}
	in := func(idx int64) bool { return idx >= first && (last < 0 || idx <= last) }
	st.flushAll++
	defer func() { st.flushAll-- }()
	for wb.err == nil {
		busy := false
		for idx, ch := range wb.dirty {
			if in(idx) {
				c.startFlush(st, ch)
				busy = true
			}
		}
		for idx := range wb.flushing {
			if in(idx) {
				busy = true
			}
		}
		if !busy {
			break
		}
		wb.done.Wait()
	}
	err := wb.err
	wb.err = nil
	if err != nil {
		c.dropDirtyRange(st, start, end, err)
	}
	return err
}

// dropDirtyRange discards the unflushed chunks holding bytes of [start,
// end), keeping err for the file's next fsync or close. st.mu is held.
func (c *Client) dropDirtyRange(st *inodeState, start, end uint64, err error) {
	wb := &st.wb
	dropped := false
	for idx, ch := range wb.dirty {
		s := uint64(idx * wb.size)
		if s+uint64(wb.size) <= start || s >= end {
			continue
		}
		delete(wb.dirty, idx)
		c.freeChunk(st, ch)
		dropped = true
	}
	if dropped && st.lostErr == nil {
		st.lostErr = err
	}
	c.memFreed()
}

// flushPartial starts sending the file's partial chunks, oldest first,
// until at most keep bytes of buffers remain; olderThan limits it to
// chunks at least that old. st.mu is held.
func (c *Client) flushPartial(st *inodeState, keep int64, olderThan time.Duration) {
	wb := &st.wb
	now := time.Now()
	for wb.held > keep {
		var oldest *chunk
		for _, ch := range wb.dirty {
			if _, busy := wb.flushing[ch.idx]; busy || now.Sub(ch.born) < olderThan {
				continue
			}
			if oldest == nil || ch.born.Before(oldest.born) {
				oldest = ch
			}
		}
		if oldest == nil {
			return
		}
		c.startFlush(st, oldest)
	}
}

// overlay copies this client's unflushed bytes in [off, off+len(p)) over
// p: flushing chunks first, then the newer dirty ones. st.mu is held.
func (st *inodeState) overlayDirty(p []byte, off int64) []pendingBytes {
	wb := &st.wb
	if len(wb.dirty) == 0 && len(wb.flushing) == 0 {
		return nil
	}
	var out []pendingBytes
	first, last := off/wb.size, (off+int64(len(p))-1)/wb.size
	for _, m := range []map[int64]*chunk{wb.flushing, wb.dirty} {
		if int64(len(m)) < last-first+1 { // few chunks: walk them
			for idx, ch := range m {
				if idx >= first && idx <= last {
					out = append(out, ch.pending(wb.size, off, len(p))...)
				}
			}
			continue
		}
		for idx := first; idx <= last; idx++ {
			if ch := m[idx]; ch != nil {
				out = append(out, ch.pending(wb.size, off, len(p))...)
			}
		}
	}
	return out
}

// pendingBytes is a copy of unflushed data at a file offset.
type pendingBytes struct {
	off  int64
	data []byte
}

func (ch *chunk) pending(size, off int64, n int) []pendingBytes {
	base := ch.idx * size
	var out []pendingBytes
	for _, r := range ch.dirty.Ranges() {
		s, e := max(base+r.Start, off), min(base+r.End, off+int64(n))
		if s < e {
			out = append(out, pendingBytes{off: s, data: append([]byte(nil), ch.buf[s-base:e-base]...)})
		}
	}
	return out
}

// waitForMemory blocks a writer while the mount holds more dirty data than
// its bound. Data already on its way frees memory by itself; only when
// nothing is in flight are partial chunks pushed out, so a chunk still
// being filled is not split needlessly. A writer is let through when
// nothing could be sent, or what was sent failed (the per-file bound then
// stops the writers of the file that cannot be flushed, with its error);
// an interrupted one gets EINTR.
func (c *Client) waitForMemory(ctx context.Context, need int64) error {
	if c.dirtyBytes.Load()+need <= c.opts.MaxDirty {
		return nil
	}
	c.counters.memoryWaits.Add(1)
	c.memMu.Lock()
	defer c.memMu.Unlock()
	defer wakeOn(ctx, &c.memMu, c.memCond)()
	failed := c.flushFailures.Load()
	for c.dirtyBytes.Load()+need > c.opts.MaxDirty {
		if ctx.Err() != nil {
			return fmt.Errorf("waiting for dirty memory: %w", syscall.EINTR)
		}
		if c.flushFailures.Load() != failed {
			return nil
		}
		if c.inflight.Load() == 0 {
			c.memMu.Unlock()
			for _, st := range c.openFiles() {
				st.mu.Lock()
				c.flushPartial(st, 0, 0)
				st.mu.Unlock()
			}
			c.memMu.Lock()
			if c.inflight.Load() == 0 {
				return nil // nothing could be sent: let the writer through
			}
			continue
		}
		c.memCond.Wait()
	}
	return nil
}

// waitForFileMemory is waitForMemory for one file's bound, which is at
// least two chunks (erasure-coded rows may be larger than the bound). If
// the flushes it waits for fail, the writer gets their error (ENOSPC,
// EDQUOT, EIO) rather than wait for ever: the data already written stays
// cached for fsync to retry and report. st.mu is held.
func (c *Client) waitForFileMemory(ctx context.Context, st *inodeState) error {
	wb := &st.wb
	limit := max(c.opts.MaxDirtyPerFile, 2*wb.size)
	if wb.held <= limit {
		return nil
	}
	defer wakeOn(ctx, &st.mu, wb.done)()
	failed := wb.fails
	for wb.held > limit {
		if ctx.Err() != nil {
			return fmt.Errorf("waiting for dirty memory: %w", syscall.EINTR)
		}
		if wb.fails != failed {
			return wb.lastErr
		}
		if len(wb.flushing) == 0 {
			c.flushPartial(st, limit/2, 0)
			if len(wb.flushing) == 0 {
				return nil
			}
		}
		wb.done.Wait()
	}
	return nil
}

// freeChunk gives back the buffer of a chunk no longer held (flushed,
// merged into a newer one, or dropped): its memory and its charge on the
// grants. st.mu is held.
func (c *Client) freeChunk(st *inodeState, ch *chunk) {
	st.wb.held -= st.wb.size
	c.dirtyBytes.Add(-st.wb.size)
	c.uncharge(st.layout, st.wb.size, ch.idx)
	putBuf(ch.buf)
}

// wakeOn wakes cond's waiters when ctx ends, so that a wait can look at
// ctx.Err(); calling what it returns stops that.
func wakeOn(ctx context.Context, l sync.Locker, cond *sync.Cond) func() {
	stop := context.AfterFunc(ctx, func() {
		l.Lock()
		cond.Broadcast()
		l.Unlock()
	})
	return func() { stop() }
}

func (c *Client) addDirty(n int64) {
	raise(&c.counters.peakDirty, c.dirtyBytes.Add(n))
}

// memFreed wakes writers waiting for memory.
func (c *Client) memFreed() {
	c.memMu.Lock()
	c.memCond.Broadcast()
	c.memMu.Unlock()
}

func (c *Client) openFiles() []*inodeState {
	c.filesMu.Lock()
	defer c.filesMu.Unlock()
	out := make([]*inodeState, 0, len(c.files))
	for _, st := range c.files {
		out = append(out, st)
	}
	return out
}

// flusher pushes out partial chunks that have waited too long, so data a
// program leaves in an open file reaches the OSTs (like dirty_expire).
func (c *Client) flusher() {
	t := time.NewTicker(c.opts.DirtyExpire / 2)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			for _, st := range c.openFiles() {
				st.mu.Lock()
				c.flushPartial(st, 0, c.opts.DirtyExpire)
				st.mu.Unlock()
			}
		}
	}
}

// ostSem bounds this client's RPCs in flight to one OST.
func (c *Client) ostSem(ost uint32) chan struct{} {
	c.semMu.Lock()
	defer c.semMu.Unlock()
	s := c.sems[ost]
	if s == nil {
		s = make(chan struct{}, c.opts.RPCsInFlight)
		c.sems[ost] = s
	}
	return s
}
