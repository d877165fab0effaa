package mds

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"syscall"
	"time"

	"github.com/stripefs/stripefs/mds/lockd"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// Where the MDT meets its lock server (package lockd): the lock methods,
// metadata locks granted with replies, glimpses for attributes, and the
// server's own locks around every change that other clients may have
// cached.
//
// Who grants which lock: a file's data locks and its Update locks come
// from the file's own MDT; the Lookup lock guarding a directory entry
// comes from the MDT that answered the lookup, which holds the entry,
// whatever MDT the inode is on. So an unlink or rename calls entries'
// locks back where it removes the entries.

// lockStore is what lockd needs of the MDT.
type lockStore struct{ m *MDT }

func (s lockStore) Attr(fid proto.FID) (proto.Attr, error) {
	n, err := s.m.getInode(fid)
	if err != nil {
		return proto.Attr{}, err
	}
	return n.Attr, nil
}

// Merge applies a writer's LVB on cancel: size and mtime only grow, so a
// writer below the end of the file never shrinks it.
func (s lockStore) Merge(fid proto.FID, lvb proto.LVB) error {
	m := s.m
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.getInode(fid)
	if err != nil {
		return err
	}
	if !mergeWrites(&n.Attr, lvb.Size, lvb.Mtime) {
		return nil
	}
	b := m.newBatch(context.Background())
	m.putInode(b, n)
	return m.commit(b, false)
}

// mergeWrites raises a's size and mtime to what a writer reports, and
// says whether anything changed.
func mergeWrites(a *proto.Attr, size uint64, mtime int64) bool {
	changed := false
	if size > a.Size {
		a.Size, changed = size, true
	}
	if mtime > a.Mtime {
		a.Mtime, changed = mtime, true
		a.Ctime = max(a.Ctime, mtime)
	}
	return changed
}

func (s lockStore) Register(client, name string) error { return s.m.registerClient(client, name) }

// Evicted takes an evicted client out of the client table: its
// uncommitted changes are lost to it, and a restart must not wait for it.
func (s lockStore) Evicted(client string) { s.m.forgetClient(client, "evicted by the lock server") }

func (m *MDT) startLocks() {
	m.locks = lockd.New(lockd.Config{Name: m.Srv.Name, Timeout: m.cfg.LockTimeout}, m.Srv, lockStore{m})
	m.locks.Recovering = m.win.open.Load
	s := m.Srv
	s.Handle(proto.MLockEnqueue, func(ctx context.Context, r *rpc.Request) (rpc.Reply, error) {
		var req proto.LockEnqueueReq
		if err := r.Decode(&req); err != nil {
			return rpc.Reply{}, fmt.Errorf("mdt%d: lock enqueue: %v: %w", m.cfg.Index, err, syscall.EINVAL)
		}
		if err := m.checkDataRes(req.Lock.Res); err != nil {
			return rpc.Reply{}, err
		}
		if err := m.mayLock(ctx, &req.Lock); err != nil {
			return rpc.Reply{}, err
		}
		rep, err := m.locks.Enqueue(ctx, r.Client, r.Name, &req)
		if err != nil {
			return rpc.Reply{}, err
		}
		return rpc.Reply{Msg: rep}, nil
	})
	s.Handle(proto.MLockCancel, func(ctx context.Context, r *rpc.Request) (rpc.Reply, error) {
		var req proto.LockCancelReq
		if err := r.Decode(&req); err != nil {
			return rpc.Reply{}, fmt.Errorf("mdt%d: lock cancel: %v: %w", m.cfg.Index, err, syscall.EINVAL)
		}
		return rpc.Reply{Msg: &proto.Empty{}}, m.locks.Cancel(r.Client, &req)
	})
	s.Handle(proto.MLockReplay, func(ctx context.Context, r *rpc.Request) (rpc.Reply, error) {
		var req proto.LockReplayReq
		if err := r.Decode(&req); err != nil {
			return rpc.Reply{}, fmt.Errorf("mdt%d: lock replay: %v: %w", m.cfg.Index, err, syscall.EINVAL)
		}
		rep, err := m.locks.Replay(r.Client, &req)
		if err != nil {
			return rpc.Reply{}, err
		}
		return rpc.Reply{Msg: rep}, nil
	})
	s.Handle(proto.MFlock, func(ctx context.Context, r *rpc.Request) (rpc.Reply, error) {
		var req proto.FlockReq
		if err := r.Decode(&req); err != nil {
			return rpc.Reply{}, fmt.Errorf("mdt%d: flock: %v: %w", m.cfg.Index, err, syscall.EINVAL)
		}
		if req.Op != proto.FlockCancel {
			if req.Res.MDT() != m.cfg.Index {
				return rpc.Reply{}, fmt.Errorf("mdt%d: flock on %s, which mdt%d holds: %w", m.cfg.Index, req.Res, req.Res.MDT(), syscall.EINVAL)
			}
			if _, err := m.getInode(req.Res); err != nil {
				return rpc.Reply{}, err
			}
		}
		rep, err := m.locks.Flock(ctx, r.Client, r.Name, &req)
		if err != nil {
			return rpc.Reply{}, err
		}
		return rpc.Reply{Msg: rep}, nil
	})
	s.Handle(proto.MFlockReplay, func(ctx context.Context, r *rpc.Request) (rpc.Reply, error) {
		var req proto.FlockReplayReq
		if err := r.Decode(&req); err != nil {
			return rpc.Reply{}, fmt.Errorf("mdt%d: flock replay: %v: %w", m.cfg.Index, err, syscall.EINVAL)
		}
		rep, err := m.locks.FlockReplay(r.Client, &req)
		if err != nil {
			return rpc.Reply{}, err
		}
		return rpc.Reply{Msg: rep}, nil
	})
	rpc.HandleFunc(s, proto.MLockRevoke, func(ctx context.Context, r *proto.LockRevokeReq) (any, error) {
		release, err := m.locks.Change(ctx, r.Client, r.Bits, r.FID)
		if err != nil {
			return nil, err
		}
		release()
		return &proto.Empty{}, nil
	})
	m.wrapChanges()
}

