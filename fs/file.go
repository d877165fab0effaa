package fs

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"syscall"

	"github.com/stripefs/stripefs/layout"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
	"golang.org/x/sync/errgroup"
)

// maxRPC bounds the bulk of one OST request.
const maxRPC = 4 << 20

// inodeState is what the client knows of a file it has open: shared by
// every open handle of that file.
type inodeState struct {
	fid    proto.FID
	layout proto.Layout
	refs   int // open handles; guarded by Client.filesMu

	mu    sync.Mutex
	size  uint64
	mtime int64
	dirty bool // size/mtime changed by writes and not yet told to the MDT
	// intent is the write lock a create granted (intent.go), given back
	// with the close if the file is still empty then.
	intent *heldLock
	// reporting counts size reports (setattr, close) on their way to the
	// MDT, and reported is the attribute epoch at which the last one
	// landed: an MDT reply to a request sent before then may predate it.
	reporting int
	reported  uint64
	// cut is the attribute epoch at which this client's last size
	// change (a truncate) landed: laying the size over a reply (layOver).
	cut uint64
	// sizeSent: a report of the size this client's writes made reached
	// the MDT while the state lived (the last release notes it then).
	sizeSent bool
	wb       writeback
	ra       readahead
	flushAll int // flushAll calls waiting: chunks are sent as soon as they can be

	// ecEnd bounds the data of an erasure-coded file on the OSTs as far
	// as this client knows (the size at open, raised by each flush and
	// each lock grant, cut by truncates): a partial row reads no data
	// unit starting past it.
	ecEnd uint64
	// lockedSize: the client holds a data lock on the file, so size is
	// the file's as of that lock's grant (and this client's writes since)
	// rather than whatever it last heard (locks.go).
	lockedSize bool
	// lostErr is why unflushed data was dropped (an eviction, a lock the
	// MDT would not take back after a restart): the next fsync or close
	// reports it once.
	lostErr error
}

// unreported is the size this client's writes made that the MDT has not
// been told. st.mu is held.
func (st *inodeState) unreported() uint64 {
	if st.dirty {
		return st.size
	}
	return 0
}

// takeLost returns and clears lostErr. st.mu is held.
func (st *inodeState) takeLost() error {
	err := st.lostErr
	st.lostErr = nil
	return err
}

// File is one open handle.
type File struct {
	c     *Client
	st    *inodeState
	Flags int
	// openData is the file's data as the open brought it, kept under
	// openLock (OpenData).
	openData []byte
	openLock *heldLock
}

// Open opens an existing file.
func (c *Client) Open(ctx context.Context, fid proto.FID, flags int) (*File, error) {
	var r proto.AttrReply
	req := &proto.OpenReq{FID: fid, Flags: uint32(flags), Want: c.wantBits(fid, proto.LockUpdate)}
	gen, held, ask := c.askData(fid, flags) // opendata.go
	if ask {
		req.ReadData, req.ReadDataHeld = proto.MaxReadData, held != nil
	}
	stamp := c.attrStamp()
	if err := c.mdtCall(ctx, fid, proto.MOpen, req, &r); err != nil {
		return nil, err
	}
	c.noteAttrLock(uint32(fid.MDT()), fid, &r.Attr, r.Lock)
	// The reply may predate this client's own size report on its way (a
	// release that carries the file's last write, landing after the MDT
	// answered): a file state made from it would hold the size before
	// that write, and a read under a lock already held would stop there.
	c.overlay(&r.Attr, stamp)
	f := c.newFile(&r.Attr, flags, stamp)
	if ask && (r.Data.ID != 0 || len(r.Bytes) > 0) {
		f.openData, f.openLock = c.keepOpenData(f.st, &r, gen, held)
	}
	return f, nil
}

