package fs

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/stripefs/stripefs/ldlm"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// Application locks (fcntl, OFD, flock) held across clients: granted by
// the MDT of the file (mds/lockd), so a lock taken on one mount excludes
// the same lock on every other. The client keeps its own copy of what it
// holds (the same ldlm.Flocks arithmetic, with its locks only) to replay
// them after an MDT restart, and to know which closes must tell the MDT.

// FlockLock is one application lock operation as a frontend asks it.
type FlockLock struct {
	Kind  uint8 // proto.FlockPOSIX or FlockBSD
	Type  uint8 // proto.FlockRead or FlockWrite
	Owner uint64
	Start uint64 // [Start, End)
	End   uint64
	Pid   uint32
}

// FlockConflict is the lock F_GETLK reports.
type FlockConflict struct {
	Type       uint8 // 0: none
	Start, End uint64
	Pid        uint32 // the holder's process, if it is on this client; else 0
}

type flockTable struct {
	mu      sync.Mutex
	mine    *ldlm.Flocks // what this client holds, under the name "me"
	cookies atomic.Uint64

	sets, waits, interrupted atomic.Int64
}

const me = "me"

func (t *flockTable) table() *ldlm.Flocks {
	if t.mine == nil {
		t.mine = ldlm.NewFlocks()
	}
	return t.mine
}

func (l *FlockLock) check() error {
	r := ldlm.Flock{Kind: ldlm.FlockKind(l.Kind), Type: ldlm.FlockType(l.Type), Owner: ldlm.FlockOwner{Client: me, ID: l.Owner}, Start: l.Start, End: l.End}
	if err := ldlm.CheckFlock(&r); err != nil {
		return fmt.Errorf("%v: %w", err, syscall.EINVAL)
	}
	return nil
}

// Flock takes an application lock on fid. Without wait a conflicting lock
// anywhere gives EAGAIN; with wait it blocks until granted (the MDT
// answers when the holders let go) or ctx ends (EINTR: the MDT withdraws
// the wait), or EDEADLK when the wait would close a cycle.
func (c *Client) Flock(ctx context.Context, fid proto.FID, l FlockLock, wait bool) error {
	if err := l.check(); err != nil {
		return err
	}
	ft := &c.flocks
	ft.sets.Add(1)
	req := &proto.FlockReq{Op: proto.FlockSet, Res: fid, Kind: l.Kind, Type: l.Type, Owner: l.Owner, Start: l.Start, End: l.End,
		Pid: l.Pid, Wait: wait, Cookie: ft.cookies.Add(1)}
	var err error
	if !wait {
		err = c.mdtCall(ctx, fid, proto.MFlock, req, &proto.FlockReply{})
	} else {
		ft.waits.Add(1)
		err = c.flockWait(ctx, fid, req)
	}
	if err != nil {
		return err
	}
	ft.mu.Lock()
	ft.table().Set(ldlm.Flock{Res: fid, Kind: ldlm.FlockKind(l.Kind), Owner: ldlm.FlockOwner{Client: me, ID: l.Owner},
		Type: ldlm.FlockType(l.Type), Start: l.Start, End: l.End, Pid: l.Pid}, false)
	ft.mu.Unlock()
	return nil
}

