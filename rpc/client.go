package rpc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/stripefs/stripefs/wire"
)

// ErrDisconnected reports a call whose connection broke after the request
// was sent: the server may or may not have executed it.
var ErrDisconnected = errors.New("rpc: connection lost")

// RemoteError is an error the server described in text.
type RemoteError struct{ Text string }

func (e *RemoteError) Error() string { return e.Text }

// Call is one request and where its reply goes.
type Call struct {
	Method  uint16
	Req     any      // wire-encoded request message, or nil
	BulkOut [][]byte // data sent after the message, not copied
	Resp    any      // decoded reply message, or nil
	BulkIn  []byte   // reply data is read straight into this buffer
	NBulkIn int      // bytes of BulkIn filled
	// XID is given on the first Do and kept: doing the same Call again
	// after ErrDisconnected is a resend the server can recognise.
	XID uint64
	// Replay marks a change the client must keep until the server commits
	// it, and replay if the server restarts first (Client.Replay on).
	Replay bool
	// FailFast fails the call at once when the server cannot be reached,
	// instead of redialing for RetryFor: for callers that have somewhere
	// else to go (an erasure-coded read rebuilds the data from the other
	// OSTs).
	FailFast bool
	// Direct is set when the call ran its handler directly (Client.Direct).
	Direct bool
	// Cred is the user the call acts for; nil: the one of Do's ctx
	// (WithCred), if any.
	Cred *Cred

	transno, committed uint64 // from the reply header
	replayOf           uint64 // a replay: the transno before the restart
	replyMsg           []byte // the reply's message, kept with a change for its replay

	done chan struct{}
	err  error
}

// Transno is the transno of the change the call made, from its reply (0:
// none): a server applies its changes in transno order.
func (c *Call) Transno() uint64 { return c.transno }

// Client is a connection to one server that redials when the connection
// is lost. It is safe for concurrent use; calls share one connection.
type Client struct {
	Addr string
	Name string // our name, sent in the hello
	// UUID names this client instance to servers (reply reconstruction
	// after a resend is keyed by it). Clients that share it share XIDs.
	UUID  string
	xids  *atomic.Uint64
	Stats *Stats
	// TargetStats, if set, counts this client's calls apart from the
	// others that share Stats (a mount's calls to each target).
	TargetStats *Stats
	// DialTimeout bounds each connection attempt.
	DialTimeout time.Duration
	// RetryFor is how long a call keeps redialing a server that refuses
	// connections (e.g. while it restarts) before giving up.
	RetryFor time.Duration
	// DeadAfter is how long a connection with calls in flight may go
	// without a byte from the server before it is taken for dead and its
	// calls fail with ErrDisconnected (0: never). The server is pinged
	// once a quarter of it has passed in silence, and answers pings
	// however busy its handlers are: a server that is merely slow stays
	// alive, one stopped, hung or cut off by the network does not.
	DeadAfter time.Duration
	// Key is what the client proves itself with (nil: the process's key,
	// ProcessKey), as Role: 0 means the highest the key allows, up to
	// admin (a server's own calls to its peers ask for RoleServer).
	Key  *Key
	Role Role
	// Flavor is the lowest flavour the client accepts (0: DefaultFlavor).
	Flavor Flavor
	// Direct lets calls run the handler of a server in this process
	// directly (callDirect), their bulk handed over without a copy. The
	// connection is still dialed first (hello and replay happen on it),
	// and replays after a server restart go over it.
	Direct bool

	mu      sync.Mutex
	conn    *clientConn
	dial    chan struct{} // closed when an in-progress dial ends
	dialing *clientConn   // connected, still replaying, not yet in conn
	shut    bool
	redial  bool // a background redial (Replay clients) is running

	// Replay keeps every Call marked Replay until the server reports it
	// committed, and sends the kept ones again, in transno order, when it
	// reconnects to a restarted server (Lustre's client replay).
	Replay    bool
	replayMu  sync.Mutex
	kept      []keptCall
	committed uint64
	boot      string // the server start we last talked to
	// mustReplay: a replay was cut short by a lost connection, so the next
	// connection replays (and says replay done) whatever the server's Boot.
	mustReplay bool
	// Replayed counts changes sent again after a server restart.
	Replayed atomic.Int64

	callbacks [256]Handler // the server's calls to us (callback.go)

	// OnRestart, if set, runs on a new connection to a restarted server
	// after the kept changes are replayed and before replay done is said,
	// with a do that sends on that connection: where a client puts back
	// its locks (Lustre's lock replay).
	OnRestart func(ctx context.Context, do func(*Call) error)
}

