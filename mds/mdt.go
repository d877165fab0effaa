// Package mds is a metadata target: the namespace and inode attributes of
// the files whose FIDs it owns, kept in a Pebble database, and the first
// bytes of those whose layout keeps them on the MDT (Data-on-MDT, dom.go:
// an object store of package ost's kind beside the database, served on
// the MDT's connection).
//
// Its parts, by file:
//   - the database (store.go): keys (keys.go), stored records as
//     protocol buffers (records.go), their format and its conversion
//     (compat.go), failures (storefail.go);
//   - the namespace handlers (ops.go, xattr.go, layout_intent.go,
//     dirlayout.go) over the inode type (inode.go), under m.mu, and the
//     permission checks (perm.go, acl.go);
//   - the distributed namespace (dne*.go, mkdir_async.go, stripedir.go,
//     xmdt.go, fidreserve.go, the held update-log records in
//     recindex.go, and what a group commit must cover first in deps.go):
//     what to do is decided by package dtx, sending and storing it is
//     here;
//   - clients, replay and recovery (clients.go, resend.go, evict.go, with
//     package recovery deciding), locks (locks.go over package lockd),
//     quota (quota.go), space (space.go), nodemaps (nodemaps.go) and the
//     fsck scans (fsck.go);
//   - MDT0 also runs the management service (package mgs) over its
//     database (mgs_store.go).
//
// Test hold points are the hooks interface (hooks.go), empty in
// production.
package mds

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/stripefs/stripefs/internal/diskspace"
	"github.com/stripefs/stripefs/internal/nodemapsync"
	"github.com/stripefs/stripefs/internal/storeguard"
	"github.com/stripefs/stripefs/mds/dtx"
	"github.com/stripefs/stripefs/mds/lockd"
	"github.com/stripefs/stripefs/mds/mgs"
	"github.com/stripefs/stripefs/ost"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
	"github.com/stripefs/stripefs/wire"
)

// Config configures one MDT.
type Config struct {
	Index   int
	DataDir string
	// MGS is MDT0's address; MDTs other than 0 register there and fetch the
	// cluster map from it. Ignored on MDT0.
	MGS string
	// Addr is the address clients reach this MDT at, registered with the
	// MGS.
	Addr   string
	FSName string
	// FS is the filesystem Pebble runs on; nil means the real disk. Tests
	// pass vfs.NewCrashableMem or an error-injecting FS.
	FS vfs.FS
	// hooks are a test's hold points (hooks.go); nil for none.
	hooks hooks
	// CommitInterval groups commits: changes are applied and answered at
	// once and made durable together this often (fsync forces it sooner).
	CommitInterval time.Duration
	// RemoteSync forces a synchronous commit of every cross-MDT operation,
	// as Lustre's osd_sync on lock cancel did. Atomicity does not need it.
	RemoteSync bool
	// RecoveryWindow bounds how long a restarted MDT waits for its peers'
	// update logs before serving clients (default 15s).
	RecoveryWindow time.Duration
	// ClientWindow bounds how long a restarted MDT then waits for the
	// clients of its client table to reconnect and replay before it
	// serves new requests and evicts the missing (default
	// DefaultClientWindow; clients still replaying at its end get as long
	// again). See clients.go.
	ClientWindow time.Duration
	// EvictAfter is how long a client of the client table may stay
	// without a connection before the running MDT evicts it (default
	// DefaultEvictAfter; negative: never). See evict.go.
	EvictAfter time.Duration
	// CacheSize bounds the MDT's block cache (default DefaultCacheSize).
	CacheSize int64
	// TxnAskAfter is how old a record held as a participant must be before
	// its coordinator is asked whether it lost its part (default 5s; the
	// answer is safe at any age, asking early only wastes RPCs).
	TxnAskAfter time.Duration
	// Reserve is what the MDT keeps back of its disk (default
	// diskspace.Default); see space.go.
	Reserve *diskspace.Reserve
	// LockTimeout is how long a client may take to answer a lock callback
	// before it is evicted (default lockd.DefaultTimeout).
	LockTimeout time.Duration
	// DoMMax is the largest Data-on-MDT component the MDT keeps (default
	// proto.DefaultDoMMax); negative: it keeps no file data and refuses
	// layouts with pattern=mdt (dom.go).
	DoMMax int64
	// DoMInline is the largest file data the MDT keeps as values of its
	// store's index rather than as a file each (default
	// DefaultDoMInline, at most ost.MaxInline; negative: none): see
	// ost/inline.go.
	DoMInline int
}

