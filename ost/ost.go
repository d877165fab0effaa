// Package ost is an object storage target: each object a sparse file under
// the data directory, named by its FID and stripe index, plus a small
// index (index.go) of object owners and sizes and of the space granted to
// clients (space.go). A write wholly inside blocks the object already has
// is a rewrite: it costs no grant, no quota and no accounting (extent.go).
// An MDT opens one too, for the file data it keeps (Data-on-MDT), and
// serves its data methods on its own server (RegisterData, Track).
package ost

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"

	"github.com/stripefs/stripefs/internal/diskspace"
	"github.com/stripefs/stripefs/internal/nodemapsync"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
	"github.com/stripefs/stripefs/wire"
)

// Config configures one OST.
type Config struct {
	Index   int
	DataDir string
	// MaxOpenFiles bounds the cache of open object files.
	MaxOpenFiles int
	// MGS is MDT0's address, where the quota master runs. Empty: no quota
	// limits are enforced (usage is still kept).
	MGS string
	// QuotaMaster, if set, is used instead of a connection to MGS (tests).
	QuotaMaster proto.QuotaMaster
	// QuotaRefresh is how often limits are reread from the master
	// (default 10s; setquota also pokes every target).
	QuotaRefresh time.Duration
	// Capacity caps the bytes the OST allocates and promises; 0 means the
	// disk's free space. It runs an OST "full" without filling a disk.
	Capacity uint64
	// IndexFS is the filesystem the index's Pebble runs on; nil means the
	// disk. Power-loss tests pass vfs.NewCrashableMem.
	IndexFS vfs.FS
	// ObjectFS is what the object files live on (objfs.go); nil means
	// the disk (DiskFS). Power-loss tests pass one that can lose what was
	// not synced.
	ObjectFS ObjectFS
	// Reserve is what the OST keeps back of its disk (default
	// diskspace.Default): neither granted nor allocated.
	Reserve *diskspace.Reserve
	// GrantGrace is how long a disconnected client keeps its grant
	// (default 30s); GrantIdle how long a connected one that allocates
	// nothing does (default 5 minutes).
	GrantGrace, GrantIdle time.Duration
	// FiemapFail makes every FIEMAP call fail with EFAULT, so the
	// allocated-range check takes its SEEK_DATA/SEEK_HOLE fallback: a test
	// and benchmark knob. STRIPEFS_FIEMAP_FAIL=1 in the environment of the
	// OST process sets it too.
	FiemapFail bool
	// NoEarlyWriteback turns off starting the disk write of every large
	// write at once (sync_file_range SYNC_FILE_RANGE_WRITE, no waiting).
	// With it on, the disk works while data streams in instead of all at
	// the client's fsync or when the kernel's dirty limits bite: ior
	// write+fsync went from 730-840 to 970-1060 MiB/s on this VM, and an
	// erasure-coded file, with half again as many bytes to put on disk,
	// gains most.
	NoEarlyWriteback bool
	// Name replaces "ost<Index>" in messages, logs and as the quota
	// slave's name: an MDT's store of file data (Data-on-MDT) is not an
	// OST of the cluster map.
	Name string
	// Nodemaps, if set, is the nodemap copy to enforce instead of one of
	// the OST's own (an MDT's, for its file data).
	Nodemaps *nodemapsync.Follower
	// InlineMax, if set, keeps objects whose bytes all lie below it as
	// values of the index rather than as files (inline.go): an MDT's
	// store of small files' data. At most MaxInline.
	InlineMax int
}

// MaxInline bounds Config.InlineMax: an inline object is read and
// rewritten whole by every write to it.
const MaxInline = 1 << 20

// earlyWriteback is the smallest write whose disk write starts at once.
const earlyWriteback = 256 << 10

// FiemapFailEnv names the environment variable that sets
// Config.FiemapFail for every OST a process opens.
const FiemapFailEnv = "STRIPEFS_FIEMAP_FAIL"

// OST is one running object storage target.
type OST struct {
	cfg     Config
	name    string // ost3, in messages and to the quota master
	target  string // OST0003, in logs
	dir     string // DataDir/O
	fs      ObjectFS
	reserve diskspace.Reserve
	Srv     *rpc.Server
	// nodemaps is the OST's copy of the nodemaps: read-only groups'
	// clients change nothing here either.
	nodemaps *nodemapsync.Follower

	fdMu  sync.Mutex
	fds   map[proto.ObjID]*list.Element
	lru   *list.List // of *objFile, most recent at front
	locks [64]sync.RWMutex
	// alloc serialises the allocating writes of one object, so the blocks
	// fstat shows after a write are that write's doing.
	alloc [256]sync.Mutex

	idx      *index
	space    *space
	ext      extentChecker
	fiemap   atomic.Pointer[FiemapFunc]
	quota    *proto.QuotaSlave
	master   *rpc.Client // to the quota master, if any
	peers    peers       // to other OSTs, for ost_copy (copy.go)
	nextConn atomic.Uint64
	ctr      counters
	stop     chan struct{}
	bg       sync.WaitGroup
}

