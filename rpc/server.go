package rpc

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/stripefs/stripefs/wire"
	"golang.org/x/sync/semaphore"
)

// Request is one incoming call as a handler sees it. Msg and Bulk are only
// valid until the handler returns.
type Request struct {
	Method uint16
	Msg    []byte
	Bulk   []byte
	Peer   string
	Client string // the client's UUID from its hello
	Name   string // the client's name from its hello, for logs
	XID    uint64
	// Flags are the header's request flags (FlagKept, FlagReplay), and
	// Transno, on a replay, the transno the change had before the restart.
	Flags   uint8
	Transno uint64
	// Role and Group are what the peer's key proved at the handshake.
	Role  Role
	Group string
	// Cred is the user the request acts for (FlagCred), nil when the
	// client named none.
	Cred *Cred

	received time.Time // when the request arrived whole, for its latency
}

type callerKey struct{}

type transnoKey struct{}

type firstReplyKey struct{}

// FirstReply returns, for a replayed change (FlagReplay), the message of
// the reply the server's earlier start gave it; nil otherwise.
func FirstReply(ctx context.Context) []byte {
	b, _ := ctx.Value(firstReplyKey{}).([]byte)
	return b
}

// SetTransno records the transno of the change a handler made; the reply
// carries it so the client can replay the change if it is lost.
func SetTransno(ctx context.Context, t uint64) {
	if p, ok := ctx.Value(transnoKey{}).(*uint64); ok {
		*p = t
	}
}

// Caller is who sent a request: the client instance and the request's
// XID, the same on every resend.
type Caller struct {
	Client string
	XID    uint64
	Name   string // the client's name, for logs
	// Kept: the client keeps the change for replay (FlagKept), so the
	// server must remember it across restarts.
	Kept bool
	// Resent: the client sent this request before (FlagResent, or a
	// replay), so it may already be done.
	Resent bool
	// Role and Group: what the peer's key proved; Peer: its address.
	Role  Role
	Group string
	Peer  string
	// Cred: the user the request acts for, nil when it names none.
	Cred *Cred
}

// CallerFrom returns the caller of the request a handler's ctx belongs
// to; ok only when it names a client instance and an XID (what resend
// detection needs).
func CallerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok && c.Client != "" && c.XID != 0
}

// PeerFrom returns who sent the request a handler's ctx belongs to,
// whatever it names: its role, group, address and credential.
func PeerFrom(ctx context.Context) Caller {
	c, _ := ctx.Value(callerKey{}).(Caller)
	return c
}

// Decode decodes the request message into v.
func (r *Request) Decode(v any) error { return wire.Unmarshal(r.Msg, v) }

// Reply is what a handler answers: a message and optional bulk data that is
// written straight from the given slices.
type Reply struct {
	Msg  any
	Bulk [][]byte
	// Done, if set, runs after the reply has been written, e.g. to return
	// Bulk's buffers to a pool.
	Done func()
}

// RawMsg is a reply message already encoded.
type RawMsg []byte

// Handler serves one method. An error that wraps a syscall.Errno reaches
// the caller as that errno; any other error as its text.
type Handler func(ctx context.Context, req *Request) (Reply, error)

// Server dispatches framed requests to handlers.
type Server struct {
	Name     string
	Stats    *Stats
	inflight atomic.Int64 // requests read and not yet answered (InFlight)
	handlers [256]Handler
	// Key is what the server proves itself and checks its peers with
	// (nil: the process's key, ProcessKey).
	Key *Key
	// MinFlavor is the lowest flavour the server accepts.
	MinFlavor Flavor
	// Limits bound what each peer may take of the server.
	Limits Limits
	// need is the lowest role each method serves (Require).
	need [256]Role
	// Counters, if set, adds the server's own counters to MethodStats.
	Counters func() []Counter
	// Committed, if set, reports the highest durable transno; it rides on
	// every reply.
	Committed func() uint64
	// Boot identifies this start of the server.
	Boot string

	// ConnHook, when set before serving, is told when a connection whose
	// hello named a client opens (after the hello) and closes.
	ConnHook func(client, name string, up bool)

	mu    sync.Mutex
	lis   []net.Listener
	conns map[net.Conn]struct{}
	// byClient is each client's newest connection, for callbacks.
	byClient map[string]*serverConn
	pipes    map[string]string // in-process connection name → its peer address (callDirect)
	wg       sync.WaitGroup
	done     bool
	adm      admission

	certOnce sync.Once
	cert     tls.Certificate
	certErr  error
}

