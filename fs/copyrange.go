package fs

import (
	"context"
	"fmt"
	"syscall"

	"golang.org/x/sync/errgroup"

	"github.com/stripefs/stripefs/layout"
	"github.com/stripefs/stripefs/proto"
)

// copyMax bounds one CopyRange: copy_file_range(2) may copy less than
// asked, and cp and friends call again for the rest.
const copyMax = 1 << 30

// CopyRange is copy_file_range(2) from src at inOff to f at outOff: up to
// n bytes, fewer past src's end (0 at or past it). Each piece, cut where
// a stripe unit of either file ends, is copied by the OST of its
// destination object from its source object (ost_copy): the data does
// not pass through this client, nor the network when both objects are on
// one OST. It holds the read lock of the source range and the write lock
// of the destination file meanwhile, after flushing what this client
// has cached of either, so the copy sees every client's writes and every
// client sees the copy. Erasure-coded and composite files, on either
// side, are copied through the client: a row's parity comes from all of
// its data, and a component may need objects first.
func (f *File) CopyRange(ctx context.Context, src *File, inOff, outOff, n uint64) (uint64, error) {
	n = min(n, copyMax)
	if n == 0 {
		return 0, nil
	}
	if inOff > 1<<50 || outOff > 1<<50 {
		return 0, fmt.Errorf("copy_file_range at %d to %d: %w", inOff, outOff, syscall.EFBIG)
	}
	c, s, d := f.c, src.st, f.st
	s.mu.Lock()
	sLay := s.layout
	s.mu.Unlock()
	d.mu.Lock()
	dLay := d.layout
	d.mu.Unlock()
	if sLay.IsEC() || dLay.IsEC() || sLay.IsComposite() || dLay.IsComposite() {
		return f.copyThrough(ctx, src, inOff, outOff, n)
	}
	release, err := c.copyLocks(ctx, s, d, inOff, inOff+n)
	if err != nil {
		return 0, err
	}
	defer release()
	srcSize, err := c.sizeNow(ctx, s)
	if err != nil {
		return 0, err
	}
	if inOff >= srcSize {
		return 0, nil
	}
	n = min(n, srcSize-inOff)
	dstSize, err := c.sizeNow(ctx, d)
	if err != nil {
		return 0, err
	}
	owner, err := c.ownerOf(ctx, d.fid)
	if err != nil {
		return 0, err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(c.opts.RPCsInFlight)
	for _, sc := range layout.Map(sLay, inOff, int(n)) {
		to := outOff + (sc.FileOff - inOff)
		srcOST := sLay.OSTs[sc.Stripe]
		t, err := c.target(ctx, proto.KindOST, srcOST)
		if err != nil {
			return 0, err
		}
		for _, dc := range layout.Map(dLay, to, sc.Len) {
			for done := 0; done < dc.Len; {
				ln := min(dc.Len-done, maxRPC)
				req := &proto.OCopyReq{
					Obj: proto.ObjID{FID: d.fid, Stripe: uint32(dc.Stripe)}, Off: dc.ObjOff + uint64(done),
					Src: proto.ObjID{FID: s.fid, Stripe: uint32(sc.Stripe)}, SrcOff: sc.ObjOff + (dc.FileOff - to) + uint64(done),
					Len: uint32(ln), SrcOST: srcOST, SrcAddr: t.Addr, Owner: owner,
				}
				dstOST := dLay.OSTs[dc.Stripe]
				g.Go(func() error { return c.ostCall(gctx, dstOST, proto.OCopy, req, &proto.Empty{}) })
				done += ln
			}
		}
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	c.counters.copiedBytes.Add(int64(n))
	c.dropReadaheadRange(d, outOff, outOff+n)
	// The destination changed as a write changes it: mtime, and the
	// size when the copy went past its end.
	req := &SetAttr{FID: d.fid, Valid: proto.SetMtimeNow}
	if outOff+n > dstSize {
		req.Valid |= proto.SetSize
		req.Size = outOff + n
	}
	if _, err := c.Setattr(ctx, req); err != nil {
		return 0, err
	}
	return n, nil
}

// copyLocks takes the read lock of src's range and the write lock of all
// of dst (one write lock when they are one file), in FID order so that
// two clients copying each into the other's file wait in turn rather
// than on each other, and flushes what this client has dirty of both.
func (c *Client) copyLocks(ctx context.Context, src, dst *inodeState, start, end uint64) (func(), error) {
	type want struct {
		st         *inodeState
		mode       uint8
		start, end uint64
	}
	ws := []want{{src, proto.LockPR, start, end}, {dst, proto.LockPW, 0, proto.LockEOF}}
	switch {
	case src == dst:
		ws = ws[1:]
	case dst.fid.Ino() < src.fid.Ino():
		ws[0], ws[1] = ws[1], ws[0]
	}
	var releases []func()
	release := func() {
		for i := len(releases) - 1; i >= 0; i-- {
			releases[i]()
		}
	}
	for _, w := range ws {
		_, r, err := c.dataLock(ctx, w.st, w.mode, w.start, w.end)
		if err != nil {
			release()
			return nil, err
		}
		releases = append(releases, r)
		if err := c.flushAll(w.st); err != nil {
			release()
			return nil, err
		}
	}
	return release, nil
}

// sizeNow is st's size from its MDT as well as this client's: without a
// lock (-o nolock) what the client knew may be older than another's
// growth.
func (c *Client) sizeNow(ctx context.Context, st *inodeState) (uint64, error) {
	a, err := c.Getattr(ctx, st.fid)
	if err != nil {
		return 0, err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return max(st.size, a.Size), nil
}

// copyThrough copies by reading into this client and writing out, a
// stripe's worth at a time, for the layouts the OSTs cannot copy between.
func (f *File) copyThrough(ctx context.Context, src *File, inOff, outOff, n uint64) (uint64, error) {
	buf := make([]byte, min(n, maxRPC))
	var done uint64
	for done < n {
		p := buf[:min(uint64(len(buf)), n-done)]
		got, err := src.ReadAt(ctx, p, int64(inOff+done))
		if err != nil {
			return done, err
		}
		if got == 0 {
			break
		}
		if _, err := f.WriteAt(ctx, p[:got], int64(outOff+done)); err != nil {
			return done, err
		}
		done += uint64(got)
	}
	f.c.counters.copiedThroughBytes.Add(int64(done))
	return done, nil
}