type objFile struct {
	id   proto.ObjID
	f    ObjectFile
	refs int
	dead bool // evicted while in use: close at last unref

	dmu      sync.Mutex
	direct   ObjectFile // O_DIRECT, for NoCache writes (nocache.go); opened on first use
	noDirect bool       // direct I/O failed on this object: write buffered
	dioOff   int        // alignment of direct I/O offsets and lengths
	dioMem   int        // and of its buffers

	// owner is the owner xattr the file carries, read at the first
	// allocating write after the open; guarded by the object's allocLock.
	owner      proto.Owner
	ownerKnown bool
}

// close closes the object's descriptors.
func (of *objFile) close() {
	of.f.Close()
	of.dmu.Lock()
	if of.direct != nil {
		of.direct.Close()
	}
	of.dmu.Unlock()
}

// Open opens (creating on first use) the OST in cfg.DataDir.
func Open(cfg Config) (*OST, error) {
	if cfg.Index < 0 || cfg.Index >= 65536 {
		return nil, fmt.Errorf("ost: index %d out of range", cfg.Index)
	}
	if cfg.InlineMax < 0 || cfg.InlineMax > MaxInline {
		return nil, fmt.Errorf("ost: inline objects of up to %d bytes: at most %d", cfg.InlineMax, MaxInline)
	}
	if cfg.MaxOpenFiles == 0 {
		cfg.MaxOpenFiles = 512
	}
	if cfg.GrantGrace == 0 {
		cfg.GrantGrace = 30 * time.Second
	}
	if cfg.GrantIdle == 0 {
		cfg.GrantIdle = 5 * time.Minute
	}
	if cfg.QuotaRefresh == 0 {
		cfg.QuotaRefresh = 10 * time.Second
	}
	if v := os.Getenv(FiemapFailEnv); v != "" && v != "0" {
		cfg.FiemapFail = true
	}
	name, target := fmt.Sprintf("ost%d", cfg.Index), proto.TargetName(proto.KindOST, uint32(cfg.Index))
	if cfg.Name != "" {
		name, target = cfg.Name, cfg.Name
	}
	o := &OST{cfg: cfg, name: name, target: target, dir: filepath.Join(cfg.DataDir, "O"), reserve: diskspace.Default, fds: map[proto.ObjID]*list.Element{}, lru: list.New(),
		stop: make(chan struct{})}
	if cfg.Reserve != nil {
		o.reserve = *cfg.Reserve
	}
	o.fs = cfg.ObjectFS
	if o.fs == nil {
		o.fs = DiskFS
	}
	if err := o.fs.MkdirAll(o.dir, 0o755); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var st unix.Statfs_t
	if err := o.fs.Statfs(o.dir, &st); err != nil {
		return nil, fmt.Errorf("%s: statfs %s: %w", name, o.dir, err)
	}
	o.ext = extentChecker{fiemap: o.callFiemap, blockSize: uint64(max(st.Bsize, 512)), ctr: &o.ctr}
	o.SetFiemapFail(cfg.FiemapFail)
	if cfg.FiemapFail {
		o.logf(slog.LevelWarn, "FIEMAP made to fail (test knob): allocated-range checks use SEEK_DATA/SEEK_HOLE")
	}
	idx, clean, err := openIndex(filepath.Join(cfg.DataDir, "index"), name, cfg.IndexFS, cfg.InlineMax > 0, o.logf)
	if err != nil {
		return nil, err
	}
	o.idx = idx
	if !clean {
		if err := o.reconcile(); err != nil {
			idx.abort()
			return nil, err
		}
	}
	o.space = newSpace(o, cfg.Capacity)
	if err := o.space.load(); err != nil {
		idx.abort()
		return nil, fmt.Errorf("%s: load index: %w", name, err)
	}
	o.quota = &proto.QuotaSlave{Target: name, Kind: proto.QuotaBlocks, Usage: o.space.usageOf, Idle: 2 * time.Second}
	switch {
	case cfg.QuotaMaster != nil:
		o.quota.Master = cfg.QuotaMaster
	case cfg.MGS != "":
		o.master = rpc.NewClient(cfg.MGS, name)
		o.master.Role = rpc.RoleServer
		o.master.RetryFor = 10 * time.Second
		o.quota.Master = rpcMaster{o.master}
	default:
		o.quota.Master = noMaster{}
	}
	o.Srv = rpc.NewServer(name)
	proto.RequireRoles(o.Srv)
	if o.nodemaps = cfg.Nodemaps; o.nodemaps == nil {
		if o.nodemaps, err = nodemapsync.New(name, filepath.Join(cfg.DataDir, "nodemaps"), o.Srv); err != nil {
			idx.abort()
			return nil, err
		}
		if o.master != nil {
			o.nodemaps.Pull(o.master, nodemapsync.DefaultInterval)
		}
	}
	o.register()
	o.Srv.Counters = o.counters
	ctx, cancel := context.WithCancel(context.Background())
	o.bg.Add(2)
	go func() {
		defer o.bg.Done()
		<-o.stop
		cancel()
	}()
	go func() {
		defer o.bg.Done()
		o.quota.Run(ctx, cfg.QuotaRefresh, time.Second)
	}()
	o.bg.Add(1)
	go o.reclaimer()
	return o, nil
}