// newFile is a handle on a's file, from a reply to a request sent at
// stamp (overlaid already), sharing the file's state if it has one.
func (c *Client) newFile(a *proto.Attr, flags int, stamp uint64) *File {
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		c.dataGen.Add(1) // a writer: an open's data on its way may predate its writes (opendata.go)
	}
	c.filesMu.Lock()
	defer c.filesMu.Unlock()
	st := c.files[a.FID]
	if st == nil {
		// The state a was overlaid with may have gone since, its last
		// release reporting a size newer than a's (two processes opening
		// and appending at once): a new state starts from that, and
		// overlay goes on laying it over replies to requests that left
		// before it landed (a stat the kernel sent before the last
		// release came back), as the old state's would have.
		r, noted := c.closed.after(a.FID, 0)
		if noted && r.epoch > stamp {
			layOver(a, r, stamp)
		}
		st = &inodeState{fid: a.FID, layout: a.Layout, size: a.Size, mtime: a.Mtime, ecEnd: a.Size}
		if noted {
			st.reported, st.cut = r.epoch, r.cut
		}
		st.initWriteback()
		c.files[a.FID] = st
	}
	st.refs++
	return &File{c: c, st: st, Flags: flags}
}

func (c *Client) openState(fid proto.FID) *inodeState {
	c.filesMu.Lock()
	defer c.filesMu.Unlock()
	return c.files[fid]
}

// attrStamp is taken before an MDT request whose reply carries
// attributes, and handed to overlay with the reply.
func (c *Client) attrStamp() uint64 { return c.attrEpoch.Load() }

// overlay puts this client's size and mtime of an open file into a, an
// MDT reply to a request sent at stamp, unless the MDT is known to have
// them: none unreported, none on the way, and the last report landed
// before the request was sent. Otherwise a reply overtaken by this
// client's own size report would shrink the kernel's file size, and a
// read there would see end of file.
func (c *Client) overlay(a *proto.Attr, stamp uint64) {
	st := c.openState(a.FID)
	if st == nil {
		if r, ok := c.closed.after(a.FID, stamp); ok {
			layOver(a, r, stamp)
		}
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.overlayLocked(a, stamp)
}

// overlayLocked is overlay with st.mu held.
func (st *inodeState) overlayLocked(a *proto.Attr, stamp uint64) {
	if st.dirty || st.reporting > 0 || st.reported > stamp {
		layOver(a, reportedSize{size: st.size, mtime: st.mtime, cut: st.cut}, stamp)
	}
}

// layOver puts this client's size and mtime (r) over a, an MDT reply to
// a request sent at stamp. A larger size in a is another client's write
// past this one's end, which this client has not heard of (its size is
// the file's as of its lock's grant, and its own writes since): it
// stands, unless the request left before this client's own truncate
// landed, which it may predate.
func layOver(a *proto.Attr, r reportedSize, stamp uint64) {
	if a.Size <= r.size || r.cut > stamp {
		a.Size, a.Mtime = r.size, r.mtime
		return
	}
	a.Mtime = max(a.Mtime, r.mtime)
}

// waitReports waits until no size report of st is on its way to the
// MDT; st.mu is held.
func (c *Client) waitReports(ctx context.Context, st *inodeState) error {
	if st.reporting == 0 {
		return nil
	}
	defer wakeOn(ctx, &st.mu, st.wb.done)()
	for st.reporting > 0 {
		if ctx.Err() != nil {
			return fmt.Errorf("%s: waiting for a size report on its way: %w", st.fid, syscall.EINTR)
		}
		st.wb.done.Wait()
	}
	return nil
}

// sizeReported records that a size report of st reached the MDT; st.mu
// is held.
func (c *Client) sizeReported(st *inodeState) { st.reported = c.attrEpoch.Add(1) }

// FID is the open file's identifier.
func (f *File) FID() proto.FID { return f.st.fid }

// Size is the file size as this client knows it.
func (f *File) Size() uint64 {
	f.st.mu.Lock()
	defer f.st.mu.Unlock()
	return f.st.size
}

// ReadAt reads up to len(p) bytes at off; it returns fewer at end of file.
// Holes and the unwritten tails of objects read as zeros.
func (f *File) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	v, err := f.ReadView(ctx, p, off)
	if err != nil {
		return 0, err
	}
	defer v.Release()
	if v.File == 0 && len(v.Data) > 0 && &v.Data[0] == &p[0] {
		return len(v.Data), nil
	}
	return v.CopyTo(p)
}