// checkDataRes refuses data locks on what is not a regular file of this
// MDT.
func (m *MDT) checkDataRes(fid proto.FID) error {
	if fid.MDT() != m.cfg.Index {
		return fmt.Errorf("mdt%d: lock on %s, which mdt%d holds: %w", m.cfg.Index, fid, fid.MDT(), syscall.EINVAL)
	}
	n, err := m.getInode(fid)
	if err != nil {
		return err
	}
	if n.Attr.Mode&sIFMT != sIFREG {
		return fmt.Errorf("mdt%d: data lock on %s, not a regular file: %w", m.cfg.Index, fid, syscall.EINVAL)
	}
	return nil
}

// grantMeta is the metadata lock a reply carries for want bits on fid:
// Lookup from the MDT answering for an entry, Update only from fid's own
// MDT.
func (m *MDT) grantMeta(ctx context.Context, fid proto.FID, want uint8) proto.LockGrant {
	g, _ := m.grantMetaFresh(ctx, fid, want)
	return g
}

func (m *MDT) grantMetaFresh(ctx context.Context, fid proto.FID, want uint8) (proto.LockGrant, bool) {
	if want == 0 || fid.IsZero() {
		return proto.LockGrant{}, false
	}
	if fid.MDT() != m.cfg.Index {
		want &^= proto.LockUpdate | proto.LockLayout
	}
	c, _ := rpc.CallerFrom(ctx)
	return m.locks.TryBits(c.Client, fid, want)
}

// grantEntry is grantMeta for a reply that found fid through an entry it
// read when the MDT had made gen commits. A change to the entry between
// that read and the grant would find no lock to call back, and the asker
// would cache the entry as it was: so if anything was committed since,
// the entry is read again (still leads to fid?), and a lock granted for
// what is no longer there is taken back. A lock the asker held already
// needs no check: that change would have called it back first.
func (m *MDT) grantEntry(ctx context.Context, fid proto.FID, want uint8, gen uint64, still func() bool) proto.LockGrant {
	g, fresh := m.grantMetaFresh(ctx, fid, want)
	if g.ID == 0 || !fresh || m.commits.Load() == gen || (still != nil && still()) {
		return g
	}
	m.locks.Withdraw(g.ID)
	return proto.LockGrant{}
}

// entryLeadsTo reports whether name in parent still names fid.
func (m *MDT) entryLeadsTo(parent proto.FID, name string, fid proto.FID) func() bool {
	return func() bool {
		d, err := m.getDirent(parent, name)
		return err == nil && d.FID == fid
	}
}

// glimpse merges into a, read at mark (lockd's Merged), what other
// clients' writes have made of a regular file's size and mtime.
func (m *MDT) glimpse(ctx context.Context, a *proto.Attr, mark uint64) {
	if a.Mode&sIFMT != sIFREG || a.FID.MDT() != m.cfg.Index {
		return
	}
	c, _ := rpc.CallerFrom(ctx)
	if !m.locks.Glimpse(a.FID, c.Client, a, mark) {
		return
	}
	// A writer's size report that landed after the caller read a and
	// before the writer answered (or before its lock went) is in neither:
	// the writer no longer holds it as its own (two mounts writing
	// records, a third stat saw the size go down). Read again.
	if n, err := m.getInode(a.FID); err == nil {
		mergeWrites(a, n.Attr.Size, n.Attr.Mtime)
	}
}