// reclaimer takes back the grants of departed and idle clients.
func (o *OST) reclaimer() {
	defer o.bg.Done()
	t := time.NewTicker(max(min(o.cfg.GrantGrace/4, time.Second), 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-o.stop:
			return
		case <-t.C:
			o.space.reclaim(o.cfg.GrantGrace, o.cfg.GrantIdle)
		}
	}
}

// Serve answers RPCs on l until Close. Connections are tracked so that a
// client's grant follows its connections (space.go).
func (o *OST) Serve(l net.Listener) error {
	return o.Srv.Serve(trackedListener{Listener: l, s: o.space})
}

// Close stops serving, closes every object file and marks the index clean.
func (o *OST) Close() error {
	o.Srv.Close()
	close(o.stop)
	o.bg.Wait()
	if o.cfg.Nodemaps == nil {
		o.nodemaps.Stop()
	}
	if o.master != nil {
		o.master.Close()
	}
	o.closePeers()
	o.fdMu.Lock()
	for e := o.lru.Front(); e != nil; e = e.Next() {
		e.Value.(*objFile).close()
	}
	o.fds = map[proto.ObjID]*list.Element{}
	o.lru.Init()
	o.fdMu.Unlock()
	return o.idx.close()
}

// SetFiemapFail makes FIEMAP fail with EFAULT (or work again), as
// Config.FiemapFail.
func (o *OST) SetFiemapFail(fail bool) {
	f := FiemapFunc(ioctlFiemap)
	if fail {
		f = failingFiemap
	}
	o.fiemap.Store(&f)
}

// setFiemap replaces the FIEMAP call (tests).
func (o *OST) setFiemap(f FiemapFunc) { o.fiemap.Store(&f) }

func (o *OST) callFiemap(fd uintptr, buf *fiemapBuf) error { return (*o.fiemap.Load())(fd, buf) }

// objPath spreads objects over 256 subdirectories by object id.
func (o *OST) objPath(id proto.ObjID) string {
	return filepath.Join(o.dir, fmt.Sprintf("%02x", id.FID.Oid&0xff),
		fmt.Sprintf("%x_%x_%x_%d", id.FID.Seq, id.FID.Oid, id.FID.Ver, id.Stripe))
}

func parseObjName(name string) (proto.ObjID, bool) {
	p := strings.Split(name, "_")
	if len(p) != 4 {
		return proto.ObjID{}, false
	}
	seq, e1 := strconv.ParseUint(p[0], 16, 64)
	oid, e2 := strconv.ParseUint(p[1], 16, 32)
	ver, e3 := strconv.ParseUint(p[2], 16, 32)
	st, e4 := strconv.ParseUint(p[3], 10, 32)
	if e1 != nil || e2 != nil || e3 != nil || e4 != nil {
		return proto.ObjID{}, false
	}
	return proto.ObjID{FID: proto.FID{Seq: seq, Oid: uint32(oid), Ver: uint32(ver)}, Stripe: uint32(st)}, true
}

// lock orders size-changing operations (punch, destroy), which take it
// exclusively, against writes, which share it and run in parallel.
func (o *OST) lock(id proto.ObjID) *sync.RWMutex {
	return &o.locks[(uint64(id.FID.Oid)*31+uint64(id.Stripe))%uint64(len(o.locks))]
}

// allocLock is the mutex of id's allocating writes.
func (o *OST) allocLock(id proto.ObjID) *sync.Mutex {
	h := id.FID.Seq*0x9e3779b97f4a7c15 ^ uint64(id.FID.Oid)*0xbf58476d1ce4e5b9 ^ uint64(id.Stripe)*0x94d049bb133111eb
	return &o.alloc[(h^h>>29)%uint64(len(o.alloc))]
}

