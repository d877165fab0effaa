package rpc

import (
	"net"
	"testing"
)

// relay listens on a local port and relays each connection to target,
// passing every chunk read from the client to toServer and from the
// server to toClient first (nil: as is); a hook may change the chunk in
// place, or block. It returns the listener, closed when the test ends.
func relay(t *testing.T, target string, toServer, toClient func([]byte)) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	pipe := func(dst, src net.Conn, hook func([]byte)) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				if hook != nil {
					hook(buf[:n])
				}
				dst.Write(buf[:n])
			}
			if err != nil {
				dst.Close()
				return
			}
		}
	}
	go func() {
		for {
			a, err := l.Accept()
			if err != nil {
				return
			}
			b, err := net.Dial("tcp", target)
			if err != nil {
				a.Close()
				continue
			}
			go pipe(b, a, toServer)
			go pipe(a, b, toClient)
		}
	}()
	return l
}
