package fs

import (
	"context"
	"fmt"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/stripefs/stripefs/layout"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// Read-ahead. A reader whose reads follow one another is sequential: the
// client then fetches whole chunks (stripe units) ahead of it, several in
// flight on different OSTs, into a window that grows while the pattern
// holds. A read elsewhere resets the window; random readers never trigger
// it. Writes and truncates drop the chunks they touch.

// raChunk is a chunk fetched ahead: data is valid once ready is closed,
// and never changes after; the chunk is dropped, not updated. Its buffer
// is pooled: the read-ahead map, the fetch and each reader using the
// bytes hold a reference, and the last one out recycles it (a 1 MiB
// allocation and clear per chunk was a fifth of the read path's CPU).
type raChunk struct {
	ready chan struct{}
	data  []byte // the chunk's bytes; shorter at end of file
	err   error
	refs  atomic.Int32
	// given: the bytes came with the open (opendata.go), for the reads
	// that follow it; a reader's pattern does not drop them.
	given bool
}

func (ch *raChunk) hold() { ch.refs.Add(1) }

func (ch *raChunk) unref() {
	if ch.refs.Add(-1) == 0 {
		putBuf(ch.data)
	}
}

// unrefAll drops the references noteRead took.
func unrefAll(chunks map[int64]*raChunk) {
	for _, ch := range chunks {
		ch.unref()
	}
}

// readahead is a file's read-ahead state; guarded by inodeState.mu.
type readahead struct {
	next   int64 // end of the furthest read so far
	seq    int   // reads in a row near next
	window int64 // chunks to keep ahead; 0 when not sequential
	chunks map[int64]*raChunk
	// hinted is, by stripe, how far into its object file the page cache
	// was asked to read ahead for reads lent from it (hintAhead).
	hinted map[int]int64
}

// raMinRun is how many reads in a row must follow one another before the
// client reads ahead: the kernel splits one large read into adjacent
// requests, which alone prove nothing.
const raMinRun = 3

// noteRead updates the pattern and starts fetches; it returns the chunks
// already fetched or on their way that cover [off, off+n), each with a
// reference the caller drops (unrefAll). The kernel
// sends a sequential reader's requests in parallel and they arrive out of
// order, so "near next" allows a window of slack either way. Nothing is
// fetched past the end of lk, the lock the read holds: read-ahead is
// cached under it. st.mu is held.
func (c *Client) noteRead(st *inodeState, off int64, n int, lk *heldLock) map[int64]*raChunk {
	ra, size := &st.ra, st.wb.size
	if !c.observe(st, off, n) {
		return nil
	}
	end := off + int64(n)
	first, last := off/size, (end-1)/size
	if ra.window > 0 {
		for idx := range ra.chunks { // well behind the reader: done with
			if idx < first-1 {
				c.releaseRA(st, idx)
			}
		}
		stop := min(last+ra.window, (int64(st.size)-1)/size)
		if lk != nil && lk.d.End != proto.LockEOF {
			stop = min(stop, (int64(lk.d.End)/size)-1) // whole chunks under the lock only
		}
		if l := st.layout; l.IsComposite() {
			// Past what this copy of the layout has instantiated, another
			// client may have written since: a reader asks (pfl.go).
			stop = min(stop, int64(l.InstEnd()/uint64(size))-1)
		}
		for idx := first; idx <= stop; idx++ {
			if ra.chunks[idx] != nil || st.wb.dirty[idx] != nil || st.wb.flushing[idx] != nil {
				continue
			}
			if c.raBytes.Load()+size > c.opts.MaxReadAheadTotal {
				break
			}
			c.fetchChunk(st, idx)
		}
	}
	var out map[int64]*raChunk
	for idx := first; idx <= last; idx++ {
		if ch := ra.chunks[idx]; ch != nil {
			select {
			case <-ch.ready:
				if ch.err != nil { // reported to a reader already: this one tries again
					c.releaseRA(st, idx)
					continue
				}
			default:
			}
			if out == nil {
				out = map[int64]*raChunk{}
			}
			ch.hold()
			out[idx] = ch
		}
	}
	return out
}

// observe updates the reader's pattern with a read of [off, off+n): the
// window opens after raMinRun reads that follow one another and doubles
// with each chunk crossed, up to Options.ReadAhead. It is false when the
// mount reads nothing ahead. st.mu is held.
func (c *Client) observe(st *inodeState, off int64, n int) bool {
	ra, size := &st.ra, st.wb.size
	maxWindow := c.opts.ReadAhead / size
	if maxWindow <= 0 {
		return false
	}
	slack := max(ra.window, 1) * size
	if ra.seq > 0 && off >= ra.next-slack && off <= ra.next+slack {
		ra.seq++
	} else {
		ra.seq, ra.window, ra.hinted = 1, 0, nil
		c.dropFetched(st)
	}
	end := off + int64(n)
	if end > ra.next {
		if ra.seq >= raMinRun && (end-1)/size > (ra.next-1)/size {
			ra.window = min(max(ra.window*2, 1), maxWindow) // grows once per chunk crossed
		}
		ra.next = end
	}
	return true
}

// hintAhead is read-ahead for a read lent from an OST's object file in
// this process (localView): nothing is fetched into the client, but once
// the reader is sequential the object file's page cache is asked to read
// its share of the window ahead (POSIX_FADV_WILLNEED), as the kernel reads
// ahead on a loopback mount's backing file. Without it each 1 MiB read of
// cold data waited for the disk, with only the block device's small
// read-ahead (a cold 1 GiB read ran at 0.61-0.69 of the loopback mount's).
// The hint is renewed once the reader is half-way through it. st.mu is
// held; the returned hint is given after it is let go (the call may wait
// for the disk to take the reads), while the view still holds the file.
func (c *Client) hintAhead(st *inodeState, v View, off int64, n int) readHint {
	ra := &st.ra
	if !c.observe(st, off, n) || ra.window == 0 || v.File == 0 {
		return readHint{}
	}
	win := ra.window * st.wb.size / int64(max(len(st.layout.OSTs), 1))
	end := v.Off + int64(n)
	if ra.hinted == nil {
		ra.hinted = map[int]int64{}
	}
	from := max(ra.hinted[v.stripe], end)
	if from-end >= win/2 {
		return readHint{}
	}
	ra.hinted[v.stripe] = end + win
	return readHint{c: c, fd: v.File, off: from, n: end + win - from}
}

// readHint is a range of an object file to read ahead (hintAhead).
type readHint struct {
	c      *Client
	fd     uintptr
	off, n int64
}

func (h readHint) give() {
	if h.n > 0 && unix.Fadvise(int(h.fd), h.off, h.n, unix.FADV_WILLNEED) == nil {
		h.c.counters.readaheadHints.Add(1)
	}
}

// dropFetched forgets chunks whose fetch has finished; those still on
// their way stay, so their RPC is not wasted if the reader comes back.
// st.mu is held.
func (c *Client) dropFetched(st *inodeState) {
	for idx, ch := range st.ra.chunks {
		select {
		case <-ch.ready:
			if !ch.given {
				c.releaseRA(st, idx)
			}
		default:
		}
	}
}

// fetchChunk starts reading chunk idx in the background. st.mu is held.
func (c *Client) fetchChunk(st *inodeState, idx int64) *raChunk {
	size := st.wb.size
	ch := &raChunk{ready: make(chan struct{}), data: getBuf(size)}
	ch.refs.Store(2) // the map's and the fetch's
	if st.ra.chunks == nil {
		st.ra.chunks = map[int64]*raChunk{}
	}
	st.ra.chunks[idx] = ch
	c.raBytes.Add(size)
	lay, fid := st.layout, st.fid
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		defer ch.unref()
		defer close(ch.ready)
		if ep, ok := ecRow(lay, idx); ok && (ep.Instantiated() || !lay.IsComposite()) {
			clear(ch.data) // a pooled buffer: units short at end of file must read as zeros
			if ch.err = c.fetchRow(context.Background(), fid, ep, uint64(idx), ch.data); ch.err == nil {
				c.counters.readaheadBytes.Add(size)
			}
			return
		}
		for _, m := range chunkPieces(lay, size, idx) {
			if ch.err = c.fetchPiece(fid, lay, ch.data[int64(m.FileOff)-idx*size:][:m.Len], m); ch.err != nil {
				return
			}
		}
		c.counters.readaheadBytes.Add(size)
	}()
	return ch
}