// ID is the UUID the client sends now (Renew changes it).
func (c *Client) ID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.UUID
}

// Renew makes the client a new one to its server: a new UUID, nothing
// kept for replay, and a new connection. A client the server evicted
// comes back so (its requests under the old UUID are refused, and what
// it had not committed is lost, as the server forgot it).
func (c *Client) Renew() {
	c.mu.Lock()
	c.UUID = NewUUID()
	cc := c.conn
	c.conn = nil
	c.mu.Unlock()
	c.replayMu.Lock()
	c.kept, c.committed, c.boot, c.mustReplay = nil, 0, "", false
	c.replayMu.Unlock()
	if cc != nil {
		cc.fail(fmt.Errorf("%w: renewed as a new client", ErrDisconnected))
	}
}

// keptCall is a change the server has not yet committed.
type keptCall struct {
	transno uint64
	method  uint16
	msg     []byte
	xid     uint64
	reply   []byte // the first reply's message: a replay carries it (see FlagReplay)
	cred    *Cred
}

// NewClient returns a client for addr; it connects on first use.
func NewClient(addr, name string) *Client {
	return &Client{Addr: addr, Name: name, UUID: NewUUID(), xids: new(atomic.Uint64), Stats: NewStats(), DialTimeout: 5 * time.Second, RetryFor: 60 * time.Second,
		DeadAfter: 30 * time.Second}
}

type clientConn struct {
	// lost, if set, runs once when the read loop ends (the connection
	// died); Replay clients redial at once from it.
	lost    func()
	c       net.Conn // a *tls.Conn under the privacy flavour
	w       *frameWriter
	role    Role   // what the handshake proved
	group   string // the key's nodemap group
	mu      sync.Mutex
	pending map[uint64]*Call
	nextID  uint64
	err     error // set once the connection is dead

	callbacks *[256]Handler // the Client's, for the server's callbacks
	name      string

	lastRecv atomic.Int64 // unix ns of the last header from the server
	pinging  atomic.Bool  // a ping is being written
}

// Close closes the connection; calls in flight fail.
func (c *Client) Close() error {
	c.mu.Lock()
	c.shut = true
	cc, dc := c.conn, c.dialing
	c.conn = nil
	c.mu.Unlock()
	for _, x := range []*clientConn{cc, dc} {
		if x != nil {
			x.fail(errClosed)
		}
	}
	return nil
}

// Do performs call, redialing a refused or lost server until ctx ends or
// RetryFor passes. A call already sent when its connection broke is not
// resent: it fails with ErrDisconnected, since only the caller knows whether
// the operation may be repeated.
func (c *Client) Do(ctx context.Context, call *Call) error {
	start := time.Now()
	wait := NewBackoff(20*time.Millisecond, time.Second)
	for {
		cc, err := c.get(ctx)
		if err == nil {
			if c.Direct {
				if srv := localServer(c.Addr); srv != nil {
					return srv.callDirect(ctx, c, cc, call)
				}
			}
			return c.do(ctx, cc, call)
		}
		if errors.Is(err, errClosed) || errors.Is(err, ErrAuth) || call.FailFast || ctx.Err() != nil || time.Since(start) > c.RetryFor {
			return fmt.Errorf("%s: %w", c.Addr, err)
		}
		if err := wait.Wait(ctx); err != nil {
			return fmt.Errorf("%s: %w", c.Addr, err)
		}
	}
}

// ShareIdentity makes c send other's UUID and draw XIDs from the same
// counter, so that one client instance talking to a server through several
// connections is one caller to it.
func (c *Client) ShareIdentity(other *Client) {
	c.UUID, c.xids = other.UUID, other.xids
}

// NextXID is the last XID c's counter gave out.
func (c *Client) NextXID() uint64 { return c.xids.Load() }

// Resume makes c the client instance uuid whose last XID was xid, as
// another process of the same client was (a mount taken over): servers
// see it reconnect, with what it held, and take its XIDs as new ones.
// Call it before sharing c's identity.
func (c *Client) Resume(uuid string, xid uint64) {
	c.UUID = uuid
	c.xids.Store(xid)
}

