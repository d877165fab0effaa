package fs

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// The client's side of the lock service (package ldlm decides, mds/lockd
// serves). The client caches only under locks the MDTs grant, and gives a
// lock up when called back, after flushing and dropping what it covers:
//
//   - data: a write takes a PW extent lock on the file, a read PR (or
//     the PW it has). Dirty chunks and read-ahead exist only under a
//     lock covering them; a cancel flushes the dirty ones first, reports
//     the size and mtime the writes made (the LVB), and drops the
//     read-ahead. A grant carries the file's size as of the grant, which
//     includes what every writer called back for it reported.
//   - metadata: lookups, getattrs and creates ask for Lookup and Update
//     locks, granted with their replies when nothing conflicts; the
//     frontend lets its kernel cache an entry or a file's attributes only
//     while the matching lock is held (CachesEntry, KeptAttr), and is
//     told to drop them when the lock goes (Invalidator).
//
// Locks outlive opens and are kept until called back or until more than
// LRUSize are held, when the least recently used unused ones are
// cancelled in the background (Lustre's lru_size).

// Invalidator is told what a frontend's caches above the client (the
// kernel's) must drop when a lock goes. Its methods must not wait long: a
// cancel waits for them (at most invalidateWait, then goes on).
type Invalidator interface {
	// InvalidateAttr drops fid's cached attributes.
	InvalidateAttr(fid proto.FID)
	// InvalidateEntries drops every cached name that leads to fid.
	InvalidateEntries(fid proto.FID)
	// InvalidateData drops fid's cached data in [off, off+n) (n < 0: to
	// the end).
	InvalidateData(fid proto.FID, off, n int64)
}

// invalidateWait bounds how long a cancel waits for the frontend to drop
// its caches. A kernel that holds the pages or the directory for an
// operation of its own answers only when that operation ends, and that
// operation may wait for this very cancel: the cancel goes on, and the
// invalidation completes when the kernel gets to it.
const invalidateWait = 200 * time.Millisecond

// DefaultLRUSize is how many locks a client keeps by default.
const DefaultLRUSize = 20000

// heldLock is a lock this client holds.
type heldLock struct {
	d     proto.LockDesc
	mdt   uint32 // the MDT that granted it
	users int    // operations using it now; a cancel waits for them
	// cancelling: a cancel is under way; new operations do not use it.
	cancelling bool
	// downgrading: a close is turning this write lock into a read lock
	// (closewrite.go); new writes do not use it.
	downgrading bool
	done        chan struct{} // closed when the cancel is over
	lvb         proto.LVB     // what the cancel's flush made of the size, once done
	// reportOf is the file state whose size lvb reports, counted as a
	// report on its way until the MDT has it in order (delivered).
	reportOf *inodeState
	elem     *list.Element // in the LRU
	// given is when the frontend last let its cache keep what the lock
	// guards (unix nanoseconds): past the frontend's cache timeout there
	// is nothing to drop when the lock goes.
	given atomic.Int64
}

func (l *heldLock) covers(mode uint8, start, end uint64) bool {
	return l.d.Kind == proto.LockExtent && !l.cancelling && ((l.d.Mode == proto.LockPW && !l.downgrading) || mode == proto.LockPR) &&
		l.d.Start <= start && end <= l.d.End
}

// lockTable is what the client holds, guarded by its mu.
type lockTable struct {
	mu    sync.Mutex
	byRes map[proto.FID][]*heldLock
	byID  map[uint64]*heldLock
	lru   *list.List // front: most recently used
	cond  *sync.Cond // signalled when users drop
	// revoked are locks the MDT called back before their grant reached
	// this client (revokeLocked).
	revoked recent[uint64, struct{}]
	// sentLVBs are the sizes the last write locks given up reported
	// (cancelHere), for a glimpse that comes before the MDT has them.
	sentLVBs recent[uint64, proto.LVB]
	cookies  atomic.Uint64
	off      bool // NoLocks
	inv      Invalidator
	lruKick  chan struct{} // wakes lruWorker
	cacheTTL atomic.Int64  // the frontend's longest cache timeout (SetCacheTimeout)

	granted, cancelled, lruCancels, blockingCBs, glimpseCBs, enqueueWaits, downgrades atomic.Int64
	enqueueNanos, evictions, replayed, replayRefused, enqueues                        atomic.Int64
}