// DefaultDoMInline is Config.DoMInline unless configured: a small file
// (mdtest-hard's 3901 bytes, a source file, a job script) costs no file
// of its own on the MDT.
const DefaultDoMInline = 64 << 10

// DefaultCacheSize is an MDT's block cache unless configured.
const DefaultCacheSize = 256 << 20

// MDT is one running metadata target.
type MDT struct {
	cfg Config
	store
	Srv *rpc.Server

	// mu serialises namespace changes. Reads go to Pebble without it.
	mu  sync.Mutex
	seq seqState
	// seqDurable is the allocator position on disk: seq may run up to it
	// without a write (seqAdvanced).
	seqDurable seqState
	opens      map[proto.FID]int
	// writers are the clients' write opens (perm.go), under writersMu.
	writersMu sync.Mutex
	writers   map[writerKey]int
	// nodemaps is this MDT's copy of the nodemaps (nodemaps.go); MDT0
	// changes them under nodemapMu. filesetSeen: directories found
	// inside a fileset, and when.
	nodemaps *nodemapsync.Follower
	// dom is the store of Data-on-MDT file data (dom.go); nil: none.
	dom         *ost.OST
	nodemapMu   sync.Mutex
	filesetMu   sync.Mutex
	filesetSeen map[filesetKey]time.Time
	recs        recIndex // the update-log records held, and cancel watermarks

	lastTransno atomic.Uint64 // of the last change applied
	commits     atomic.Uint64 // batches committed: a reply granting a lock checks nothing changed since it read (locks.go)
	committed   atomic.Uint64 // highest transno known durable
	rr          atomic.Uint32 // round-robin start OST for new layouts
	rrDir       atomic.Uint32 // round-robin MDT for new directories
	inodes      atomic.Int64  // inodes in use, for statfs
	dirty       atomic.Bool
	stop        chan struct{}
	wg          sync.WaitGroup

	// Distributed namespace state (dne.go).
	epoch   uint32
	opSeq   uint64              // guarded by mu
	pending map[string]struct{} // names reserved by running operations; guarded by mu
	// running holds the distributed operations this MDT is coordinating
	// right now; guarded by mu. A participant that asks for one of them
	// to be redone is told to wait: the coordinator is still at it.
	running map[dtx.OpID]struct{}
	// lastAsk is when the sweeper last read the records held as a
	// participant (sweeper goroutine only).
	lastAsk    time.Time
	hooks      hooks // cfg.hooks, or none
	remoteSync atomic.Bool
	peers      peerSet       // dne_peers.go
	recovered  chan struct{} // closed when start-up recovery is over
	grants     grants        // mkdir_async.go
	// fresh holds the keys of inodes and entries created since the WAL
	// was last synced, with the sync generation they were made in
	// (deps.go); guarded by mu.
	fresh   map[string]uint64
	syncGen uint64
	// durableGen is one past the last generation a completed WAL sync
	// covers: everything marked fresh below it is on disk (deps.go).
	durableGen atomic.Uint64
	// Striped directories (stripedir.go).
	frozen map[proto.FID]time.Time // stripes held empty for a striped rmdir, until; guarded by mu
	pools  fidPools                // FIDs other MDTs reserved for this one's mkdirs there (fidreserve.go)
	ctr    struct {
		remoteSyncCommits, dtxStarted, dtxRedone, dtxCancelled, dtxPending, resends, dtxDepSyncs atomic.Int64
	}

	locks *lockd.Service // the lock server (locks.go)
	space spaceGuard     // space.go

	// Client table and recovery window (clients.go).
	clientsMu    sync.RWMutex
	clients      map[string]bool // uuids in the client table
	win          clientWindow
	lost         lostClients
	startTransno uint64 // last transno on disk at start

	quota *quotaState // quota.go
	// cluster is the cluster map: MDT0's management service, or on the
	// others mgsClient, their cached copy read from MDT0.
	cluster   mgs.Source
	mgsClient *mgs.Client
}

