package ost

import (
	"context"
	"errors"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/stripefs/stripefs/proto"
)

// fallocate is fallocate(2) on a range of an object, always with
// KEEP_SIZE: an object's size is not the file's (the MDT keeps that), and
// a hole past an object's end is its business. Allocating and zeroing
// are charged as an allocating write is (quota first, then space, never
// beyond what the OST may give; only the blocks really added count, as
// FIEMAP tells them), punching gives blocks back. It runs under the
// object's shared lock, as writes do: the client holds the file's write
// lock, so no other client writes the range meanwhile.
func (o *OST) fallocate(ctx context.Context, r *proto.OFallocateReq) (any, error) {
	if err := o.writable(ctx, "fallocate", r.Obj); err != nil {
		return nil, err
	}
	var mode uint32
	switch r.Mode {
	case proto.FallocAllocate:
		mode = unix.FALLOC_FL_KEEP_SIZE
	case proto.FallocPunch:
		mode = unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_KEEP_SIZE
	case proto.FallocZero:
		mode = unix.FALLOC_FL_ZERO_RANGE | unix.FALLOC_FL_KEEP_SIZE
	default:
		return nil, o.errorf("fallocate", r.Obj, syscall.EINVAL)
	}
	end := r.Off + r.Len
	if r.Len == 0 || end < r.Off || end > 1<<50 {
		return nil, o.errorf("fallocate", r.Obj, syscall.EINVAL)
	}
	mu := o.lock(r.Obj)
	mu.RLock()
	defer mu.RUnlock()
	if err := o.unInline(r.Obj, r.Mode != proto.FallocPunch); err != nil {
		return nil, o.errorf("fallocate", r.Obj, err)
	}
	of, err := o.get(r.Obj, r.Mode != proto.FallocPunch)
	if errors.Is(err, os.ErrNotExist) {
		return &proto.Empty{}, nil // a hole punched in no object
	}
	if err != nil {
		return nil, o.errorf("fallocate", r.Obj, err)
	}
	defer o.put(of)
	am := o.allocLock(r.Obj)
	am.Lock()
	defer am.Unlock()
	rec, had, err := o.idx.object(r.Obj)
	if err != nil {
		return nil, o.errorf("fallocate", r.Obj, err)
	}
	if r.Mode == proto.FallocPunch {
		// ext4 punches nothing past a file's end, where blocks allocated
		// with KEEP_SIZE (or the file's own size growing past the
		// object's) may lie: the object grows to the hole's end first.
		// Its size is nobody's but its own; the hole reads as zeros.
		if _, size, err := o.allocated(of); err == nil && size < end {
			if err := of.f.Truncate(int64(end)); err != nil {
				return nil, o.errorf("fallocate", r.Obj, err)
			}
		}
		if err := of.f.Fallocate(mode, int64(r.Off), int64(r.Len)); err != nil {
			o.diskFailed("fallocate", r.Obj, err)
			return nil, o.errorf("fallocate", r.Obj, err)
		}
		if err := o.shrunk(of, rec, had); err != nil {
			return nil, o.errorf("fallocate", r.Obj, err)
		}
		return &proto.Empty{}, nil
	}
	est, known := o.ext.unallocated(of.f.Fd(), r.Off, end)
	if !known {
		est = r.Len
	}
	res, err := o.space.admit(ctx, 0, r.Owner, est, true)
	if err != nil {
		return nil, o.errorf("fallocate", r.Obj, err)
	}
	o.noteOwner(of, r.Owner)
	ferr := of.f.Fallocate(mode, int64(r.Off), int64(r.Len))
	if ferr != nil {
		o.diskFailed("fallocate", r.Obj, ferr)
	}
	after, size, err := o.allocated(of)
	if err != nil {
		after, size = rec.Bytes+est, rec.Size
		ferr = errors.Join(ferr, err)
	}
	// Settle even after a failure: some blocks may have been allocated.
	if _, err := o.space.settle(res, r.Obj, rec, had, after, size, 0, nil); err != nil {
		ferr = errors.Join(ferr, err)
	}
	if ferr != nil {
		return nil, o.errorf("fallocate", r.Obj, ferr)
	}
	o.ctr.newAllocations.Add(1)
	return &proto.Empty{}, nil
}