// ReadView is ReadAt that may answer with data the client already holds
// (a chunk read ahead) or can lend (an object file of an OST in this
// process) instead of copying it into p; see View. The caller releases
// the view once it no longer uses it.
func (f *File) ReadView(ctx context.Context, p []byte, off int64) (View, error) {
	if off < 0 {
		return View{}, syscall.EINVAL
	}
	st := f.st
	if len(p) == 0 {
		return View{Data: p}, nil
	}
	raise(&f.c.counters.largestRead, int64(len(p)))
	lk, release, err := f.c.dataLock(ctx, st, proto.LockPR, uint64(off), uint64(off)+uint64(len(p)))
	if err != nil {
		return View{}, err
	}
	defer release()
	if !lk.reachesEOF() {
		// Another client may be writing past this lock: what it has made
		// of the size is asked of it (a glimpse through the MDT).
		if err := f.refreshSize(ctx, uint64(off)+uint64(len(p))); err != nil {
			return View{}, err
		}
	}
	if err := f.c.refreshLayout(ctx, st, uint64(off)+uint64(len(p))); err != nil {
		return View{}, err
	}
	st.mu.Lock()
	size, lay := st.size, st.layout
	var pending []pendingBytes
	var ahead map[int64]*raChunk
	if uint64(off) < size {
		n := int(min(uint64(len(p)), size-uint64(off)))
		pending = st.overlayDirty(p[:n], off)
		if len(pending) == 0 {
			if v, ok := f.c.localView(st, lay, off, n); ok {
				hint := f.c.hintAhead(st, v, off, n)
				st.mu.Unlock()
				hint.give()
				return v, nil
			}
		}
		ahead = f.c.noteRead(st, off, n, lk)
	}
	chunkSize := st.wb.size
	st.mu.Unlock()
	defer unrefAll(ahead)
	if uint64(off) >= size {
		return View{Data: p[:0]}, nil
	}
	n := int(min(uint64(len(p)), size-uint64(off)))
	p = p[:n]
	if len(ahead) > 0 && len(pending) == 0 {
		b, ch, ok, err := f.c.viewAhead(ctx, ahead, chunkSize, off, n)
		if err != nil {
			return View{}, err
		}
		if ok {
			return View{Data: b, release: ch.unref}, nil
		}
	}
	// Unflushed data was copied before the OSTs are read: a flush that
	// lands meanwhile cannot leave this read with neither version.
	defer func() {
		for _, pb := range pending {
			copy(p[pb.off-off:], pb.data)
		}
	}()
	if len(ahead) > 0 {
		ok, err := f.c.readFromAhead(ctx, ahead, chunkSize, p, off)
		if err != nil {
			return View{}, err
		}
		if ok {
			return View{Data: p}, nil
		}
	}
	if err := f.c.readObjects(ctx, st, lay, p, off); err != nil {
		return View{}, err
	}
	return View{Data: p}, nil
}

// readObjects reads p at off from the objects of st's file, with layout
// lay: its erasure-coded part, if it has one, from data units (ecRead),
// the rest stripe by stripe.
func (c *Client) readObjects(ctx context.Context, st *inodeState, lay proto.Layout, p []byte, off int64) error {
	start, end := uint64(off), uint64(off)+uint64(len(p))
	if ep, ok := layout.ECPartOf(lay); ok && ep.Start < end && ep.End > start {
		lo, hi := max(start, ep.Start), min(end, ep.End)
		part := p[lo-start : hi-start]
		if ep.Instantiated() {
			if err := c.ecRead(ctx, st, ep, part, int64(lo)); err != nil {
				return err
			}
		} else {
			clear(part) // a component not instantiated: never written
		}
		if lo > start {
			if err := c.readStripes(ctx, st, lay, p[:lo-start], off); err != nil {
				return err
			}
		}
		if hi < end {
			return c.readStripes(ctx, st, lay, p[hi-start:], int64(hi))
		}
		return nil
	}
	return c.readStripes(ctx, st, lay, p, off)
}