// get returns an open file for id, creating the object when create is set.
// A missing object with create unset gives os.ErrNotExist.
func (o *OST) get(id proto.ObjID, create bool) (*objFile, error) {
	o.fdMu.Lock()
	if e, ok := o.fds[id]; ok {
		of := e.Value.(*objFile)
		of.refs++
		o.lru.MoveToFront(e)
		o.fdMu.Unlock()
		return of, nil
	}
	o.fdMu.Unlock()
	p := o.objPath(id)
	flags := os.O_RDWR
	if create {
		flags |= os.O_CREATE
	}
	f, err := o.fs.OpenFile(p, flags, 0o600)
	if errors.Is(err, os.ErrNotExist) && create {
		if err = o.fs.MkdirAll(filepath.Dir(p), 0o755); err == nil {
			f, err = o.fs.OpenFile(p, flags, 0o600)
		}
	}
	if err != nil {
		return nil, err
	}
	o.fdMu.Lock()
	defer o.fdMu.Unlock()
	if e, ok := o.fds[id]; ok { // raced with another opener
		f.Close()
		of := e.Value.(*objFile)
		of.refs++
		return of, nil
	}
	of := &objFile{id: id, f: f, refs: 1}
	o.fds[id] = o.lru.PushFront(of)
	for o.lru.Len() > o.cfg.MaxOpenFiles {
		e := o.lru.Back()
		old := e.Value.(*objFile)
		o.lru.Remove(e)
		delete(o.fds, old.id)
		if old.refs == 0 {
			old.close()
		} else {
			old.dead = true
		}
	}
	return of, nil
}

func (o *OST) put(of *objFile) {
	o.fdMu.Lock()
	defer o.fdMu.Unlock()
	of.refs--
	if of.refs == 0 && of.dead {
		of.close()
	}
}

// forget drops id from the cache (after destroy).
func (o *OST) forget(id proto.ObjID) {
	o.fdMu.Lock()
	defer o.fdMu.Unlock()
	if e, ok := o.fds[id]; ok {
		of := e.Value.(*objFile)
		o.lru.Remove(e)
		delete(o.fds, id)
		if of.refs == 0 {
			of.close()
		} else {
			of.dead = true
		}
	}
}

func (o *OST) errorf(op string, id proto.ObjID, err error) error {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		errno = syscall.EIO
	}
	return fmt.Errorf("%s: %s %s: %v: %w", o.name, op, id, err, errno)
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 1<<20); return &b }}

func (o *OST) register() {
	s := o.Srv
	o.RegisterData(s)
	rpc.HandleFunc(s, proto.OStatfs, o.statfs)
	rpc.HandleFunc(s, proto.OSetParam, o.setParam)
	s.Handle(proto.OCopy, o.copyRange)
}

// RegisterData serves the methods of object data on s: what a client's
// data path calls (write, read, punch, getattr, destroy, sync,
// fallocate), quota usage and the object listing of fsck. An MDT serves
// them for its Data-on-MDT files on its own server.
func (o *OST) RegisterData(s *rpc.Server) {
	s.Handle(proto.OWrite, o.write)
	s.Handle(proto.ORead, o.read)
	rpc.HandleFunc(s, proto.OPunch, o.punch)
	rpc.HandleFunc(s, proto.OGetattr, o.getattr)
	rpc.HandleFunc(s, proto.ODestroy, o.destroy)
	rpc.HandleFunc(s, proto.OSync, o.sync)
	rpc.HandleFunc(s, proto.OQuotaGet, o.quotaGet)
	rpc.HandleFunc(s, proto.OFallocate, o.fallocate)
	rpc.HandleFunc(s, proto.OList, o.listObjects)
}

// write stores the request's bulk at its offset. A write wholly inside
// blocks the object already has (a rewrite) goes straight to the file:
// no lock beyond the object's shared one, no grant, no quota, no index
// update. Any other write is admitted against quota and space first
// (EDQUOT or ENOSPC before a byte is written) and charged afterwards with
// what fstat shows it allocated.
func (o *OST) write(ctx context.Context, r *rpc.Request) (rpc.Reply, error) {
	var req proto.OWriteReq
	if err := r.Decode(&req); err != nil {
		return rpc.Reply{}, fmt.Errorf("%s: write: %v: %w", o.name, err, syscall.EINVAL)
	}
	o.space.bind(r.Peer, req.Grant.Client)
	if len(req.Extents) > 0 {
		return o.writeExtents(ctx, req, r.Bulk)
	}
	return o.writeObject(ctx, req, r.Bulk)
}