func (t *lockTable) init(off bool) {
	t.byRes, t.byID, t.lru, t.off = map[proto.FID][]*heldLock{}, map[uint64]*heldLock{}, list.New(), off
	t.revoked, t.sentLVBs = newRecent[uint64, struct{}](revokedKept), newRecent[uint64, proto.LVB](revokedKept)
	t.cond = sync.NewCond(&t.mu)
	t.lruKick = make(chan struct{}, 1)
}

// SetInvalidator names the frontend whose caches locks guard, and the
// longest time it keeps what it caches: a lock whose guarded data was last
// handed to the frontend longer ago than that needs no invalidation when
// it goes. Set it before the first request.
func (c *Client) SetInvalidator(inv Invalidator, ttl time.Duration) {
	c.locks.inv = inv
	c.locks.cacheTTL.Store(int64(ttl))
}

// Coherent reports whether the client caches under locks (not NoLocks).
func (c *Client) Coherent() bool { return !c.locks.off }

// revokedKept bounds the revoked locks remembered, and the sizes of
// given up ones: a grant comes within moments of its callback, a
// glimpse within moments of the cancel it overtakes, and lock IDs are
// never reused.
const revokedKept = 4096

// revokeLocked notes that lock id was called back before its grant came:
// the reply that carries it is on its way, and nothing can have used the
// lock here yet. The callback is answered at once as for a lock not held
// (the MDT drops it), and addLocked refuses the grant when it comes: the
// request that asked for it asks again. Waiting for the grant instead
// would wait for this client's own requests, and one of them may be an
// enqueue queued at the MDT behind this very lock, or an open waiting for
// a glimpse of another client that waits the same way for ours (two
// mounts appending a shared file, two processes each: both evicted after
// the callback timeout). t.mu is held.
func (t *lockTable) revokeLocked(id uint64) {
	t.revoked.put(id, struct{}{})
}

// addLocked records a granted lock; nil if it was called back before it
// came (revokeLocked). t.mu is held.
func (t *lockTable) addLocked(d proto.LockDesc, mdt uint32) *heldLock {
	if l := t.byID[d.ID]; l != nil {
		return l // a resend's answer: the lock we have
	}
	if _, ok := t.revoked.get(d.ID); ok {
		return nil
	}
	l := &heldLock{d: d, mdt: mdt}
	l.elem = t.lru.PushFront(l)
	t.byID[d.ID] = l
	t.byRes[d.Res] = append(t.byRes[d.Res], l)
	t.granted.Add(1)
	return l
}

func (t *lockTable) removeLocked(l *heldLock) {
	if t.byID[l.d.ID] != l {
		return
	}
	delete(t.byID, l.d.ID)
	ls := t.byRes[l.d.Res]
	for i, x := range ls {
		if x == l {
			ls = append(ls[:i], ls[i+1:]...)
			break
		}
	}
	if len(ls) == 0 {
		delete(t.byRes, l.d.Res)
	} else {
		t.byRes[l.d.Res] = ls
	}
	t.lru.Remove(l.elem)
	t.cancelled.Add(1)
}

// hasBits reports whether the client holds a metadata lock with bits on
// fid; with give, it notes that the frontend caches what they guard.
func (t *lockTable) hasBits(fid proto.FID, bits uint8, give bool) bool {
	return t.heldBits(fid, bits, give)&bits == bits
}

// heldBits returns which of bits the client holds metadata locks for on
// fid; with give, it notes that the frontend caches what they guard.
func (t *lockTable) heldBits(fid proto.FID, bits uint8, give bool) uint8 {
	t.mu.Lock()
	defer t.mu.Unlock()
	have := uint8(0)
	var now int64
	for _, l := range t.byRes[fid] {
		if l.d.Kind == proto.LockBits && !l.cancelling && l.d.Bits&bits != 0 {
			have |= l.d.Bits
			if give {
				if now == 0 {
					now = time.Now().UnixNano()
				}
				l.given.Store(now)
			}
		}
	}
	return have & bits
}

