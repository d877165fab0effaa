// Package fs is the stripefs client library: namespace calls to the MDTs
// and file I/O through layouts to the OSTs. It knows nothing of FUSE, so
// the FUSE frontend and the NFS gateway share it.
package fs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// Options configure a client.
type Options struct {
	// MGS is MDT0's address, where the cluster map is read.
	MGS string
	// Name identifies this client to the servers.
	Name string
	// RetryFor is how long a call waits for an unreachable server (a
	// restart) before failing with EIO.
	RetryFor time.Duration
	// MaxDirty bounds the unflushed write data of the whole mount, and
	// MaxDirtyPerFile that of one file (bytes).
	MaxDirty, MaxDirtyPerFile int64
	// RPCsInFlight bounds the requests this client has outstanding to one
	// OST.
	RPCsInFlight int
	// DirtyExpire is how long a partly written chunk may wait for the rest
	// of its data before it is sent anyway.
	DirtyExpire time.Duration
	// ReadAhead is how far ahead of a sequential reader one file is read
	// (bytes; negative turns read-ahead off), and MaxReadAheadTotal bounds
	// the read-ahead data of the whole mount.
	ReadAhead, MaxReadAheadTotal int64
	// NoCloseWrite flushes a small Data-on-MDT file's data at close(2),
	// as any other file's, instead of letting its close carry it
	// (closewrite.go).
	NoCloseWrite bool
	// NoLocalReads keeps every request on the RPC even when its server is
	// in this process (stripefs up: an OST lends its object files to the
	// mount for reads, view.go, and servers take calls directly,
	// rpc.Client.Direct).
	NoLocalReads bool
	// DropECWrite, if set, is asked before each unit write of an
	// erasure-coded row and drops the write (reporting success) when it
	// returns true: a fault seam for crash tests, never set otherwise.
	DropECWrite func(fid proto.FID, row uint64, unit int) bool
	// NoLocks turns caching under locks off (locks.go): the client takes
	// no locks, and coherency between clients is close-to-open at best,
	// as before the lock service. For comparison only.
	NoLocks bool
	// LRUSize bounds the locks the client keeps (DefaultLRUSize); unused
	// ones past it are given back early.
	LRUSize int
	// Key is what the client proves itself with to the servers (nil:
	// the process's key), always as a client; Flavor is the lowest
	// flavour it accepts (0: rpc.DefaultFlavor).
	Key    *rpc.Key
	Flavor rpc.Flavor
	// Resume, if set, is the identity of the client this one carries on
	// from (takeover.go).
	Resume *Identity
}

// Defaults for Options fields left zero.
const (
	DefaultMaxDirty        = 256 << 20
	DefaultMaxDirtyPerFile = 64 << 20
	DefaultRPCsInFlight    = 8
	DefaultDirtyExpire     = 5 * time.Second
	DefaultReadAhead       = 16 << 20
	DefaultReadAheadTotal  = 128 << 20
)

// Client is a connection to one stripefs filesystem.
type Client struct {
	opts Options

	// policy is what the client's nodemap makes of it (MNodemapMine):
	// its root is the fileset's, when the map has one.
	policy proto.Nodemap

	mu   sync.RWMutex
	cfg  *proto.Config
	mdts map[uint32]*rpc.Client
	osts map[uint32]*rpc.Client

	filesMu sync.Mutex
	files   map[proto.FID]*inodeState // files open through this client
	// attrEpoch orders this client's size reports against the MDT
	// requests whose replies carry attributes (overlay).
	attrEpoch atomic.Uint64
	closed    closedSizes // what released files' last reports said (closedsizes.go)

	bg   sync.WaitGroup // flushes and object destroys in flight
	stop chan struct{}

	dirtyBytes atomic.Int64 // chunk buffers held by the write-back cache
	raBytes    atomic.Int64 // chunks held by read-ahead
	inflight   atomic.Int64 // chunk flushes in flight
	// flushFailures counts failed chunk flushes of every file: a writer
	// waiting for memory stops waiting on flushes that fail.
	flushFailures atomic.Int64
	memMu         sync.Mutex
	memCond       *sync.Cond
	semMu         sync.Mutex
	sems          map[uint32]chan struct{}

	identity *rpc.Client // UUID and XID counter every connection shares

	// Stats counts this client's RPCs to all targets; targetStats to
	// each (by name: MDT0000, OST0001), under targetMu.
	Stats       *rpc.Stats
	targetMu    sync.Mutex
	targetStats map[string]*rpc.Stats
	blocks      blockCache // st_blocks of files (blocks.go)
	counters    counters
	ec          ecState

	lmvMu sync.Mutex
	lmvs  map[proto.FID]*proto.LMV // layouts of striped directories (stripedir.go)

	dirs dirAttrs // directories as this client's last change left them

	locks  lockTable  // what the client holds of the lock service (locks.go)
	xattrs xattrCache // extended attributes under Update locks (xattrcache.go)
	fattrs fileAttrs  // regular files' attributes under Update locks (fileattrs.go)
	// dataGen counts what may change file data here (a write open, a
	// truncate): an open's data is kept only if none came while the open
	// was on its way (opendata.go).
	dataGen atomic.Uint64
	flocks  flockTable // its application locks (flock.go)
}

