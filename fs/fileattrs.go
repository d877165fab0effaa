package fs

import (
	"sync"
	"syscall"
	"time"

	"github.com/stripefs/stripefs/proto"
)

// Regular files' attributes under the Update lock. The kernel drops a
// file's attributes after every write through the mount (direct I/O
// invalidates size, times and blocks) and asks again at the next stat: in
// mdtest-hard's stat phase that was one getattr round trip per file that
// the empty-file run does not pay. An answer the MDT gave while this
// client held the file's Update lock stays true while that lock is held
// (another client's change, a write included, calls it back first: ldlm's
// cross of Update and PW), except for this client's own changes. So the
// client keeps the last such answer and gives it to the next getattr,
// with its own unreported writes laid over it as over any reply.
//
// This client's changes are told apart by order. Each change of a file is
// an event on it, at its start and at its end; a change by name (unlink,
// rename, link: which inode it touches is the MDT's to know) is an event
// on every file. A reply is kept only if no event it could have missed
// happened after its request left, and nothing kept is answered while a
// change of the file is in flight.

// maxFileAttrs bounds the files kept; past it, the cache starts again.
const maxFileAttrs = 1 << 16

type fileAttrs struct {
	mu    sync.Mutex
	ended sync.Cond // broadcast when a change ends
	clock uint64    // ticks at every event
	all   uint64    // clock at the last event on every file
	m     map[proto.FID]*fileAttr
}

type fileAttr struct {
	busy int    // changes in flight
	last uint64 // clock at the file's last event
	has  bool
	// at is the clock when attr was last known true: an event on every
	// file after it (all) spoils attr. Not cleared one by one: mdtest's
	// removal phase is an unlink per file, each such an event.
	at    uint64
	attr  proto.Attr
	stamp uint64 // the attrStamp of the request that brought attr
	lock  uint64 // the Update lock it was given under
	// spoiled is an Update lock under which nothing is kept: this
	// client's writes reached the MDT in a lock callback's answer
	// (an LVB), which no reply orders against.
	spoiled uint64
}

// now is the clock as a request leaves, for keep.
func (f *fileAttrs) now() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.clock
}

// entryLocked is fid's entry, made if missing. f.mu is held.
func (f *fileAttrs) entryLocked(fid proto.FID) *fileAttr {
	e := f.m[fid]
	if e != nil {
		return e
	}
	if f.m == nil {
		f.m = map[proto.FID]*fileAttr{}
	}
	if len(f.m) >= maxFileAttrs {
		busy := map[proto.FID]*fileAttr{}
		for id, e := range f.m {
			if e.busy > 0 {
				busy[id] = e
			}
		}
		f.m = busy
		// A reply on its way finds no entry for its file, and must not
		// take that for a file without events.
		f.clock++
		f.all = f.clock
	}
	e = &fileAttr{}
	f.m[fid] = e
	return e
}

// changing notes that this client starts a change of fid; the returned
// done ends it, and keeps a (the attributes the change's reply says it
// left, nil: none) under Update lock lock if no other event on fid
// happened meanwhile.
func (f *fileAttrs) changing(fid proto.FID) (done func(a *proto.Attr, stamp, lock uint64)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.entryLocked(fid)
	e.busy++
	f.clock++
	e.last, e.has = f.clock, false
	start := f.clock
	return func(a *proto.Attr, stamp, lock uint64) {
		f.mu.Lock()
		defer f.mu.Unlock()
		e := f.entryLocked(fid)
		alone := e.busy == 1 && e.last == start && f.all < start
		e.busy--
		if f.ended.L != nil {
			f.ended.Broadcast()
		}
		f.clock++
		e.last, e.has = f.clock, false
		if alone && a != nil && lock != 0 && lock != e.spoiled && a.Mode&syscall.S_IFMT == syscall.S_IFREG {
			e.has, e.at, e.attr, e.stamp, e.lock = true, f.clock, *a, stamp, lock
		}
	}
}

// spoil forgets fid's attributes and keeps none under Update lock lock
// (0: none held, nothing to spoil).
func (f *fileAttrs) spoil(fid proto.FID, lock uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.entryLocked(fid)
	f.clock++
	e.last, e.has, e.spoiled = f.clock, false, lock
}

// event notes a change of fid this client made that is already over.
func (f *fileAttrs) event(fid proto.FID) { f.changing(fid)(nil, 0, 0) }

// changingAll notes a change that may touch any file (by name).
func (f *fileAttrs) changingAll() (done func()) {
	f.forgetAll()
	return f.forgetAll
}

func (f *fileAttrs) forgetAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.clock++
	f.all = f.clock
}

// keep records a's attributes, the MDT's answer to a request that left
// at clock since (and at attrStamp stamp), given under Update lock lock
// (0: none, nothing is kept). A regular file's only.
func (f *fileAttrs) keep(a *proto.Attr, since, stamp, lock uint64) {
	if lock == 0 || a.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.entryLocked(a.FID) // first: starting the cache again moves all
	if f.all > since || e.busy > 0 || e.last > since || e.spoiled == lock {
		return
	}
	e.has, e.at, e.attr, e.stamp, e.lock = true, since, *a, stamp, lock
}

// changeWait bounds how long a getattr waits for this client's own
// change of the file to end before it asks the MDT instead: the change's
// reply says what the file became (a close that carries the file's last
// write and size is in flight as the stat after close(2) comes).
const changeWait = time.Second