// NewUUID returns a random identifier.
func NewUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Invoke is the typed form of Do for calls without bulk data.
func Invoke[Resp any](ctx context.Context, c *Client, method uint16, req any) (*Resp, error) {
	resp := new(Resp)
	if err := c.Do(ctx, &Call{Method: method, Req: req, Resp: resp}); err != nil {
		return nil, err
	}
	return resp, nil
}

func (c *Client) get(ctx context.Context) (*clientConn, error) {
	for {
		c.mu.Lock()
		if c.shut {
			c.mu.Unlock()
			return nil, errClosed
		}
		if c.conn != nil {
			cc := c.conn
			c.mu.Unlock()
			return cc, nil
		}
		if c.dial != nil {
			wait := c.dial
			c.mu.Unlock()
			select {
			case <-wait:
				c.mu.Lock()
				ok := c.conn != nil
				c.mu.Unlock()
				if !ok {
					return nil, fmt.Errorf("dial failed")
				}
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		wait := make(chan struct{})
		c.dial = wait
		c.mu.Unlock()
		cc, err := c.connect(ctx)
		c.mu.Lock()
		c.dial = nil
		if err == nil {
			if c.shut {
				cc.fail(errClosed)
				err = errClosed
			} else {
				c.conn = cc
			}
		}
		c.mu.Unlock()
		close(wait)
		return cc, err
	}
}

func (c *Client) connect(ctx context.Context) (*clientConn, error) {
	key, role, err := c.identity()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrAuth, err)
	}
	dctx, cancel := context.WithTimeout(ctx, c.DialTimeout)
	defer cancel()
	nc, err := DialContext(dctx, c.Addr)
	if err != nil {
		return nil, err
	}
	if dl, ok := dctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	// A caller that gives up (an interrupted program) ends the handshake
	// too: a server that accepts and then says nothing must not hold it
	// for the whole DialTimeout.
	stop := context.AfterFunc(dctx, func() { _ = nc.SetDeadline(time.Now()) })
	ss, err := c.clientHandshake(dctx, nc, key, role)
	if !stop() && err == nil {
		err = dctx.Err()
	}
	if err != nil {
		nc.Close()
		return nil, err
	}
	sh := ss.peer
	_ = nc.SetDeadline(time.Time{})
	cc := &clientConn{c: ss.conn, w: ss.w, role: ss.role, group: ss.group, pending: map[uint64]*Call{}, callbacks: &c.callbacks, name: c.Name}
	if c.Replay {
		cc.lost = func() { c.redialSoon(cc) }
	}
	cc.lastRecv.Store(time.Now().UnixNano())
	go cc.readLoop(ss.r)
	if c.DeadAfter > 0 {
		go cc.watch(c.DeadAfter)
	}
	if c.Replay {
		c.mu.Lock()
		c.dialing = cc
		c.mu.Unlock()
		err := c.replayTo(ctx, cc, sh.Boot)
		c.mu.Lock()
		c.dialing = nil
		c.mu.Unlock()
		if err != nil {
			cc.fail(err)
			return nil, err
		}
	}
	return cc, nil
}

// identity is the key and role the client proves at connect.
func (c *Client) identity() (*Key, Role, error) {
	key := c.Key
	if key == nil {
		var err error
		if key, err = ProcessKey(); err != nil {
			return nil, 0, err
		}
	}
	role := c.Role
	if role == RoleNone {
		role = min(key.Role, RoleAdmin)
	}
	return key, role, nil
}

// redialSoon reconnects a Replay client whose connection died, without
// waiting for its next call: a restarted server holds every client's new
// requests in its recovery window until each client it knew has replayed
// and said so, so an idle client must come back by itself (Lustre's
// pinger notices a restarted target the same way).
func (c *Client) redialSoon(dead *clientConn) {
	c.drop(dead)
	c.mu.Lock()
	if c.shut || c.redial {
		c.mu.Unlock()
		return
	}
	c.redial = true
	c.mu.Unlock()
	go func() {
		defer func() {
			c.mu.Lock()
			c.redial = false
			c.mu.Unlock()
		}()
		start := time.Now()
		wait := NewBackoff(20*time.Millisecond, 500*time.Millisecond)
		for time.Since(start) < c.RetryFor {
			_, err := c.get(context.Background())
			if err == nil || errors.Is(err, errClosed) || errors.Is(err, ErrAuth) {
				return
			}
			_ = wait.Wait(context.Background())
		}
	}()
}