// fetchPiece reads into buf what object m.Stripe holds of a read-ahead
// chunk (zeros where it holds nothing, or there is no object yet).
func (c *Client) fetchPiece(fid proto.FID, lay proto.Layout, buf []byte, m layout.Chunk) error {
	if m.Stripe == layout.NoObject {
		clear(buf)
		return nil
	}
	ost := lay.OSTs[m.Stripe]
	sem := c.ostSem(ost)
	sem <- struct{}{}
	defer func() { <-sem }()
	for done := 0; done < len(buf); done += maxRPC { // a piece of a row-sized chunk may be larger than one RPC
		piece := buf[done:min(len(buf), done+maxRPC)]
		var r proto.OReadReply
		call := &rpc.Call{Method: proto.ORead, Req: &proto.OReadReq{Obj: proto.ObjID{FID: fid, Stripe: uint32(m.Stripe)}, Off: m.ObjOff + uint64(done), Len: uint32(len(piece))},
			Resp: &r, BulkIn: piece}
		if err := c.ostDo(context.Background(), ost, call); err != nil {
			return err
		}
		clear(piece[call.NBulkIn:])
	}
	return nil
}

// dropReadaheadRange forgets the chunks that hold bytes of [start, end)
// (a lock that covered them went). st.mu is held.
func (c *Client) dropReadaheadRange(st *inodeState, start, end uint64) {
	size := uint64(st.wb.size)
	for idx := range st.ra.chunks {
		s := uint64(idx) * size
		if s+size > start && s < end {
			c.releaseRA(st, idx)
		}
	}
}