// kept is what keep recorded of fid, once no change of it is in flight
// (with wait, waiting up to changeWait), and the lock it was given under.
func (f *fileAttrs) kept(fid proto.FID, wait bool) (a proto.Attr, stamp, lock uint64, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.m[fid]
	if e != nil && e.busy > 0 && wait {
		if f.ended.L == nil {
			f.ended.L = &f.mu
		}
		expired := false
		t := time.AfterFunc(changeWait, func() {
			f.mu.Lock()
			expired = true
			f.ended.Broadcast()
			f.mu.Unlock()
		})
		for e.busy > 0 && !expired {
			f.ended.Wait()
			e = f.m[fid]
			if e == nil {
				break
			}
		}
		t.Stop()
	}
	if e == nil || !e.has || e.busy > 0 || f.all > e.at {
		return proto.Attr{}, 0, 0, false
	}
	return e.attr, e.stamp, e.lock, true
}

// cachedAttr answers a getattr of fid from what was kept, while the
// Update lock it was given under is still held.
func (c *Client) cachedAttr(fid proto.FID) (*proto.Attr, bool) {
	a, stamp, lock, ok := c.fattrs.kept(fid, true)
	if !ok || !c.locks.stillHeldID(lock, false) {
		return nil, false
	}
	c.overlay(&a, stamp)
	return &a, true
}

// KeptAttr returns the attributes of regular file fid that a frontend
// may cache now, and notes that it does (the Update lock's cancel drops
// them there): what an MDT answered under the Update lock this client
// still holds, with its own writes laid over. A reply's own attributes
// are not enough: one to a request that left before the lock came may be
// older than the lock (the MDT read them before another client's write
// landed), and of two replies to requests the kernel sent together it
// keeps the first it reads, not the newer. False when nothing is kept,
// or a change of the file is in flight.
func (c *Client) KeptAttr(fid proto.FID) (*proto.Attr, bool) {
	if c.locks.off {
		return nil, false
	}
	a, stamp, lock, ok := c.fattrs.kept(fid, false)
	if !ok || !c.locks.stillHeldID(lock, true) {
		return nil, false
	}
	c.overlay(&a, stamp)
	return &a, true
}

// keepAttr keeps a, from the reply to a request that left at clock
// since and attrStamp stamp: under the Update lock the reply granted (g),
// or else the one this client held when the request left (held). A lock
// taken after the request left guards nothing the reply says: a change
// by another client may lie between the two. Whether the lock is still
// held is asked when the attributes are.
func (c *Client) keepAttr(a *proto.Attr, g proto.LockGrant, held, since, stamp uint64) {
	lock := held
	if g.ID != 0 && g.Bits&proto.LockUpdate != 0 {
		lock = g.ID
	}
	c.fattrs.keep(a, since, stamp, lock)
}

// attrsAround is mdtCall's part in keeping file attributes: it notes the
// change a request to fid's MDT makes, or keeps what its reply says. The
// returned func takes the request's outcome.
func (c *Client) attrsAround(fid proto.FID, method uint16, req any) func(resp any, err error) {
	nothing := func(any, error) {}
	if c.locks.off {
		return nothing
	}
	switch method {
	case proto.MUnlink, proto.MRename, proto.MLink:
		done := c.fattrs.changingAll()
		return func(any, error) { done() }
	case proto.MCreate:
		// An O_CREAT without O_EXCL may open a file another client
		// made meanwhile: what was kept of it predates this. The reply
		// says the file as of the lock it grants (the MDT reads it
		// after the grant).
		stamp := c.attrStamp()
		return func(resp any, err error) {
			if r, ok := resp.(*proto.AttrReply); ok && err == nil {
				c.fattrs.event(r.Attr.FID)
				c.keepAttr(&r.Attr, r.Lock, 0, c.fattrs.now(), stamp)
			}
		}
	case proto.MGetattr, proto.MOpen, proto.MClose, proto.MLookup, proto.MSetattr, proto.MSetxattr, proto.MRemovexattr:
	default:
		return nothing
	}
	var held uint64
	if method != proto.MLookup { // a lookup names its file; it is kept only under the lock it grants
		held = c.locks.heldUpdate(fid)
	}
	var change func(*proto.Attr, uint64, uint64)
	if r, ok := req.(*proto.CloseReq); (ok && r.SetSize) || method == proto.MSetattr || method == proto.MSetxattr || method == proto.MRemovexattr {
		change = c.fattrs.changing(fid)
	}
	since, stamp := c.fattrs.now(), c.attrStamp()
	return func(resp any, err error) {
		var a *proto.Attr
		var g proto.LockGrant
		switch r := resp.(type) {
		case *proto.AttrReply:
			a, g = &r.Attr, r.Lock
		case *proto.CloseReply:
			a = &r.Attr
		}
		if err != nil {
			a = nil
		}
		switch {
		case change != nil:
			change(a, stamp, held)
		case a != nil:
			c.keepAttr(a, g, held, since, stamp)
		}
	}
}

// heldUpdate is the id of the Update lock this client holds on fid (0:
// none), for keepAttr.
func (t *lockTable) heldUpdate(fid proto.FID) uint64 {
	if l := t.updateLock(fid); l != nil {
		return l.d.ID
	}
	return 0
}

// stillHeldID is stillHeld by lock id; with give, it notes that the
// frontend caches what the lock guards (under the table's mutex, so a
// cancel either sees it or comes first).
func (t *lockTable) stillHeldID(id uint64, give bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.byID[id]
	held := l != nil && !l.cancelling && l.d.Kind == proto.LockBits && l.d.Bits&proto.LockUpdate != 0
	if held && give {
		l.given.Store(time.Now().UnixNano())
	}
	return held
}
