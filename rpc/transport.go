package rpc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
)

// Addresses are "host:port" for TCP, "unix:PATH" for a Unix socket (what
// servers on the client's own host use: no TCP stack in the data path), or
// "inproc:NAME" for the in-process transport, which carries the same
// frames over net.Pipe so tests exercise the real protocol without sockets.
const (
	inprocPrefix = "inproc:"
	unixPrefix   = "unix:"
)

var inproc = struct {
	sync.Mutex
	m map[string]*pipeListener
}{m: map[string]*pipeListener{}}

// Listen opens a listener for addr.
func Listen(addr string) (net.Listener, error) {
	if name, ok := strings.CutPrefix(addr, inprocPrefix); ok {
		inproc.Lock()
		defer inproc.Unlock()
		if _, dup := inproc.m[name]; dup {
			return nil, fmt.Errorf("rpc: listen %s: address in use", addr)
		}
		l := &pipeListener{name: name, ch: make(chan net.Conn), done: make(chan struct{})}
		inproc.m[name] = l
		return l, nil
	}
	// A server restarted in this process takes its address's shortcut
	// before its socket listens: a client redialing would otherwise reach
	// the socket in between and stay on it, never calling directly.
	var sl *shortcutListener
	if Shortcut {
		sl = reserveShortcut(addr)
	}
	var l net.Listener
	var err error
	if path, ok := strings.CutPrefix(addr, unixPrefix); ok {
		_ = os.Remove(path) // a socket left by a process that died
		var ul net.Listener
		if ul, err = net.Listen("unix", path); err == nil {
			l = unixListener{ul, path}
		}
	} else {
		l, err = net.Listen("tcp", addr)
	}
	if err != nil {
		if sl != nil {
			sl.Close()
		}
		return nil, err
	}
	if !Shortcut {
		return l, nil
	}
	if sl != nil && sl.addr == l.Addr().String() {
		sl.start(l)
		return sl, nil
	}
	if sl != nil {
		sl.Close() // addr was a name the socket reports otherwise
	}
	sl = newShortcut(l.Addr().String())
	shortcuts.Lock()
	shortcuts.m[sl.addr] = sl
	shortcuts.Unlock()
	sl.start(l)
	return sl, nil
}

// unixListener reports its address with the "unix:" prefix so that what
// it registers can be dialed again.
type unixListener struct {
	net.Listener
	path string
}

func (l unixListener) Addr() net.Addr { return unixAddr(l.path) }

type unixAddr string

func (a unixAddr) Network() string { return "unix" }
func (a unixAddr) String() string  { return unixPrefix + string(a) }

// DialContext connects to addr.
func DialContext(ctx context.Context, addr string) (net.Conn, error) {
	if name, ok := strings.CutPrefix(addr, inprocPrefix); ok {
		inproc.Lock()
		l := inproc.m[name]
		inproc.Unlock()
		if l == nil {
			return nil, fmt.Errorf("rpc: dial %s: connection refused", addr)
		}
		a, b := net.Pipe()
		select {
		case l.ch <- b:
			return a, nil
		case <-l.done:
			return nil, fmt.Errorf("rpc: dial %s: connection refused", addr)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if c, ok, err := dialShortcut(ctx, addr); ok {
		return c, err
	}
	var d net.Dialer
	var c net.Conn
	var err error
	if path, ok := strings.CutPrefix(addr, unixPrefix); ok {
		c, err = d.DialContext(ctx, "unix", path)
	} else {
		c, err = d.DialContext(ctx, "tcp", addr)
	}
	if err == nil && Shortcut {
		// The server may have come up in this process while we dialed
		// its socket (a restart under `stripefs up`): take its pipe.
		if pc, ok, perr := dialShortcut(ctx, addr); ok && perr == nil {
			c.Close()
			return pc, nil
		}
	}
	if tc, ok := c.(*net.TCPConn); ok {
		// Bulk replies of a MiB or more then arrive in fewer reads.
		_ = tc.SetReadBuffer(4 << 20)
		_ = tc.SetWriteBuffer(4 << 20)
	}
	return c, err
}

type pipeListener struct {
	name string
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() {
		close(l.done)
		inproc.Lock()
		delete(inproc.m, l.name)
		inproc.Unlock()
	})
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr(l.name) }

type pipeAddr string

func (a pipeAddr) Network() string { return "inproc" }
func (a pipeAddr) String() string  { return inprocPrefix + string(a) }

var errClosed = errors.New("rpc: closed")