// Open opens (creating on first use) the MDT in cfg.DataDir.
func Open(cfg Config) (*MDT, error) {
	if cfg.Index < 0 || cfg.Index >= proto.MaxMDTs {
		return nil, fmt.Errorf("mdt: index %d out of range [0,%d)", cfg.Index, proto.MaxMDTs)
	}
	if cfg.Index > 0 && cfg.MGS == "" {
		return nil, fmt.Errorf("mdt%d: --mgs is required for MDTs other than 0", cfg.Index)
	}
	if cfg.FSName == "" {
		cfg.FSName = "stripefs"
	}
	if cfg.CommitInterval == 0 {
		cfg.CommitInterval = 100 * time.Millisecond
	}
	if cfg.RecoveryWindow == 0 {
		cfg.RecoveryWindow = 15 * time.Second
	}
	if cfg.ClientWindow <= 0 {
		cfg.ClientWindow = DefaultClientWindow
	}
	if cfg.EvictAfter == 0 {
		cfg.EvictAfter = DefaultEvictAfter
	}
	if cfg.ClientWindow > MaxClientWindow {
		return nil, fmt.Errorf("mdt%d: %w: %v, at most %v", cfg.Index, errWindowTooLong, cfg.ClientWindow, MaxClientWindow)
	}
	if cfg.TxnAskAfter == 0 {
		cfg.TxnAskAfter = 5 * time.Second
	}
	if cfg.LockTimeout <= 0 {
		cfg.LockTimeout = lockd.DefaultTimeout
	}
	// The block cache is the MDT's metadata cache (Pebble's default is
	// 8 MB): with tens of thousands of inodes, every lookup and getattr
	// otherwise re-reads and re-parses index and data blocks of the
	// tables. Memory is taken as blocks are read, up to the bound.
	guard := storeguard.New(fmt.Sprintf("mdt%d", cfg.Index))
	opts := &pebble.Options{CacheSize: cmp.Or(cfg.CacheSize, DefaultCacheSize)}
	guard.Configure(opts, cmp.Or(cfg.FS, vfs.Default))
	// Bloom filters: most namespace operations probe for a name or an
	// inode that is not there (create, lookup of a new name, quota
	// records), and without a filter such a probe reads every table.
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	dir := filepath.Join(cfg.DataDir, "db")
	if cfg.FS == nil {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("mdt%d: %w", cfg.Index, err)
		}
	}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return nil, fmt.Errorf("mdt%d: open %s: %w", cfg.Index, dir, err)
	}
	m := &MDT{cfg: cfg, store: store{db: db, guard: guard, index: cfg.Index}, opens: map[proto.FID]int{}, writers: map[writerKey]int{}, filesetSeen: map[filesetKey]time.Time{}, stop: make(chan struct{}),
		pending: map[string]struct{}{}, running: map[dtx.OpID]struct{}{}, fresh: map[string]uint64{},
		frozen: map[proto.FID]time.Time{}}
	m.remoteSync.Store(cfg.RemoteSync)
	if m.hooks = cfg.hooks; m.hooks == nil {
		m.hooks = noHooks{}
	}
	m.space = spaceGuard{index: cfg.Index, reserve: diskspace.Default}
	if cfg.Reserve != nil {
		m.space.reserve = *cfg.Reserve
	}
	if cfg.FS == nil {
		m.space.dir = dir
	}
	if err := m.upgradeFormat(); err != nil {
		db.Close()
		return nil, err
	}
	if err := m.load(); err != nil {
		db.Close()
		return nil, err
	}
	if err := m.recs.load(db); err != nil {
		db.Close()
		return nil, fmt.Errorf("mdt%d: %w", cfg.Index, err)
	}
	if err := m.loadTransno(); err != nil {
		db.Close()
		return nil, fmt.Errorf("mdt%d: transno: %w", cfg.Index, err)
	}
	if err := m.loadEpoch(); err != nil {
		db.Close()
		return nil, fmt.Errorf("mdt%d: epoch: %w", cfg.Index, err)
	}
	m.startTransno = m.lastTransno.Load()
	if err := m.loadClients(); err != nil {
		db.Close()
		return nil, fmt.Errorf("mdt%d: client table: %w", cfg.Index, err)
	}
	m.Srv = rpc.NewServer(fmt.Sprintf("mdt%d", cfg.Index))
	m.Srv.ConnHook = m.connChange
	proto.RequireRoles(m.Srv)
	m.Srv.Committed = m.committed.Load
	m.register()
	m.startLocks()
	m.registerDNE()
	m.registerStriped()
	m.registerFsck()
	m.resendable()
	m.registerGrants()
	m.pullOnMiss()
	m.recovered = make(chan struct{})
	m.gateClients()
	m.gateRecovery()
	if cfg.Index == 0 {
		if err := m.openMGS(); err != nil {
			db.Close()
			return nil, err
		}
	} else {
		m.mgsClient = mgs.NewClient(cfg.MGS, m.Srv.Name)
		m.cluster = m.mgsClient
	}
	if err := m.openQuota(); err != nil {
		db.Close()
		return nil, err
	}
	if err := m.startNodemaps(); err != nil {
		db.Close()
		return nil, err
	}
	if err := m.openDoM(); err != nil {
		m.closeQuota()
		m.nodemaps.Stop()
		db.Close()
		return nil, err
	}
	prevCounters := m.Srv.Counters
	m.Srv.Counters = func() []rpc.Counter {
		return slices.Concat(prevCounters(), m.windowCounters(), m.lostCounters(), m.locks.Counters(), m.storeCounters(), m.domCounters())
	}
	m.wg.Add(2)
	go m.committer()
	go m.sweeper()
	go func() {
		m.recoverFromPeers()
		m.openClientWindow()
		close(m.recovered)
	}()
	return m, nil
}

