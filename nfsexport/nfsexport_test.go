package nfsexport

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stripefs/stripefs/proto"
)

func TestHandles(t *testing.T) {
	for _, fid := range []proto.FID{proto.RootFID, {Seq: proto.MDTSeq(1, 7), Oid: 42}, {Seq: proto.MDTSeq(255, 1), Oid: 1<<32 - 1}} {
		fh := handleOf(fid)
		got, err := fidOfHandle(fh)
		if err != nil || got != fid {
			t.Errorf("%s: handle %x decodes to %s, %v", fid, fh, got, err)
		}
		pp, err := parsePath(joinPath(pathOf(fid)...))
		if err != nil || pp.start != fid || pp.up || len(pp.names) != 0 {
			t.Errorf("%s: path %q parses to %+v, %v", fid, pathOf(fid), pp, err)
		}
	}
	for _, bad := range [][]byte{nil, {1, 2, 3}, make([]byte, 16), make([]byte, 17), bytes.Repeat([]byte{0xff}, 16)} {
		if fid, err := fidOfHandle(bad); err == nil {
			t.Errorf("handle %x accepted as %s", bad, fid)
		} else if !errors.Is(err, syscall.ESTALE) {
			t.Errorf("handle %x: %v, want ESTALE", bad, err)
		}
	}
}

func TestPaths(t *testing.T) {
	f := proto.FID{Seq: proto.MDTSeq(0, 3), Oid: 9}
	p := pathOf(f)
	cases := []struct {
		elems []string
		start proto.FID
		up    bool
		names []string
	}{
		{nil, proto.RootFID, false, nil},
		{[]string{"a", "b"}, proto.RootFID, false, []string{"a", "b"}},
		{p, f, false, nil},
		{append(p, "x"), f, false, []string{"x"}},
		{p[:1], f, true, nil}, // go-nfs's ".." drops the last element
		{[]string{"a", "..", "b"}, proto.RootFID, false, []string{"a", "..", "b"}},
	}
	for _, c := range cases {
		pp, err := parsePath(joinPath(c.elems...))
		if err != nil || pp.start != c.start || pp.up != c.up || strings.Join(pp.names, "/") != strings.Join(c.names, "/") {
			t.Errorf("%q: %+v, %v; want start %s up %v names %q", c.elems, pp, err, c.start, c.up, c.names)
		}
	}
	// Names a client cannot send, and tokens a client cannot forge.
	for _, elems := range [][]string{{"a/b"}, {""}, {"a\x00b"}, append(p, "x/y"), {"\x00=zz"}, {"\x00!"}} {
		if j := joinPath(elems...); j != badPath {
			t.Errorf("join %q = %q, want the invalid path", elems, j)
		}
	}
	if _, err := parsePath("name/" + token(tokenAt, f)); err == nil {
		t.Errorf("a token after a name parsed")
	}
	if _, err := parsePath(badPath); err == nil {
		t.Errorf("the invalid path parsed")
	}
	if s := showPath(joinPath(append(p, "x")...)); s != f.String()+"/x" {
		t.Errorf("showPath = %q", s)
	}
	// Random strings never panic and never parse into a token by accident.
	r := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		b := make([]byte, r.IntN(80))
		for i := range b {
			b[i] = "ab/\x00=^0123456789abcdef"[r.IntN(22)]
		}
		pp, err := parsePath(string(b))
		if err == nil && pp.start != proto.RootFID && !strings.Contains(string(b), "\x00") {
			t.Fatalf("%q: token without a NUL", b)
		}
	}
}

func TestParseAllow(t *testing.T) {
	ps, err := ParseAllow("10.0.0.0/8, 192.168.1.7,::1,fd00::/8")
	if err != nil {
		t.Fatal(err)
	}
	in := func(s string) bool {
		return allowed(ps, &net.TCPAddr{IP: net.ParseIP(s), Port: 1})
	}
	for _, a := range []string{"10.1.2.3", "192.168.1.7", "::1", "fd12::1", "::ffff:10.9.9.9"} {
		if !in(a) {
			t.Errorf("%s refused", a)
		}
	}
	for _, a := range []string{"11.0.0.1", "192.168.1.8", "127.0.0.1", "fe80::1"} {
		if in(a) {
			t.Errorf("%s allowed", a)
		}
	}
	if allowed(Loopback, &net.UnixAddr{Name: "x"}) {
		t.Errorf("a non-IP address allowed")
	}
	if !allowed(Loopback, &net.TCPAddr{IP: net.ParseIP("127.3.4.5")}) || allowed(Loopback, &net.TCPAddr{IP: net.ParseIP("10.0.0.1")}) {
		t.Errorf("loopback default wrong")
	}
	for _, bad := range []string{"", ",", "10.0.0.0/33", "host.example", "1.2.3"} {
		if _, err := ParseAllow(bad); err == nil {
			t.Errorf("ParseAllow(%q) accepted", bad)
		}
	}
}

