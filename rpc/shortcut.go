package rpc

import (
	"context"
	"fmt"
	"net"
	"sync"
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
	local any // what the server lends clients in this process (SetLocal)
	addr  string
	conns chan net.Conn
	errs  chan error
	done  chan struct{}
	once  sync.Once
}

func newShortcutListener(l net.Listener) *shortcutListener {
	sl := &shortcutListener{Listener: l, addr: l.Addr().String(), conns: make(chan net.Conn), errs: make(chan error, 1), done: make(chan struct{})}
	shortcuts.Lock()
	shortcuts.m[sl.addr] = sl
	shortcuts.Unlock()
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
	return sl
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
	select {
	case l.conns <- b:
		return a, true, nil
	case <-l.done:
		return nil, true, fmt.Errorf("rpc: dial %s: connection refused", addr)
	case <-ctx.Done():
		return nil, true, ctx.Err()
	}
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