// load reads the FID allocator, creates the root on a new MDT0 and drops
// orphans left by a previous run: their opens died with it.
func (m *MDT) load() error {
	v, closer, err := m.db.Get(keySeq)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		m.seq = seqState{Seq: proto.MDTSeq(m.cfg.Index, 2), NextOid: 1}
	case err != nil:
		return fmt.Errorf("mdt%d: read FID sequence: %w", m.cfg.Index, err)
	default:
		err = wire.Unmarshal(v, &m.seq)
		closer.Close()
		if err != nil {
			return fmt.Errorf("mdt%d: corrupt FID sequence: %w", m.cfg.Index, err)
		}
		m.seqDurable = m.seq // the previous run used no FID from here on
	}
	if m.cfg.Index == 0 {
		if _, err := m.getInode(proto.RootFID); errors.Is(err, syscall.ENOENT) {
			now := time.Now().UnixNano()
			root := &inode{Attr: proto.Attr{FID: proto.RootFID, Mode: sIFDIR | 0o755, Nlink: 2,
				Atime: now, Mtime: now, Ctime: now}, Parent: proto.RootFID}
			b := m.db.NewBatch()
			b.Set(inodeKey(proto.RootFID), root.marshal(), nil)
			if err := m.write(b, pebble.Sync); err != nil {
				return fmt.Errorf("mdt0: create root: %w", err)
			}
		} else if err != nil {
			return err
		}
	}
	if err := m.countInodes(); err != nil {
		return err
	}
	return m.dropOrphans()
}