// Caches is CachesEntry and the Update lock at once: what a frontend may cache
// of fid now, as lock bits (proto.LockLookup, LockUpdate).
func (c *Client) Caches(fid proto.FID) uint8 {
	if c.locks.off {
		return proto.LockLookup | proto.LockUpdate
	}
	return c.locks.heldBits(fid, proto.LockLookup|proto.LockUpdate, true)
}

// CachesEntry reports whether a frontend may cache a name leading to fid
// now: the client holds fid's Lookup lock.
func (c *Client) CachesEntry(fid proto.FID) bool {
	return c.locks.off || c.locks.hasBits(fid, proto.LockLookup, true)
}

// wantBits is what a metadata request asks for: the locks on fid the
// client does not hold yet.
func (c *Client) wantBits(fid proto.FID, bits uint8) uint8 {
	if c.locks.off {
		return 0
	}
	if !fid.IsZero() && c.locks.hasBits(fid, bits, false) {
		return 0
	}
	return bits
}

// noteLock records a metadata lock that came with a reply from mdt.
func (c *Client) noteLock(mdt uint32, fid proto.FID, g proto.LockGrant) {
	if g.ID == 0 || fid.IsZero() {
		return
	}
	t := &c.locks
	t.mu.Lock()
	t.addLocked(proto.LockDesc{ID: g.ID, Res: fid, Kind: proto.LockBits, Mode: proto.LockPR, Bits: g.Bits}, mdt)
	t.mu.Unlock()
	c.trimLRU()
}

// forgetLocks drops this client's metadata locks on fid, and with all
// its data locks too, without a word to anyone: fid left the namespace by
// this client's own change, whose MDT dropped them too, and this mount's
// kernel dropped what they guarded. Data locks go only once the file is
// destroyed (no name and no open anywhere): nothing of it is cached then.
func (c *Client) forgetLocks(fid proto.FID, all bool) {
	t := &c.locks
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, l := range slices.Clone(t.byRes[fid]) {
		if (all || l.d.Kind == proto.LockBits) && !l.cancelling && l.users == 0 {
			t.removeLocked(l)
		}
	}
}

// dataLock returns a lock on st's file covering [start, end) in mode,
// taking one from the file's MDT if none is held, and a release the
// caller calls once done with it (a cancel waits for that). The grant's
// size refreshes st's.
func (c *Client) dataLock(ctx context.Context, st *inodeState, mode uint8, start, end uint64) (*heldLock, func(), error) {
	t := &c.locks
	if t.off {
		return nil, func() {}, nil
	}
	if row := ecLockAlign(st.layout); row > 0 {
		// A writer must hold whole rows: its partial-row RMW reads the
		// rest of the row, which no one else may be writing.
		start = start / row * row
		if end != proto.LockEOF {
			end = min((end+row-1)/row*row, proto.LockEOF)
		}
	}
	for {
		t.mu.Lock()
		if found := t.coveringLocked(st.fid, mode, start, end); found != nil {
			found.users++
			t.lru.MoveToFront(found.elem)
			t.mu.Unlock()
			return found, func() { t.unuse(found) }, nil
		}
		t.mu.Unlock()
		l, err := c.enqueue(ctx, st, mode, start, end)
		if err != nil {
			return nil, nil, err
		}
		if l != nil {
			return l, func() { t.unuse(l) }, nil
		}
		// Called back before we could use it: try again.
	}
}

// coveringLocked is a lock on fid that lets mode over [start, end), or
// nil. t.mu is held.
func (t *lockTable) coveringLocked(fid proto.FID, mode uint8, start, end uint64) *heldLock {
	for _, l := range t.byRes[fid] {
		if l.covers(mode, start, end) {
			return l
		}
	}
	return nil
}