func TestFSID(t *testing.T) {
	a, b := FSID("stripefs", "10.0.0.1:9400"), FSID("stripefs", "10.0.0.2:9400")
	if a == b || a == 0 || a >= 1<<31 {
		t.Errorf("FSID: %d, %d", a, b)
	}
	if FSID("stripefs", "10.0.0.1:9400") != a {
		t.Errorf("FSID not stable")
	}
}

func TestFindMount(t *testing.T) {
	mi := `22 1 0:21 / /proc rw,nosuid - proc proc rw
36 22 0:45 / /mnt/my\040fs rw,relatime shared:1 - fuse.stripefs 127.0.0.1:9400 rw,user_id=0,group_id=0,default_permissions,allow_other
37 22 0:46 / /mnt/other rw - fuse.stripefs x rw,user_id=0,group_id=0
`
	point, opts, found, err := findMount(strings.NewReader(mi), "/mnt/my fs")
	if err != nil || !found || point != "/mnt/my fs" || !strings.Contains(strings.Join(opts, ","), "allow_other") {
		t.Errorf("findMount: %q %q %v %v", point, opts, found, err)
	}
	point, _, found, _ = findMount(strings.NewReader(mi), "/mnt/my fs/sub/dir")
	if found || point != "/mnt/my fs" {
		t.Errorf("inside a mount: %q %v", point, found)
	}
	e := &Export{Mountpoint: "/mnt/my fs", FSName: "stripefs", MGS: "m:1", FSID: 7, Options: []string{"rw"}}
	line := e.Line("*")
	if !strings.Contains(line, `"/mnt/my fs" *(rw,sync,no_subtree_check,fsid=7)`) || !strings.Contains(line, "WARNING") {
		t.Errorf("exports line:\n%s", line)
	}
}

// Records as a client and go-nfs would send them.

func putWords(b []byte, ws ...uint32) []byte {
	for _, w := range ws {
		b = binary.BigEndian.AppendUint32(b, w)
	}
	return b
}

func record(body []byte) []byte {
	return append(putWords(nil, lastFragment|uint32(len(body))), body...)
}

func callRecord(xid, proc uint32, fid proto.FID, stable uint32, data int) []byte {
	b := putWords(nil, xid, rpcCall, 2, nfsProgram, nfsVersion, proc)
	b = putWords(b, 1, 20) // AUTH_UNIX with a 20-byte body
	b = append(b, make([]byte, 20)...)
	b = putWords(b, 0, 0) // verifier
	fh := handleOf(fid)
	b = putWords(b, uint32(len(fh)))
	b = append(b, fh...)
	b = putWords(b, 0, 4096, 4096) // offset (two words), count
	if proc == procWrite {
		b = putWords(b, stable, uint32(data))
		b = append(b, make([]byte, (data+3)&^3)...)
	}
	return record(b)
}

func writeReply(xid, committed uint32) []byte {
	b := putWords(nil, xid, rpcReply, msgAccepted, 0, 0, acceptSuccess, nfs3OK)
	b = putWords(b, 1)
	b = append(b, make([]byte, 24)...)
	b = putWords(b, 1)
	b = append(b, make([]byte, 84)...)
	b = putWords(b, 4096, committed)
	b = append(b, "verifier"...)
	return record(b)
}

func commitReply(xid uint32) []byte {
	b := putWords(nil, xid, rpcReply, msgAccepted, 0, 0, acceptSuccess, nfs3OK, 0, 1)
	b = append(b, make([]byte, 84)...)
	b = append(b, "verifier"...)
	return record(b)
}

// fakeConn reads from in in pieces of random size and collects writes.
type fakeConn struct {
	net.Conn
	in  []byte
	r   *rand.Rand
	out bytes.Buffer
}

func (c *fakeConn) Read(p []byte) (int, error) {
	if len(c.in) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), 1+c.r.IntN(300))], c.in)
	c.in = c.in[n:]
	return n, nil
}

func (c *fakeConn) Write(p []byte) (int, error) { return c.out.Write(p) }

