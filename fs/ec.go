package fs

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/stripefs/stripefs/layout"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// Erasure-coded files (EC.md). The write-back cache keeps an erasure-coded
// file's dirty data in chunks of one row (K data units). A whole row is
// encoded once and its K+M units written in parallel, each with a tag
// (row version and CRC-32C) its OST stores beside the data; nothing is
// read. A partial row (end of file, fsync, memory pressure) first reads
// the data units it does not cover, except those past the end of what
// this client knows to be on the OSTs (zeros), and counts a
// read-modify-write. Reads touch only data units; a unit that cannot be
// read (OST down, an error, a lost object) turns the read of its row into
// a degraded read: every reachable unit is read with its tag and the row
// rebuilt from units that agree with one parity manifest (layout.Codec),
// or EIO.

// ecState is a client's erasure-coding state.
type ecState struct {
	once sync.Once
	salt uint64

	mu      sync.Mutex
	lastVer uint64
	down    map[uint32]time.Time // OSTs skipped by reads until then
	// unreachable, set by tests, makes fast calls to an OST fail as if it
	// could not be reached.
	unreachable map[uint32]bool
}

// ecDownFor is how long an OST that could not be reached is left out of
// erasure-coded reads before it is tried again.
const ecDownFor = 5 * time.Second

func (e *ecState) init() {
	e.once.Do(func() {
		var b [8]byte
		_, _ = rand.Read(b[:])
		e.salt = binary.LittleEndian.Uint64(b[:]) & 0xfff
		e.down = map[uint32]time.Time{}
	})
}

// ecVersion returns a new row version: the clock in nanoseconds with the
// low 12 bits replaced by this client's salt, rising strictly within a
// client. Versions only need to differ between writes of one row; the
// clock makes the newest win when two manifests are equally complete.
func (c *Client) ecVersion() uint64 {
	e := &c.ec
	e.init()
	e.mu.Lock()
	defer e.mu.Unlock()
	v := uint64(time.Now().UnixNano())&^0xfff | e.salt
	if v <= e.lastVer {
		v = e.lastVer + 0x1000
	}
	e.lastVer = v
	return v
}

// ostDown reports whether erasure-coded reads leave ost out for now.
func (c *Client) ostDown(ost uint32) bool { return c.skipOST(ost, false) }

// skipOST reports whether a fast call to ost fails without being sent:
// the OST failed one lately (unless tryDown), or a test made it
// unreachable.
func (c *Client) skipOST(ost uint32, tryDown bool) bool {
	e := &c.ec
	e.init()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.unreachable[ost] {
		return true
	}
	until, ok := e.down[ost]
	if ok && time.Now().After(until) {
		delete(e.down, ost)
		return false
	}
	return ok && !tryDown
}

func (c *Client) setDown(ost uint32, down bool) {
	e := &c.ec
	e.init()
	e.mu.Lock()
	defer e.mu.Unlock()
	if down {
		e.down[ost] = time.Now().Add(ecDownFor)
	} else if len(e.down) > 0 {
		delete(e.down, ost)
	}
}

// errOSTDown fails a read from an OST left out for a while.
var errOSTDown = errors.New("left out of reads after a failure")

// fastDo sends an OST read that fails at once when the OST cannot be
// reached, instead of waiting for it; such an OST is then left out of
// reads for ecDownFor (unless tryDown). Callers rebuild what they could
// not read. A read is idempotent: one that met a connection broken
// earlier (the OST restarted) is sent once more on a new one.
func (c *Client) fastDo(ctx context.Context, ost uint32, call *rpc.Call, tryDown bool) error {
	if c.skipOST(ost, tryDown) {
		return fmt.Errorf("ost%d: %w: %w", ost, errOSTDown, syscall.EIO)
	}
	r, err := c.target(ctx, proto.KindOST, ost)
	if err != nil {
		return err
	}
	call.FailFast = true
	err = r.Do(ctx, call)
	if errors.Is(err, rpc.ErrDisconnected) && ctx.Err() == nil {
		err = r.Do(ctx, call)
	}
	switch {
	case err == nil:
		c.setDown(ost, false)
		return nil
	case ctx.Err() == nil && unreachableErr(err):
		c.setDown(ost, true)
	}
	return fmt.Errorf("ost%d: %w", ost, asErrno(err))
}

