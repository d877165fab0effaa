package rpc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/stripefs/stripefs/wire"
)

// Shortcut, set before servers listen, lets a client in the same process
// as a server reach it over an in-process pipe instead of its socket: the
// same frames, one memory copy per byte instead of two and no system
// calls. `stripefs up` sets it: its mount and servers share a process.
// Other processes still use the socket, and a server that is restarted
// elsewhere is dialed on its socket again.
var Shortcut bool

var shortcuts = struct {
	sync.Mutex
	m map[string]*shortcutListener
}{m: map[string]*shortcutListener{}}

// shortcutListener accepts from its socket and from in-process dials of
// its address.
type shortcutListener struct {
	net.Listener
	local any     // what the server lends clients in this process (SetLocal)
	srv   *Server // the server serving it, for direct calls (callDirect)
	addr  string
	conns chan net.Conn
	errs  chan error
	done  chan struct{}
	once  sync.Once
}

// reserveShortcut registers a shortcut listener for addr before its
// socket exists, when addr is what the socket will report (a literal
// address with its port) and no listener holds it: in-process dials
// queue for its Accept meanwhile. nil when it cannot be reserved.
func reserveShortcut(addr string) *shortcutListener {
	if !strings.HasPrefix(addr, unixPrefix) {
		ap, err := netip.ParseAddrPort(addr)
		if err != nil || ap.Port() == 0 || ap.String() != addr {
			return nil
		}
	}
	shortcuts.Lock()
	defer shortcuts.Unlock()
	if shortcuts.m[addr] != nil {
		return nil
	}
	sl := newShortcut(addr)
	shortcuts.m[addr] = sl
	return sl
}

func newShortcut(addr string) *shortcutListener {
	return &shortcutListener{addr: addr, conns: make(chan net.Conn), errs: make(chan error, 1), done: make(chan struct{})}
}

// start makes sl accept from l, its socket, too.
func (sl *shortcutListener) start(l net.Listener) {
	sl.Listener = l
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				sl.errs <- err
				return
			}
			select {
			case sl.conns <- c:
			case <-sl.done:
				c.Close()
				return
			}
		}
	}()
}

func (l *shortcutListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case err := <-l.errs:
		return nil, err
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *shortcutListener) Close() error {
	l.once.Do(func() {
		close(l.done)
		shortcuts.Lock()
		if shortcuts.m[l.addr] == l {
			delete(shortcuts.m, l.addr)
		}
		shortcuts.Unlock()
	})
	if l.Listener == nil {
		return nil // reserved, never listened
	}
	return l.Listener.Close()
}

// dialShortcut connects to addr over a pipe if this process serves it.
func dialShortcut(ctx context.Context, addr string) (net.Conn, bool, error) {
	shortcuts.Lock()
	l := shortcuts.m[addr]
	shortcuts.Unlock()
	if l == nil {
		return nil, false, nil
	}
	a, b := net.Pipe()
	name := strconv.FormatUint(pipeSeq.Add(1), 10)
	select {
	case l.conns <- &pipeEnd{Conn: b, name: name}:
		return &pipeEnd{Conn: a, name: name}, true, nil
	case <-l.done:
		return nil, true, fmt.Errorf("rpc: dial %s: connection refused", addr)
	case <-ctx.Done():
		return nil, true, ctx.Err()
	}
}

var pipeSeq atomic.Uint64

// pipeEnd is one end of an in-process connection. Both ends know the
// connection's name, and the server end reports it as its peer address
// ("pipe:NAME"), so a direct call (callDirect) can run as a call on that
// connection: the handler sees the connection's peer, and what a server
// ties to a connection (an OST's grants) holds for direct calls too.
type pipeEnd struct {
	net.Conn
	name string
}

func (p *pipeEnd) RemoteAddr() net.Addr { return pipeEndAddr(p.name) }

type pipeEndAddr string

func (pipeEndAddr) Network() string  { return "pipe" }
func (a pipeEndAddr) String() string { return "pipe:" + string(a) }

// pipeName is the name of the in-process connection a peer address
// names, which a listener may have suffixed ("pipe:NAME#ID").
func pipeName(peer string) (string, bool) {
	name, ok := strings.CutPrefix(peer, "pipe:")
	if i := strings.IndexByte(name, '#'); i >= 0 {
		name = name[:i]
	}
	return name, ok
}

// SetLocal attaches v to l, a listener of this process: clients in the
// process that talk to l's address find v with Local and may use it
// instead of some RPCs (an OST lends its object files for reads). It
// does nothing unless l takes the shortcut.
func SetLocal(l net.Listener, v any) {
	if sl, ok := l.(*shortcutListener); ok {
		shortcuts.Lock()
		sl.local = v
		shortcuts.Unlock()
	}
}

// Local returns what the server at addr, in this process, lent with
// SetLocal; nil when there is none.
func Local(addr string) any {
	shortcuts.Lock()
	defer shortcuts.Unlock()
	if l := shortcuts.m[addr]; l != nil {
		return l.local
	}
	return nil
}