func TestTap(t *testing.T) {
	f1 := proto.FID{Seq: proto.MDTSeq(0, 2), Oid: 5}
	f2 := proto.FID{Seq: proto.MDTSeq(1, 2), Oid: 6}
	for seed := range uint64(50) {
		r := rand.New(rand.NewPCG(seed, 7))
		var calls []byte
		calls = append(calls, callRecord(1, procWrite, f1, unstable, 100000)...)
		calls = append(calls, callRecord(2, procWrite, f2, 2, 10)...) // FILE_SYNC
		calls = append(calls, callRecord(3, procCommit, f1, 0, 0)...)
		calls = append(calls, callRecord(4, procCommit, f2, 0, 0)...)
		calls = append(calls, callRecord(5, 1, f1, 0, 0)...) // GETATTR
		fc := &fakeConn{in: calls, r: r}
		var synced []proto.FID
		tc := newTapConn(fc, func(fid proto.FID) error {
			synced = append(synced, fid)
			if fid == f2 && len(synced) == 3 {
				return syscall.ENOSPC // the COMMIT of f2 fails
			}
			return nil
		}, func(uint32, uint32, error) {})
		if _, err := io.Copy(io.Discard, tc); err != nil {
			t.Fatal(err)
		}
		other := record(bytes.Repeat([]byte{0xab}, 200000)) // a READ reply, say
		other[4], other[5], other[6], other[7] = 0, 0, 0, 5 // xid 5
		replies := [][]byte{writeReply(1, 2), writeReply(2, 2), commitReply(3), commitReply(4), other}
		var all []byte
		for _, rep := range replies {
			all = append(all, rep...)
		}
		// go-nfs's bufio.Writer splits wherever it likes.
		for rest := all; len(rest) > 0; {
			n := min(len(rest), 1+r.IntN(5000))
			if k, err := tc.Write(rest[:n]); k != n || err != nil {
				t.Fatalf("Write: %d, %v", k, err)
			}
			rest = rest[n:]
		}
		want := append([]byte(nil), all...)
		// The UNSTABLE write's reply now says UNSTABLE.
		committedAt := 4 + 7*4 + 4 + 24 + 4 + 84 + 4
		binary.BigEndian.PutUint32(want[committedAt:], unstable)
		// The failed COMMIT of f2 became NFS3ERR_NOSPC.
		off := len(replies[0]) + len(replies[1]) + len(replies[2])
		want = append(append(want[:off:off], errorReply(4, nfs3ErrNoSpc)...), replies[4]...)
		if !bytes.Equal(fc.out.Bytes(), want) {
			t.Fatalf("seed %d: output differs (%d bytes, want %d)", seed, fc.out.Len(), len(want))
		}
		if len(synced) != 3 || synced[0] != f2 || synced[1] != f1 || synced[2] != f2 {
			t.Fatalf("seed %d: synced %v, want the FILE_SYNC write's file, then each COMMIT's", seed, synced)
		}
	}
}

// Garbage in either direction passes through without a panic.
func TestTapGarbage(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		junk := make([]byte, r.IntN(3000))
		for i := range junk {
			junk[i] = byte(r.Uint32())
		}
		if r.IntN(2) == 0 && len(junk) > 4 {
			binary.BigEndian.PutUint32(junk, lastFragment|uint32(r.IntN(len(junk))))
		}
		fc := &fakeConn{in: junk, r: r}
		tc := newTapConn(fc, func(proto.FID) error { return nil }, func(uint32, uint32, error) {})
		io.Copy(io.Discard, tc)
		tc.Write(junk)
	}
}

func TestNameCache(t *testing.T) {
	n := newNameCache()
	d := proto.RootFID
	f := proto.FID{Seq: proto.MDTSeq(0, 2), Oid: 1}
	n.put(d, "a", f)
	if got, ok := n.get(d, "a"); !ok || got != f {
		t.Errorf("get after put: %s %v", got, ok)
	}
	n.forget(d, "a")
	if _, ok := n.get(d, "a"); ok {
		t.Errorf("get after forget")
	}
	n.m[nameKey{d, "old"}] = nameVal{f, time.Now().Add(-2 * nameTTL)}
	if _, ok := n.get(d, "old"); ok {
		t.Errorf("expired entry returned")
	}
}

