package rpc

import (
	"log/slog"
	"net"
	"sync"
	"time"
)

// Limits bound what one peer can take of a server, so that a peer that
// misbehaves (or many idle ones) is slowed or cut off while others go on.
type Limits struct {
	// MaxInFlight bounds the requests of one connection being served;
	// the server reads no more from it meanwhile.
	MaxInFlight int
	// MaxInFlightBytes bounds the request bytes of one connection held
	// in memory at once, the same way.
	MaxInFlightBytes int64
	// HelloTimeout bounds the whole handshake.
	HelloTimeout time.Duration
	// FrameTimeout bounds a frame from its first byte to its last.
	FrameTimeout time.Duration
	// MaxHellosPerAddr and MaxHellos bound connections still in their
	// handshake, from one address and in all. A new connection over the
	// first closes that address's oldest handshake (a quick client gets
	// in past slow ones); over the second it is closed at once.
	MaxHellosPerAddr, MaxHellos int
	// MaxConnsPerAddr bounds authenticated connections from one address.
	MaxConnsPerAddr int
}

// DefaultLimits are a server's limits unless its owner sets others.
var DefaultLimits = Limits{
	MaxInFlight:      256,
	MaxInFlightBytes: 256 << 20,
	HelloTimeout:     10 * time.Second,
	FrameTimeout:     60 * time.Second,
	MaxHellosPerAddr: 64,
	MaxHellos:        512,
	MaxConnsPerAddr:  4096,
}

// admission counts a server's connections by peer address.
type admission struct {
	mu      sync.Mutex
	hellos  map[string][]net.Conn // in their handshake, oldest first
	conns   map[string]int
	nhellos int
	logged  map[string]time.Time
}

// peerHost is the address limits count a connection under: the host of
// a TCP peer, "local" for a Unix socket; in-process pipes are not
// counted.
func peerHost(c net.Conn) (string, bool) {
	a := c.RemoteAddr()
	switch a.Network() {
	case "pipe":
		return "", false
	case "tcp":
		if host, _, err := net.SplitHostPort(a.String()); err == nil {
			return host, true
		}
	}
	return "local", true
}

// hello admits c, a new connection from host, to its handshake, closing
// host's oldest handshake if host has too many; false: the server has
// too many in all.
func (ad *admission) hello(host string, c net.Conn, l *Limits) (ok bool, evicted bool) {
	ad.mu.Lock()
	defer ad.mu.Unlock()
	if ad.hellos == nil {
		ad.hellos, ad.conns = map[string][]net.Conn{}, map[string]int{}
	}
	if q := ad.hellos[host]; len(q) >= max(1, l.MaxHellosPerAddr) {
		q[0].Close() // its handshake fails
		ad.hellos[host] = q[1:]
		ad.nhellos--
		evicted = true
	} else if ad.nhellos >= l.MaxHellos {
		return false, false
	}
	ad.hellos[host] = append(ad.hellos[host], c)
	ad.nhellos++
	return true, evicted
}

// helloDone ends c's handshake; ok: it succeeded, and the connection now
// counts as one of its address's (false: over MaxConnsPerAddr).
func (ad *admission) helloDone(host string, c net.Conn, ok bool, l *Limits) bool {
	ad.mu.Lock()
	defer ad.mu.Unlock()
	if q := ad.hellos[host]; len(q) > 0 {
		for i, x := range q {
			if x == c {
				q = append(q[:i], q[i+1:]...)
				ad.nhellos--
				break
			}
		}
		if len(q) == 0 {
			delete(ad.hellos, host)
		} else {
			ad.hellos[host] = q
		}
	}
	if !ok || ad.conns[host] >= l.MaxConnsPerAddr {
		return false
	}
	ad.conns[host]++
	return true
}

func (ad *admission) closed(host string) {
	ad.mu.Lock()
	defer ad.mu.Unlock()
	if ad.conns[host]--; ad.conns[host] <= 0 {
		delete(ad.conns, host)
	}
}

// refused logs why a peer was refused, at most once a second per host,
// so that a flood cannot fill the log.
func (ad *admission) refused(server, host, why string) {
	ad.mu.Lock()
	if ad.logged == nil || len(ad.logged) > 4096 {
		ad.logged = map[string]time.Time{}
	}
	last := ad.logged[host]
	now := time.Now()
	if now.Sub(last) >= time.Second {
		ad.logged[host] = now
	}
	ad.mu.Unlock()
	if now.Sub(last) >= time.Second {
		slog.Warn(server+": "+why, "server", server, "peer", host)
	}
}
