package fs

import (
	"context"
	"fmt"

	"github.com/stripefs/stripefs/ldlm"
	"github.com/stripefs/stripefs/proto"
)

// A client instance can move from one process to another (a mount's
// daemon handing its FUSE session to a new binary, fusefs/takeover.go):
// the old process quiesces, the new one connects under the old one's
// identity, and the servers see one client that reconnected, with its
// opens, write opens and application locks where they were.

// Identity is what makes a client instance the same one to the servers:
// its UUID, and the last XID it used (a successor's XIDs start past it,
// and past any the old process may still send while it finishes, so
// that none is taken for a resend).
type Identity struct {
	UUID string
	XID  uint64
}

// xidGap is how far past the old process's last XID its successor
// starts.
const xidGap = 1 << 32

// Identity is c's, for a successor (Options.Resume).
func (c *Client) Identity() Identity {
	return Identity{UUID: c.identity.UUID, XID: c.identity.NextXID() + xidGap}
}

// Quiesce makes the client hold nothing its successor would not know:
// every open file's cached writes are flushed and the MDTs commit them,
// and every lock of the lock service is given back (a successor starts
// with empty caches, and takes locks as it needs them). Application
// locks (HeldFlocks) and opens stay: they belong to programs.
func (c *Client) Quiesce(ctx context.Context) error {
	c.filesMu.Lock()
	sts := make([]*inodeState, 0, len(c.files))
	for _, st := range c.files {
		sts = append(sts, st)
	}
	c.filesMu.Unlock()
	for _, st := range sts {
		if err := c.flushAll(st); err != nil {
			return fmt.Errorf("fs: quiesce: flush %s: %w", st.fid, err)
		}
	}
	if err := c.SyncAllMDTs(ctx); err != nil {
		return fmt.Errorf("fs: quiesce: %w", err)
	}
	t := &c.locks
	t.mu.Lock()
	ls := make([]*heldLock, 0, len(t.byID))
	for _, l := range t.byID {
		if !l.cancelling {
			ls = append(ls, l)
		}
	}
	t.mu.Unlock()
	c.cancelLocks(ls)
	return nil
}

// Adopt is a handle on a's file as the predecessor opened it with flags:
// the MDT counts that open already (under this same identity), so no
// open is sent; closing it closes the predecessor's. a is what the
// predecessor knew of the file (File.Known); without it (a zero FID:
// fid only) the MDT is asked.
func (c *Client) Adopt(ctx context.Context, fid proto.FID, a proto.Attr, flags int) (*File, error) {
	stamp := c.attrStamp()
	if a.FID != fid {
		got, err := c.Getattr(ctx, fid)
		if err != nil {
			return nil, fmt.Errorf("fs: adopt %s: %w", fid, err)
		}
		a = *got
	}
	return c.newFile(&a, flags, stamp), nil
}

// Known is what the client knows of f's file: its FID, layout, size and
// mtime (for a successor's Adopt).
func (f *File) Known() proto.Attr {
	st := f.st
	st.mu.Lock()
	defer st.mu.Unlock()
	return proto.Attr{FID: st.fid, Layout: st.layout, Size: st.size, Mtime: st.mtime}
}

// HeldFlocks are the application locks the client holds.
func (c *Client) HeldFlocks() []ldlm.Flock {
	ft := &c.flocks
	ft.mu.Lock()
	defer ft.mu.Unlock()
	if ft.mine == nil {
		return nil
	}
	return ft.mine.All()
}

// AdoptFlocks takes on the application locks a predecessor held: the MDTs
// hold them for this identity already; the client needs to know them to
// release them and to put them back after an MDT restart.
func (c *Client) AdoptFlocks(ls []ldlm.Flock) error {
	ft := &c.flocks
	ft.mu.Lock()
	defer ft.mu.Unlock()
	for _, l := range ls {
		l.Owner.Client = me
		if err := ft.table().Replay(l); err != nil {
			return fmt.Errorf("fs: adopt lock %+v: %w", l, err)
		}
	}
	return nil
}
