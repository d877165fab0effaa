// Package nfsexport re-exports stripefs over NFS: helpers for kernel nfsd
// re-exporting a FUSE mount (ExportsLine), and a user-space NFSv3 gateway
// over the client library, for hosts without kernel nfsd (Gateway).
//
// The gateway is github.com/willscott/go-nfs serving a billy.Filesystem
// that calls fs.Client directly, not the FUSE mount. File handles are FID
// keys, so they need no table and stay valid across gateway and server
// restarts. Writes go through fs.File.WriteV into the client's write-back
// cache, which merges them by file offset whatever their boundaries; a
// small cache of open files lets consecutive WRITEs share it, and COMMIT
// (or a stable WRITE) syncs the file before its reply leaves.
package nfsexport

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	nfs "github.com/willscott/go-nfs"

	"github.com/stripefs/stripefs/fs"
	"github.com/stripefs/stripefs/nodemap"
	"github.com/stripefs/stripefs/proto"
)

// Options configure a Gateway.
type Options struct {
	// Allow lists the client addresses served; others are disconnected
	// as they connect. Empty means Loopback.
	Allow []netip.Prefix
	// ReadOnly refuses every change.
	ReadOnly bool
	// Squash is how callers' ids are taken: root squashed unless
	// NoRootSquash, everyone under AllSquash (which alone lets AUTH_NONE
	// calls in), to AnonUID:AnonGID (65534 when zero).
	Squash Squash
	// MaxOpenFiles bounds the files kept open between calls (default 64).
	MaxOpenFiles int
	// IdleClose is how long an unused file stays open (default 1s). Its
	// release tells the MDT the size written, which other clients see.
	IdleClose time.Duration
	// Logf, if set, takes the gateway's log lines (refused clients,
	// failed flushes) instead of slog, which logs them at their levels
	// with their attributes (fid=, peer=).
	Logf func(format string, args ...any)
}

// Stats counts what the gateway did about durability.
type Stats struct {
	UnstableWrites int64 // WRITEs answered UNSTABLE (kept in the write-back cache)
	StableWrites   int64 // DATA_SYNC/FILE_SYNC WRITEs, synced before the reply
	Commits        int64 // COMMITs, synced before the reply
	SyncErrors     int64 // syncs that failed and were answered with an error
	Refused        int64 // connections refused by the allow-list
}

// Gateway serves one fs.Client over NFSv3 (and the MOUNT protocol on the
// same port).
type Gateway struct {
	opts  Options
	files *openFiles
	base  fsys    // what every connection's fsys shares
	id    [8]byte // the write verifier

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	ls     []net.Listener
	conns  map[net.Conn]struct{}
	closed bool

	unstable, stable, commits, syncErrs, refused atomic.Int64
}

// New returns a gateway over c. The caller keeps c and closes it after
// the gateway.
func New(c *fs.Client, opts Options) *Gateway {
	if len(opts.Allow) == 0 {
		opts.Allow = Loopback
	}
	if opts.MaxOpenFiles <= 0 {
		opts.MaxOpenFiles = 64
	}
	if opts.IdleClose <= 0 {
		opts.IdleClose = time.Second
	}
	g := &Gateway{opts: opts, conns: map[net.Conn]struct{}{}}
	if opts.Squash.AnonUID == 0 && opts.Squash.AnonGID == 0 {
		opts.Squash.AnonUID, opts.Squash.AnonGID = nodemap.DefaultSquash, nodemap.DefaultSquash
	}
	g.opts = opts
	logf := opts.Logf
	if logf == nil {
		// A release that failed is reported to the next COMMIT.
		logf = func(format string, args ...any) { slog.Warn(fmt.Sprintf(format, args...)) }
	}
	g.files = newOpenFiles(c, opts.MaxOpenFiles, opts.IdleClose, logf)
	g.base = fsys{c: c, files: g.files, names: newNameCache(), readOnly: opts.ReadOnly, squash: opts.Squash}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	// The write verifier: new for each gateway, so that after a restart
	// clients resend what they wrote UNSTABLE and never saw committed.
	_, _ = rand.Read(g.id[:])
	g.wg.Add(1)
	go g.janitor()
	return g
}

func (g *Gateway) janitor() {
	defer g.wg.Done()
	t := time.NewTicker(max(g.opts.IdleClose/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-g.ctx.Done():
			return
		case now := <-t.C:
			g.files.expire(now)
		}
	}
}