// unreachableErr tells an OST that did not answer (a dial refused, a
// connection lost) from one that answered with an error.
func unreachableErr(err error) bool {
	var oe *net.OpError
	if errors.As(err, &oe) || errors.Is(err, rpc.ErrDisconnected) {
		return true
	}
	var errno syscall.Errno
	var remote *rpc.RemoteError
	return !errors.As(err, &errno) && !errors.As(err, &remote)
}

// unitIO says how a unit is read.
type unitIO struct {
	fast      bool // fail at once if the OST is unreachable
	tryDown   bool // even if it failed lately (fast reads)
	mustExist bool // a missing object is an error, not a hole
	wantTag   bool
}

// readUnit reads len(buf) bytes of the part's object obj at unitOff+in
// (unitOff is where the unit starts) in RPC-sized pieces, and returns how
// far into buf the object holds bytes and, if asked, the unit's tag; the
// rest of buf is zeroed.
func (c *Client) readUnit(ctx context.Context, fid proto.FID, ep layout.ECPart, obj int, unitOff, in uint64, buf []byte, how unitIO) (int, []byte, error) {
	ost := ep.Layout.OSTs[obj]
	id := proto.ObjID{FID: fid, Stripe: ep.Stripe(obj)}
	sem := c.ostSem(ost)
	var tag []byte
	n := 0
	for done := 0; done < len(buf); done += maxRPC {
		piece := buf[done:min(done+maxRPC, len(buf))]
		var r proto.OReadReply
		req := &proto.OReadReq{Obj: id, Off: unitOff + in + uint64(done), Len: uint32(len(piece)), MustExist: how.mustExist,
			WantTag: how.wantTag && done == 0, TagOff: unitOff}
		call := &rpc.Call{Method: proto.ORead, Req: req, Resp: &r, BulkIn: piece}
		sem <- struct{}{}
		var err error
		if how.fast {
			err = c.fastDo(ctx, ost, call, how.tryDown)
		} else {
			err = c.ostDo(ctx, ost, call)
		}
		<-sem
		if err != nil {
			return 0, nil, err
		}
		if done == 0 {
			tag = r.Tag
		}
		clear(piece[call.NBulkIn:]) // a hole, or past the object's end
		if call.NBulkIn > 0 {
			n = done + call.NBulkIn
		}
	}
	return n, tag, nil
}

// writeUnit writes data at offset in of unit j of row r, with the unit's
// tag; data may be shorter than the unit, or empty for a tag-only write.
// A write larger than one RPC goes in pieces, the tag with the last, after
// the others landed: a unit whose tag is stored is whole.
func (c *Client) writeUnit(ctx context.Context, fid proto.FID, ep layout.ECPart, r uint64, j int, in uint64, data []byte, tag layout.Tag) error {
	g := ep.Geometry()
	obj, objOff := g.UnitAt(r, j)
	if hook := c.opts.DropECWrite; hook != nil && hook(fid, r, j) {
		return nil
	}
	ost := ep.Layout.OSTs[obj]
	id := proto.ObjID{FID: fid, Stripe: ep.Stripe(obj)}
	sem := c.ostSem(ost)
	for done := 0; ; {
		ln := min(len(data)-done, maxRPC)
		last := done+ln == len(data)
		call, err := c.writeCall(ctx, fid, ost, id, objOff+in+uint64(done), data[done:done+ln])
		if err != nil {
			return err
		}
		req := call.Req.(*proto.OWriteReq)
		req.NoCache = j >= g.K // parity: read only to rebuild
		if last {
			req.Tag, req.TagOff = tag.Marshal(), objOff
		}
		sem <- struct{}{}
		err = c.ostDo(ctx, ost, call)
		<-sem
		if err != nil {
			return fmt.Errorf("row %d unit %d: %w", r, j, err)
		}
		c.noteGrant(ost, call)
		if last {
			return nil
		}
		done += ln
	}
}

// ecRow returns the erasure-coded part of lay if chunk idx of a file with
// that layout is one of the part's rows (chunkSize makes the chunks of
// such a file its rows): that chunk is written whole rows at a time, with
// parity (sendRow), and fetched by fetchRow.
func ecRow(lay proto.Layout, idx int64) (layout.ECPart, bool) {
	ep, ok := layout.ECPartOf(lay)
	if !ok || idx < 0 || !ep.HasRow(uint64(idx)) {
		return layout.ECPart{}, false
	}
	return ep, true
}

