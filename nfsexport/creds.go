package nfsexport

import (
	"encoding/binary"
	"io"
	"net"
	"sync"

	"github.com/stripefs/stripefs/nodemap"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// Credentials. Every NFS call carries its caller's credential in its RPC
// header (AUTH_UNIX: uid, gid, up to 16 groups), and the gateway runs the
// call as that user, squashed as exports(5) says. go-nfs hands its
// filesystem no call context, so the tap gates the calls: it hands go-nfs
// one call at a time, the next only once the reply to the one before has
// gone out, and notes the credential of the call in between. go-nfs
// serves a connection's calls one after another anyway; what the gate
// costs is the read-ahead of the next call's first bytes.

const (
	authNone = 0
	authUnix = 1

	msgDenied   = 1
	authError   = 1
	authTooWeak = 5

	maxMachineName = 255
	maxUnixGroups  = 16
	// credHeadMax covers a call header up to the end of its credential:
	// mark, six words, flavor, length and a full body.
	credHeadMax = 4 + 6*4 + 8 + maxAuthBody
)

// callCred is the credential of a call: its flavour, and AUTH_UNIX's ids.
type callCred struct {
	flavor uint32
	unix   *rpc.Cred
}

// callGate holds back a connection's next call until the reply to the
// one handed on.
type callGate struct {
	mu      sync.Mutex
	cond    *sync.Cond
	waiting bool
	closed  bool
	cur     callCred
}

func (g *callGate) replied() {
	g.mu.Lock()
	g.waiting = false
	g.mu.Unlock()
	g.cond.Broadcast()
}

func (g *callGate) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.cond.Broadcast()
}

// idle waits until no call is outstanding.
func (g *callGate) idle() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.waiting && !g.closed {
		g.cond.Wait()
	}
	if g.closed {
		return net.ErrClosed
	}
	return nil
}

func (g *callGate) begin(c callCred) {
	g.mu.Lock()
	g.waiting, g.cur = true, c
	g.mu.Unlock()
}

// current is the credential of the call being served.
func (g *callGate) current() callCred {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cur
}

// gateCalls turns the gate on; refuseNone answers AUTH_NONE calls (but
// the NULL procedure's) with AUTH_TOOWEAK without handing them on.
func (t *tapConn) gateCalls(refuseNone bool) {
	t.gated = true
	t.refuseNone = refuseNone
}

// fill reads from the client until n bytes wait in rbuf.
func (t *tapConn) fill(n int) error {
	for len(t.rbuf) < n {
		buf := make([]byte, max(n-len(t.rbuf), 64<<10))
		k, err := t.Conn.Read(buf)
		t.rbuf = append(t.rbuf, buf[:k]...)
		if err != nil && len(t.rbuf) < n {
			return err
		}
	}
	return nil
}

func (t *tapConn) readGated(p []byte) (int, error) {
	for t.left == 0 {
		if err := t.gate.idle(); err != nil {
			return 0, err
		}
		if err := t.fill(4); err != nil {
			if len(t.rbuf) > 0 {
				return t.handOn(p, len(t.rbuf)) // a stub for go-nfs to fail on
			}
			return 0, err
		}
		m := binary.BigEndian.Uint32(t.rbuf)
		if m&lastFragment == 0 {
			t.raw = true
			return t.handOn(p, len(t.rbuf))
		}
		size := 4 + int(m&^lastFragment)
		_ = t.fill(min(size, credHeadMax)) // a short call fails in go-nfs
		xid, c, null, ok := parseCred(t.rbuf[4:min(size, len(t.rbuf))])
		if ok && t.refuseNone && c.flavor != authUnix && !null {
			if err := t.refuse(xid, size); err != nil {
				return 0, err
			}
			continue
		}
		t.gate.begin(c)
		t.left = size
	}
	if len(t.rbuf) == 0 {
		n, err := t.Conn.Read(p[:min(len(p), t.left)])
		if n > 0 {
			t.left -= n
			t.in.feed(p[:n], t.noteCall)
		}
		return n, err
	}
	return t.handOn(p, min(t.left, len(t.rbuf)))
}

// handOn gives go-nfs up to n bytes of rbuf.
func (t *tapConn) handOn(p []byte, n int) (int, error) {
	k := copy(p, t.rbuf[:n])
	t.in.feed(p[:k], t.noteCall)
	t.rbuf = t.rbuf[k:]
	t.left = max(t.left-k, 0)
	return k, nil
}

// refuse answers call xid, of size bytes with its mark, with MSG_DENIED
// AUTH_ERROR AUTH_TOOWEAK (RFC 5531), and drops it.
func (t *tapConn) refuse(xid uint32, size int) error {
	words := []uint32{lastFragment | 5*4, xid, rpcReply, msgDenied, authError, authTooWeak}
	b := make([]byte, 4*len(words))
	for i, w := range words {
		binary.BigEndian.PutUint32(b[4*i:], w)
	}
	t.wmu.Lock()
	_, err := t.Conn.Write(b)
	t.wmu.Unlock()
	if err != nil {
		return err
	}
	k := min(size, len(t.rbuf))
	t.rbuf = t.rbuf[k:]
	if rest := int64(size - k); rest > 0 {
		if _, err := io.CopyN(io.Discard, t.Conn, rest); err != nil {
			return err
		}
	}
	return nil
}

// parseCred reads a call header up to its credential: the xid, the
// credential, and whether the call is a NULL procedure (a ping, which any
// flavour may make).
func parseCred(head []byte) (xid uint32, c callCred, null, ok bool) {
	r := xdrReader{b: head}
	xid = r.u32()
	if r.u32() != rpcCall || r.u32() != 2 {
		return 0, c, false, false
	}
	r.u32() // program
	r.u32() // version
	null = r.u32() == 0
	c.flavor = r.u32()
	body := r.opaque(maxAuthBody)
	if r.bad {
		return 0, c, false, false
	}
	if c.flavor == authUnix {
		b := xdrReader{b: body}
		b.u32() // stamp
		b.opaque(maxMachineName)
		u := &rpc.Cred{Uid: b.u32(), Gid: b.u32()}
		n := b.u32()
		if n > maxUnixGroups {
			b.bad = true
		}
		for i := uint32(0); i < n && !b.bad; i++ {
			u.Groups = append(u.Groups, b.u32())
		}
		if b.bad {
			c.flavor = ^uint32(0) // a malformed AUTH_UNIX is no credential
		} else {
			c.unix = u
		}
	}
	return xid, c, null, true
}

// Squash is how the gateway takes its callers' ids (exports(5)): root
// squashed (the default) or not, every user squashed, to Anon.
type Squash struct {
	NoRootSquash, AllSquash bool
	AnonUID, AnonGID        uint32
}

// cred is the credential the gateway runs a call under: the call's
// AUTH_UNIX ids squashed as s says; AUTH_NONE (let through only under
// all_squash) is the anonymous user.
func (s Squash) cred(c callCred) *rpc.Cred {
	m := proto.Nodemap{RootSquash: !s.NoRootSquash, AllSquash: s.AllSquash,
		SquashUID: s.AnonUID, SquashGID: s.AnonGID}
	if c.unix == nil {
		return &rpc.Cred{Uid: s.AnonUID, Gid: s.AnonGID}
	}
	return nodemap.Squash(&m, c.unix)
}