// Serve accepts NFS clients on l until Close; it returns nil then.
func (g *Gateway) Serve(l net.Listener) error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		l.Close()
		return fmt.Errorf("nfs: gateway closed")
	}
	g.ls = append(g.ls, l)
	g.mu.Unlock()
	err := g.serve(&listener{Listener: l, g: g})
	g.mu.Lock()
	closed := g.closed
	g.mu.Unlock()
	if closed {
		return nil
	}
	return fmt.Errorf("nfs: serve %s: %w", l.Addr(), err)
}

// serve gives each connection a go-nfs server of its own, whose
// filesystem runs each call as the user the tap saw in it.
func (g *Gateway) serve(l *listener) error {
	for {
		c, err := l.Accept()
		if err != nil {
			return err
		}
		tc := c.(*trackedConn)
		fsys := g.base
		fsys.call = &tc.gate
		srv := &nfs.Server{Handler: &handler{fsys: &fsys}, ID: g.id, Context: g.ctx}
		go srv.Serve(&oneConn{c: tc})
	}
}

// oneConn is a listener of one connection: go-nfs serves it, then waits
// for the next, which comes once the connection is closed, as an error.
type oneConn struct {
	c    *trackedConn
	once sync.Once
}

func (l *oneConn) Accept() (net.Conn, error) {
	var first bool
	l.once.Do(func() { first = true })
	if first {
		return l.c, nil
	}
	<-l.c.closed
	return nil, net.ErrClosed
}

func (l *oneConn) Close() error   { return nil }
func (l *oneConn) Addr() net.Addr { return l.c.LocalAddr() }

// Stats returns the durability counters.
func (g *Gateway) Stats() Stats {
	return Stats{UnstableWrites: g.unstable.Load(), StableWrites: g.stable.Load(), Commits: g.commits.Load(),
		SyncErrors: g.syncErrs.Load(), Refused: g.refused.Load()}
}

// Close stops accepting, disconnects every client and releases every
// open file, flushing its data; it returns the flush errors.
func (g *Gateway) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	ls := g.ls
	conns := make([]net.Conn, 0, len(g.conns))
	for c := range g.conns {
		conns = append(conns, c)
	}
	g.mu.Unlock()
	for _, l := range ls {
		l.Close()
	}
	for _, c := range conns {
		c.Close() // takes g.mu to forget itself
	}
	g.cancel()
	g.wg.Wait()
	if err := g.files.close(); err != nil {
		return fmt.Errorf("nfs: flush on close: %w", err)
	}
	return nil
}

// syncFile makes one file durable for the tap.
func (g *Gateway) syncFile(fid proto.FID) error {
	ctx, cancel := context.WithTimeout(g.ctx, 5*time.Minute)
	defer cancel()
	err := g.files.commit(ctx, fid)
	if err != nil {
		g.log(slog.LevelError, fmt.Sprintf("nfs: commit %s: %v", fid, err), "fid", fid.String())
	}
	return err
}

// log logs msg at level with attrs, or hands it to Options.Logf.
func (g *Gateway) log(level slog.Level, msg string, attrs ...any) {
	if g.opts.Logf != nil {
		g.opts.Logf("%s", msg)
		return
	}
	slog.Log(context.Background(), level, msg, attrs...)
}

func (g *Gateway) count(proc, stable uint32, err error) {
	switch {
	case err != nil:
		g.syncErrs.Add(1)
	case proc == procCommit:
		g.commits.Add(1)
	case stable == unstable:
		g.unstable.Add(1)
	default:
		g.stable.Add(1)
	}
}

// listener refuses clients outside the allow-list and wraps the others in
// the stability tap.
type listener struct {
	net.Listener
	g *Gateway
}

func (l *listener) Accept() (net.Conn, error) {
	g := l.g
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if !allowed(g.opts.Allow, c.RemoteAddr()) {
			g.refused.Add(1)
			g.log(slog.LevelWarn, fmt.Sprintf("nfs: refused %s: not in the allow-list", c.RemoteAddr()), "peer", c.RemoteAddr().String())
			c.Close()
			continue
		}
		g.mu.Lock()
		if g.closed {
			g.mu.Unlock()
			c.Close()
			return nil, net.ErrClosed
		}
		tc := &trackedConn{tapConn: newTapConn(c, g.syncFile, g.count), g: g, closed: make(chan struct{})}
		tc.gateCalls(!g.opts.Squash.AllSquash)
		g.conns[tc] = struct{}{}
		g.mu.Unlock()
		return tc, nil
	}
}

// trackedConn forgets itself when closed.
type trackedConn struct {
	*tapConn
	g      *Gateway
	once   sync.Once
	closed chan struct{}
}

func (c *trackedConn) Close() error {
	err := c.tapConn.Close()
	c.once.Do(func() {
		c.g.mu.Lock()
		delete(c.g.conns, c)
		c.g.mu.Unlock()
		close(c.closed)
	})
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