// Connect reads the cluster map from the MGS and returns a client.
func Connect(ctx context.Context, opts Options) (*Client, error) {
	if opts.MGS == "" {
		return nil, fmt.Errorf("fs: no MGS address")
	}
	if opts.Name == "" {
		opts.Name = "client"
	}
	if opts.RetryFor == 0 {
		opts.RetryFor = 60 * time.Second
	}
	opts.MaxDirty = cmp.Or(opts.MaxDirty, DefaultMaxDirty)
	opts.MaxDirtyPerFile = cmp.Or(opts.MaxDirtyPerFile, DefaultMaxDirtyPerFile)
	opts.RPCsInFlight = cmp.Or(opts.RPCsInFlight, DefaultRPCsInFlight)
	opts.DirtyExpire = cmp.Or(opts.DirtyExpire, DefaultDirtyExpire)
	opts.ReadAhead = cmp.Or(opts.ReadAhead, DefaultReadAhead)
	opts.MaxReadAheadTotal = cmp.Or(opts.MaxReadAheadTotal, DefaultReadAheadTotal)
	opts.LRUSize = cmp.Or(opts.LRUSize, DefaultLRUSize)
	if opts.MaxDirty < 4*maxRPC || opts.MaxDirtyPerFile < 2*maxRPC || opts.RPCsInFlight < 1 {
		return nil, fmt.Errorf("fs: dirty limits must be at least %d MiB per mount and %d MiB per file, RPCs in flight at least 1",
			4*maxRPC>>20, 2*maxRPC>>20)
	}
	c := &Client{opts: opts, mdts: map[uint32]*rpc.Client{}, osts: map[uint32]*rpc.Client{},
		files: map[proto.FID]*inodeState{}, Stats: rpc.NewStats(), stop: make(chan struct{}),
		sems: map[uint32]chan struct{}{}}
	c.memCond = sync.NewCond(&c.memMu)
	c.locks.init(opts.NoLocks)
	c.identity = rpc.NewClient("", opts.Name)
	if r := opts.Resume; r != nil {
		c.identity.Resume(r.UUID, r.XID)
		// The servers key lock requests by cookie too (a resend is
		// recognised by it): start past any the predecessor drew, one
		// per request at most, as its XIDs.
		c.flocks.cookies.Store(r.XID)
		c.locks.cookies.Store(r.XID)
	}
	go c.flusher()
	go c.lruWorker()
	c.mdts[0] = c.newMDTRPC(0, opts.MGS)
	if err := c.refreshConfig(ctx); err != nil {
		c.Close()
		return nil, err
	}
	if err := c.mdtCall(ctx, proto.RootFID, proto.MNodemapMine, &proto.Empty{}, &c.policy); err != nil {
		c.Close()
		return nil, fmt.Errorf("fs: nodemap: %w", err)
	}
	return c, nil
}

// Root is the directory the client sees as the filesystem's root: the
// root, or its nodemap's fileset.
func (c *Client) Root() proto.FID {
	if !c.policy.FilesetFID.IsZero() {
		return c.policy.FilesetFID
	}
	return proto.RootFID
}

// Policy is the client's nodemap as MDT0 applies it.
func (c *Client) Policy() proto.Nodemap { return c.policy }

// KeyFile is the file of the key the client proves itself with ("" for
// a key that came from no file).
func (c *Client) KeyFile() string {
	if c.opts.Key != nil {
		return c.opts.Key.Path
	}
	if k, err := rpc.ProcessKey(); err == nil {
		return k.Path
	}
	return ""
}

// TargetStats are the client's RPC counters and latencies for each
// target it called, by target name (MDT0000, OST0001).
func (c *Client) TargetStats() map[string]*rpc.Stats {
	c.targetMu.Lock()
	defer c.targetMu.Unlock()
	out := make(map[string]*rpc.Stats, len(c.targetStats))
	for k, v := range c.targetStats {
		out[k] = v
	}
	return out
}