// unixCall is a GETATTR call of uid:gid (groups) with AUTH_UNIX, or, with
// uid ^0, with AUTH_NONE; proc 0 makes it a NULL call.
func unixCall(xid, proc, uid, gid uint32, groups ...uint32) []byte {
	b := putWords(nil, xid, rpcCall, 2, nfsProgram, nfsVersion, proc)
	if uid == ^uint32(0) {
		b = putWords(b, authNone, 0)
	} else {
		body := putWords(nil, 7, 4) // stamp, machine name of 4 bytes
		body = append(body, "host"...)
		body = putWords(body, uid, gid, uint32(len(groups)))
		body = putWords(body, groups...)
		b = putWords(b, authUnix, uint32(len(body)))
		b = append(b, body...)
	}
	b = putWords(b, 0, 0) // verifier
	fh := handleOf(proto.RootFID)
	b = putWords(b, uint32(len(fh)))
	b = append(b, fh...)
	return record(b)
}

// The gated tap hands on one call at a time, each after the reply to
// the one before, with that call's credential current meanwhile; an
// AUTH_NONE call (but a NULL ping) is answered AUTH_TOOWEAK and never
// handed on.
func TestTapGatesCallsAndCredentials(t *testing.T) {
	var in []byte
	in = append(in, unixCall(1, 1, 1000, 100, 5, 6)...)
	in = append(in, unixCall(2, 1, ^uint32(0), 0)...) // refused
	in = append(in, unixCall(3, 0, ^uint32(0), 0)...) // a ping: passes
	in = append(in, unixCall(4, 1, 0, 0)...)
	a, b := net.Pipe()
	defer a.Close()
	tc := newTapConn(b, func(proto.FID) error { return nil }, func(uint32, uint32, error) {})
	tc.gateCalls(true)
	go func() { a.Write(in) }()
	replies := make(chan []byte, 8)
	go func() {
		for {
			h := make([]byte, 4)
			if _, err := io.ReadFull(a, h); err != nil {
				return
			}
			body := make([]byte, binary.BigEndian.Uint32(h)&^lastFragment)
			if _, err := io.ReadFull(a, body); err != nil {
				return
			}
			replies <- body
		}
	}()
	readCall := func() []byte {
		t.Helper()
		h := make([]byte, 4)
		if _, err := io.ReadFull(tc, h); err != nil {
			t.Fatal(err)
		}
		body := make([]byte, binary.BigEndian.Uint32(h)&^lastFragment)
		if _, err := io.ReadFull(tc, body); err != nil {
			t.Fatal(err)
		}
		return body
	}
	reply := func(xid uint32) {
		t.Helper()
		if _, err := tc.Write(record(putWords(nil, xid, rpcReply, msgAccepted, 0, 0, acceptSuccess, nfs3OK))); err != nil {
			t.Fatal(err)
		}
		if got := binary.BigEndian.Uint32(<-replies); got != xid {
			t.Fatalf("reply to %d came out as %d", xid, got)
		}
	}
	if body := readCall(); binary.BigEndian.Uint32(body) != 1 {
		t.Fatal("first call")
	}
	if c := tc.gate.current(); c.unix == nil || c.unix.Uid != 1000 || c.unix.Gid != 100 || len(c.unix.Groups) != 2 {
		t.Fatalf("first call's credential: %+v", c.unix)
	}
	// Nothing more is handed on before the reply.
	next := make(chan []byte, 1)
	go func() { next <- readCall() }()
	select {
	case <-next:
		t.Fatal("the second call came before the first was answered")
	case <-time.After(100 * time.Millisecond):
	}
	reply(1)
	denied := <-replies // the AUTH_NONE call, answered by the tap
	if w := putWords(nil, 2, rpcReply, msgDenied, authError, authTooWeak); !bytes.Equal(denied, w) {
		t.Fatalf("AUTH_NONE call answered %x, want %x", denied, w)
	}
	if body := <-next; binary.BigEndian.Uint32(body) != 3 {
		t.Fatalf("after the refused call, call %d", binary.BigEndian.Uint32(body))
	}
	reply(3)
	if body := readCall(); binary.BigEndian.Uint32(body) != 4 {
		t.Fatal("fourth call")
	}
	if c := tc.gate.current(); c.unix == nil || c.unix.Uid != 0 {
		t.Fatalf("fourth call's credential: %+v", c)
	}
	squashed := Squash{AnonUID: 65534, AnonGID: 65534}.cred(tc.gate.current())
	if squashed.Uid != 65534 || squashed.Gid != 65534 {
		t.Errorf("root squashed: %+v", squashed)
	}
}