// NewServer returns a server with no handlers.
func NewServer(name string) *Server {
	s := &Server{Name: name, Stats: NewStats(), MinFlavor: DefaultFlavor, Limits: DefaultLimits, conns: map[net.Conn]struct{}{}, pipes: map[string]string{}, Boot: NewUUID(),
		byClient: map[string]*serverConn{}}
	s.handlers[MethodStats] = s.serveStats
	return s
}

// Handle registers h for method m.
func (s *Server) Handle(m uint16, h Handler) {
	if int(m) >= len(s.handlers) {
		panic(fmt.Sprintf("rpc: method %d out of range", m))
	}
	s.handlers[m] = h
}

// Handler returns method m's handler as wrapped so far, for a handler
// that serves another method's request as part of its own (nil if none).
func (s *Server) Handler(m uint16) Handler {
	if int(m) >= len(s.handlers) {
		return nil
	}
	return s.handlers[m]
}

// Require makes methods serve only peers whose key proved role or a
// higher one; others get EPERM. Methods not named serve every role.
func (s *Server) Require(role Role, methods ...uint16) {
	for _, m := range methods {
		s.need[m] = role
	}
}

// Wrap replaces method m's handler with f(handler), e.g. to answer some
// requests before the handler sees them.
func (s *Server) Wrap(m uint16, f func(Handler) Handler) {
	s.handlers[m] = f(s.handlers[m])
}

// Serve accepts connections on l until l is closed.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		return errClosed
	}
	s.lis = append(s.lis, l)
	s.mu.Unlock()
	if sl := shortcutFor(l); sl != nil {
		shortcuts.Lock()
		sl.srv = s
		shortcuts.Unlock()
	}
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		s.mu.Lock()
		if s.done {
			s.mu.Unlock()
			c.Close()
			return nil
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveConn(c)
	}
}