// withGrant adds to the reply of a request that made an entry the
// metadata locks it asked for on the entry's inode, and the inode's
// attributes as of the grant (another client may have found the new name
// and changed the inode since the change was made).
func withGrant[Req interface{ WantLocks() uint8 }](m *MDT, f func(context.Context, *Req) (any, error)) func(context.Context, *Req) (any, error) {
	return func(ctx context.Context, r *Req) (any, error) {
		resp, err := f(ctx, r)
		rep, ok := resp.(*proto.AttrReply)
		if err != nil || !ok || (*r).WantLocks() == 0 || rep.Attr.FID.IsZero() {
			return resp, err
		}
		// The entry was made by this very request: any commit since may be
		// a change to it (a rename by another client that found the name).
		rep.Lock = m.grantEntry(ctx, rep.Attr.FID, (*r).WantLocks(), m.commits.Load(), nil)
		if rep.Lock.ID != 0 && !rep.Remote && rep.Attr.FID.MDT() == m.cfg.Index {
			if n, err := m.getInode(rep.Attr.FID); err == nil {
				rep.Attr = n.Attr
			}
		}
		return rep, nil
	}
}

// lockedKey carries, in a change's context, the FIDs whose metadata locks
// the change holds.
type lockedKey struct{}

// errRelock says a change found its entries changed since it chose which
// locks to take: it is run again with the right ones.
var errRelock = errors.New("mds: entries changed while taking locks")

// changeLocked reports whether the change running in ctx holds fid's
// metadata locks (or needs none: a request that took none at all, from
// inside the MDT).
func changeLocked(ctx context.Context, fid proto.FID) bool {
	held, ok := ctx.Value(lockedKey{}).([]proto.FID)
	return !ok || slices.Contains(held, fid)
}

// readEntries are the entries a change's locks were chosen by, read when
// the MDT had made gen commits: the change itself may use them instead of
// reading them again, if nothing was committed since (direntFor).
type readEntries struct {
	gen     uint64
	entries map[entryKey]*dirent
}

type entryKey struct {
	parent proto.FID
	name   string
}

type readKey struct{}

// direntFor is getDirent for a change that may have read the entry while
// choosing its locks. m.mu is held.
func (m *MDT) direntFor(ctx context.Context, parent proto.FID, name string) (*dirent, error) {
	if re, ok := ctx.Value(readKey{}).(*readEntries); ok && re.gen == m.commits.Load() {
		if d, ok := re.entries[entryKey{parent, name}]; ok {
			c := *d
			return &c, nil
		}
	}
	return m.getDirent(parent, name)
}

// changeTargets are the inodes a change request touches in ways other
// clients may have cached, with the bits to call back, and the entries it
// read to find them.
func (m *MDT) changeTargets(method uint16, r *rpc.Request) (fids []proto.FID, bits uint8, read *readEntries, err error) {
	read = &readEntries{gen: m.commits.Load(), entries: map[entryKey]*dirent{}}
	entry := func(parent proto.FID, name string) {
		if d, err := m.getDirent(parent, name); err == nil {
			fids = append(fids, d.FID)
			read.entries[entryKey{parent, name}] = d
		}
	}
	switch method {
	case proto.MSetattr:
		var q proto.SetattrReq
		if err = r.Decode(&q); err != nil {
			return nil, 0, nil, err
		}
		if q.FromWrites {
			return nil, 0, nil, nil // a writer's own size: no other client caches it
		}
		return []proto.FID{q.FID}, proto.LockUpdate, nil, nil
	case proto.MSetxattr, proto.MRemovexattr:
		var q proto.XattrReq
		if err = r.Decode(&q); err != nil {
			return nil, 0, nil, err
		}
		return []proto.FID{q.FID}, proto.LockUpdate | proto.LockLayout, nil, nil
	case proto.MLayoutIntent:
		// lustre.lov shows the new components: what other clients
		// cached of it goes (their copies of the layout stay right
		// below their own InstEnd, fs/pfl.go).
		var q proto.LayoutIntentReq
		if err = r.Decode(&q); err != nil {
			return nil, 0, nil, err
		}
		return []proto.FID{q.FID}, proto.LockUpdate | proto.LockLayout, nil, nil
	case proto.MLink:
		var q proto.LinkReq
		if err = r.Decode(&q); err != nil {
			return nil, 0, nil, err
		}
		return []proto.FID{q.FID}, proto.LockUpdate, nil, nil
	case proto.MUnlink:
		var q proto.UnlinkReq
		if err = r.Decode(&q); err != nil {
			return nil, 0, nil, err
		}
		entry(q.Parent, q.Name)
		return fids, proto.LockLookup | proto.LockUpdate, read, nil
	case proto.MRename:
		var q proto.RenameReq
		if err = r.Decode(&q); err != nil {
			return nil, 0, nil, err
		}
		entry(q.SrcParent, q.SrcName)
		if q.DstParent.MDT() == m.cfg.Index {
			entry(q.DstParent, q.DstName)
		}
		return fids, proto.LockLookup | proto.LockUpdate, read, nil
	}
	return nil, 0, nil, nil
}