// writeExtents writes each of req's extents from the bulk, in order: a
// client's scattered small writes to one chunk in one round trip. A
// failure leaves the extents before it written; the client sends the
// whole request again, and writing the same bytes twice is harmless. The
// reply is the last write's grant (the newest) with the largest end.
func (o *OST) writeExtents(ctx context.Context, req proto.OWriteReq, bulk []byte) (rpc.Reply, error) {
	total := uint64(0)
	for _, e := range req.Extents {
		total += uint64(e.Len)
	}
	switch {
	case len(req.Tag) > 0 || len(req.Extents) > proto.MaxWriteExtents:
		return rpc.Reply{}, fmt.Errorf("%s: write %s: %d extents (at most %d, and no tag): %w",
			o.name, req.Obj, len(req.Extents), proto.MaxWriteExtents, syscall.EINVAL)
	case total != uint64(len(bulk)):
		return rpc.Reply{}, fmt.Errorf("%s: write %s: extents of %d bytes, bulk of %d: %w",
			o.name, req.Obj, total, len(bulk), syscall.EINVAL)
	}
	out := &proto.OWriteReply{}
	for _, e := range req.Extents {
		one := req
		one.Off, one.Extents = e.Off, nil
		rep, err := o.writeObject(ctx, one, bulk[:e.Len])
		if err != nil {
			return rep, err
		}
		bulk = bulk[e.Len:]
		if m, ok := rep.Msg.(*proto.OWriteReply); ok {
			out.Grant, out.Size, out.OverQuota = m.Grant, max(out.Size, m.Size), out.OverQuota || m.OverQuota
		}
	}
	return rpc.Reply{Msg: out}, nil
}

// writeObject writes data at req.Off of req.Obj: ost_write's work, and
// ost_copy's once it has the source's bytes.
func (o *OST) writeObject(ctx context.Context, req proto.OWriteReq, data []byte) (rpc.Reply, error) {
	if err := o.writable(ctx, "write", req.Obj); err != nil {
		return rpc.Reply{}, err
	}
	if req.Off > 1<<50 {
		return rpc.Reply{}, o.errorf("write", req.Obj, syscall.EFBIG)
	}
	if err := checkTag(&req); err != nil {
		return rpc.Reply{}, o.errorf("write", req.Obj, err)
	}
	mu := o.lock(req.Obj)
	mu.RLock()
	defer mu.RUnlock()
	if o.cfg.InlineMax > 0 {
		rep, done, err := o.writeInline(ctx, &req, data)
		if err != nil {
			return rpc.Reply{}, o.errorf("write", req.Obj, err)
		}
		if done {
			rep.OverQuota = o.overQuota(ctx, req.Grant)
			return rpc.Reply{Msg: rep}, nil
		}
	}
	of, err := o.get(req.Obj, true)
	if err != nil {
		return rpc.Reply{}, o.errorf("write", req.Obj, err)
	}
	defer o.put(of)
	end := req.Off + uint64(len(data))
	est, known := o.ext.unallocated(of.f.Fd(), req.Off, end)
	if known && est == 0 {
		o.ctr.rewritesSkipped.Add(1)
		if err := o.store(of, data, int64(req.Off), req.NoCache); err != nil {
			return rpc.Reply{}, o.errorf("write", req.Obj, err)
		}
		if err := o.putTag(&req); err != nil {
			return rpc.Reply{}, o.errorf("write", req.Obj, err)
		}
		grant, err := o.space.grantNow(req.Grant.Client, req.Grant.Want)
		if err != nil {
			return rpc.Reply{}, o.errorf("write", req.Obj, err)
		}
		return rpc.Reply{Msg: &proto.OWriteReply{Size: end, Grant: grant, OverQuota: o.overQuota(ctx, req.Grant)}}, nil
	}
	rep, err := o.allocatingWrite(ctx, &req, data, of, est)
	if err != nil {
		return rep, err
	}
	if err := o.putTag(&req); err != nil {
		return rpc.Reply{}, o.errorf("write", req.Obj, err)
	}
	if m, ok := rep.Msg.(*proto.OWriteReply); ok {
		m.OverQuota = o.overQuota(ctx, req.Grant)
	}
	return rep, nil
}

// overQuota reports whether an id the write's owner is charged to could
// not grow here by the client's wanted grant without the master refusing
// it: the client then stops caching that owner's writes. An allowance that
// does not cover it is asked for now, so the answer is the master's.
func (o *OST) overQuota(ctx context.Context, g proto.WriteGrant) bool {
	for _, k := range g.Owner.Keys() {
		if !o.quota.Limited(k) {
			continue
		}
		usage := o.space.usageOf(k)
		if o.quota.Within(k, usage+g.Want) {
			continue
		}
		if err := o.quota.Acquire(ctx, k, usage, g.Want); err != nil {
			return true
		}
	}
	return false
}

// store puts data at off in the object and, for a large buffered write,
// starts its disk write at once. A rewrite takes the same path as a first
// write: when only allocating writes started their disk write early, a
// rewritten range was left dirty in the page cache for the client's fsync
// to push out whole, which made rewrite+fsync slower than write+fsync.
func (o *OST) store(of *objFile, data []byte, off int64, noCache bool) error {
	direct, err := o.writeData(of, data, off, noCache)
	if err != nil {
		o.diskFailed("write", of.id, err)
	}
	if err == nil && !direct && !o.cfg.NoEarlyWriteback && len(data) >= earlyWriteback {
		// Best effort: an error here is the disk's, and fsync reports it.
		_ = unix.SyncFileRange(int(of.f.Fd()), off, int64(len(data)), unix.SYNC_FILE_RANGE_WRITE)
		o.ctr.earlyWritebacks.Add(1)
	}
	return err
}

