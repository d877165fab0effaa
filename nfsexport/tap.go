package nfsexport

import (
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"syscall"

	"github.com/stripefs/stripefs/proto"
)

// The stability tap.
//
// go-nfs v0.0.4 answers every WRITE with "committed: FILE_SYNC" and treats
// COMMIT as a no-op, and neither handler can be replaced: its registry
// refuses a second handler for a procedure, and a handler's request type
// is unexported. Over the write-back client that would be a lie — a
// client told FILE_SYNC drops its copy of data that is only in this
// gateway's memory, and a gateway crash loses it. So each connection is
// wrapped in a tap that reads the ONC RPC records as they pass, in both
// directions, and:
//
//   - WRITE asked UNSTABLE: the reply's "committed" becomes UNSTABLE, so
//     the client keeps its data until a COMMIT succeeds, and resends it if
//     the write verifier changes (a restarted gateway);
//   - WRITE asked DATA_SYNC or FILE_SYNC, and COMMIT: the file is synced
//     (fs.File.Fsync: every object on its OST, the size on the MDT) before
//     the reply leaves, and a sync failure turns the reply into NFS3ERR_IO
//     (or NOSPC, DQUOT).
//
// go-nfs serves one connection's calls one at a time and replies in order,
// so when a COMMIT's reply passes, every WRITE the client sent before it on
// that connection is in the write-back cache and the sync covers it. The
// tap holds back only the first bytes of a reply until it has decided;
// everything it does not recognise passes through untouched.

// ONC RPC (RFC 5531) and NFSv3 (RFC 1813) numbers the tap needs.
const (
	rpcCall       = 0
	rpcReply      = 1
	msgAccepted   = 0
	acceptSuccess = 0
	nfsProgram    = 100003
	nfsVersion    = 3
	procWrite     = 7
	procCommit    = 21
	unstable      = 0

	lastFragment = 1 << 31
	maxAuthBody  = 400 // RFC 5531's limit on an opaque_auth body
	maxFH        = 64  // NFSv3's limit on a file handle

	// callHeadMax covers a call header with two full auth bodies and
	// WRITE's arguments up to "stable"; replyHeadMax a WRITE reply with
	// both attributes up to "committed" (152 bytes).
	callHeadMax  = 1024
	replyHeadMax = 512

	// maxPending bounds the calls a connection remembers until their
	// reply; go-nfs has at most a couple outstanding.
	maxPending = 1024

	nfs3OK       = 0
	nfs3ErrIO    = 5
	nfs3ErrFBig  = 27
	nfs3ErrNoSpc = 28
	nfs3ErrDQuot = 69
)

// pendingCall is a WRITE or COMMIT waiting for its reply.
type pendingCall struct {
	proc   uint32
	fid    proto.FID
	stable uint32
}

// tapConn is one client connection seen through the tap.
type tapConn struct {
	net.Conn
	sync  func(proto.FID) error // makes a file durable
	count func(proc uint32, stable uint32, err error)

	pmu     sync.Mutex
	pending map[uint32]pendingCall

	in recordScanner // Read's state; go-nfs reads from one goroutine

	wmu sync.Mutex // Write's state; go-nfs writes from one goroutine
	out replyState

	// With calls gated (gate), go-nfs gets one call at a time (creds.go).
	gated      bool
	refuseNone bool
	gate       callGate
	rbuf       []byte // read from the client, not yet handed on
	left       int    // bytes of the call being handed on, its mark included
	raw        bool   // a fragmented record: go-nfs refuses those; pass all on
}

func newTapConn(c net.Conn, syncFn func(proto.FID) error, count func(uint32, uint32, error)) *tapConn {
	t := &tapConn{Conn: c, sync: syncFn, count: count, pending: map[uint32]pendingCall{}}
	t.gate.cond = sync.NewCond(&t.gate.mu)
	return t
}

// Read passes the client's bytes on and notes the WRITE and COMMIT calls
// among them; with calls gated, one call at a time, each after the reply
// to the one before.
func (t *tapConn) Read(p []byte) (int, error) {
	if t.gated && !t.raw {
		return t.readGated(p)
	}
	n, err := t.Conn.Read(p)
	if n > 0 {
		t.in.feed(p[:n], t.noteCall)
	}
	return n, err
}

// Close ends the connection and any Read waiting for a reply.
func (t *tapConn) Close() error {
	t.gate.close()
	return t.Conn.Close()
}