// readStripes reads p at off, which no erasure-coded part of lay holds,
// from its objects in parallel.
func (c *Client) readStripes(ctx context.Context, st *inodeState, lay proto.Layout, p []byte, off int64) error {
	g, gctx := errgroup.WithContext(ctx)
	for _, ch := range layout.Map(lay, uint64(off), len(p)) {
		for done := 0; done < ch.Len; {
			ln := min(ch.Len-done, maxRPC)
			buf := p[ch.FileOff-uint64(off)+uint64(done):][:ln]
			if ch.Stripe == layout.NoObject {
				clear(buf) // a component not instantiated: never written
				done += ln
				continue
			}
			obj := proto.ObjID{FID: st.fid, Stripe: uint32(ch.Stripe)}
			ost := lay.OSTs[ch.Stripe]
			objOff := ch.ObjOff + uint64(done)
			g.Go(func() error {
				var r proto.OReadReply
				call := &rpc.Call{Method: proto.ORead, Req: &proto.OReadReq{Obj: obj, Off: objOff, Len: uint32(len(buf))}, Resp: &r, BulkIn: buf}
				if err := c.ostDo(gctx, ost, call); err != nil {
					return err
				}
				clear(buf[call.NBulkIn:]) // hole or unwritten tail
				return nil
			})
			done += ln
		}
	}
	return g.Wait()
}

// refreshSize learns the file's size from its MDT when a read up to end
// goes past what this client knows of it.
func (f *File) refreshSize(ctx context.Context, end uint64) error {
	st := f.st
	st.mu.Lock()
	known := st.size
	st.mu.Unlock()
	if end <= known {
		return nil
	}
	a, err := f.c.Getattr(ctx, st.fid)
	if err != nil {
		return err
	}
	st.mu.Lock()
	st.size = max(st.size, a.Size)
	st.mu.Unlock()
	return nil
}

// WriteAt writes p at off.
func (f *File) WriteAt(ctx context.Context, p []byte, off int64) (int, error) {
	return f.WriteV(ctx, off, [][]byte{p})
}

// Append writes the concatenation of iovs at the end of the file, as
// O_APPEND does, and returns the offset it wrote at: under a write lock to
// the end of the file, so that finding the end and writing there is one
// step for every client.
func (f *File) Append(ctx context.Context, iovs [][]byte) (int, int64, error) {
	st, c := f.st, f.c
	total := 0
	for _, v := range iovs {
		total += len(v)
	}
	raise(&c.counters.largestWrite, int64(total))
	_, release, err := c.dataLock(ctx, st, proto.LockPW, 0, proto.LockEOF)
	if err != nil {
		return 0, 0, err
	}
	defer release()
	if err := c.waitForMemory(ctx, int64(total)+st.wb.size); err != nil {
		return 0, 0, err
	}
	st.mu.Lock()
	for end := st.size + uint64(total); st.layout.IsComposite() && end > st.layout.InstEnd(); end = st.size + uint64(total) {
		// Another appender of this client may grow the file while
		// st.mu is let go for the MDT: the end is looked at again.
		st.mu.Unlock()
		if err := c.cover(ctx, st, end); err != nil {
			return 0, 0, err
		}
		st.mu.Lock()
	}
	defer st.mu.Unlock()
	if err := c.waitForFileMemory(ctx, st); err != nil {
		return 0, 0, err
	}
	off := int64(st.size)
	if total == 0 {
		return 0, off, nil
	}
	if uint64(off)+uint64(total) > 1<<50 {
		return 0, off, syscall.EFBIG
	}
	n, err := c.write(ctx, st, off, iovs, total)
	return n, off, err
}