// changeMethods are the requests wrapChanges takes locks for.
var changeMethods = []uint16{proto.MSetattr, proto.MSetxattr, proto.MRemovexattr, proto.MLink, proto.MUnlink, proto.MRename, proto.MLayoutIntent}

// wrapChanges makes every change that others may have cached take the
// server's locks first: other clients' metadata locks on what it touches
// are called back (their kernels drop those entries and attributes)
// before it is made, and none is granted again until it is. Inodes on
// other MDTs are called back there (MLockRevoke) just before.
func (m *MDT) wrapChanges() {
	for _, method := range changeMethods {
		m.Srv.Wrap(method, func(next rpc.Handler) rpc.Handler {
			return func(ctx context.Context, r *rpc.Request) (rpc.Reply, error) {
				for attempt := 0; ; attempt++ {
					fids, bits, read, err := m.changeTargets(method, r)
					if err != nil {
						return rpc.Reply{}, fmt.Errorf("mdt%d: %s: %v: %w", m.cfg.Index, proto.MethodName(method), err, syscall.EINVAL)
					}
					if len(fids) == 0 {
						return next(ctx, r)
					}
					release, err := m.lockChange(ctx, r.Client, bits, fids)
					if err != nil {
						return rpc.Reply{}, err
					}
					cctx := context.WithValue(ctx, lockedKey{}, fids)
					if read != nil {
						cctx = context.WithValue(cctx, readKey{}, read)
					}
					rep, err := next(cctx, r)
					if u, ok := rep.Msg.(*proto.UnlinkReply); ok && err == nil && u.Attr.Nlink == 0 && !u.Attr.FID.IsZero() {
						// The inode is gone from the namespace: the asker's
						// metadata locks on it guard nothing (it drops its
						// own), and others' were just called back. Once the
						// file is destroyed, neither do its data locks.
						if u.Destroy {
							m.locks.DropAll(r.Client, u.Attr.FID)
						} else {
							m.locks.DropBits(r.Client, u.Attr.FID)
						}
					}
					if rr, ok := rep.Msg.(*proto.RenameReply); ok && err == nil && rr.Destroy && rr.HasReplaced {
						m.locks.DropAll(r.Client, rr.Replaced.FID) // as an unlink's, for the file renamed over
					}
					release()
					if !errors.Is(err, errRelock) {
						return rep, err
					}
					if attempt > 100 {
						return rpc.Reply{}, fmt.Errorf("mdt%d: %s: entries keep changing: %w", m.cfg.Index, proto.MethodName(method), syscall.EAGAIN)
					}
				}
			}
		})
	}
}

// lockChange takes the change locks of fids: local inodes' held until
// release, other MDTs' called back there now.
func (m *MDT) lockChange(ctx context.Context, client string, bits uint8, fids []proto.FID) (func(), error) {
	var local []proto.FID
	for _, fid := range fids {
		// The entry's Lookup lock is ours whatever MDT the inode is on.
		local = append(local, fid)
		if fid.MDT() != m.cfg.Index && bits&^proto.LockLookup != 0 {
			if err := m.revokeRemote(ctx, fid, bits&^proto.LockLookup, client); err != nil {
				return nil, err
			}
		}
	}
	return m.locks.Change(ctx, client, bits, local...)
}

// revokeRemote asks fid's MDT to call other clients' locks on it back.
func (m *MDT) revokeRemote(ctx context.Context, fid proto.FID, bits uint8, client string) error {
	peer, err := m.peer(ctx, uint32(fid.MDT()))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, m.cfg.LockTimeout+10*time.Second)
	defer cancel()
	_, err = invokePeer[proto.Empty](ctx, peer, proto.MLockRevoke, &proto.LockRevokeReq{FID: fid, Bits: bits, Client: client})
	return err
}

// forgetClient takes a client out of the client table and drops its
// locks: it left, was evicted, or was lost.
func (m *MDT) forgetClient(uuid, why string) {
	m.locks.Forget(uuid)
	m.forgetWriters(uuid)
	m.clientsMu.Lock()
	known := m.clients[uuid]
	delete(m.clients, uuid)
	m.clientsMu.Unlock()
	if !known {
		return
	}
	b := m.db.NewBatch()
	b.Delete(clientKey(uuid), nil)
	if err := m.commit(b, false); err != nil {
		m.logf(slog.LevelWarn, "forgetting client %s (%s): %v", uuid, why, err)
	}
}