func (m *MDT) countInodes() error {
	it, err := m.db.NewIter(&pebble.IterOptions{LowerBound: []byte{pInode}, UpperBound: []byte{pInode + 1}})
	if err != nil {
		return err
	}
	defer it.Close()
	var n int64
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	m.inodes.Store(n)
	return nil
}

func (m *MDT) dropOrphans() error {
	it, err := m.db.NewIter(&pebble.IterOptions{LowerBound: []byte{pOrphan}, UpperBound: []byte{pOrphan + 1}})
	if err != nil {
		return err
	}
	defer it.Close()
	b := m.db.NewBatch()
	n := 0
	for it.First(); it.Valid(); it.Next() {
		fid, err := proto.FIDFromKey(it.Key()[1:])
		if err != nil {
			continue
		}
		m.deleteInode(b, fid)
		b.Delete(it.Key(), nil)
		n++
	}
	if n > 0 {
		m.logf(slog.LevelInfo, "dropped %d open-unlinked inodes of the previous run (their OST objects are left for fsck)", n)
	}
	return m.write(b, pebble.Sync)
}

// Serve answers RPCs on l until Close.
func (m *MDT) Serve(l net.Listener) error {
	if m.dom != nil {
		l = m.dom.Track(l) // the file data's grants follow the connections
	}
	return m.Srv.Serve(l)
}

// halt stops serving and every background task without a final commit:
// what a crash does, for tests that then take the filesystem's crash image.
func (m *MDT) halt() {
	m.stopLost()   // before the connections close: none of that is a lost client
	m.stopWindow() // first: requests held by the window must end for Close to return
	m.Srv.Close()
	close(m.stop)
	m.wg.Wait()
	m.closeDoM()
	m.closeQuota()
	m.nodemaps.Stop()
}

// Close stops serving and closes the database after a final commit.
func (m *MDT) Close() error {
	m.halt()
	if m.mgsClient != nil {
		m.mgsClient.Close()
	}
	m.peers.close()
	if m.guard.Err() != nil {
		m.abandonStore()
		return nil
	}
	if err := m.logSync(); err != nil {
		m.logf(slog.LevelWarn, "final commit: %v", err)
	}
	return m.db.Close()
}

// committer makes applied changes durable in groups: one WAL sync covers
// every batch applied since the last, so no operation waits for a disk
// sync of its own.
func (m *MDT) committer() {
	defer m.wg.Done()
	t := time.NewTicker(m.cfg.CommitInterval)
	defer t.Stop()
	prune := time.NewTicker(time.Minute)
	defer prune.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-prune.C:
			m.pruneDone()
		case <-t.C:
			if !m.hooks.syncsHeld() && m.dirty.Swap(false) {
				if err := m.Sync(); err != nil && m.guard.Err() == nil { // a failed store is logged once
					m.logf(slog.LevelWarn, "group commit: %v", err)
				}
			}
		}
	}
}

// commit applies b; with sync it waits for the WAL sync too.
func (m *MDT) commit(b *pebble.Batch, sync bool) error {
	opt := pebble.NoSync
	if sync {
		opt = pebble.Sync
	}
	err := m.write(b, opt)
	m.quotaCommitted(b, err == nil)
	if err != nil {
		return fmt.Errorf("mdt%d: commit: %v: %w", m.cfg.Index, err, storeErrno(err))
	}
	m.recs.committed(b)
	m.commits.Add(1)
	if !sync {
		m.dirty.Store(true)
	}
	return nil
}

func (m *MDT) getDir(f proto.FID) (*inode, error) {
	n, err := m.getInode(f)
	if err != nil {
		return nil, err
	}
	if !n.isDir() {
		return nil, fmt.Errorf("mdt%d: %s: %w", m.cfg.Index, f, syscall.ENOTDIR)
	}
	return n, nil
}