func (t *lockTable) unuse(l *heldLock) {
	t.mu.Lock()
	l.users--
	if l.users == 0 {
		t.cond.Broadcast()
	}
	t.mu.Unlock()
}

// enqueue asks st's MDT for a data lock, waiting until it is granted. It
// returns the lock in use (users counted), or nil if it was called back
// before it could be used.
func (c *Client) enqueue(ctx context.Context, st *inodeState, mode uint8, start, end uint64) (*heldLock, error) {
	t := &c.locks
	req := &proto.LockEnqueueReq{Lock: proto.LockDesc{Res: st.fid, Kind: proto.LockExtent, Mode: mode, Start: start, End: end},
		Cookie: t.cookies.Add(1)}
	req.Align = ecLockAlign(st.layout)
	t.enqueues.Add(1)
	began := time.Now()
	var r proto.LockEnqueueReply
	stamp := c.attrStamp()
	err := c.mdtCall(ctx, st.fid, proto.MLockEnqueue, req, &r)
	t.enqueueNanos.Add(int64(time.Since(began)))
	if err != nil {
		return nil, fmt.Errorf("lock %s [%d, %d) of %s: %w", modeName(mode), start, end, st.fid, err)
	}
	if time.Since(began) > time.Millisecond {
		t.enqueueWaits.Add(1)
	}
	st.mu.Lock()
	if st.lockedSize {
		st.size = max(st.size, r.Attr.Size)
	} else {
		// Whatever this client knew of the size before it held a lock may
		// be another client's truncate out of date; but not what its own
		// reports on their way say (a release's close carrying the last
		// append while the next open appends): the grant may predate them.
		a := r.Attr
		st.overlayLocked(&a, stamp)
		st.size, st.lockedSize = max(r.Attr.Size, a.Size), true
	}
	st.ecEnd = max(st.ecEnd, r.Attr.Size)
	st.mu.Unlock()
	t.mu.Lock()
	l := t.addLocked(r.Lock, uint32(st.fid.MDT()))
	if l == nil {
		t.mu.Unlock()
		c.grantRefused(st)
		return nil, nil
	}
	if l.cancelling {
		t.mu.Unlock()
		return nil, nil
	}
	l.users++
	t.mu.Unlock()
	c.trimLRU()
	return l, nil
}

func modeName(m uint8) string {
	if m == proto.LockPW {
		return "PW"
	}
	return "PR"
}

// reachesEOF reports whether l extends to the end of the file, so that
// no other client can change the size past it.
func (l *heldLock) reachesEOF() bool { return l == nil || l.d.End == proto.LockEOF }

// handleBlocking is the MDT's call to give a lock up.
func (c *Client) handleBlocking(mdt uint32) rpc.Handler {
	return func(_ context.Context, r *rpc.Request) (rpc.Reply, error) {
		var req proto.BlockingReq
		if err := r.Decode(&req); err != nil {
			return rpc.Reply{}, fmt.Errorf("lock callback: %v: %w", err, syscall.EINVAL)
		}
		c.locks.blockingCBs.Add(1)
		l := c.locks.calledBack(req.ID)
		if l == nil {
			return rpc.Reply{}, syscall.ENOENT
		}
		lvb, delivered := c.cancelLocal(l)
		// The MDT merges the size as its reader reads the answer, before
		// any later request of ours on the connection: it is on the MDT
		// for them once written.
		return rpc.Reply{Msg: &proto.BlockingReply{LVB: lvb}, Done: delivered}, nil
	}
}