func (t *tapConn) noteCall(head []byte) {
	xid, call, ok := parseCall(head)
	if !ok {
		return
	}
	t.pmu.Lock()
	defer t.pmu.Unlock()
	if len(t.pending) >= maxPending {
		clear(t.pending) // calls whose replies never came; forgetting is safe
	}
	t.pending[xid] = call
}

// recordScanner follows record marking (RFC 5531 section 11) on a byte
// stream and hands the first bytes of each record to a callback.
type recordScanner struct {
	mark   [4]byte
	nmark  int
	remain int // body bytes of the current record not yet seen
	head   []byte
	want   int
	off    bool // a fragmented record: go-nfs refuses those; stop watching
}

func (s *recordScanner) feed(p []byte, onHead func([]byte)) {
	for len(p) > 0 && !s.off {
		if s.nmark < 4 {
			k := copy(s.mark[s.nmark:], p)
			s.nmark += k
			p = p[k:]
			if s.nmark < 4 {
				return
			}
			m := binary.BigEndian.Uint32(s.mark[:])
			if m&lastFragment == 0 {
				s.off = true
				return
			}
			s.remain = int(m &^ lastFragment)
			s.want = min(s.remain, callHeadMax)
			s.head = s.head[:0]
		} else if len(s.head) < s.want {
			k := min(s.want-len(s.head), len(p))
			s.head = append(s.head, p[:k]...)
			p = p[k:]
			s.remain -= k
			if len(s.head) == s.want {
				onHead(s.head)
			}
		} else {
			k := min(s.remain, len(p))
			p = p[k:]
			s.remain -= k
		}
		if s.remain == 0 {
			s.nmark = 0
		}
	}
}

// xdrReader reads big-endian words from a byte slice, remembering the
// first overrun instead of panicking.
type xdrReader struct {
	b   []byte
	off int
	bad bool
}

func (r *xdrReader) u32() uint32 {
	if r.bad || len(r.b)-r.off < 4 {
		r.bad = true
		return 0
	}
	v := binary.BigEndian.Uint32(r.b[r.off:])
	r.off += 4
	return v
}

func (r *xdrReader) skip(n int) {
	if r.bad || n < 0 || len(r.b)-r.off < n {
		r.bad = true
		return
	}
	r.off += n
}

// opaque reads a variable-length opaque of at most max bytes.
func (r *xdrReader) opaque(max int) []byte {
	n := int(r.u32())
	if r.bad || n > max || len(r.b)-r.off < (n+3)&^3 {
		r.bad = true
		return nil
	}
	v := r.b[r.off : r.off+n]
	r.off += (n + 3) &^ 3
	return v
}

func (r *xdrReader) auth() {
	r.u32() // flavor
	r.opaque(maxAuthBody)
}

// parseCall recognises an NFSv3 WRITE or COMMIT call header.
func parseCall(head []byte) (xid uint32, call pendingCall, ok bool) {
	r := xdrReader{b: head}
	xid = r.u32()
	if r.u32() != rpcCall || r.u32() != 2 || r.u32() != nfsProgram || r.u32() != nfsVersion {
		return 0, call, false
	}
	call.proc = r.u32()
	if call.proc != procWrite && call.proc != procCommit {
		return 0, call, false
	}
	r.auth() // credential
	r.auth() // verifier
	fh := r.opaque(maxFH)
	if call.proc == procWrite {
		r.skip(8 + 4) // offset, count
		call.stable = r.u32()
	}
	if r.bad {
		return 0, call, false
	}
	fid, err := fidOfHandle(fh)
	if err != nil {
		return 0, call, false // go-nfs answers STALE
	}
	call.fid = fid
	return xid, call, true
}

// replyState follows the records go-nfs writes.
type replyState struct {
	mark    [4]byte
	nmark   int
	remain  int
	head    []byte
	want    int
	discard bool // the record was replaced: drop the rest of it
	off     bool
}

