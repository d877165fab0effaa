package fs

import (
	"context"
	"fmt"
	"syscall"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"

	"github.com/stripefs/stripefs/layout"
	"github.com/stripefs/stripefs/proto"
)

// Fallocate is fallocate(2) on the file: mode 0 allocates the range
// (growing the size past it), FALLOC_FL_KEEP_SIZE allocates without
// growing it, FALLOC_FL_PUNCH_HOLE|KEEP_SIZE frees the range (it reads
// as zeros), FALLOC_FL_ZERO_RANGE zeros it, allocated. Each object's
// share of the range is done by its OST, which charges quota and space
// for what it allocates. EOPNOTSUPP for what makes no sense on striped
// objects: COLLAPSE_RANGE and INSERT_RANGE (they would move data between
// objects), UNSHARE_RANGE (no shared extents here), and punching or
// zeroing an erasure-coded file (the row's parity would have to be
// rewritten with it; allocating it is fine: parity of zeros is zeros).
func (f *File) Fallocate(ctx context.Context, mode uint32, off, length uint64) error {
	st, c := f.st, f.c
	const known = unix.FALLOC_FL_KEEP_SIZE | unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_ZERO_RANGE
	punch, zero := mode&unix.FALLOC_FL_PUNCH_HOLE != 0, mode&unix.FALLOC_FL_ZERO_RANGE != 0
	keep := mode&unix.FALLOC_FL_KEEP_SIZE != 0
	end := off + length
	switch {
	case mode&^known != 0:
		return fmt.Errorf("fallocate mode %#x: %w", mode, syscall.EOPNOTSUPP)
	case punch && (zero || !keep):
		return fmt.Errorf("fallocate: punching a hole needs KEEP_SIZE alone: %w", syscall.EOPNOTSUPP)
	case length == 0 || end < off || end > 1<<50:
		return fmt.Errorf("fallocate [%d, +%d): %w", off, length, syscall.EINVAL)
	}
	obj := proto.FallocAllocate
	switch {
	case punch:
		obj = proto.FallocPunch
	case zero:
		obj = proto.FallocZero
	}
	size, err := f.fallocateObjects(ctx, obj, off, end)
	if err != nil {
		return err
	}
	// What the file shows: a size grown past the range (not with
	// KEEP_SIZE), a new mtime where its bytes changed, and a new ctime
	// always (the MDT sets it with any setattr, an empty one too, which a
	// writer who is not the owner may send): its blocks changed, and a
	// new ctime is what makes every client measure them again
	// (blocks.go).
	req := &SetAttr{FID: st.fid}
	if !keep && end > size {
		req.Valid |= proto.SetSize
		req.Size = end
	}
	if obj != proto.FallocAllocate {
		req.Valid |= proto.SetMtimeNow
	}
	_, err = c.Setattr(ctx, req)
	return err
}

// fallocateObjects does obj to each object's share of [off, end) under
// the whole file's write lock (other clients flush and forget what they
// cached of it), and returns the size the file had.
func (f *File) fallocateObjects(ctx context.Context, obj uint8, off, end uint64) (uint64, error) {
	st, c := f.st, f.c
	_, release, err := c.dataLock(ctx, st, proto.LockPW, 0, proto.LockEOF)
	if err != nil {
		return 0, err
	}
	defer release()
	if obj != proto.FallocPunch {
		if err := c.cover(ctx, st, end); err != nil {
			return 0, err
		}
	}
	if obj != proto.FallocAllocate {
		// Cached data in the range goes out first, so the hole or the
		// zeros are not overwritten by it later.
		if err := c.flushAll(st); err != nil {
			return 0, err
		}
	}
	// The size from the MDT as well as this client's: without a lock
	// (-o nolock) what the client knew may be older than another's
	// growth, and a size set from it would cut that off.
	a, err := c.Getattr(ctx, st.fid)
	if err != nil {
		return 0, err
	}
	st.mu.Lock()
	lay, size := st.layout, max(st.size, a.Size)
	st.mu.Unlock()
	if ep, ok := layout.ECPartOf(lay); ok && obj != proto.FallocAllocate && off < ep.End && end > ep.Start {
		return 0, fmt.Errorf("fallocate: punching or zeroing an erasure-coded file or component: %w", syscall.EOPNOTSUPP)
	}
	owner, err := c.ownerOf(ctx, st.fid)
	if err != nil {
		return 0, err
	}
	g, gctx := errgroup.WithContext(ctx)
	for s, ost := range lay.OSTs {
		from, to := layout.ObjectRange(lay, off, end, s)
		if to <= from {
			continue
		}
		req := &proto.OFallocateReq{Obj: proto.ObjID{FID: st.fid, Stripe: uint32(s)}, Off: from, Len: to - from, Mode: obj, Owner: owner}
		g.Go(func() error { return c.ostCall(gctx, ost, proto.OFallocate, req, &proto.Empty{}) })
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	if obj != proto.FallocAllocate {
		c.dropReadaheadRange(st, off, end)
	}
	return size, nil
}