// WriteV writes the concatenation of iovs at off. The vector is one
// contiguous stream: where its pieces begin and end does not matter, only
// file offsets do.
func (f *File) WriteV(ctx context.Context, off int64, iovs [][]byte) (int, error) {
	if off < 0 {
		return 0, syscall.EINVAL
	}
	total := 0
	for _, v := range iovs {
		total += len(v)
	}
	if total == 0 {
		return 0, nil
	}
	raise(&f.c.counters.largestWrite, int64(total))
	if uint64(off)+uint64(total) > 1<<50 {
		return 0, syscall.EFBIG
	}
	st := f.st
	c := f.c
	_, release, err := c.dataLock(ctx, st, proto.LockPW, uint64(off), uint64(off)+uint64(total))
	if err != nil {
		return 0, err
	}
	defer release()
	if err := c.cover(ctx, st, uint64(off)+uint64(total)); err != nil {
		return 0, err
	}
	if err := c.waitForMemory(ctx, int64(total)+st.wb.size); err != nil {
		return 0, err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if err := c.waitForFileMemory(ctx, st); err != nil {
		return 0, err
	}
	return c.write(ctx, st, off, iovs, total)
}

// slice returns the bytes [from, from+n) of the concatenated iovs as
// sub-slices, without copying.
func slice(iovs [][]byte, from, n int) [][]byte {
	var out [][]byte
	for _, v := range iovs {
		if n == 0 {
			break
		}
		if from >= len(v) {
			from -= len(v)
			continue
		}
		piece := v[from:min(len(v), from+n)]
		out = append(out, piece)
		n -= len(piece)
		from = 0
	}
	return out
}

// Flush sends this client's dirty data to the OSTs and its size and mtime
// to the MDT, so other clients see them after close (close-to-open). It
// reports any earlier background flush failure.
func (f *File) Flush(ctx context.Context) error {
	st := f.st
	st.mu.Lock()
	if _, _, ok := f.c.closeCarries(st); ok {
		// The release's close carries it (closewrite.go).
		defer st.mu.Unlock()
		return st.takeLost()
	}
	st.mu.Unlock()
	err := f.c.flushAll(f.st)
	st.mu.Lock()
	defer st.mu.Unlock()
	if lost := st.takeLost(); err == nil {
		err = lost
	}
	if aerr := f.flushAttrs(ctx, false); err == nil {
		err = aerr
	}
	return err
}

// flushAttrs sends dirty size and mtime; st.mu is held.
func (f *File) flushAttrs(ctx context.Context, sync bool) error {
	st := f.st
	if !st.dirty {
		if sync {
			return f.c.SyncMDT(ctx, st.fid)
		}
		return nil
	}
	req := &proto.SetattrReq{FID: st.fid, Valid: proto.SetSize | proto.SetMtime, Size: st.size, Mtime: st.mtime, Sync: sync, FromWrites: true}
	if err := f.c.mdtCall(ctx, st.fid, proto.MSetattr, req, &proto.AttrReply{}); err != nil {
		return err
	}
	st.dirty = false
	st.sizeSent = true
	f.c.sizeReported(st)
	return nil
}

// Fsync makes the file's data and attributes durable: every object is
// synced on its OST, then the size is committed on the MDT.
func (f *File) Fsync(ctx context.Context) error {
	if err := f.c.flushAll(f.st); err != nil {
		return err
	}
	st := f.st
	st.mu.Lock()
	osts := st.layout.OSTs
	st.mu.Unlock()
	byOST := map[uint32][]proto.ObjID{}
	for s, ost := range osts {
		byOST[ost] = append(byOST[ost], proto.ObjID{FID: st.fid, Stripe: uint32(s)})
	}
	g, gctx := errgroup.WithContext(ctx)
	for ost, objs := range byOST {
		g.Go(func() error {
			return f.c.ostCall(gctx, ost, proto.OSync, &proto.OSyncReq{Objs: objs}, &proto.Empty{})
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if err := st.takeLost(); err != nil {
		return err
	}
	return f.flushAttrs(ctx, true)
}

// Release closes the handle. The last close of a file tells the MDT, which
// may then ask for an unlinked file's objects to be destroyed. The file
// stays known to this client until the MDT has the size the close
// reports, so attributes read meanwhile are overlaid (see overlay), and an
// open meanwhile shares its state.
func (f *File) Release(ctx context.Context) error {
	c, st := f.c, f.st
	var ferr error
	cw := c.takeCloseWrite(st)
	if cw == nil {
		ferr = c.flushAll(st)
	}
	cancel := c.unusedIntent(st)
	st.mu.Lock()
	if lost := st.takeLost(); ferr == nil {
		ferr = lost
	}
	req := &proto.CloseReq{FID: st.fid, Flags: uint32(f.Flags), SetSize: st.dirty, Size: st.size, Mtime: st.mtime, Cancel: cancel}
	st.dirty = false
	st.reporting++
	st.mu.Unlock()
	var dg *heldLock
	if cw != nil {
		if dg = c.startDowngrade(st); dg != nil {
			req.Downgrade = dg.d.ID
		}
	}
	var r proto.CloseReply
	var err error
	carried := false
	if cw != nil {
		if err = c.closeWith(ctx, st, req, cw, &r); err == nil {
			carried = true
		} else {
			// Nothing was closed: the data goes apart, its error is the
			// close's.
			c.log(slog.LevelWarn, fmt.Sprintf("stripefs: %v; flushing it apart", err), "fid", st.fid.String())
			ferr = c.flushAll(st)
		}
	}
	if cw == nil || err != nil {
		err = c.mdtCall(ctx, st.fid, proto.MClose, req, &r)
	}
	if dg != nil {
		c.endDowngrade(dg, err == nil && r.Downgraded)
	}
	st.mu.Lock()
	st.reporting--
	st.wb.done.Broadcast() // waitReports
	if err == nil && !carried {
		c.sizeReported(st) // (closeWith reported a carried write's)
	} else if err != nil && req.SetSize {
		st.dirty = true // the next flush or close reports it again
	}
	if err == nil && (req.SetSize || carried) {
		st.sizeSent = true
	}
	c.filesMu.Lock()
	st.refs--
	c.filesMu.Unlock()
	c.leaveLocked(st, err == nil)
	st.mu.Unlock()
	if err != nil {
		return err
	}
	if r.Destroy {
		c.forgetLocks(st.fid, true) // the MDT dropped them too
		c.destroyObjects(r.Attr)
	}
	return ferr
}

// leaveLocked forgets st once no handle has it open and no size report
// of it is on its way (a lock's LVB may land after the last release:
// lvbDelivered); st.mu is held. With note,
// what the state says of the size is noted if a report of it reached the
// MDT in its life (a close, a flush, an LVB), so that overlay finds one
// or the other for a reply that predates the report (an open the kernel
// sent before this release came back): the state's size now, not the
// last report's, since another handle's may have reported a larger one
// since.
func (c *Client) leaveLocked(st *inodeState, note bool) {
	c.filesMu.Lock()
	gone := st.refs == 0 && st.reporting == 0 && c.files[st.fid] == st
	if gone {
		delete(c.files, st.fid)
		if note && st.sizeSent {
			c.closed.note(st.fid, reportedSize{size: st.size, mtime: st.mtime, epoch: st.reported, cut: st.cut})
		}
	}
	c.filesMu.Unlock()
	if gone {
		c.dropDirty(st) // what still failed to flush dies with the last handle
		c.dropReadahead(st, 0)
	}
}

// dropDirty discards a file's unflushable data. st.mu is held.
func (c *Client) dropDirty(st *inodeState) {
	for idx, ch := range st.wb.dirty {
		delete(st.wb.dirty, idx)
		c.freeChunk(st, ch)
	}
	c.memFreed()
}

// ostDo sends call to the target of layout entry ost: an OST, or the MDT
// holding a Data-on-MDT component.
func (c *Client) ostDo(ctx context.Context, ost uint32, call *rpc.Call) error {
	r, err := c.target(ctx, proto.KindOST, ost)
	if err != nil {
		return err
	}
	if err := c.call(ctx, r, call); err != nil {
		return fmt.Errorf("%s: %w", targetOf(ost), err)
	}
	return nil
}

// targetOf names a layout entry's target in errors: "ost3" or "mdt0".
func targetOf(ost uint32) string {
	if proto.IsDoMOST(ost) {
		return proto.OSTName(ost)
	}
	return "ost" + proto.OSTName(ost)
}

func (c *Client) ostCall(ctx context.Context, ost uint32, method uint16, req, resp any) error {
	return c.ostDo(ctx, ost, &rpc.Call{Method: method, Req: req, Resp: resp})
}