// ecLockAlign is what the extent locks on a file with layout lay are
// widened to: the rows of its erasure-coded part, if it has one (the
// whole file's locks, which are then a little wider than they need be
// outside it), else 0.
func ecLockAlign(lay proto.Layout) uint64 {
	if ep, ok := layout.ECPartOf(lay); ok && lay.CheckFile() == nil {
		return ep.Geometry().RowSize()
	}
	return 0
}

// codecOf returns the codec of a file's erasure-coded part, checking it
// first: layouts come from the wire, and a component may have no objects
// yet.
func codecOf(ep layout.ECPart) (*layout.Codec, error) {
	if err := ep.Layout.CheckFile(); err != nil {
		return nil, err
	}
	cd, err := layout.NewCodec(ep.Geometry())
	if err != nil {
		return nil, fmt.Errorf("%v: %w", err, syscall.EIO)
	}
	return cd, nil
}

// sendRow writes a dirty row chunk of an erasure-coded file: its dirty
// data units, parity and tags. knownEnd bounds the data this client knows
// to be on the OSTs; data units starting at or past it are zeros and are
// not read. The chunk's buffer receives the row's other bytes.
func (c *Client) sendRow(ctx context.Context, fid proto.FID, ep layout.ECPart, ch *chunk, knownEnd uint64) error {
	cd, err := codecOf(ep)
	if err == nil && len(ch.buf) != int(cd.G.RowSize()) {
		err = fmt.Errorf("a chunk of %d bytes for rows of %d: %w", len(ch.buf), cd.G.RowSize(), syscall.EIO) // the layout was not valid when the file was opened
	}
	if err != nil {
		return fmt.Errorf("flush %s: %w", fid, err)
	}
	g := cd.G
	k, u := g.K, int64(g.Unit)
	r := uint64(ch.idx)
	rowStart := r * g.RowSize()
	version := c.ecVersion()
	data := make([][]byte, k)
	tags := make([]layout.Tag, k)
	extent := make([]int, k) // bytes of each data unit the object will hold
	type write struct {
		j    int
		in   int64 // where data goes in the unit
		data []byte
	}
	var writes []write
	whole := ch.dirty.Covers(0, int64(g.RowSize()))
	if whole {
		c.counters.ecFullRows.Add(1)
	} else {
		c.counters.ecPartialRows.Add(1)
	}
	reads, rg := 0, new(errgroup.Group)
	readTags := make([][]byte, k)
	for j := 0; j < k; j++ {
		lo, hi := int64(j)*u, int64(j+1)*u
		data[j] = ch.buf[lo:hi]
		if whole || ch.dirty.Covers(lo, hi) {
			extent[j] = int(u)
			continue
		}
		gaps := ch.dirty.Subtract(lo, hi)
		if rowStart+uint64(lo) >= knownEnd {
			for _, gp := range gaps {
				clear(ch.buf[gp.Start:gp.End]) // past the known end: zeros
			}
			continue
		}
		reads++
		obj, objOff := g.UnitAt(r, j)
		rg.Go(func() error {
			buf := getBuf(u)
			defer putBuf(buf)
			n, tag, err := c.readUnit(ctx, fid, ep, obj, objOff, 0, buf, unitIO{wantTag: true})
			if err != nil {
				return err
			}
			for _, gp := range gaps {
				copy(ch.buf[gp.Start:gp.End], buf[gp.Start-lo:gp.End-lo])
			}
			extent[j], readTags[j] = n, tag
			return nil
		})
	}
	if reads > 0 {
		c.counters.readModifyWrites.Add(1)
		if err := rg.Wait(); err != nil {
			return fmt.Errorf("flush %s: read-modify-write of row %d: %w", fid, r, err)
		}
	}
	parity := make([][]byte, g.M)
	for i := range parity {
		parity[i] = getBuf(u)
		defer putBuf(parity[i])
	}
	crcs, err := cd.Encode(data, parity)
	if err != nil {
		return fmt.Errorf("flush %s: row %d: %w", fid, r, err)
	}
	for j := 0; j < k; j++ {
		lo, hi := int64(j)*u, int64(j+1)*u
		first, end, dirty := lo, hi, whole
		if !whole {
			first, end, dirty = dirtySpan(ch, lo, hi)
		}
		newTag := layout.Tag{UnitRef: layout.UnitRef{Version: version, CRC: crcs[j]}}
		if dirty {
			// A new version of the unit, written from its first to its
			// last dirty byte (the bytes between were read).
			tags[j] = newTag
			extent[j] = max(extent[j], int(end-lo))
			writes = append(writes, write{j, first - lo, ch.buf[first:end]})
			continue
		}
		// Clean: keep its tag if the bytes match it, else re-tag the bytes
		// as they are, which is what reads return.
		t, ok := cd.HoleTag(j), true
		if readTags[j] != nil {
			pt, err := layout.ParseTag(readTags[j], k)
			t, ok = pt, err == nil && !pt.Parity
		}
		if ok && crcs[j] == t.CRC {
			tags[j] = t
			continue
		}
		tags[j] = newTag
		writes = append(writes, write{j, 0, nil})
	}
	ptags := layout.ParityTags(crcs[k:], tags, version)
	plen := 0
	for _, e := range extent {
		plen = max(plen, e)
	}
	wg, wctx := errgroup.WithContext(ctx)
	for _, w := range writes {
		wg.Go(func() error { return c.writeUnit(wctx, fid, ep, r, w.j, uint64(w.in), w.data, tags[w.j]) })
	}
	for i := range parity {
		wg.Go(func() error { return c.writeUnit(wctx, fid, ep, r, k+i, 0, parity[i][:plen], ptags[i]) })
	}
	if err := wg.Wait(); err != nil {
		return fmt.Errorf("flush %s: %w", fid, err)
	}
	return nil
}