// handleGlimpse is the MDT asking what this client's writes made of a
// file's size. It answers from the file's state at once, whether or not
// the lock's grant has reached this client yet: nothing was written under
// a lock not yet known here, and waiting for the grant (as a blocking
// callback does) could wait for this client's own requests, which may
// wait at the MDT for a glimpse of another client that waits the same way
// for ours (two mounts appending one file, each open glimpsing the other:
// both were evicted after the callback timeout).
func (c *Client) handleGlimpse(_ context.Context, r *rpc.Request) (rpc.Reply, error) {
	var req proto.GlimpseReq
	if err := r.Decode(&req); err != nil {
		return rpc.Reply{}, fmt.Errorf("glimpse: %v: %w", err, syscall.EINVAL)
	}
	c.locks.glimpseCBs.Add(1)
	var lvb proto.LVB
	if st := c.openState(req.Res); st != nil {
		st.mu.Lock()
		// A size report on its way (a release's close, which may carry
		// the last write) is not on the MDT yet either.
		if st.dirty || st.reporting > 0 {
			lvb = proto.LVB{Valid: true, Size: st.size, Mtime: st.mtime}
		}
		st.mu.Unlock()
	}
	// The lock was given up with a size the MDT has not merged yet (the
	// answer to its callback, or its cancel, is on its way; the MDT keeps
	// the lock until then): a stat beside it must not show less.
	t := &c.locks
	t.mu.Lock()
	sent, ok := t.sentLVBs.get(req.ID)
	t.mu.Unlock()
	if ok {
		lvb.Valid = true
		lvb.Size, lvb.Mtime = max(lvb.Size, sent.Size), max(lvb.Mtime, sent.Mtime)
	}
	return rpc.Reply{Msg: &proto.GlimpseReply{LVB: lvb}}, nil
}

// calledBack returns lock id for its callback, or nil if this client
// does not hold it: given up already, or granted by a reply still on its
// way (revokeLocked).
func (t *lockTable) calledBack(id uint64) *heldLock {
	t.mu.Lock()
	defer t.mu.Unlock()
	if l := t.byID[id]; l != nil {
		return l
	}
	t.revokeLocked(id)
	return nil
}

// cancelLocal gives up l on this side: no new operation uses it, those
// using it finish, its dirty data is flushed and its read-ahead and the
// frontend's caches dropped; it returns what the writes made of the size
// (the LVB). The MDT learns of the cancel from the caller (a callback's
// answer, or a cancel RPC), which calls delivered once the MDT has the
// LVB, or will before it reads any later request of this client: until
// then the size counts as a report on its way (overlay).
func (c *Client) cancelLocal(l *heldLock) (lvb proto.LVB, delivered func()) {
	lvb, first := c.cancelHere(l, false)
	if !first {
		return lvb, func() {} // the first cancel's caller delivers it
	}
	return lvb, func() { c.lvbDelivered(l) }
}