// noteOwner puts the owner on the object file itself, for a reconcile
// that finds the index lost the record (it wins over the record there).
// Whether the file has it is asked of the file, not inferred from the
// record: after a crash the index may keep a record whose file lost its
// xattr (the creation was durable, the xattr was not), and every later
// write under that record would then leave the file without one, its
// blocks charged to root once a crash lost the record too. Failure is
// not an error: the index has the owner until then. The object's
// allocation lock is held.
func (o *OST) noteOwner(of *objFile, owner proto.Owner) {
	if !of.ownerKnown {
		of.owner, of.ownerKnown = readOwnerXattr(o.objPath(of.id)), true
	}
	if of.owner != owner && of.f.SetXattr(ownerXattr, wire.Marshal(nil, &owner)) == nil {
		of.owner = owner
	}
}

// allocated is the object's allocated bytes and size, from the file.
func (o *OST) allocated(of *objFile) (bytes, size uint64, err error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(of.f.Fd()), &st); err != nil {
		return 0, 0, err
	}
	return uint64(st.Blocks) * 512, uint64(st.Size), nil
}

// shrunk records what an object that may have lost blocks (a punch, a
// truncate) now holds. rec and had are its record before.
func (o *OST) shrunk(of *objFile, rec objRecord, had bool) error {
	after, size, err := o.allocated(of)
	if err != nil {
		return err
	}
	if had || after > 0 {
		return o.space.shrink(of.id, rec, had, after, size, false, nil)
	}
	return nil
}

// allocatingWrite is a write that may allocate up to est bytes. The
// object's shared lock is held.
func (o *OST) allocatingWrite(ctx context.Context, req *proto.OWriteReq, data []byte, of *objFile, est uint64) (rpc.Reply, error) {
	am := o.allocLock(req.Obj)
	am.Lock()
	defer am.Unlock()
	rec, had, err := o.idx.object(req.Obj)
	if err != nil {
		return rpc.Reply{}, o.errorf("write", req.Obj, err)
	}
	owner := req.Grant.Owner
	res, err := o.space.admit(ctx, req.Grant.Client, owner, est, req.Grant.Through)
	if err != nil {
		return rpc.Reply{}, o.errorf("write", req.Obj, err)
	}
	o.noteOwner(of, owner)
	end := req.Off + uint64(len(data))
	werr := o.store(of, data, int64(req.Off), req.NoCache)
	after, size, err := o.allocated(of)
	if err != nil {
		after, size = rec.Bytes+est, max(rec.Size, end)
		werr = errors.Join(werr, err)
	}
	// Settle even after a failed write: it may have allocated some blocks.
	grant, serr := o.space.settle(res, req.Obj, rec, had, after, size, req.Grant.Want, nil)
	if werr != nil {
		return rpc.Reply{}, o.errorf("write", req.Obj, werr)
	}
	if serr != nil {
		return rpc.Reply{}, o.errorf("write", req.Obj, serr)
	}
	o.ctr.newAllocations.Add(1)
	return rpc.Reply{Msg: &proto.OWriteReply{Size: end, Grant: grant}}, nil
}