// dropReadahead forgets fetched chunks from index from on. st.mu is held.
func (c *Client) dropReadahead(st *inodeState, from int64) {
	for idx := range st.ra.chunks {
		if idx >= from {
			c.releaseRA(st, idx)
		}
	}
}

func (c *Client) releaseRA(st *inodeState, idx int64) {
	if ch := st.ra.chunks[idx]; ch != nil {
		delete(st.ra.chunks, idx)
		c.raBytes.Add(-st.wb.size)
		ch.unref()
	}
}

// viewAhead returns [off, off+n) as a slice of one fetched chunk, if one
// holds it all, with a reference to the chunk for the caller to drop.
// A fetch that failed fails the read with its error (the reader would
// only wait as long again for the same answer); an interrupted reader
// stops waiting.
func (c *Client) viewAhead(ctx context.Context, chunks map[int64]*raChunk, size, off int64, n int) ([]byte, *raChunk, bool, error) {
	idx := off / size
	if (off+int64(n)-1)/size != idx {
		return nil, nil, false, nil
	}
	ch := chunks[idx]
	if ch == nil {
		return nil, nil, false, nil
	}
	if err := waitFetch(ctx, ch); err != nil {
		return nil, nil, false, err
	}
	base := idx * size
	if off-base+int64(n) > int64(len(ch.data)) {
		return nil, nil, false, nil
	}
	c.counters.readaheadHits.Add(1)
	ch.hold()
	return ch.data[off-base : off-base+int64(n) : off-base+int64(n)], ch, true, nil
}

// waitFetch waits for ch's fetch and returns its error, or EINTR when ctx
// ends first.
func waitFetch(ctx context.Context, ch *raChunk) error {
	select {
	case <-ch.ready:
		return ch.err
	case <-ctx.Done():
		return fmt.Errorf("waiting for read-ahead: %w", syscall.EINTR)
	}
}

// readFromAhead serves [off, off+len(p)) from fetched chunks if they cover
// it all; it reports false (and touches nothing) otherwise, and fails as
// viewAhead does.
func (c *Client) readFromAhead(ctx context.Context, chunks map[int64]*raChunk, size int64, p []byte, off int64) (bool, error) {
	first, last := off/size, (off+int64(len(p))-1)/size
	for idx := first; idx <= last; idx++ {
		ch := chunks[idx]
		if ch == nil {
			return false, nil
		}
		if err := waitFetch(ctx, ch); err != nil {
			return false, err
		}
		if base := idx * size; min(off+int64(len(p)), base+size)-base > int64(len(ch.data)) {
			return false, nil // a chunk that ends at end of file, read past
		}
	}
	for idx := first; idx <= last; idx++ {
		base := idx * size
		s, e := max(off, base), min(off+int64(len(p)), base+size)
		copy(p[s-off:e-off], chunks[idx].data[s-base:e-base])
	}
	c.counters.readaheadHits.Add(1)
	return true, nil
}
