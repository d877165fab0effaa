package fs

import (
	"sync"
	"syscall"

	"github.com/stripefs/stripefs/perm"
	"github.com/stripefs/stripefs/proto"
)

// Extended attributes under the Update lock. `ls -l` asks for two of every
// file's (security.selinux, system.posix_acl_access), which are nearly
// always absent: asked of the MDT, 10,000 files cost 20,000 round trips.
// Any change to a file's xattrs calls back the Update locks other clients
// hold on it (mds changeTargets), so an answer the MDT gave while this
// client held one stays true while that lock is held; this client's own
// changes drop what it kept of the file.

// maxCachedXattrs bounds the cache; past it, it starts again empty.
const maxCachedXattrs = 100_000

type xattrEntry struct {
	value []byte // nil with missing: ENODATA
	lock  *heldLock
}

type xattrCache struct {
	mu sync.Mutex
	m  map[proto.FID]map[string]xattrEntry
	n  int // entries in all
}

// updateLock is a metadata lock with the Update bit this client holds on
// fid, or nil.
func (t *lockTable) updateLock(fid proto.FID) *heldLock {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, l := range t.byRes[fid] {
		if l.d.Kind == proto.LockBits && !l.cancelling && l.d.Bits&proto.LockUpdate != 0 {
			return l
		}
	}
	return nil
}

// stillHeld reports whether l is held and not being given back.
func (t *lockTable) stillHeld(l *heldLock) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byID[l.d.ID] == l && !l.cancelling
}

// cachedXattr is what the cache knows of fid's name: its value, or
// ENODATA; ok false when it knows nothing valid.
func (c *Client) cachedXattr(fid proto.FID, name string) (v []byte, err error, ok bool) {
	x := &c.xattrs
	x.mu.Lock()
	e, found := x.m[fid][name]
	x.mu.Unlock()
	if !found || !c.locks.stillHeld(e.lock) {
		return nil, nil, false
	}
	if e.value == nil {
		return nil, syscall.ENODATA, true
	}
	return append([]byte(nil), e.value...), nil, true
}

// keepXattr records an answer the MDT gave while l was held, if it still
// is (a change in between would have taken it).
func (c *Client) keepXattr(fid proto.FID, name string, v []byte, l *heldLock) {
	if l == nil || !c.locks.stillHeld(l) {
		return
	}
	x := &c.xattrs
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.m == nil || x.n >= maxCachedXattrs {
		x.m, x.n = map[proto.FID]map[string]xattrEntry{}, 0
	}
	names := x.m[fid]
	if names == nil {
		names = map[string]xattrEntry{}
		x.m[fid] = names
	}
	if _, had := names[name]; !had {
		x.n++
	}
	names[name] = xattrEntry{value: v, lock: l}
}

// dropXattrs forgets what the cache holds of fid (this client changed
// its xattrs, or its mode, which ACLs follow).
func (c *Client) dropXattrs(fid proto.FID) {
	x := &c.xattrs
	x.mu.Lock()
	defer x.mu.Unlock()
	x.n -= len(x.m[fid])
	delete(x.m, fid)
}

// noteAttrLock is noteLock for a grant that came with fid's attributes
// a: with the Update bit, a's access ACL is what a getxattr of it would
// answer while the lock is held, and needs no RPC (the first ls -l).
func (c *Client) noteAttrLock(mdt uint32, fid proto.FID, a *proto.Attr, g proto.LockGrant) {
	c.noteLock(mdt, fid, g)
	if g.ID == 0 || g.Bits&proto.LockUpdate == 0 || a.FID != fid || fid.IsZero() {
		return
	}
	t := &c.locks
	t.mu.Lock()
	l := t.byID[g.ID]
	t.mu.Unlock()
	var v []byte
	if a.ACL != "" {
		v = []byte(a.ACL)
	}
	c.keepXattr(fid, perm.ACLAccessXattr, v, l)
}
