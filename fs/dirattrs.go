package fs

import (
	"sync"
	"time"

	"github.com/stripefs/stripefs/proto"
)

// The kernel's FUSE client drops a directory's attributes whenever an
// entry comes or goes in it, and asks for them again (a getattr) before
// the next lookup there, to check the caller's permission. In an mdtest
// create or remove phase that is one round trip to the MDT in three. The
// MDT's reply to the change already says what the directory became, so
// the client keeps that and answers the getattr that follows from it.
//
// Replies can cross: two creates in one directory (mdtest's shared
// directory, several tasks) may come back in either order. The MDT takes
// a transno for each change in the order it applies them, and the reply
// says it, so the client keeps the directory as the change with the
// highest transno left it: that state holds every change of this client
// that has completed, and answering with it while others are still in
// flight is as if the getattr had reached the MDT before them. A change
// whose reply does not say what the directory became (a chmod, a failed
// create) leaves nothing to answer with until no change of the directory
// is in flight; a rename anywhere (which can move a directory and change
// its ctime without naming it) clears everything. The answer is given only
// just after the reply (dirAttrFresh), to every getattr that asks then:
// several tasks in one directory each find its attributes dropped after
// one change and ask together (given once, all but the first went to the
// MDT: 0.35 getattrs a create and 0.6-0.76 an unlink in mdtest's shared
// directory, 2 tasks). The kernel keeps what it is told for the attribute
// timeout, so another client's change shows no later than it would
// through the kernel's own attribute cache; one that calls back this
// client's Update lock on the directory ends the answer at once (forget),
// as it drops the kernel's cache.

// maxDirAttrs bounds the directories kept: past it, the stale go.
const maxDirAttrs = 4096

// dirAttrFresh is how long after its reply a change may answer, at most.
const dirAttrFresh = 100 * time.Millisecond

type dirAttrs struct {
	mu    sync.Mutex
	ttl   time.Duration // zero: keep nothing
	epoch uint64        // bumped by a rename
	all   int           // renames in flight
	m     map[proto.FID]*dirAttr
}

type dirAttr struct {
	busy    int  // changes of the directory in flight
	unknown bool // one of them did not say what it left
	has     bool
	attr    proto.Attr
	transno uint64 // of the change that left attr
	at      time.Time
}

// keep sets how long a change's reply may answer for its directory.
func (d *dirAttrs) keep(ttl time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ttl = min(ttl, dirAttrFresh)
	d.m = map[proto.FID]*dirAttr{}
}

// changing notes that this client is about to change dir; done gets what
// the change's reply says dir became and the change's transno (nil or 0:
// nothing, or it failed).
func (d *dirAttrs) changing(dir proto.FID) (done func(a *proto.Attr, transno uint64)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ttl <= 0 {
		return func(*proto.Attr, uint64) {}
	}
	e := d.m[dir]
	if e == nil {
		e = &dirAttr{}
		d.m[dir] = e
	}
	e.busy++
	epoch := d.epoch
	return func(a *proto.Attr, transno uint64) {
		d.mu.Lock()
		defer d.mu.Unlock()
		e.busy--
		switch {
		case a == nil || a.FID != dir || transno == 0 || d.epoch != epoch || d.all > 0:
			e.unknown, e.has = true, false
		case !e.unknown && transno > e.transno: // not one a later change overtook
			e.attr, e.transno, e.has, e.at = *a, transno, true, time.Now()
		}
		if e.busy == 0 {
			e.unknown = false
			if !e.has {
				delete(d.m, dir)
			}
		}
		if len(d.m) > maxDirAttrs {
			d.sweepLocked()
		}
	}
}

// changingAll is changing for an operation that may change directories
// it does not name (a rename moves a directory, and its ctime changes).
func (d *dirAttrs) changingAll() (done func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.all++
	d.epoch++
	for f, e := range d.m {
		e.has = false
		if e.busy == 0 {
			delete(d.m, f)
		}
	}
	return func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.all--
		d.epoch++
	}
}

// take returns what this client's latest completed change of dir made
// it, if nothing since makes that unknown and it is recent.
func (d *dirAttrs) take(dir proto.FID) (proto.Attr, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e := d.m[dir]
	if e == nil || !e.has || e.unknown || d.all > 0 {
		return proto.Attr{}, false
	}
	if time.Since(e.at) >= d.ttl {
		e.has = false
		if e.busy == 0 {
			delete(d.m, dir)
		}
		return proto.Attr{}, false
	}
	return e.attr, true
}

// forget drops what dir's latest change left: another client changed dir
// (its Update lock was called back), which that reply does not hold, nor
// perhaps the replies of this client's changes in flight (applied before
// the other's, they may come back after the callback).
func (d *dirAttrs) forget(dir proto.FID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if e := d.m[dir]; e != nil {
		e.has = false
		if e.busy == 0 {
			delete(d.m, dir)
		} else {
			e.unknown = true
		}
	}
}

// sweepLocked drops what is stale, and if that is not enough, all but
// the changes in flight: a getattr then goes to the MDT, as without this.
func (d *dirAttrs) sweepLocked() {
	for f, e := range d.m {
		if e.busy == 0 && (!e.has || time.Since(e.at) >= d.ttl) {
			delete(d.m, f)
		}
	}
	if len(d.m) > maxDirAttrs/2 {
		for f, e := range d.m {
			if e.busy == 0 {
				delete(d.m, f)
			}
		}
	}
}