// Close stops listening, closes every connection and waits for handlers.
func (s *Server) Close() error {
	s.mu.Lock()
	s.done = true
	for _, l := range s.lis {
		l.Close()
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

type serverConn struct {
	s     *Server
	c     net.Conn
	w     *frameWriter
	peer  string
	uuid  string // from the client's hello
	name  string
	role  Role
	group string

	// Callbacks to the client on this connection (callback.go).
	cbMu      sync.Mutex
	cbPending map[uint64]*pendingCallback
	cbNext    uint64
	cbDead    bool
}

func (s *Server) serveConn(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	sc := &serverConn{s: s, c: c, peer: c.RemoteAddr().String(), cbPending: map[uint64]*pendingCallback{}}
	defer sc.failCallbacks(fmt.Errorf("%w: connection closed", ErrDisconnected))
	if name, ok := pipeName(sc.peer); ok {
		// Direct calls of the client at the other end run as ours.
		s.mu.Lock()
		s.pipes[name] = sc.peer
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			delete(s.pipes, name)
			s.mu.Unlock()
		}()
	}
	host, counted := peerHost(c)
	if counted {
		ok, evicted := s.adm.hello(host, c, &s.Limits)
		if !ok {
			s.adm.refused(s.Name, host, "refusing connections: too many in their handshake")
			return
		}
		if evicted {
			s.adm.refused(s.Name, host, "closing the oldest of too many handshakes from "+host)
		}
	}
	ss, err := s.serverHandshake(c)
	if counted {
		if !s.adm.helloDone(host, c, err == nil, &s.Limits) && err == nil {
			s.adm.refused(s.Name, host, "refusing connections from "+host+": too many from that address")
			return
		}
		if err == nil {
			defer s.adm.closed(host)
		}
	}
	if err != nil {
		if !errors.Is(err, io.EOF) || errors.Is(err, ErrAuth) {
			s.adm.refused(s.Name, host, sc.peer+": "+err.Error())
		}
		return
	}
	sc.w, sc.uuid, sc.name, sc.role, sc.group = ss.w, ss.peer.UUID, ss.peer.Name, ss.role, ss.group
	if ss.conn != c {
		defer ss.conn.Close()
	}
	fr := ss.r
	if sc.uuid != "" {
		s.mu.Lock()
		s.byClient[sc.uuid] = sc
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			if s.byClient[sc.uuid] == sc {
				delete(s.byClient, sc.uuid)
			}
			s.mu.Unlock()
		}()
	}
	if hook := s.ConnHook; hook != nil && sc.uuid != "" {
		hook(sc.uuid, sc.name, true)
		defer hook(sc.uuid, sc.name, false)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sem := make(chan struct{}, max(1, s.Limits.MaxInFlight))
	budget := semaphore.NewWeighted(max(1, s.Limits.MaxInFlightBytes))
	var inflight sync.WaitGroup
	defer inflight.Wait()
	for {
		h, err := fr.header()
		if err == nil && h.Kind == KindReply {
			// The answer to one of our callbacks (callback.go).
			if err := sc.readCallbackReply(fr, h); err != nil {
				sc.readFailed(err)
				return
			}
			continue
		}
		if err == nil && h.Kind != KindRequest {
			err = fmt.Errorf("%w: kind %d where a request belongs", ErrBadFrame, h.Kind)
		}
		if err != nil {
			sc.readFailed(err)
			return
		}
		if h.Method == MethodPing && h.MsgLen == 0 && h.BulkLen == 0 {
			// Answered here, ahead of every handler: a ping asks only
			// whether this connection is still read (Client.DeadAfter).
			if err := fr.end(); err != nil {
				sc.readFailed(err)
				return
			}
			s.Stats.request(MethodPing, 0)
			_ = sc.write(Header{Kind: KindReply, Method: MethodPing, ReqID: h.ReqID}, nil, nil)
			continue
		}
		n := int64(h.MsgLen) + int64(h.BulkLen)
		cost := min(n, max(1, s.Limits.MaxInFlightBytes))
		sem <- struct{}{}
		_ = budget.Acquire(ctx, cost)
		release := func() { budget.Release(cost); <-sem }
		body, err := fr.body(int(n))
		if err == nil {
			err = fr.end()
		}
		if err != nil {
			if body != nil {
				putBody(body)
			}
			release()
			sc.readFailed(err)
			return
		}
		req := &Request{Method: h.Method, Msg: body[:h.MsgLen], Bulk: body[h.MsgLen:], Peer: sc.peer, Client: sc.uuid, Name: sc.name,
			XID: h.XID, Flags: h.Flags, Transno: h.Transno, Role: sc.role, Group: sc.group}
		if h.Flags&FlagCred != 0 {
			if req.Cred, req.Msg, err = takeCred(req.Msg); err != nil {
				putBody(body)
				release()
				sc.readFailed(err)
				return
			}
		}
		s.Stats.request(h.Method, int64(h.BulkLen))
		req.received = time.Now()
		inflight.Add(1)
		s.inflight.Add(1)
		go func() {
			defer func() { release(); inflight.Done(); s.inflight.Add(-1) }()
			sc.dispatch(ctx, h, req)
			putBody(body) // handlers must not keep Msg or Bulk
		}()
	}
}

// readFailed ends a connection whose peer broke the protocol or went
// quiet in the middle of a frame; a plain close is not worth a line.
func (sc *serverConn) readFailed(err error) {
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, io.ErrClosedPipe) || errors.Is(err, syscall.ECONNRESET) {
		return
	}
	slog.Warn(fmt.Sprintf("%s: %s (%s): %v; closing the connection", sc.s.Name, sc.peer, sc.name, err), "server", sc.s.Name, "peer", sc.peer, "client", sc.name)
}

type wireError struct{ Text string }

func (sc *serverConn) dispatch(ctx context.Context, h Header, req *Request) {
	if req.Flags&FlagReplay != 0 && len(req.Bulk) > 0 {
		ctx = context.WithValue(ctx, firstReplyKey{}, req.Bulk)
		req.Bulk = nil
	}
	if h.TimeoutMs > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(h.TimeoutMs)*time.Millisecond)
		defer cancel()
	}
	reply, transno, err := sc.s.run(ctx, req)
	if reply.Done != nil {
		defer reply.Done()
	}
	out := Header{Kind: KindReply, Method: h.Method, ReqID: h.ReqID, Transno: transno}
	if sc.s.Committed != nil {
		out.Committed = sc.s.Committed()
	}
	out, msg, bulk := replyFrame(out, reply, err)
	sc.s.Stats.reply(h.Method, int64(out.BulkLen))
	_ = sc.write(out, msg, bulk)
	sc.s.Stats.latency(h.Method, time.Since(req.received))
}