// dirtySpan returns the first and last dirty byte (plus one) of chunk
// bytes [lo, hi), and whether there are any.
func dirtySpan(ch *chunk, lo, hi int64) (first, end int64, any bool) {
	for _, r := range ch.dirty.Ranges() {
		s, e := max(r.Start, lo), min(r.End, hi)
		if s >= e {
			continue
		}
		if !any {
			first, any = s, true
		}
		end = e
	}
	return first, end, any
}

// resealRow rewrites the tags and parity of row r of an erasure-coded
// file from the data units on the OSTs (none at or past end), as after a
// truncate cut it.
func (c *Client) resealRow(fid proto.FID, ep layout.ECPart, r uint64, end uint64) error {
	size := int64(ep.Geometry().RowSize())
	ch := &chunk{idx: int64(r), buf: getBuf(size)}
	defer putBuf(ch.buf)
	return c.sendRow(context.Background(), fid, ep, ch, end)
}

// ecRead reads p at off, which the file's erasure-coded part holds, from
// its data units. Rows with a unit that cannot be read are fetched whole,
// rebuilt from parity (fetchRow), and kept as read-ahead chunks for the
// reads that follow. The caller overlays this client's unflushed data.
func (c *Client) ecRead(ctx context.Context, st *inodeState, ep layout.ECPart, p []byte, off int64) error {
	if err := ep.Layout.CheckFile(); err != nil {
		return err
	}
	lay, g := ep.Layout, ep.Geometry()
	rowSize := int64(g.RowSize())
	var mu sync.Mutex
	failed := map[int64]bool{}
	var eg errgroup.Group
	for _, m := range layout.Map(lay, uint64(off), len(p)) {
		r := int64(m.FileOff) / rowSize
		if c.ostDown(lay.OSTs[m.Stripe]) {
			mu.Lock()
			failed[r] = true
			mu.Unlock()
			continue
		}
		buf := p[m.FileOff-uint64(off):][:m.Len]
		in := m.ObjOff % g.Unit
		eg.Go(func() error {
			_, _, err := c.readUnit(ctx, st.fid, ep, m.Stripe, m.ObjOff-in, in, buf, unitIO{fast: true, mustExist: true})
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				mu.Lock()
				failed[r] = true
				mu.Unlock()
			}
			return nil
		})
	}
	if err := eg.Wait(); err != nil {
		return asErrno(err)
	}
	for r := range failed {
		st.mu.Lock()
		// A row this client is writing is rebuilt once the write is done:
		// half of it would not agree with the other half.
		for st.wb.flushing[r] != nil {
			st.wb.done.Wait()
		}
		ch := st.ra.chunks[r]
		if ch != nil {
			select {
			case <-ch.ready:
				if ch.err != nil { // an earlier attempt failed: try again
					c.releaseRA(st, r)
					ch = nil
				}
			default:
			}
		}
		if ch == nil {
			if c.raBytes.Load()+rowSize > c.opts.MaxReadAheadTotal {
				c.dropFetched(st) // rebuilt rows are not kept past the bound
			}
			ch = c.fetchChunk(st, r)
		}
		ch.hold()
		st.mu.Unlock()
		if err := copyRow(ctx, ch, p, off, r*rowSize, rowSize); err != nil {
			return err
		}
	}
	return nil
}

