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
// Only a reply that is the last word may answer: if another change of the
// same directory by this client overlapped it, their replies may have
// crossed, and a rename anywhere (which can move a directory and change
// its ctime without naming it) clears everything. Changes by other
// clients show after at most the mount's attribute timeout, as they would
// through the kernel's own attribute cache.

// maxDirAttrs bounds the directories kept: past it, the stale go.
const maxDirAttrs = 4096

type dirAttrs struct {
	mu    sync.Mutex
	ttl   time.Duration // zero: keep nothing
	epoch uint64        // bumped by a rename
	all   int           // renames in flight
	m     map[proto.FID]*dirAttr
}

type dirAttr struct {
	busy  int  // changes of the directory in flight
	mixed bool // two of them overlapped
	has   bool
	attr  proto.Attr
	at    time.Time
}

// keep sets how long a change's reply may answer for its directory.
func (d *dirAttrs) keep(ttl time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ttl = ttl
	d.m = map[proto.FID]*dirAttr{}
}

// changing notes that this client is about to change dir; done gets what
// the change's reply says dir became (nil: nothing, or it failed).
func (d *dirAttrs) changing(dir proto.FID) (done func(a *proto.Attr)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ttl <= 0 {
		return func(*proto.Attr) {}
	}
	e := d.m[dir]
	if e == nil {
		e = &dirAttr{}
		d.m[dir] = e
	}
	if e.busy > 0 {
		e.mixed = true
	}
	e.busy++
	e.has = false
	epoch := d.epoch
	return func(a *proto.Attr) {
		d.mu.Lock()
		defer d.mu.Unlock()
		e.busy--
		if a != nil && a.FID == dir && !e.mixed && d.epoch == epoch && d.all == 0 {
			e.attr, e.has, e.at = *a, true, time.Now()
		}
		if e.busy == 0 {
			e.mixed = false
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

// take returns, once, what the last change of dir made it, if that is
// still the last word and recent.
func (d *dirAttrs) take(dir proto.FID) (proto.Attr, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e := d.m[dir]
	if e == nil || !e.has || e.busy > 0 || d.all > 0 {
		return proto.Attr{}, false
	}
	delete(d.m, dir)
	if time.Since(e.at) >= d.ttl {
		return proto.Attr{}, false
	}
	return e.attr, true
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