// allocFID hands out the next FID and records the allocator's position in
// b, so a FID is never reused after a crash.
func (m *MDT) allocFID(b *pebble.Batch) (proto.FID, error) {
	if m.seq.NextOid == 0 { // wrapped: move to the next sequence
		if err := m.nextSeqLocked(); err != nil {
			return proto.FID{}, err
		}
	}
	f := proto.FID{Seq: m.seq.Seq, Oid: m.seq.NextOid}
	m.seq.NextOid++
	if err := m.seqAdvanced(); err != nil {
		return proto.FID{}, err
	}
	return f, nil
}

// nextSeqLocked moves the allocator to the next plain sequence. m.mu is
// held.
func (m *MDT) nextSeqLocked() error {
	local := m.seq.Seq&proto.MaxLocalSeq + 1
	if local > proto.LastPlainSeq { // the rest are striped directories'
		return fmt.Errorf("mdt%d: FID space exhausted: %w", m.cfg.Index, syscall.ENOSPC)
	}
	m.seq = seqState{Seq: proto.MDTSeq(m.cfg.Index, local), NextOid: 1}
	return nil
}

// fidAhead is how far ahead of use the allocator's position is made
// durable: one synced write per that many FIDs.
const fidAhead = 1024

// seqAdvanced makes the allocator's position durable ahead of use once it
// has passed what the disk holds. A FID handed out with a change that a
// crash then loses is so never handed out again: a client may have
// written objects under it, which a new file must not inherit (Lustre
// allocates FIDs from sequences granted ahead for the same reason). After
// a restart the allocator starts where the disk says, past any FID of the
// previous run. m.mu is held.
func (m *MDT) seqAdvanced() error {
	if m.seq.Seq == m.seqDurable.Seq && m.seq.NextOid != 0 && m.seq.NextOid <= m.seqDurable.NextOid {
		return nil
	}
	ahead := seqState{Seq: m.seq.Seq, NextOid: uint32(min(uint64(m.seq.NextOid)+fidAhead, 1<<32-1))}
	b := m.db.NewBatch()
	b.Set(keySeq, encode(&ahead), nil)
	if err := m.write(b, pebble.Sync); err != nil {
		return fmt.Errorf("mdt%d: FID sequence: %v: %w", m.cfg.Index, err, storeErrno(err))
	}
	m.seqDurable = ahead
	return nil
}

// childFID is the FID for a new inode. A create replayed after a restart
// gets the FID its first reply gave, if that is this MDT's and still
// free: the client already uses it (the kernel's inode, later requests,
// OST objects), and allocation order alone does not bring it back when
// changes before it were lost with an evicted client. m.mu is held.
func (m *MDT) childFID(ctx context.Context, b *pebble.Batch) (proto.FID, error) {
	if first, ok := firstAttr(ctx); ok {
		f := first.FID
		if f.MDT() == m.cfg.Index && f.Oid != 0 && kindOf(f) == proto.FIDPlain {
			if _, err := m.getInode(f); errors.Is(err, syscall.ENOENT) {
				return f, m.claimFID(f)
			}
		}
	}
	return m.allocFID(b)
}

// firstAttr returns the attributes the first reply to a replayed create
// carried.
func firstAttr(ctx context.Context) (proto.Attr, bool) {
	raw := rpc.FirstReply(ctx)
	if raw == nil {
		return proto.Attr{}, false
	}
	var r proto.AttrReply
	if err := wire.Unmarshal(raw, &r); err != nil {
		return proto.Attr{}, false
	}
	return r.Attr, true
}