// lvbDelivered ends the report l's LVB made (dropData).
func (c *Client) lvbDelivered(l *heldLock) {
	t := &c.locks
	t.mu.Lock()
	st := l.reportOf
	l.reportOf = nil
	t.mu.Unlock()
	if st == nil {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.reporting--
	c.sizeReported(st)
	st.sizeSent = true
	st.wb.done.Broadcast()  // waitReports
	c.leaveLocked(st, true) // its last release came first
}

// cancelHere is cancelLocal; with bare, l guarded nothing (a create's
// write lock on a file still empty): nothing is flushed or dropped from
// the frontend's caches. It reports false if l was already being
// cancelled (it then waits for that).
func (c *Client) cancelHere(l *heldLock, bare bool) (proto.LVB, bool) {
	t := &c.locks
	t.mu.Lock()
	if l.cancelling {
		done := l.done
		t.mu.Unlock()
		<-done
		t.mu.Lock()
		defer t.mu.Unlock()
		return l.lvb, false
	}
	l.cancelling = true
	l.done = make(chan struct{})
	for l.users > 0 {
		t.cond.Wait()
	}
	t.mu.Unlock()
	var lvb proto.LVB
	var reportOf *inodeState
	switch {
	case bare:
	case l.d.Kind == proto.LockExtent:
		lvb, reportOf = c.dropData(l)
	case l.d.Kind == proto.LockBits:
		// What the frontend was last given longer ago than it keeps
		// anything has gone from its cache by itself (most of what the
		// LRU gives back): only the names it recorded are forgotten.
		recent := time.Since(time.Unix(0, l.given.Load())) <= time.Duration(t.cacheTTL.Load())
		if l.d.Bits&proto.LockUpdate != 0 {
			c.dirs.forget(l.d.Res) // the getattr the invalidation brings must reach the MDT
		}
		c.invalidate(func(inv Invalidator) {
			if l.d.Bits&proto.LockUpdate != 0 && recent {
				inv.InvalidateAttr(l.d.Res)
			}
			if l.d.Bits&proto.LockLookup != 0 {
				inv.InvalidateEntries(l.d.Res)
			}
		})
	}
	t.mu.Lock()
	t.removeLocked(l)
	l.lvb, l.reportOf = lvb, reportOf
	if lvb.Valid {
		t.sentLVBs.put(l.d.ID, lvb)
	}
	close(l.done)
	t.mu.Unlock()
	return lvb, true
}

// dropData flushes and drops what an extent lock covers; the LVB it
// returns is a report of reportOf's size on its way (lvbDelivered ends it).
func (c *Client) dropData(l *heldLock) (lvb proto.LVB, reportOf *inodeState) {
	if st := c.openState(l.d.Res); st != nil {
		upd := c.locks.heldUpdate(st.fid) // before st.mu: the lock table's mutex is not taken under it
		if l.d.Mode == proto.LockPW {
			if err := c.flushRange(st, l.d.Start, l.d.End); err != nil {
				// Without the lock the data cannot be kept: the program
				// hears of it at its next fsync or close.
				c.log(slog.LevelError, fmt.Sprintf("stripefs: flush of %s for a lock callback: %v; unflushed data dropped", l.d.Res, err),
					"fid", l.d.Res.String())
			}
		}
		st.mu.Lock()
		c.dropReadaheadRange(st, l.d.Start, l.d.End)
		if l.d.Mode == proto.LockPW && (st.dirty || st.reporting > 0) {
			// The answer (or the cancel RPC) carries the size to the MDT.
			// A size report on its way (another handle's release, whose
			// close took the size this handle's append made) is not on
			// the MDT yet either: the next writer's grant would miss it.
			lvb, reportOf = proto.LVB{Valid: true, Size: st.size, Mtime: st.mtime}, st
			st.dirty = false
			// A report like a close's, on its way until delivered: a
			// reply to a request sent before the MDT has it (this
			// client's own enqueue behind this lock, granted with the
			// size from before; a stat sent while the answer waits for
			// the kernel's invalidation) is overlaid with it.
			st.reporting++
			c.fattrs.spoil(st.fid, upd)
		}
		if !c.holdsOtherData(st.fid, l) {
			st.lockedSize = false
		}
		st.mu.Unlock()
	}
	end := int64(-1)
	if l.d.End != proto.LockEOF {
		end = int64(l.d.End - l.d.Start)
	}
	c.invalidate(func(inv Invalidator) { inv.InvalidateData(l.d.Res, int64(l.d.Start), end) })
	return lvb, reportOf
}

// grantRefused undoes, for a data lock's grant that was refused because
// it was called back before it came (revokeLocked), what taking its size
// did: with no data lock held, the size is not this client's to keep.
func (c *Client) grantRefused(st *inodeState) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if !c.holdsOtherData(st.fid, nil) {
		st.lockedSize = false
	}
}

// holdsOtherData reports whether the client holds a data lock on fid
// beside l.
func (c *Client) holdsOtherData(fid proto.FID, l *heldLock) bool {
	t := &c.locks
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, x := range t.byRes[fid] {
		if x != l && x.d.Kind == proto.LockExtent && !x.cancelling {
			return true
		}
	}
	return false
}

// invalidate runs f on the frontend's invalidator, waiting for it at most
// invalidateWait.
func (c *Client) invalidate(f func(Invalidator)) {
	inv := c.locks.inv
	if inv == nil {
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(inv)
	}()
	select {
	case <-done:
	case <-time.After(invalidateWait):
	}
}

// trimLRU wakes the LRU worker once the client holds more than LRUSize
// locks.
func (c *Client) trimLRU() {
	t := &c.locks
	t.mu.Lock()
	over := t.lru.Len() > c.opts.LRUSize
	t.mu.Unlock()
	if over {
		select {
		case t.lruKick <- struct{}{}:
		default:
		}
	}
}