// Disconnect tells the server this client is going away for good (an
// unmount), so it does not wait for it after a restart. Only Replay
// clients that have talked to the server say it; errors are only logged:
// a server that does not hear it waits for this client for one recovery
// window at most.
func (c *Client) Disconnect(ctx context.Context) {
	if !c.Replay {
		return
	}
	c.replayMu.Lock()
	talked := c.boot != ""
	c.replayMu.Unlock()
	if !talked {
		return
	}
	if err := c.Do(ctx, &Call{Method: MethodDisconnect, FailFast: true}); err != nil && !errors.Is(err, syscall.ENOSYS) {
		slog.Warn(fmt.Sprintf("rpc: disconnect from %s: %v", c.Addr, err), "server", c.Addr, "client", c.Name)
	}
}

// replayTo sends the kept changes again if the server restarted since we
// last talked to it, before the connection is used for anything else, one
// at a time in transno order, each flagged FlagReplay with its old transno
// (the server orders all clients' replays by it), then says replay done.
// The server skips those it still has (it knows their XIDs). Replays do
// not end with the caller's context: a kept change dropped half-way would
// be lost.
func (c *Client) replayTo(ctx context.Context, cc *clientConn, boot string) error {
	ctx = context.WithoutCancel(ctx)
	c.replayMu.Lock()
	restarted := c.mustReplay || (c.boot != "" && c.boot != boot)
	c.boot = boot
	c.mustReplay = false
	var todo []keptCall
	if restarted {
		todo = append(todo, c.kept...)
		c.kept = c.kept[:0]
		c.committed = 0 // a new start: its transnos are its own
	}
	c.replayMu.Unlock()
	if !restarted {
		return nil
	}
	for i, k := range todo {
		call := &Call{Method: k.method, Req: RawMsg(k.msg), XID: k.xid, Replay: true, replayOf: k.transno, Cred: k.cred}
		if len(k.reply) > 0 {
			call.BulkOut = [][]byte{k.reply}
		}
		err := c.do(ctx, cc, call)
		if errors.Is(err, ErrDisconnected) || errors.Is(err, errClosed) || errors.Is(err, syscall.ESHUTDOWN) {
			// The server went away (or is stopping) again: the change is
			// not lost, the next start gets it.
			c.replayCut(todo[i:])
			return fmt.Errorf("replay: %w", err)
		}
		if err != nil {
			slog.Warn(fmt.Sprintf("rpc: replay of method %d (xid %d, transno %d) to %s: %v", k.method, k.xid, k.transno, c.Addr, err),
				"server", c.Addr, "method", k.method, "xid", k.xid, "transno", k.transno)
			continue
		}
		c.Replayed.Add(1)
	}
	if c.OnRestart != nil {
		c.OnRestart(ctx, func(call *Call) error { return c.do(ctx, cc, call) })
	}
	err := c.do(ctx, cc, &Call{Method: MethodReplayDone})
	switch {
	case errors.Is(err, ErrDisconnected) || errors.Is(err, errClosed):
		c.replayCut(nil)
		return fmt.Errorf("replay done: %w", err)
	case err != nil && !errors.Is(err, syscall.ENOSYS):
		slog.Warn(fmt.Sprintf("rpc: replay done to %s: %v", c.Addr, err), "server", c.Addr, "client", c.Name)
	}
	return nil
}

// replayCut keeps the changes a lost connection stopped replayTo from
// sending, after those already replayed (kept again under their new
// transnos), and makes the next connection replay again.
func (c *Client) replayCut(rest []keptCall) {
	c.replayMu.Lock()
	defer c.replayMu.Unlock()
	c.kept = append(c.kept, rest...)
	c.mustReplay = true
}

// keep records a reply's transno and drops what the server committed.
func (c *Client) keep(call *Call, msg []byte) {
	c.replayMu.Lock()
	defer c.replayMu.Unlock()
	if call.committed > c.committed {
		c.committed = call.committed
		i := 0
		for i < len(c.kept) && c.kept[i].transno <= c.committed {
			i++
		}
		c.kept = c.kept[i:]
	}
	if !call.Replay || call.transno == 0 || call.transno <= c.committed {
		return
	}
	k := keptCall{transno: call.transno, method: call.Method, msg: msg, xid: call.XID, reply: call.replyMsg, cred: call.Cred}
	i := sort.Search(len(c.kept), func(i int) bool { return c.kept[i].transno > k.transno })
	c.kept = append(c.kept, keptCall{})
	copy(c.kept[i+1:], c.kept[i:])
	c.kept[i] = k
}