// statsFor is the counters of the target called name, made on first use
// and kept across reconnections.
func (c *Client) statsFor(name string) *rpc.Stats {
	c.targetMu.Lock()
	defer c.targetMu.Unlock()
	if c.targetStats == nil {
		c.targetStats = map[string]*rpc.Stats{}
	}
	s := c.targetStats[name]
	if s == nil {
		s = rpc.NewStats()
		c.targetStats[name] = s
	}
	return s
}

func (c *Client) newRPC(addr string) *rpc.Client {
	r := rpc.NewClient(addr, c.opts.Name)
	r.ShareIdentity(c.identity) // one caller to the servers, whatever the connection
	r.Key, r.Role, r.Flavor = c.opts.Key, rpc.RoleClient, c.opts.Flavor
	r.RetryFor = c.opts.RetryFor
	// A server that stops answering (stopped, hung, cut off) must end in
	// EIO within about RetryFor as one that refuses connections does.
	r.DeadAfter = min(max(c.opts.RetryFor/2, time.Second), 20*time.Second)
	r.Stats = c.Stats
	// A server in this process (stripefs up) runs our calls in our
	// goroutine: an OST writes straight from the chunk buffers, and a
	// metadata call costs no handoffs between goroutines.
	r.Direct = !c.opts.NoLocalReads
	return r
}

// newMDTRPC is newRPC for an MDT: its changes are kept until committed
// and replayed after a restart, with its locks; it calls us back to give
// locks up.
func (c *Client) newMDTRPC(idx uint32, addr string) *rpc.Client {
	r := c.newRPC(addr)
	r.TargetStats = c.statsFor(proto.TargetName(proto.KindMDT, idx))
	r.Replay = true
	r.HandleCallback(proto.CBBlocking, c.handleBlocking(idx))
	r.HandleCallback(proto.CBGlimpse, c.handleGlimpse)
	r.OnRestart = func(ctx context.Context, do func(*rpc.Call) error) {
		c.replayLocks(ctx, idx, do)
		c.replayFlocks(idx, do)
	}
	return r
}

// refreshConfig rereads the cluster map and (re)connects targets whose
// address changed.
func (c *Client) refreshConfig(ctx context.Context) error {
	c.mu.RLock()
	mgs := c.mdts[0]
	c.mu.RUnlock()
	cfg, err := rpc.Invoke[proto.Config](ctx, mgs, proto.GConfig, &proto.Empty{})
	if err != nil {
		return fmt.Errorf("fs: read cluster map from %s: %w", c.opts.MGS, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cfg = cfg
	for _, t := range cfg.MDTs {
		if t.Index == 0 {
			continue // MDT0 is the MGS address we were given
		}
		if old := c.mdts[t.Index]; old == nil || old.Addr != t.Addr {
			if old != nil {
				old.Close()
			}
			c.mdts[t.Index] = c.newMDTRPC(t.Index, t.Addr)
		}
	}
	for _, t := range cfg.OSTs {
		if old := c.osts[t.Index]; old == nil || old.Addr != t.Addr {
			if old != nil {
				old.Close()
			}
			c.osts[t.Index] = c.newRPC(t.Addr)
			c.osts[t.Index].TargetStats = c.statsFor(proto.TargetName(proto.KindOST, t.Index))
		}
	}
	return nil
}

// MGS is the address the client reads the cluster map from.
func (c *Client) MGS() string { return c.opts.MGS }

// Config returns the cluster map as last read.
func (c *Client) Config() proto.Config {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return *c.cfg
}

// Close waits for background work and closes every connection.
func (c *Client) Close() error {
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	c.bg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	// Say goodbye to the MDTs, so that after a restart they do not wait
	// for this client's replays (it will never send them).
	var wg sync.WaitGroup
	for _, r := range c.mdts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			r.Disconnect(ctx)
		}()
	}
	wg.Wait()
	for _, r := range c.mdts {
		r.Close()
	}
	for _, r := range c.osts {
		r.Close()
	}
	return nil
}

func (c *Client) target(ctx context.Context, kind string, idx uint32) (*rpc.Client, error) {
	if kind == proto.KindOST && proto.IsDoMOST(idx) {
		// Data-on-MDT: the MDT serves the object's data methods.
		kind, idx = proto.KindMDT, proto.DoMIndex(idx)
	}
	for attempt := 0; ; attempt++ {
		c.mu.RLock()
		m := c.osts
		if kind == proto.KindMDT {
			m = c.mdts
		}
		r := m[idx]
		c.mu.RUnlock()
		if r != nil {
			return r, nil
		}
		if attempt > 0 {
			return nil, fmt.Errorf("fs: %s%d is not in the cluster map: %w", kind, idx, syscall.EIO)
		}
		if err := c.refreshConfig(ctx); err != nil {
			return nil, err
		}
	}
}