// lruWorker gives back the least recently used unused locks, down to nine
// tenths of LRUSize, a batch per RPC, whenever trimLRU wakes it.
func (c *Client) lruWorker() {
	t := &c.locks
	for {
		select {
		case <-c.stop:
			return
		case <-t.lruKick:
		}
		for {
			t.mu.Lock()
			excess := t.lru.Len() - c.opts.LRUSize*9/10
			var victims []*heldLock
			for e := t.lru.Back(); e != nil && len(victims) < min(excess, 1024); e = e.Prev() {
				l := e.Value.(*heldLock)
				if l.users == 0 && !l.cancelling && !c.inUse(l) {
					victims = append(victims, l)
				}
			}
			t.mu.Unlock()
			if len(victims) == 0 {
				break
			}
			c.cancelLocks(victims)
		}
	}
}

// inUse reports whether l guards a file some handle has open: such locks
// are what the client is working with, kept over idle ones. t.mu is
// held; filesMu nests inside it.
func (c *Client) inUse(l *heldLock) bool {
	return l.d.Kind == proto.LockExtent && c.openState(l.d.Res) != nil
}

// cancelLocks gives locks back early: each dropped here, then told to
// its MDT, many to an RPC.
func (c *Client) cancelLocks(ls []*heldLock) {
	byMDT := map[uint32]*proto.LockCancelReq{}
	delivered := map[uint32][]func(){}
	for _, l := range ls {
		lvb, d := c.cancelLocal(l)
		r := byMDT[l.mdt]
		if r == nil {
			r = &proto.LockCancelReq{}
			byMDT[l.mdt] = r
		}
		r.Res = append(r.Res, l.d.Res)
		r.IDs = append(r.IDs, l.d.ID)
		r.LVBs = append(r.LVBs, lvb)
		delivered[l.mdt] = append(delivered[l.mdt], d)
		c.locks.lruCancels.Add(1)
	}
	for mdt, r := range byMDT {
		ds := delivered[mdt]
		for len(r.IDs) > 0 {
			n := min(len(r.IDs), 1024)
			part := &proto.LockCancelReq{Res: r.Res[:n], IDs: r.IDs[:n], LVBs: r.LVBs[:n]}
			r.Res, r.IDs, r.LVBs = r.Res[n:], r.IDs[n:], r.LVBs[n:]
			ctx, cancel := context.WithTimeout(context.Background(), c.opts.RetryFor)
			rc, err := c.target(ctx, proto.KindMDT, mdt)
			if err == nil {
				err = c.call(ctx, rc, &rpc.Call{Method: proto.MLockCancel, Req: part, Resp: &proto.Empty{}})
			}
			cancel()
			for _, d := range ds[:n] {
				d() // answered, or never to be: either way no longer on its way
			}
			ds = ds[n:]
			if err != nil && !errors.Is(err, syscall.ENOTCONN) {
				// The MDT calls the lock back when it needs it, and finds
				// it gone (ENOENT): nothing is lost.
				c.log(slog.LevelWarn, fmt.Sprintf("stripefs: cancel of %d locks on mdt%d: %v", n, mdt, err), "target", proto.TargetName(proto.KindMDT, mdt))
			}
		}
	}
}

// dropMDTLocks forgets the locks of ids that mdt granted, without
// telling it (it evicted us, or restarted and refused them): caches they
// guarded are dropped, and dirty data under them is lost, with an error
// for its next fsync or close.
func (c *Client) dropMDTLocks(mdt uint32, ids map[uint64]bool) {
	t := &c.locks
	t.mu.Lock()
	var ls []*heldLock
	var write []bool // read under t.mu: a downgrade changes the mode
	for _, l := range t.byID {
		if l.mdt == mdt && ids[l.d.ID] {
			ls = append(ls, l)
			write = append(write, l.d.Kind == proto.LockExtent && l.d.Mode == proto.LockPW)
		}
	}
	t.mu.Unlock()
	for i, l := range ls {
		if write[i] {
			if st := c.openState(l.d.Res); st != nil {
				st.mu.Lock()
				c.dropDirtyRange(st, l.d.Start, l.d.End, fmt.Errorf("%s: the MDT dropped this client's write lock: %w", l.d.Res, syscall.EIO))
				st.mu.Unlock()
			}
		}
		_, delivered := c.cancelLocal(l)
		delivered() // to an MDT that dropped the lock: it never will have it
	}
}