// encodeReq is a call's request message on the wire.
func encodeReq(call *Call) []byte {
	switch r := call.Req.(type) {
	case nil:
		return nil
	case RawMsg:
		return r
	default:
		return wire.Marshal(nil, call.Req)
	}
}

func (c *Client) do(ctx context.Context, cc *clientConn, call *Call) error {
	if call.Cred == nil {
		call.Cred = CredOf(ctx)
	}
	msg := encodeReq(call)
	wmsg := msg
	if call.Cred != nil {
		wmsg = putCred(call.Cred, msg)
	}
	n := 0
	for _, b := range call.BulkOut {
		n += len(b)
	}
	if len(wmsg) > MaxMsg || n > MaxBulk {
		return fmt.Errorf("rpc: request too large (%d+%d bytes)", len(wmsg), n)
	}
	resent := call.XID != 0
	if !resent {
		call.XID = c.xids.Add(1)
	}
	h := Header{Kind: KindRequest, Method: call.Method, XID: call.XID}
	if call.Cred != nil {
		h.Flags |= FlagCred
	}
	if resent && call.replayOf == 0 {
		h.Flags |= FlagResent // a replay says so itself (FlagReplay)
	}
	if c.Replay && call.Replay {
		h.Flags |= FlagKept
	}
	if call.replayOf != 0 {
		h.Flags |= FlagReplay
		h.Transno = call.replayOf
	}
	if dl, ok := ctx.Deadline(); ok {
		ms := time.Until(dl).Milliseconds()
		if ms <= 0 {
			return context.DeadlineExceeded
		}
		h.TimeoutMs = uint32(min(ms, 1<<31))
	}
	call.done = make(chan struct{})
	call.err = nil
	call.NBulkIn = 0
	cc.mu.Lock()
	if cc.err != nil {
		err := cc.err
		cc.mu.Unlock()
		c.drop(cc)
		return err
	}
	cc.nextID++
	id := cc.nextID
	h.ReqID = id
	cc.pending[id] = call
	cc.mu.Unlock()
	c.Stats.request(call.Method, int64(n))
	c.TargetStats.request(call.Method, int64(n))
	sent := time.Now()

	if err := cc.w.write(h, wmsg, call.BulkOut); err != nil {
		cc.fail(fmt.Errorf("%w: %v", ErrDisconnected, err))
		c.drop(cc)
	}
	select {
	case <-call.done:
	case <-ctx.Done():
		cc.mu.Lock()
		_, mine := cc.pending[id]
		delete(cc.pending, id)
		cc.mu.Unlock()
		if mine {
			return ctx.Err()
		}
		<-call.done // the reader owns the call now; it is filling BulkIn
	}
	if errors.Is(call.err, ErrDisconnected) {
		c.drop(cc)
	} else {
		d := time.Since(sent)
		c.Stats.latency(call.Method, d)
		c.TargetStats.latency(call.Method, d)
	}
	if call.err == nil {
		c.Stats.reply(call.Method, int64(call.NBulkIn))
		c.TargetStats.reply(call.Method, int64(call.NBulkIn))
	}
	if c.Replay && (call.err == nil || call.committed > 0) {
		c.keep(call, msg)
	}
	return call.err
}

// drop forgets a dead connection so the next call redials.
func (c *Client) drop(cc *clientConn) {
	c.mu.Lock()
	if c.conn == cc {
		c.conn = nil
	}
	c.mu.Unlock()
}

func (cc *clientConn) fail(err error) {
	cc.mu.Lock()
	if cc.err == nil {
		cc.err = err
	}
	pending := cc.pending
	cc.pending = map[uint64]*Call{}
	cc.mu.Unlock()
	cc.c.Close()
	for _, call := range pending {
		call.err = err
		close(call.done)
	}
}