func (o *OST) read(ctx context.Context, r *rpc.Request) (rpc.Reply, error) {
	var req proto.OReadReq
	if err := r.Decode(&req); err != nil {
		return rpc.Reply{}, fmt.Errorf("%s: read: %v: %w", o.name, err, syscall.EINVAL)
	}
	if req.Len > rpc.MaxBulk || req.Off > 1<<50 || req.TagOff > 1<<50 {
		return rpc.Reply{}, o.errorf("read", req.Obj, syscall.EINVAL)
	}
	var tag []byte
	if req.WantTag {
		var err error
		if tag, err = o.getTag(req.Obj, req.TagOff); err != nil {
			return rpc.Reply{}, o.errorf("read", req.Obj, err)
		}
	}
	if o.cfg.InlineMax > 0 {
		rep, ok, err := o.inlineReply(&req, tag)
		if err != nil {
			return rpc.Reply{}, o.errorf("read", req.Obj, err)
		}
		if ok {
			return rep, nil
		}
	}
	of, err := o.get(req.Obj, false)
	if errors.Is(err, os.ErrNotExist) {
		if req.MustExist {
			return rpc.Reply{}, o.errorf("read", req.Obj, syscall.ENOENT)
		}
		return rpc.Reply{Msg: &proto.OReadReply{Tag: tag}}, nil // never written: a hole
	}
	if err != nil {
		return rpc.Reply{}, o.errorf("read", req.Obj, err)
	}
	defer o.put(of)
	var buf []byte
	var done func()
	if req.Len <= 1<<20 {
		bp := bufPool.Get().(*[]byte)
		buf, done = (*bp)[:req.Len], func() { bufPool.Put(bp) }
	} else {
		buf = make([]byte, req.Len)
	}
	n, err := of.f.ReadAt(buf, int64(req.Off))
	if err != nil && err != io.EOF {
		if done != nil {
			done()
		}
		return rpc.Reply{}, o.errorf("read", req.Obj, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(of.f.Fd()), &st); err != nil {
		if done != nil {
			done()
		}
		return rpc.Reply{}, o.errorf("read", req.Obj, err)
	}
	return rpc.Reply{Msg: &proto.OReadReply{N: uint32(n), Size: uint64(st.Size), Tag: tag}, Bulk: [][]byte{buf[:n]}, Done: done}, nil
}

func (o *OST) punch(ctx context.Context, r *proto.OPunchReq) (any, error) {
	if err := o.writable(ctx, "punch", r.Obj); err != nil {
		return nil, err
	}
	if r.Size > 1<<50 {
		return nil, o.errorf("punch", r.Obj, syscall.EFBIG)
	}
	mu := o.lock(r.Obj)
	mu.Lock()
	defer mu.Unlock()
	if o.cfg.InlineMax > 0 {
		if done, err := o.punchInline(r.Obj, r.Size); err != nil {
			return nil, o.errorf("punch", r.Obj, err)
		} else if done {
			return &proto.Empty{}, nil
		}
	}
	of, err := o.get(r.Obj, r.Size > 0)
	if errors.Is(err, os.ErrNotExist) {
		// Truncating a missing object to 0: nothing to do but forget its
		// tags, if any survived it.
		if err := o.dropTags(r.Obj, 0); err != nil {
			return nil, o.errorf("punch", r.Obj, err)
		}
		return &proto.Empty{}, nil
	}
	if err != nil {
		return nil, o.errorf("punch", r.Obj, err)
	}
	defer o.put(of)
	rec, had, err := o.idx.object(r.Obj)
	if err != nil {
		return nil, o.errorf("punch", r.Obj, err)
	}
	if err := of.f.Truncate(int64(r.Size)); err != nil {
		return nil, o.errorf("punch", r.Obj, err)
	}
	if err := o.dropTags(r.Obj, r.Size); err != nil {
		return nil, o.errorf("punch", r.Obj, err)
	}
	if err := o.shrunk(of, rec, had); err != nil {
		return nil, o.errorf("punch", r.Obj, err)
	}
	return &proto.Empty{}, nil
}

func (o *OST) getattr(ctx context.Context, r *proto.OGetattrReq) (any, error) {
	if rec, ok, err := o.inlineRecord(r.Obj); err != nil {
		return nil, o.errorf("getattr", r.Obj, err)
	} else if ok {
		return &proto.OGetattrReply{Exists: true, Size: rec.Size, Blocks: rec.Bytes / 512}, nil
	}
	var st unix.Stat_t
	if err := o.fs.Stat(o.objPath(r.Obj), &st); errors.Is(err, syscall.ENOENT) {
		return &proto.OGetattrReply{}, nil
	} else if err != nil {
		return nil, o.errorf("getattr", r.Obj, err)
	}
	return &proto.OGetattrReply{Exists: true, Size: uint64(st.Size), Blocks: uint64(st.Blocks)}, nil
}

// Blocks is the 512-byte blocks object id has allocated (0 if it does
// not exist); false if its file could not be looked at.
func (o *OST) Blocks(id proto.ObjID) (uint64, bool) {
	if rec, ok, err := o.inlineRecord(id); err != nil {
		return 0, false
	} else if ok {
		return rec.Bytes / 512, true
	}
	var st unix.Stat_t
	if err := o.fs.Stat(o.objPath(id), &st); errors.Is(err, syscall.ENOENT) {
		return 0, true
	} else if err != nil {
		return 0, false
	}
	return uint64(st.Blocks), true
}

// writable refuses a change from a client of a read-only nodemap.
func (o *OST) writable(ctx context.Context, op string, obj proto.ObjID) error {
	if p := o.nodemaps.Policy(rpc.PeerFrom(ctx)); p.ReadOnly {
		return fmt.Errorf("%s: %s %v: nodemap %s is read-only: %w", o.name, op, obj, p.Name, syscall.EROFS)
	}
	if err := o.readOnly(); err != nil {
		return fmt.Errorf("%s %v: %w", op, obj, err)
	}
	return nil
}

func (o *OST) destroy(ctx context.Context, r *proto.ODestroyReq) (any, error) {
	if err := o.writable(ctx, "destroy", r.Obj); err != nil {
		return nil, err
	}
	mu := o.lock(r.Obj)
	mu.Lock()
	defer mu.Unlock()
	am := o.allocLock(r.Obj) // an inline object's reads take it
	am.Lock()
	defer am.Unlock()
	o.forget(r.Obj)
	rec, had, err := o.idx.object(r.Obj)
	if err != nil {
		return nil, o.errorf("destroy", r.Obj, err)
	}
	if !had || !rec.Inline { // an inline object has no file (inline.go)
		if err := o.fs.Remove(o.objPath(r.Obj)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, o.errorf("destroy", r.Obj, err)
		}
	}
	// An inline object has no tags (a tagged write spills it first), and
	// looking for them was a tenth of a Data-on-MDT removal's CPU.
	if !had || !rec.Inline {
		if err := o.dropTags(r.Obj, 0); err != nil {
			return nil, o.errorf("destroy", r.Obj, err)
		}
	}
	if had {
		if err := o.space.shrink(r.Obj, rec, true, 0, 0, true, nil); err != nil {
			return nil, o.errorf("destroy", r.Obj, err)
		}
	}
	return &proto.Empty{}, nil
}

func (o *OST) statfs(ctx context.Context, _ *proto.Empty) (any, error) {
	var st unix.Statfs_t
	if err := o.fs.Statfs(o.dir, &st); err != nil {
		return nil, fmt.Errorf("%s: statfs: %v: %w", o.name, err, syscall.EIO)
	}
	bs := uint64(st.Bsize)
	out := &proto.StatfsReply{Blocks: st.Blocks * bs, Bfree: st.Bfree * bs, Files: st.Files, Ffree: st.Ffree}
	sn := o.space.snapshot()
	if sn.capacity > 0 {
		out.Blocks = min(out.Blocks, sn.capacity)
		out.Bfree = min(out.Bfree, sub(sn.capacity, sn.used))
	}
	// What a writer without a grant can still get: space promised to
	// clients is not available to others (as Lustre's OSTs report it).
	out.Bavail = sn.free
	if sn.capacity == 0 {
		out.Fsid = proto.FsidOf(st.Fsid.Val)
	}
	switch {
	case o.StoreNoSpace() || o.space.diskAvail() == 0:
		out.Flags |= proto.StatfsNoSpace
	case o.readOnly() != nil:
		out.Flags |= proto.StatfsReadOnly
	}
	return out, nil
}

// sync makes the listed objects durable (fdatasync of each).
func (o *OST) sync(ctx context.Context, r *proto.OSyncReq) (any, error) {
	if len(r.Objs) > 4096 {
		return nil, fmt.Errorf("%s: sync of %d objects: %w", o.name, len(r.Objs), syscall.EINVAL)
	}
	inline := false
	for _, id := range r.Objs {
		if _, ok, err := o.inlineRecord(id); err != nil {
			return nil, o.errorf("sync", id, err)
		} else if ok {
			inline = true // its bytes are the index's: the WAL sync below
			continue
		}
		of, err := o.get(id, false)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, o.errorf("sync", id, err)
		}
		err = of.f.Datasync()
		o.put(of)
		if err != nil {
			return nil, o.errorf("sync", id, err)
		}
	}
	if err := o.syncTags(); err != nil {
		return nil, fmt.Errorf("%s: sync: %w", o.name, err)
	}
	if inline {
		if err := o.idx.logSync(); err != nil {
			return nil, fmt.Errorf("%s: sync: %w", o.name, err)
		}
	}
	return &proto.Empty{}, nil
}