// call sends a request, resending it when the connection broke before the
// reply came (a restarted server). A resend carries the first send's XID:
// OST requests are idempotent, and an MDT recognises a resent change it
// already made and answers it without doing it twice.
func (c *Client) call(ctx context.Context, r *rpc.Client, call *rpc.Call) error {
	// ESHUTDOWN: an MDT stopping while it held the request in its
	// recovery window; it is not done, and the next start takes it.
	return asErrno(rpc.DoResending(ctx, r, call, c.opts.RetryFor, func(err error) bool { return errors.Is(err, syscall.ESHUTDOWN) }))
}

// asErrno keeps errnos and turns transport failures into EIO, so callers
// always have an errno to give the kernel.
func asErrno(err error) error {
	if err == nil {
		return nil
	}
	var oe *net.OpError // not net.Error: syscall.Errno is one of those
	if errors.As(err, &oe) || errors.Is(err, rpc.ErrDisconnected) {
		// An unreachable server is EIO to the program, whatever the socket
		// said (ECONNREFUSED, ECONNRESET…).
		return fmt.Errorf("%v: %w", err, syscall.EIO)
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return err
	}
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("%v: %w", err, syscall.EINTR)
	}
	return fmt.Errorf("%v: %w", err, syscall.EIO)
}

// mdtCall sends a request to the MDT that owns fid.
func (c *Client) mdtCall(ctx context.Context, fid proto.FID, method uint16, req, resp any) error {
	return c.mdtCallBulk(ctx, fid, method, req, resp, nil)
}

// mdtCallBulk is mdtCall of a request with bulk data, which must stay
// unchanged while the request may be replayed (rpc.Call.Replay).
func (c *Client) mdtCallBulk(ctx context.Context, fid proto.FID, method uint16, req, resp any, bulk [][]byte) error {
	r, err := c.target(ctx, proto.KindMDT, uint32(fid.MDT()))
	if err != nil {
		return err
	}
	call := &rpc.Call{Method: method, Req: req, Resp: resp, Replay: changes[method], BulkOut: bulk}
	kept := c.attrsAround(fid, method, req) // fileattrs.go
	defer func() { kept(resp, err) }()
	switch {
	case method == proto.MRename:
		defer c.dirs.changingAll()()
	case changes[method] && method != proto.MOpen && method != proto.MClose && !fid.IsStripedDir() && !fid.IsDirStripe():
		// A striped directory's attributes are its stripes' merged:
		// no one reply gives them.
		done := c.dirs.changing(fid)
		defer func() { done(changedDir(resp, err), call.Transno()) }()
	}
	err = c.call(ctx, r, call)
	if errors.Is(err, syscall.ENOTCONN) && !c.locks.off {
		// Evicted: what this client's locks guarded is lost to it; it
		// comes back as a new client and sends the request again.
		c.evicted(uint32(fid.MDT()), r)
		call = &rpc.Call{Method: method, Req: req, Resp: resp, Replay: changes[method], BulkOut: bulk}
		err = c.call(ctx, r, call)
	}
	if call.Direct {
		c.counters.directMDTCalls.Add(1)
	}
	if ar, ok := resp.(*proto.AttrReply); ok && err == nil && ar.HasBlocks {
		c.noteBlocks(&ar.Attr, ar.Blocks)
	}
	return err
}

// changedDir is what a change's reply says its directory became.
func changedDir(resp any, err error) *proto.Attr {
	var a *proto.Attr
	switch r := resp.(type) {
	case *proto.AttrReply:
		a = &r.Parent
	case *proto.UnlinkReply:
		a = &r.Parent
	}
	if err != nil || a == nil || a.FID.IsZero() {
		return nil
	}
	return a
}

// KeepDirAttrs lets a directory's attributes, as given by the reply to
// this client's latest change in it, answer the Getattrs of it soon after
// the reply, never later than ttl (zero: never), and not once its Update
// lock is called back. FUSE asks
// for them after every such change (dirattrs.go); ttl is the mount's
// attribute timeout.
func (c *Client) KeepDirAttrs(ttl time.Duration) { c.dirs.keep(ttl) }

// changes are the MDT methods a client replays if the MDT restarts before
// committing them.
var changes = map[uint16]bool{
	proto.MSetattr: true, proto.MCreate: true, proto.MMkdir: true, proto.MSymlink: true,
	proto.MUnlink: true, proto.MRename: true, proto.MLink: true, proto.MSetxattr: true,
	proto.MRemovexattr: true, proto.MOpen: true, proto.MClose: true,
}

// Errno extracts the errno of an error from this package (EIO if none).
func Errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return syscall.EIO
}