// shortcutFor is the shortcut listener under l, which the server's owner
// may have wrapped (an OST tracks its connections): the one registered
// for l's address.
func shortcutFor(l net.Listener) *shortcutListener {
	shortcuts.Lock()
	defer shortcuts.Unlock()
	return shortcuts.m[l.Addr().String()]
}

// localServer returns the server in this process that serves addr.
func localServer(addr string) *Server {
	shortcuts.Lock()
	defer shortcuts.Unlock()
	if l := shortcuts.m[addr]; l != nil {
		return l.srv
	}
	return nil
}

// callDirect runs call's handler in this goroutine, for a client in the
// server's own process: no frame, no handoff between goroutines, and the
// request's bulk is handed over as it is (an OST writes straight from the
// client's buffer). It is a call on cc, the client's pipe to this server,
// in all but transport: the handler sees that connection's peer and the
// caller's identity, errors and counters are the same, a change is kept
// for replay (FlagKept, transnos) as over the pipe, and the caller's
// cancel does not reach the handler while its deadline does. When cc is
// not a pipe to this server (a server restarted in this process, and cc
// still the old one's), the call goes over cc and fails as it should.
func (s *Server) callDirect(ctx context.Context, c *Client, cc *clientConn, call *Call) error {
	peer := s.pipePeer(cc)
	if peer == "" {
		return c.do(ctx, cc, call)
	}
	msg := encodeReq(call)
	var bulk []byte
	switch len(call.BulkOut) {
	case 0:
	case 1:
		bulk = call.BulkOut[0]
	default:
		for _, b := range call.BulkOut {
			bulk = append(bulk, b...)
		}
	}
	resent := call.XID != 0
	if !resent {
		call.XID = c.xids.Add(1)
	}
	s.Stats.request(call.Method, int64(len(bulk)))
	c.Stats.request(call.Method, int64(len(bulk)))
	c.TargetStats.request(call.Method, int64(len(bulk)))
	start := time.Now()
	call.Direct = true
	call.NBulkIn = 0
	if call.Cred == nil {
		call.Cred = CredOf(ctx)
	}
	req := &Request{Method: call.Method, Msg: msg, Bulk: bulk, Peer: peer, Client: c.ID(), Name: c.Name, XID: call.XID,
		Role: cc.role, Group: cc.group, Cred: call.Cred}
	if c.Replay && call.Replay {
		req.Flags |= FlagKept
	}
	if resent {
		req.Flags |= FlagResent
	}
	dctx := context.WithoutCancel(ctx)
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		dctx, cancel = context.WithDeadline(dctx, dl)
		defer cancel()
	}
	reply, transno, err := s.run(dctx, req)
	if reply.Done != nil {
		defer reply.Done()
	}
	call.transno, call.committed, call.replyMsg = transno, 0, nil
	if s.Committed != nil {
		call.committed = s.Committed()
	}
	err = call.directResult(reply, err)
	d := time.Since(start)
	s.Stats.latency(call.Method, d)
	c.Stats.latency(call.Method, d)
	c.TargetStats.latency(call.Method, d)
	if err == nil {
		s.Stats.reply(call.Method, int64(call.NBulkIn))
		c.Stats.reply(call.Method, int64(call.NBulkIn))
		c.TargetStats.reply(call.Method, int64(call.NBulkIn))
	}
	if c.Replay && (err == nil || call.committed > 0) {
		c.keep(call, msg)
	}
	return err
}

// directResult fills call from a handler's reply, as readReply does from
// a reply frame.
func (call *Call) directResult(reply Reply, err error) error {
	if err != nil {
		var errno syscall.Errno
		if errors.As(err, &errno) && errno != 0 {
			return errno
		}
		return &RemoteError{Text: err.Error()}
	}
	n := 0
	for _, b := range reply.Bulk {
		if n+len(b) > len(call.BulkIn) {
			return fmt.Errorf("rpc: reply bulk exceeds buffer")
		}
		n += copy(call.BulkIn[n:], b)
	}
	call.NBulkIn = n
	keep := call.Replay && call.transno != 0
	if (call.Resp == nil && !keep) || reply.Msg == nil {
		return nil
	}
	raw, ok := reply.Msg.(RawMsg)
	if !ok {
		raw = wire.Marshal(nil, reply.Msg)
	}
	if keep {
		call.replyMsg = slices.Clone(raw) // a RawMsg may be the server's buffer
	}
	if call.Resp == nil {
		return nil
	}
	return wire.Unmarshal(raw, call.Resp)
}

// pipePeer is the peer address under which this server serves cc, when
// cc is an in-process pipe to it; "" otherwise.
func (s *Server) pipePeer(cc *clientConn) string {
	p, ok := cc.c.(*pipeEnd)
	if !ok {
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pipes[p.name]
}