// replayLocks puts back this client's locks on a restarted MDT (Lustre's
// lock replay): those it refuses are dropped here. A lock whose cancel is
// under way is replayed too: until its flush is over (and the cancel
// removes it from the table) it still guards dirty data, and without it
// the MDT would grant another client a conflicting lock and let it read
// the file from before the flush (Lustre skips only locks whose blocking
// work is done, LDLM_FL_BL_DONE). The MDT calls it back as any other and
// finds it gone, or waits for the cancel.
func (c *Client) replayLocks(ctx context.Context, mdt uint32, do func(*rpc.Call) error) {
	t := &c.locks
	t.mu.Lock()
	var ds []proto.LockDesc
	for _, l := range t.byID {
		if l.mdt == mdt {
			ds = append(ds, l.d)
		}
	}
	t.mu.Unlock()
	if len(ds) == 0 {
		return
	}
	var r proto.LockReplayReply
	err := do(&rpc.Call{Method: proto.MLockReplay, Req: &proto.LockReplayReq{Locks: ds}, Resp: &r})
	refused := map[uint64]bool{}
	for i, d := range ds {
		if err != nil || i >= len(r.OK) || !r.OK[i] {
			refused[d.ID] = true
		}
	}
	t.replayed.Add(int64(len(ds) - len(refused)))
	t.replayRefused.Add(int64(len(refused)))
	if len(refused) > 0 {
		go c.dropMDTLocks(mdt, refused)
	}
}

// log logs a line of this client at level, with its name (client=mount:/mnt)
// after attrs.
func (c *Client) log(level slog.Level, msg string, attrs ...any) {
	slog.Log(context.Background(), level, msg, append(attrs, "client", c.opts.Name)...)
}

// evicted is what the client does when mdt says it was evicted: it comes
// back as a new client at once, and drops what the old one's locks
// guarded (in the background: an operation of its own may be using one).
func (c *Client) evicted(mdt uint32, r *rpc.Client) {
	t := &c.locks
	t.mu.Lock()
	old := map[uint64]bool{}
	for id, l := range t.byID {
		if l.mdt == mdt {
			old[id] = true
		}
	}
	t.mu.Unlock()
	t.evictions.Add(1)
	c.log(slog.LevelError, fmt.Sprintf("stripefs: evicted by mdt%d: %d locks and what they guarded are dropped; reconnecting as a new client", mdt, len(old)),
		"target", proto.TargetName(proto.KindMDT, mdt))
	r.Renew()
	c.dropMDTFlocks(mdt) // the MDT dropped them with the rest
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		c.dropMDTLocks(mdt, old)
	}()
}

func (c *Client) lockCounters() []Counter {
	t := &c.locks
	t.mu.Lock()
	held := int64(len(t.byID))
	t.mu.Unlock()
	return []Counter{
		{"locks_held", held},
		{"locks_granted", t.granted.Load()},
		{"locks_cancelled", t.cancelled.Load()},
		{"locks_lru_cancels", t.lruCancels.Load()},
		{"locks_downgraded", t.downgrades.Load()},
		{"lock_callbacks_blocking", t.blockingCBs.Load()},
		{"lock_callbacks_glimpse", t.glimpseCBs.Load()},
		{"lock_enqueues", t.enqueues.Load()},
		{"lock_enqueue_waits", t.enqueueWaits.Load()},
		{"lock_enqueue_us_total", t.enqueueNanos.Load() / 1000},
		{"lock_evictions", t.evictions.Load()},
		{"locks_replayed", t.replayed.Load()},
		{"locks_replay_refused", t.replayRefused.Load()},
	}
}