func (cc *clientConn) readLoop(fr *frameReader) {
	if cc.lost != nil {
		defer cc.lost()
	}
	for {
		h, err := fr.header()
		cc.lastRecv.Store(time.Now().UnixNano())
		if err == nil && h.Kind == KindRequest {
			// The server calling us back (callback.go).
			if err := cc.serveCallback(fr, h, cc.callbacks, cc.name); err != nil {
				cc.fail(fmt.Errorf("%w: %v", ErrDisconnected, err))
				return
			}
			continue
		}
		if err == nil && h.Kind != KindReply {
			err = fmt.Errorf("%w: kind %d where a reply belongs", ErrBadFrame, h.Kind)
		}
		if err != nil {
			cc.fail(fmt.Errorf("%w: %v", ErrDisconnected, err))
			return
		}
		cc.mu.Lock()
		call := cc.pending[h.ReqID]
		delete(cc.pending, h.ReqID)
		cc.mu.Unlock()
		if err := cc.readReply(fr, h, call); err != nil {
			cc.fail(fmt.Errorf("%w: %v", ErrDisconnected, err))
			return
		}
	}
}

// watch fails the connection when the server has been silent for
// deadAfter while calls wait on it, pinging it before that. An idle
// connection is left alone: nothing waits on it, and its next call
// starts the watch again.
func (cc *clientConn) watch(deadAfter time.Duration) {
	tick := time.NewTicker(deadAfter / 4)
	defer tick.Stop()
	for range tick.C {
		cc.mu.Lock()
		dead, waiting := cc.err != nil, len(cc.pending) > 0
		cc.mu.Unlock()
		if dead {
			return
		}
		silent := time.Since(time.Unix(0, cc.lastRecv.Load()))
		switch {
		case !waiting:
			cc.lastRecv.Store(time.Now().UnixNano()) // silence is only counted while calls wait
		case silent >= deadAfter:
			cc.fail(fmt.Errorf("%w: no word from the server for %s with calls in flight", ErrDisconnected, silent.Round(time.Millisecond)))
			return
		case silent >= deadAfter/4 && cc.pinging.CompareAndSwap(false, true):
			// A write that blocks (the server stopped reading) must not
			// stop the watch: failing the connection ends it.
			go func() {
				defer cc.pinging.Store(false)
				_ = cc.w.write(Header{Kind: KindRequest, Method: MethodPing}, nil, nil)
			}()
		}
	}
}

// readReply consumes one reply's body. call is nil for a reply whose caller
// gave up; its body is discarded. The call completes only once the
// frame's MAC (integrity flavour) has been checked.
func (cc *clientConn) readReply(fr *frameReader, h Header, call *Call) error {
	fail := func(err error) error {
		if call != nil {
			call.err = fmt.Errorf("%w: %v", ErrDisconnected, err)
			close(call.done)
		}
		return err
	}
	msg := make([]byte, h.MsgLen)
	if err := fr.read(msg); err != nil {
		return fail(err)
	}
	var bulkErr error
	if call != nil && int(h.BulkLen) <= len(call.BulkIn) {
		if err := fr.read(call.BulkIn[:h.BulkLen]); err != nil {
			return fail(err)
		}
		call.NBulkIn = int(h.BulkLen)
	} else {
		if err := fr.discard(int(h.BulkLen)); err != nil {
			return fail(err)
		}
		if h.BulkLen > 0 {
			bulkErr = fmt.Errorf("rpc: reply bulk of %d bytes exceeds buffer", h.BulkLen)
		}
	}
	if err := fr.end(); err != nil {
		return fail(err)
	}
	if call == nil {
		return nil
	}
	call.transno, call.committed = h.Transno, h.Committed
	if call.Replay && h.Status == 0 && h.Transno != 0 {
		call.replyMsg = msg // kept for a replay; msg is this call's own
	}
	call.err = replyErr(h, msg, call.Resp)
	if call.err == nil && bulkErr != nil {
		call.err = bulkErr
	}
	close(call.done)
	return nil
}

// replyErr is what a reply frame's status and message say: an errno, the
// server's text, or nil once the message is decoded into resp.
func replyErr(h Header, msg []byte, resp any) error {
	switch {
	case h.Status > 0:
		return syscall.Errno(h.Status)
	case h.Status == StatusError:
		var we wireError
		if err := wire.Unmarshal(msg, &we); err != nil {
			return err
		}
		return &RemoteError{Text: we.Text}
	case h.Status != 0:
		return fmt.Errorf("%w: status %d", ErrBadFrame, h.Status)
	case resp != nil:
		return wire.Unmarshal(msg, resp)
	}
	return nil
}