// InFlight is how many requests the server has read and not yet
// answered: its queue depth.
func (s *Server) InFlight() int64 { return s.inflight.Load() }

// run calls req's handler with the caller's identity in ctx, and returns
// the transno of the change it made (SetTransno). A panicking handler
// fails its call with EIO and leaves the server running.
func (s *Server) run(ctx context.Context, req *Request) (reply Reply, transno uint64, err error) {
	var h Handler
	var need Role
	if int(req.Method) < len(s.handlers) {
		h, need = s.handlers[req.Method], s.need[req.Method]
	}
	if req.Role < need {
		slog.Warn(fmt.Sprintf("%s: refused method %d to %s (%s): it needs the %s role, the peer proved the %s role", s.Name, req.Method, req.Name, req.Peer, need, req.Role),
			"server", s.Name, "client", req.Name, "peer", req.Peer, "method", req.Method, "xid", req.XID)
		return Reply{}, 0, fmt.Errorf("%s: method %d needs the %s role: %w", s.Name, req.Method, need, syscall.EPERM)
	}
	if h == nil {
		return Reply{}, 0, fmt.Errorf("%s: method %d: %w", s.Name, req.Method, syscall.ENOSYS)
	}
	ctx = context.WithValue(ctx, callerKey{}, Caller{Client: req.Client, XID: req.XID, Name: req.Name, Kept: req.Flags&FlagKept != 0,
		Resent: req.Flags&(FlagResent|FlagReplay) != 0, Role: req.Role, Group: req.Group, Peer: req.Peer, Cred: req.Cred})
	ctx = context.WithValue(ctx, transnoKey{}, &transno)
	defer func() {
		if p := recover(); p != nil {
			slog.Error(fmt.Sprintf("%s: panic in method %d: %v\n%s", s.Name, req.Method, p, debug.Stack()),
				"server", s.Name, "client", req.Name, "method", req.Method, "xid", req.XID)
			reply, err = Reply{}, fmt.Errorf("%s: internal error: %w", s.Name, syscall.EIO)
		}
	}()
	reply, err = h(ctx, req)
	if err != nil {
		// A failed change is not kept for replay: a handler that took a
		// transno and then could not commit (a full disk) told the
		// client it failed, and a replay must not make it happen.
		transno = 0
	}
	return reply, transno, err
}

func (sc *serverConn) write(h Header, msg []byte, bulk [][]byte) error {
	return sc.w.write(h, msg, bulk)
}

// Request bodies are pooled by size class: a 1 MiB write no longer costs
// a fresh, zeroed megabyte per request.
var bodyClasses = []int{4 << 10, 64 << 10, 1<<20 + 64<<10, 4<<20 + 64<<10}

var bodyPools = func() []sync.Pool {
	ps := make([]sync.Pool, len(bodyClasses))
	for i, size := range bodyClasses {
		ps[i].New = func() any { b := make([]byte, size); return &b }
	}
	return ps
}()

func getBody(n int) []byte {
	for i, size := range bodyClasses {
		if n <= size {
			return (*bodyPools[i].Get().(*[]byte))[:n]
		}
	}
	return make([]byte, n)
}

func putBody(b []byte) {
	for i, size := range bodyClasses {
		if cap(b) == size {
			b = b[:size]
			bodyPools[i].Put(&b)
			return
		}
	}
}

// HandleFunc registers a typed handler: the request message is decoded into
// a fresh Req (a malformed one is answered with EINVAL) and the returned
// value is the reply message.
func HandleFunc[Req any](s *Server, m uint16, f func(ctx context.Context, req *Req) (any, error)) {
	s.Handle(m, func(ctx context.Context, r *Request) (Reply, error) {
		req := new(Req)
		if err := r.Decode(req); err != nil {
			return Reply{}, fmt.Errorf("%s: method %d: %v: %w", s.Name, m, err, syscall.EINVAL)
		}
		resp, err := f(ctx, req)
		return Reply{Msg: resp}, err
	})
}