// listObjects pages through every object, for fsck.
func (o *OST) listObjects(ctx context.Context, r *proto.OListReq) (any, error) {
	limit := int(min(max(r.Max, 1), 4096))
	var all []proto.ObjID
	subs, err := o.fs.ReadDir(o.dir)
	if err != nil {
		return nil, fmt.Errorf("%s: list: %v: %w", o.name, err, syscall.EIO)
	}
	for _, s := range subs {
		ents, err := o.fs.ReadDir(filepath.Join(o.dir, s.Name()))
		if err != nil {
			continue
		}
		for _, e := range ents {
			if id, ok := parseObjName(e.Name()); ok && less(r.After, id) {
				all = append(all, id)
			}
		}
	}
	if o.cfg.InlineMax > 0 {
		ids, err := o.idx.inlineObjects(r.After)
		if err != nil {
			return nil, fmt.Errorf("%s: list: %v: %w", o.name, err, syscall.EIO)
		}
		all = append(all, ids...)
	}
	sortObjs(all)
	out := &proto.OListReply{EOF: len(all) <= limit}
	out.Objs = all[:min(limit, len(all))]
	return out, nil
}

func less(a, b proto.ObjID) bool {
	ka, kb := a.FID.Key(), b.FID.Key()
	if c := strings.Compare(string(ka[:]), string(kb[:])); c != 0 {
		return c < 0
	}
	return a.Stripe < b.Stripe
}

func sortObjs(s []proto.ObjID) {
	slices.SortFunc(s, func(a, b proto.ObjID) int {
		switch {
		case less(a, b):
			return -1
		case less(b, a):
			return 1
		}
		return 0
	})
}
