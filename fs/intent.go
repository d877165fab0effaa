package fs

import "github.com/stripefs/stripefs/proto"

// noteDataLock takes a data lock granted with a reply (a create that
// opened a new file for writing is granted the write lock of all of it)
// as an enqueue's grant is taken: the first write then needs no enqueue.
func (c *Client) noteDataLock(st *inodeState, d proto.LockDesc, a *proto.Attr) {
	if l := c.takeDataLock(st, d, a); l != nil {
		st.mu.Lock()
		st.intent = l
		st.mu.Unlock()
	}
	c.trimLRU()
}

// takeDataLock adds to the lock table a data lock on st's file granted
// with a reply that said a, as an enqueue's grant is added; nil if d is
// none or was called back before the reply came. The caller trims the
// LRU.
func (c *Client) takeDataLock(st *inodeState, d proto.LockDesc, a *proto.Attr) *heldLock {
	if d.Kind != proto.LockExtent || d.Res != st.fid {
		return nil
	}
	st.mu.Lock()
	if !st.lockedSize {
		st.size, st.lockedSize = max(a.Size, st.unreported()), true
	}
	st.mu.Unlock()
	t := &c.locks
	t.mu.Lock()
	l := t.addLocked(d, uint32(st.fid.MDT()))
	t.mu.Unlock()
	if l == nil {
		c.grantRefused(st)
	}
	return l
}

// unusedIntent gives back, here, a create's write lock on a file that is
// still empty, and returns it for the close to give back on the MDT (no
// RPC of its own): kept, it would make every other client's stat of the
// file ask this one for its size (a glimpse), as after a write; a file
// created empty (mdtest's, a lock file) would pay that for nothing.
func (c *Client) unusedIntent(st *inodeState) proto.LockCancelReq {
	st.mu.Lock()
	l := st.intent
	empty := st.size == 0 && !st.dirty
	if empty {
		st.intent = nil
	}
	st.mu.Unlock()
	if l == nil || !empty {
		return proto.LockCancelReq{}
	}
	// Nothing was written under it: there is nothing to flush, and
	// nothing the kernel caches to drop (a full cancel would make it ask
	// for the attributes again).
	if !c.locks.stillHeld(l) {
		return proto.LockCancelReq{}
	}
	if _, ok := c.cancelHere(l, true); !ok {
		return proto.LockCancelReq{}
	}
	return proto.LockCancelReq{Res: []proto.FID{l.d.Res}, IDs: []uint64{l.d.ID}}
}