// claimFID moves the allocator past f, a FID handed out before a crash
// and now given again. m.mu is held.
func (m *MDT) claimFID(f proto.FID) error {
	switch {
	case f.Seq > m.seq.Seq:
		m.seq = seqState{Seq: f.Seq, NextOid: f.Oid + 1}
	case f.Seq == m.seq.Seq && f.Oid >= m.seq.NextOid && m.seq.NextOid != 0:
		m.seq.NextOid = f.Oid + 1
	default:
		return nil
	}
	return m.seqAdvanced()
}

// newInode stores a freshly allocated inode.
func (m *MDT) newInode(b *pebble.Batch, n *inode) {
	m.markFresh(inodeKey(n.Attr.FID))
	m.inodes.Add(1)
	m.quotaCharge(b, n)
	m.putInode(b, n)
}

// deleteInode removes an inode and its xattrs. The xattrs go key by key:
// a range tombstone per unlink would make every later read in the memtable
// pay for all of them.
func (m *MDT) deleteInode(b *pebble.Batch, f proto.FID) {
	m.inodes.Add(-1)
	m.quotaUncharge(b, f)
	b.Delete(inodeKey(f), nil)
	p := xattrPrefix(f)
	it, err := m.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		b.DeleteRange(p, prefixEnd(p), nil) // still correct, only slower
		return
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		b.Delete(it.Key(), nil)
	}
}

// dirEmpty reports whether dir has no entries.
func (m *MDT) dirEmpty(dir proto.FID) (bool, error) {
	p := direntPrefix(dir)
	it, err := m.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		return false, err
	}
	defer it.Close()
	return !it.First(), nil
}

// Sync makes every applied change durable and advances the committed
// transno that replies carry.
func (m *MDT) Sync() error {
	m.mu.Lock() // every transno taken so far is applied once mu is free
	t := m.lastTransno.Load()
	gen := m.syncGen
	m.syncGen++
	m.mu.Unlock()
	if err := m.logSync(); err != nil {
		return fmt.Errorf("mdt%d: sync: %v: %w", m.cfg.Index, err, storeErrno(err))
	}
	m.mu.Lock()
	m.synced(gen)
	if gen+1 > m.durableGen.Load() {
		m.durableGen.Store(gen + 1)
	}
	m.mu.Unlock()
	for {
		c := m.committed.Load()
		if t <= c || m.committed.CompareAndSwap(c, t) {
			return nil
		}
	}
}

// Index is this MDT's index.
func (m *MDT) Index() int { return m.cfg.Index }

// config returns the cluster map: MDT0's own, others' fetched from MDT0
// and cached briefly.
func (m *MDT) config(ctx context.Context) (*proto.Config, error) {
	c, err := m.cluster.Config(ctx)
	if err != nil {
		return nil, fmt.Errorf("mdt%d: %w", m.cfg.Index, err)
	}
	return c, nil
}

// openMGS starts MDT0's management service over its database and
// registers MDT0 itself.
func (m *MDT) openMGS() error {
	svc, err := mgs.Open(mgsStore{m}, m.cfg.FSName, proto.TargetName(proto.KindMDT, uint32(m.cfg.Index)))
	if err != nil {
		return err
	}
	if m.cfg.Addr != "" {
		if err := svc.Register(proto.Target{Kind: proto.KindMDT, Index: 0, Addr: m.cfg.Addr}); err != nil {
			return err
		}
	}
	svc.Serve(m.Srv)
	m.cluster = svc
	return nil
}

var _ io.Closer = (*MDT)(nil)

// storeCounters are the Pebble store's memory: its block cache (and the
// bound it was given) and its memtables, gauges (_now) for Prometheus.
func (m *MDT) storeCounters() []rpc.Counter {
	met := m.db.Metrics()
	return []rpc.Counter{
		{Name: "block_cache_bytes_now", Value: met.BlockCache.Size},
		{Name: "block_cache_bytes_max_now", Value: cmp.Or(m.cfg.CacheSize, DefaultCacheSize)},
		{Name: "memtable_bytes_now", Value: int64(met.MemTable.Size)},
	}
}
