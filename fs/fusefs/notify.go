package fusefs

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/stripefs/stripefs/proto"
)

// The kernel's caches under the client's locks: the kernel may keep an
// entry or a file's attributes only while the client holds the lock that
// guards it (fs.Client.CachesEntry, KeptAttr; replies give a zero
// timeout otherwise), and the client tells it to drop them when the lock
// goes (fs.Invalidator, through FUSE's notify messages). File data is
// not cached by the kernel at all in that mode (FOPEN_DIRECT_IO): reads
// and writes reach the client, which caches under its data locks; only
// pages a program maps, and a small file's data its open brought whole
// (FS.cacheOpenData), are the kernel's, and dropped the same way.

// entry is a name the kernel may have cached.
type entry struct {
	parent uint64
	name   string
}

// notifier is the fs.Invalidator of a mount: it remembers which names
// it let the kernel cache for each inode, and when, to drop them by name
// (those given longer ago than the entry timeout are gone by themselves).
type notifier struct {
	nodes
	srv atomic.Pointer[fuse.Server] // set once mounted
	ttl time.Duration               // the kernel's entry timeout

	mu      sync.Mutex
	entries map[proto.FID][]given // most inodes have one name
	byEntry map[entry]proto.FID
}

// given is a name the kernel was let cache, and when.
type given struct {
	e entry
	t time.Time
}

func newNotifier(ns nodes, ttl time.Duration) *notifier {
	return &notifier{nodes: ns, ttl: ttl, entries: map[proto.FID][]given{}, byEntry: map[entry]proto.FID{}}
}

// cached records that the kernel may cache name in parent for fid.
func (n *notifier) cached(fid proto.FID, parent uint64, name string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.addLocked(fid, entry{parent, name}, time.Now())
}

func (n *notifier) addLocked(fid proto.FID, e entry, t time.Time) {
	if old, ok := n.byEntry[e]; ok {
		n.dropLocked(old, e)
	}
	n.entries[fid] = append(n.entries[fid], given{e, t})
	n.byEntry[e] = fid
}

func (n *notifier) dropLocked(fid proto.FID, e entry) {
	delete(n.byEntry, e)
	gs := n.entries[fid]
	for i, g := range gs {
		if g.e == e {
			gs = append(gs[:i], gs[i+1:]...)
			break
		}
	}
	if len(gs) == 0 {
		delete(n.entries, fid)
	} else {
		n.entries[fid] = gs
	}
}

// timeOf is when e was given for fid (zero: not given). n.mu is held.
func (n *notifier) timeOf(fid proto.FID, e entry) time.Time {
	for _, g := range n.entries[fid] {
		if g.e == e {
			return g.t
		}
	}
	return time.Time{}
}

// removed forgets the name the kernel dropped by itself (an unlink or
// rmdir through this mount).
func (n *notifier) removed(parent uint64, name string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	e := entry{parent, name}
	if fid, ok := n.byEntry[e]; ok {
		n.dropLocked(fid, e)
	}
}

// renamed follows a rename through this mount, which the kernel does to
// its cached names too: what was cached under the old name is now under
// the new one (and with exchange, the other way too).
func (n *notifier) renamed(oldParent uint64, oldName string, newParent uint64, newName string, exchange bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	from, to := entry{oldParent, oldName}, entry{newParent, newName}
	src, hasSrc := n.byEntry[from]
	dst, hasDst := n.byEntry[to]
	var st, dt time.Time
	if hasSrc {
		st = n.timeOf(src, from)
		n.dropLocked(src, from)
	}
	if hasDst {
		dt = n.timeOf(dst, to)
		n.dropLocked(dst, to)
	}
	if hasSrc {
		n.addLocked(src, to, st)
	}
	if exchange && hasDst {
		n.addLocked(dst, from, dt)
	}
}

func (n *notifier) InvalidateAttr(fid proto.FID) {
	if srv := n.srv.Load(); srv != nil {
		srv.InodeNotify(n.nodeID(fid), -1, 0)
	}
}

func (n *notifier) InvalidateData(fid proto.FID, off, length int64) {
	if srv := n.srv.Load(); srv != nil {
		srv.InodeNotify(n.nodeID(fid), off, max(length, 0))
	}
}

// entryRecheck is how long after dropping a name it is dropped again: a
// lookup's reply may have been on its way to the kernel while the lock
// was called back, and installed the name after the first drop.
const entryRecheck = 20 * time.Millisecond

func (n *notifier) InvalidateEntries(fid proto.FID) {
	n.mu.Lock()
	gs := n.entries[fid]
	for _, g := range gs {
		delete(n.byEntry, g.e)
	}
	delete(n.entries, fid)
	n.mu.Unlock()
	srv := n.srv.Load()
	if srv == nil {
		return
	}
	var live []entry
	for _, g := range gs {
		if time.Since(g.t) <= n.ttl {
			live = append(live, g.e)
		}
	}
	if len(live) == 0 {
		return
	}
	for _, e := range live {
		srv.EntryNotify(e.parent, e.name)
	}
	time.AfterFunc(entryRecheck, func() {
		for _, e := range live {
			srv.EntryNotify(e.parent, e.name)
		}
	})
}