// Write passes go-nfs's replies on, acting on those of WRITE and COMMIT
// calls once their first bytes are in.
func (t *tapConn) Write(p []byte) (int, error) {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	n := len(p)
	s := &t.out
	var out []byte // small pieces gathered into one write
	ended := 0     // reply records finished by this write
	flush := func() error {
		if len(out) == 0 {
			return nil
		}
		_, err := t.Conn.Write(out)
		out = out[:0]
		return err
	}
	for len(p) > 0 {
		switch {
		case s.off:
			out = append(out, p...)
			p = nil
		case s.nmark < 4:
			k := copy(s.mark[s.nmark:], p)
			s.nmark += k
			p = p[k:]
			if s.nmark < 4 {
				break
			}
			m := binary.BigEndian.Uint32(s.mark[:])
			if m&lastFragment == 0 {
				s.off = true // never from go-nfs; pass the rest through
				out = append(out, s.mark[:]...)
				break
			}
			s.remain = int(m &^ lastFragment)
			s.want = min(s.remain, replyHeadMax)
			s.head = s.head[:0]
			s.discard = false
			if s.remain == 0 {
				out = append(out, s.mark[:]...)
				s.nmark = 0
				ended++
			}
		case len(s.head) < s.want:
			k := min(s.want-len(s.head), len(p))
			s.head = append(s.head, p[:k]...)
			p = p[k:]
			s.remain -= k
			if len(s.head) < s.want {
				break
			}
			if repl := t.decide(s.head); repl != nil {
				out = append(out, repl...)
				s.discard = true
			} else {
				out = append(out, s.mark[:]...)
				out = append(out, s.head...)
			}
			if s.remain == 0 {
				s.nmark = 0
				ended++
			}
		default:
			k := min(s.remain, len(p))
			if !s.discard {
				if k < 64<<10 {
					out = append(out, p[:k]...)
				} else {
					// A READ reply's data: no copy.
					if err := flush(); err != nil {
						return 0, err
					}
					if _, err := t.Conn.Write(p[:k]); err != nil {
						return 0, err
					}
				}
			}
			p = p[k:]
			s.remain -= k
			if s.remain == 0 {
				s.nmark = 0
				ended++
			}
		}
	}
	if err := flush(); err != nil {
		return 0, err
	}
	for range ended {
		t.gate.replied() // after its bytes left: the next call may come
	}
	return n, nil
}

// decide acts on a reply whose first bytes are head, patching head in
// place or returning a whole replacement record.
func (t *tapConn) decide(head []byte) []byte {
	r := xdrReader{b: head}
	xid := r.u32()
	if r.u32() != rpcReply {
		return nil
	}
	t.pmu.Lock()
	call, ok := t.pending[xid]
	delete(t.pending, xid)
	t.pmu.Unlock()
	if !ok || r.u32() != msgAccepted {
		return nil
	}
	r.auth() // verifier
	if r.u32() != acceptSuccess || r.u32() != nfs3OK || r.bad {
		return nil // the call failed: there is nothing to make durable
	}
	if call.proc == procWrite {
		if r.u32() == 1 {
			r.skip(24) // pre-operation size, mtime, ctime
		}
		if r.u32() == 1 {
			r.skip(84) // post-operation fattr3
		}
		r.u32() // count
		at := r.off
		committed := r.u32()
		if r.bad {
			return nil
		}
		if call.stable == unstable {
			if committed != unstable {
				binary.BigEndian.PutUint32(head[at:], unstable)
			}
			t.count(call.proc, call.stable, nil)
			return nil
		}
	}
	err := t.sync(call.fid)
	t.count(call.proc, call.stable, err)
	if err != nil {
		return errorReply(xid, nfsStatus(err))
	}
	return nil
}

// nfsStatus maps a sync failure to the NFSv3 status a client can act on.
func nfsStatus(err error) uint32 {
	switch {
	case errors.Is(err, syscall.ENOSPC):
		return nfs3ErrNoSpc
	case errors.Is(err, syscall.EDQUOT):
		return nfs3ErrDQuot
	case errors.Is(err, syscall.EFBIG):
		return nfs3ErrFBig
	}
	return nfs3ErrIO
}

// errorReply is a whole record answering call xid with status: an accepted
// RPC whose WRITE3resfail or COMMIT3resfail carries no attributes (both
// are a status and a wcc_data).
func errorReply(xid, status uint32) []byte {
	words := []uint32{
		lastFragment | 9*4,
		xid, rpcReply, msgAccepted,
		0, 0, // verifier: AUTH_NONE, empty
		acceptSuccess,
		status,
		0, 0, // wcc_data: no pre-operation, no post-operation attributes
	}
	b := make([]byte, 4*len(words))
	for i, w := range words {
		binary.BigEndian.PutUint32(b[4*i:], w)
	}
	return b
}