// copyRow copies what p (at off) shares with the row fetched in ch
// (at base) once it is there, and drops the caller's reference.
func copyRow(ctx context.Context, ch *raChunk, p []byte, off, base, rowSize int64) error {
	defer ch.unref()
	select {
	case <-ch.ready:
	case <-ctx.Done():
		return asErrno(ctx.Err())
	}
	if ch.err != nil {
		return ch.err
	}
	s, e := max(off, base), min(off+int64(len(p)), base+rowSize)
	copy(p[s-off:e-off], ch.data[s-base:e-base])
	return nil
}

// fetchRow reads row r of an erasure-coded file into dst (the row's data
// units, back to back). Its data units are read first; if any cannot be
// (its OST down, an error, its object lost), every other unit that can be
// is read with its tag and the row rebuilt: a degraded read.
func (c *Client) fetchRow(ctx context.Context, fid proto.FID, ep layout.ECPart, r uint64, dst []byte) error {
	cd, err := codecOf(ep)
	if err == nil && len(dst) < int(cd.G.RowSize()) {
		err = fmt.Errorf("%s: a buffer of %d bytes for rows of %d: %w", fid, len(dst), cd.G.RowSize(), syscall.EIO)
	}
	if err != nil {
		return err
	}
	g := cd.G
	u := g.Unit
	units := make([]layout.Unit, g.N())
	read := func(j int, buf []byte, how unitIO) func() error {
		return func() error {
			obj, objOff := g.UnitAt(r, j)
			n, tag, err := c.readUnit(ctx, fid, ep, obj, objOff, 0, buf, how)
			if err == nil {
				units[j] = layout.Unit{Data: buf, Extent: n, Tag: tag}
			}
			return nil // a unit not read is rebuilt, or the row fails below
		}
	}
	var eg errgroup.Group
	for j := 0; j < g.K; j++ {
		eg.Go(read(j, dst[uint64(j)*u:uint64(j+1)*u], unitIO{fast: true, mustExist: true, wantTag: true}))
	}
	eg.Wait()
	missing := false
	for j := 0; j < g.K; j++ {
		missing = missing || units[j].Data == nil
	}
	if !missing {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return asErrno(err)
	}
	// Read what is missing in widening rounds: the data units again (a
	// lost object reads as a hole now: its missing tag keeps it out of any
	// manifest that says otherwise) and just enough parity units; if those
	// do not agree, every unit; last, the OSTs left out after a failure,
	// which may be back.
	var data [][]byte
	err = layout.ErrUnrecoverable
	for round := 0; round < 3 && errors.Is(err, layout.ErrUnrecoverable); round++ {
		need := 0
		for j := 0; j < g.K; j++ {
			if units[j].Data == nil {
				need++
			}
		}
		reads := 0
		for j := 0; j < g.N(); j++ {
			if units[j].Data != nil {
				continue
			}
			obj, _ := g.UnitAt(r, j)
			down := c.ostDown(ep.Layout.OSTs[obj])
			switch {
			case round == 0 && down, round == 1 && down:
				continue
			case round == 0 && j >= g.K:
				if need == 0 {
					continue
				}
				need--
			}
			reads++
			eg.Go(read(j, make([]byte, u), unitIO{fast: true, tryDown: round == 2, wantTag: true}))
		}
		eg.Wait()
		if reads > 0 || round == 0 {
			data, err = cd.Recover(units)
		}
	}
	if err != nil {
		c.counters.ecUnrecoverable.Add(1)
		return fmt.Errorf("%s: row %d cannot be read or rebuilt: %v: %w", fid, r, err, syscall.EIO)
	}
	for j := 0; j < g.K; j++ {
		if units[j].Data == nil { // rebuilt, not read: a degraded read
			c.counters.degradedReads.Add(1)
			break
		}
	}
	for j, d := range data {
		copy(dst[uint64(j)*u:], d)
	}
	return nil
}