// flockWait sends a waiting Set and, if ctx ends first, withdraws it:
// the MDT answers the Set then (EINTR), or it was granted just before, in
// which case the lock is given back.
func (c *Client) flockWait(ctx context.Context, fid proto.FID, req *proto.FlockReq) error {
	done := make(chan error, 1)
	go func() {
		done <- c.mdtCall(context.WithoutCancel(ctx), fid, proto.MFlock, req, &proto.FlockReply{})
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	c.flocks.interrupted.Add(1)
	cctx, cancel := context.WithTimeout(context.Background(), c.opts.RetryFor)
	defer cancel()
	_ = c.mdtCall(cctx, fid, proto.MFlock, &proto.FlockReq{Op: proto.FlockCancel, Res: fid, Kind: req.Kind, Cookie: req.Cookie}, &proto.FlockReply{})
	if err := <-done; err == nil {
		// Granted as we withdrew it: the program was interrupted and does
		// not hold it.
		_ = c.mdtCall(cctx, fid, proto.MFlock, &proto.FlockReq{Op: proto.FlockUnlock, Res: fid, Kind: req.Kind, Owner: req.Owner,
			Start: req.Start, End: req.End}, &proto.FlockReply{})
	}
	return fmt.Errorf("flock wait on %s: %w", fid, syscall.EINTR)
}

// FlockTest returns the lock in the way of l (F_GETLK), Type 0 if none.
func (c *Client) FlockTest(ctx context.Context, fid proto.FID, l FlockLock) (FlockConflict, error) {
	if err := l.check(); err != nil {
		return FlockConflict{}, err
	}
	var r proto.FlockReply
	req := &proto.FlockReq{Op: proto.FlockTest, Res: fid, Kind: l.Kind, Type: l.Type, Owner: l.Owner, Start: l.Start, End: l.End}
	if err := c.mdtCall(ctx, fid, proto.MFlock, req, &r); err != nil {
		return FlockConflict{}, err
	}
	out := FlockConflict{Type: r.Type, Start: r.Start, End: r.End}
	if r.Mine {
		out.Pid = r.Pid
	}
	return out, nil
}

// FlockUnlock gives up owner's locks of kind in [start, end) of fid.
//
// The range leaves this client's table before the unlock is sent, as
// FlockRelease does: an MDT that restarts after doing the unlock (and
// granting a waiter on another client) but before its answer arrives
// must not be given the lock back by this client's replay, which would
// refuse the waiter's replay and leave two owners each thinking it holds
// the range. The unlock's resend finds nothing to unlock.
func (c *Client) FlockUnlock(ctx context.Context, fid proto.FID, kind uint8, owner, start, end uint64) error {
	if start >= end {
		return syscall.EINVAL
	}
	ft := &c.flocks
	ft.mu.Lock()
	ft.table().Unlock(fid, ldlm.FlockKind(kind), ldlm.FlockOwner{Client: me, ID: owner}, start, end)
	ft.mu.Unlock()
	return c.mdtCall(ctx, fid, proto.MFlock, &proto.FlockReq{Op: proto.FlockUnlock, Res: fid, Kind: kind, Owner: owner, Start: start, End: end}, &proto.FlockReply{})
}

// FlockRelease gives up every lock of kind that owner holds on fid (the
// close of a file, for POSIX locks any close by the process); it costs an
// RPC only if owner holds one.
func (c *Client) FlockRelease(ctx context.Context, fid proto.FID, kind uint8, owner uint64) error {
	ft := &c.flocks
	ft.mu.Lock()
	holds := ft.mine != nil && ft.mine.HasOwner(fid, ldlm.FlockKind(kind), ldlm.FlockOwner{Client: me, ID: owner})
	if holds {
		ft.table().Unlock(fid, ldlm.FlockKind(kind), ldlm.FlockOwner{Client: me, ID: owner}, 0, ldlm.EOF)
	}
	ft.mu.Unlock()
	if !holds {
		return nil
	}
	return c.mdtCall(ctx, fid, proto.MFlock, &proto.FlockReq{Op: proto.FlockRelease, Res: fid, Kind: kind, Owner: owner}, &proto.FlockReply{})
}

// replayFlocks puts this client's application locks on a restarted MDT
// back; those it refuses are forgotten (their holders will find them
// gone, as after an eviction).
func (c *Client) replayFlocks(mdt uint32, do func(*rpc.Call) error) {
	ft := &c.flocks
	ft.mu.Lock()
	var reqs []proto.FlockReq
	var locks []ldlm.Flock
	if ft.mine != nil {
		for _, l := range ft.mine.All() {
			if uint32(l.Res.MDT()) == mdt {
				locks = append(locks, l)
				reqs = append(reqs, proto.FlockReq{Op: proto.FlockSet, Res: l.Res, Kind: uint8(l.Kind), Type: uint8(l.Type),
					Owner: l.Owner.ID, Start: l.Start, End: l.End, Pid: l.Pid})
			}
		}
	}
	ft.mu.Unlock()
	if len(reqs) == 0 {
		return
	}
	var r proto.LockReplayReply
	err := do(&rpc.Call{Method: proto.MFlockReplay, Req: &proto.FlockReplayReq{Locks: reqs}, Resp: &r})
	ft.mu.Lock()
	defer ft.mu.Unlock()
	for i, l := range locks {
		if err != nil || i >= len(r.OK) || !r.OK[i] {
			ft.mine.Unlock(l.Res, l.Kind, l.Owner, l.Start, l.End)
			c.locks.replayRefused.Add(1)
		} else {
			c.locks.replayed.Add(1)
		}
	}
}

// dropMDTFlocks forgets the application locks mdt granted (it evicted
// this client).
func (c *Client) dropMDTFlocks(mdt uint32) {
	ft := &c.flocks
	ft.mu.Lock()
	defer ft.mu.Unlock()
	if ft.mine == nil {
		return
	}
	for _, l := range ft.mine.All() {
		if uint32(l.Res.MDT()) == mdt {
			ft.mine.Unlock(l.Res, l.Kind, l.Owner, l.Start, l.End)
		}
	}
}

func (c *Client) flockCounters() []Counter {
	ft := &c.flocks
	ft.mu.Lock()
	held := 0
	if ft.mine != nil {
		held = ft.mine.Stats().Held
	}
	ft.mu.Unlock()
	return []Counter{
		{"flocks_held", int64(held)},
		{"flock_sets", ft.sets.Load()},
		{"flock_waits", ft.waits.Load()},
		{"flock_waits_interrupted", ft.interrupted.Load()},
	}
}
