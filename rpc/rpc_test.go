package rpc

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stripefs/stripefs/wire"
)

type echoReq struct {
	N    int64
	Text string
}

type echoResp struct {
	N    int64
	Text string
	Got  int64 // bulk bytes the server received
}

const (
	mEcho  uint16 = 1
	mSleep uint16 = 2
	mFail  uint16 = 3
	mPanic uint16 = 4
)

// newServer serves echo (bulk is returned reversed in order of calls),
// sleep, an errno failure and a panicking handler.
func newServer(t *testing.T, addr string, configure ...func(*Server)) (*Server, string) {
	t.Helper()
	s := NewServer("test")
	for _, f := range configure { // before Serve: its goroutines read the settings
		f(s)
	}
	s.Handle(mEcho, func(ctx context.Context, r *Request) (Reply, error) {
		var req echoReq
		if err := r.Decode(&req); err != nil {
			return Reply{}, err
		}
		out := append([]byte(nil), r.Bulk...)
		return Reply{Msg: &echoResp{N: req.N, Text: req.Text, Got: int64(len(r.Bulk))}, Bulk: [][]byte{out}}, nil
	})
	s.Handle(mSleep, func(ctx context.Context, r *Request) (Reply, error) {
		time.Sleep(200 * time.Millisecond) // outlives the caller's deadline
		return Reply{Msg: &echoResp{}, Bulk: [][]byte{make([]byte, 10)}}, nil
	})
	HandleFunc(s, mFail, func(ctx context.Context, r *echoReq) (any, error) {
		return nil, fmt.Errorf("no such thing: %w", syscall.ENOENT)
	})
	s.Handle(mPanic, func(ctx context.Context, r *Request) (Reply, error) { panic("boom") })
	l, err := Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(l)
	t.Cleanup(func() { s.Close() })
	return s, l.Addr().String()
}

func transports(t *testing.T, f func(t *testing.T, addr string)) {
	t.Run("tcp", func(t *testing.T) { _, a := newServer(t, "127.0.0.1:0"); f(t, a) })
	t.Run("inproc", func(t *testing.T) { _, a := newServer(t, "inproc:"+t.Name()); f(t, a) })
}

func TestManyCallsInFlight(t *testing.T) {
	transports(t, func(t *testing.T, addr string) {
		c := NewClient(addr, "t")
		defer c.Close()
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for g := 0; g < 32; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for i := 0; i < 50; i++ {
					out := bytes.Repeat([]byte{byte(g)}, g*1000+i)
					in := make([]byte, len(out))
					var resp echoResp
					call := &Call{Method: mEcho, Req: &echoReq{N: int64(g*1000 + i), Text: "x"}, BulkOut: [][]byte{out[:len(out)/2], out[len(out)/2:]}, Resp: &resp, BulkIn: in}
					if err := c.Do(context.Background(), call); err != nil {
						errs <- err
						return
					}
					if resp.N != int64(g*1000+i) || call.NBulkIn != len(out) || !bytes.Equal(in, out) || resp.Got != int64(len(out)) {
						errs <- fmt.Errorf("call %d/%d: mixed-up reply %+v (%d bulk bytes)", g, i, resp, call.NBulkIn)
						return
					}
				}
			}(g)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if got := c.Stats.Snapshot(); len(got) != 1 || got[0].Calls != 32*50 {
			t.Fatalf("stats %+v", got)
		}
	})
}

func TestErrorsCarryErrno(t *testing.T) {
	transports(t, func(t *testing.T, addr string) {
		c := NewClient(addr, "t")
		defer c.Close()
		_, err := Invoke[echoResp](context.Background(), c, mFail, &echoReq{})
		if !errors.Is(err, syscall.ENOENT) {
			t.Fatalf("got %v, want ENOENT", err)
		}
		_, err = Invoke[echoResp](context.Background(), c, mPanic, &echoReq{})
		if !errors.Is(err, syscall.EIO) {
			t.Fatalf("panicking handler: got %v, want EIO", err)
		}
		_, err = Invoke[echoResp](context.Background(), c, 99, &echoReq{})
		if !errors.Is(err, syscall.ENOSYS) {
			t.Fatalf("unknown method: got %v, want ENOSYS", err)
		}
		// A malformed request message is refused, and the connection lives on.
		_, err = Invoke[echoResp](context.Background(), c, mFail, &struct{ A, B, C string }{"a", "b", "c"})
		if !errors.Is(err, syscall.EINVAL) {
			t.Fatalf("malformed message: got %v, want EINVAL", err)
		}
		if _, err := Invoke[echoResp](context.Background(), c, mEcho, &echoReq{N: 1}); err != nil {
			t.Fatal(err)
		}
	})
}

func TestDeadline(t *testing.T) {
	transports(t, func(t *testing.T, addr string) {
		c := NewClient(addr, "t")
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		buf := make([]byte, 10)
		err := c.Do(ctx, &Call{Method: mSleep, Req: &echoReq{}, Resp: &echoResp{}, BulkIn: buf})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want deadline exceeded", err)
		}
		// The late reply is dropped; the connection still works.
		var r echoResp
		if err := c.Do(context.Background(), &Call{Method: mEcho, Req: &echoReq{N: 5}, Resp: &r}); err != nil || r.N != 5 {
			t.Fatalf("call after a timed-out one: %v %+v", err, r)
		}
	})
}

func TestReconnectAfterRestart(t *testing.T) {
	s, addr := newServer(t, "127.0.0.1:0")
	c := NewClient(addr, "t")
	defer c.Close()
	if _, err := Invoke[echoResp](context.Background(), c, mEcho, &echoReq{N: 1}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	restarted := make(chan struct{})
	go func() {
		time.Sleep(200 * time.Millisecond)
		s2 := NewServer("again")
		HandleFunc(s2, mEcho, func(ctx context.Context, r *echoReq) (any, error) { return &echoResp{N: r.N + 1}, nil })
		l, err := Listen(addr)
		if err != nil {
			t.Error(err)
			return
		}
		go s2.Serve(l)
		t.Cleanup(func() { s2.Close() })
		close(restarted)
	}()
	// The first call may see the old connection break; the next redials
	// until the server is back.
	var r *echoResp
	var err error
	for i := 0; i < 3; i++ {
		if r, err = Invoke[echoResp](context.Background(), c, mEcho, &echoReq{N: 1}); err == nil {
			break
		}
		if !errors.Is(err, ErrDisconnected) {
			t.Fatalf("unexpected error %v", err)
		}
	}
	<-restarted
	if err != nil || r.N != 2 {
		t.Fatalf("after restart: %v %+v", err, r)
	}
}

func TestVersionMismatchRefused(t *testing.T) {
	_, addr := newServer(t, "127.0.0.1:0")
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	msg := wire.Marshal(nil, &hello{Version: Version + 1, Name: "future"})
	if err := (&frameWriter{c: nc}).write(Header{Kind: KindHello}, msg, nil); err != nil {
		t.Fatal(err)
	}
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	h, body, err := readSmall(bufio.NewReader(nc), KindHello)
	if err != nil || h.Status != StatusError || !strings.Contains(refusal(body), "protocol version") {
		t.Fatalf("reply to a wrong version: %+v %v %q", h, err, refusal(body))
	}
}

// authed dials addr and authenticates as a client with the process's
// key, returning the raw connection for a test to write frames on.
func authed(t testing.TB, addr string) net.Conn {
	t.Helper()
	nc, err := DialContext(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := ProcessKey()
	ss, err := (&Client{Name: "raw", UUID: NewUUID()}).clientHandshake(context.Background(), nc, key, RoleClient)
	if err != nil {
		nc.Close()
		t.Fatal(err)
	}
	if ss.r.r.Buffered() > 0 {
		t.Fatal("server sent frames unasked")
	}
	return ss.conn
}

// TestBadFrames sends frames that break the protocol: each must end in a
// closed connection, and the server must keep serving others.
func TestBadFrames(t *testing.T) {
	_, addr := newServer(t, "127.0.0.1:0")
	hello := func() []byte {
		msg := wire.Marshal(nil, &hello{Version: Version, Name: "bad"})
		b := make([]byte, HeaderSize)
		(&Header{Kind: KindHello, MsgLen: uint32(len(msg))}).Encode(b)
		return append(b, msg...)
	}
	frame := func(h Header) []byte {
		b := make([]byte, HeaderSize)
		h.Encode(b)
		return b
	}
	cases := []struct {
		name   string
		authed bool // sent after a valid handshake
		b      []byte
	}{
		{"garbage", false, bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef}, 64)},
		{"truncated header", false, hello()[:10]},
		{"hello without nonce", false, hello()},
		{"request before the handshake", false, frame(Header{Kind: KindRequest, Method: mEcho})},
		{"oversized message", true, frame(Header{Kind: KindRequest, Method: mEcho, MsgLen: MaxMsg + 1})},
		{"oversized bulk", true, frame(Header{Kind: KindRequest, Method: mEcho, BulkLen: 1 << 31})},
		// A reply frame from a client answers a callback
		// (TestCallbackUnaskedReply); a hello frame mid-stream is wrong.
		{"hello after the handshake", true, hello()},
		{"auth after the handshake", true, frame(Header{Kind: KindAuth})},
		{"truncated body", true, append(frame(Header{Kind: KindRequest, Method: mEcho, MsgLen: 100}), 1, 2, 3)},
		{"bad credential", true, append(frame(Header{Kind: KindRequest, Method: mEcho, Flags: FlagCred, MsgLen: 6}), 200, 0, 0, 0, 1, 2)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var nc net.Conn
			if tc.authed {
				nc = authed(t, addr)
			} else {
				var err error
				if nc, err = net.Dial("tcp", addr); err != nil {
					t.Fatal(err)
				}
			}
			defer nc.Close()
			nc.Write(tc.b)
			if tc.name == "truncated body" || tc.name == "truncated header" {
				nc.(*net.TCPConn).CloseWrite()
			}
			nc.SetReadDeadline(time.Now().Add(5 * time.Second))
			buf := make([]byte, 4096)
			for {
				if _, err := nc.Read(buf); err != nil {
					var ne net.Error
					if errors.As(err, &ne) && ne.Timeout() {
						t.Fatal("server neither answered nor closed the connection")
					}
					break // closed: what we want
				}
			}
		})
	}
	c := NewClient(addr, "good")
	defer c.Close()
	if _, err := Invoke[echoResp](context.Background(), c, mEcho, &echoReq{N: 1}); err != nil {
		t.Fatalf("server after bad frames: %v", err)
	}
}

type wrappedListener struct{ net.Listener }

// TestShortcut checks that a client in the server's process reaches it
// over a pipe, bulk intact, while the socket keeps serving other
// processes, and that a closed server is not reached through either.
func TestShortcut(t *testing.T) {
	Shortcut = true
	defer func() { Shortcut = false }()
	var mu sync.Mutex
	var peers []string
	s := NewServer("shortcut")
	s.Handle(mEcho, func(ctx context.Context, r *Request) (Reply, error) {
		mu.Lock()
		peers = append(peers, r.Peer)
		mu.Unlock()
		return Reply{Msg: &echoResp{Got: int64(len(r.Bulk))}, Bulk: [][]byte{append([]byte(nil), r.Bulk...)}}, nil
	})
	dir := t.TempDir()
	l, err := Listen("unix:" + dir + "/s.sock")
	if err != nil {
		t.Fatal(err)
	}
	// Served through a wrapper, as an OST serves its listener.
	go s.Serve(wrappedListener{l})
	defer s.Close()
	bulk := bytes.Repeat([]byte("stripefs"), 3<<17) // 3 MiB
	echo := func(addr string) error {
		c := NewClient(addr, "test")
		defer c.Close()
		in := make([]byte, len(bulk))
		var r echoResp
		call := &Call{Method: mEcho, Req: &echoReq{}, Resp: &r, BulkOut: [][]byte{bulk}, BulkIn: in}
		if err := c.Do(context.Background(), call); err != nil {
			return err
		}
		if r.Got != int64(len(bulk)) || !bytes.Equal(in[:call.NBulkIn], bulk) {
			return fmt.Errorf("echo of %d bytes came back as %d (server got %d)", len(bulk), call.NBulkIn, r.Got)
		}
		return nil
	}
	if err := echo(l.Addr().String()); err != nil {
		t.Fatal(err)
	}
	// Another spelling of the path is not in the table: it is how a
	// client in another process gets there, over the socket.
	if err := echo("unix:" + dir + "/./s.sock"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(peers) != 2 || !strings.HasPrefix(peers[0], "pipe:") || strings.HasPrefix(peers[1], "pipe:") {
		t.Fatalf("peers %q: want the first over the pipe, the second over the socket", peers)
	}
	mu.Unlock()
	// Direct: a call runs the handler in this goroutine, with the same
	// results, errors and peer as over its connection.
	dc := NewClient(l.Addr().String(), "direct")
	dc.Direct = true
	in := make([]byte, len(bulk))
	var r echoResp
	call := &Call{Method: mEcho, Req: &echoReq{N: 7}, Resp: &r, BulkOut: [][]byte{bulk[:1000], bulk[1000:]}, BulkIn: in}
	if err := dc.Do(context.Background(), call); err != nil {
		t.Fatal(err)
	}
	if r.Got != int64(len(bulk)) || !bytes.Equal(in[:call.NBulkIn], bulk) || !call.Direct {
		t.Fatalf("direct echo: server got %d, %d came back, direct %v", r.Got, call.NBulkIn, call.Direct)
	}
	mu.Lock()
	if len(peers) != 3 || !strings.HasPrefix(peers[2], "pipe:") || peers[2] == peers[0] {
		t.Fatalf("peers %q: want the third call direct, as its own pipe", peers)
	}
	mu.Unlock()
	s.Handle(mFail, func(ctx context.Context, r *Request) (Reply, error) {
		return Reply{}, fmt.Errorf("no such thing: %w", syscall.ENOENT)
	})
	if err := dc.Do(context.Background(), &Call{Method: mFail, Req: &echoReq{}, BulkOut: [][]byte{bulk[:10]}}); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("direct call of a failing handler: %v, want ENOENT", err)
	}
	if got := s.Stats.Snapshot(); len(got) == 0 {
		t.Fatal("direct calls are not counted")
	}
	l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if c, err := DialContext(ctx, l.Addr().String()); err == nil {
		c.Close()
		t.Fatal("dialed a closed listener")
	}
}

// replayServer records, in order, the change requests (method mEcho) and
// replay-done markers it sees; each change gets the next transno and none
// is ever committed, so the client keeps them all.
type replayServer struct {
	s      *Server
	mu     sync.Mutex
	log    []string
	next   uint64
	doneCh chan struct{}
}

func startReplayServer(t *testing.T, addr string, first uint64) (*replayServer, string) {
	t.Helper()
	rs := &replayServer{s: NewServer("replay"), next: first, doneCh: make(chan struct{}, 1)}
	rs.s.Handle(mEcho, func(ctx context.Context, r *Request) (Reply, error) {
		rs.mu.Lock()
		defer rs.mu.Unlock()
		c, _ := CallerFrom(ctx)
		first := int64(-1) // the N of the first reply, which a replay carries
		if b := FirstReply(ctx); b != nil {
			var fr echoResp
			if err := wire.Unmarshal(b, &fr); err != nil {
				return Reply{}, err
			}
			first = fr.N
		}
		rs.log = append(rs.log, fmt.Sprintf("flags=%d old=%d kept=%v first=%d", r.Flags, r.Transno, c.Kept, first))
		rs.next++
		SetTransno(ctx, rs.next)
		return Reply{Msg: &echoResp{N: int64(rs.next)}}, nil
	})
	rs.s.Handle(MethodReplayDone, func(ctx context.Context, r *Request) (Reply, error) {
		rs.mu.Lock()
		rs.log = append(rs.log, "done")
		rs.mu.Unlock()
		rs.doneCh <- struct{}{}
		return Reply{}, nil
	})
	l, err := Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	go rs.s.Serve(l)
	t.Cleanup(func() { rs.s.Close() })
	return rs, l.Addr().String()
}

// TestReplayAfterRestart: a Replay client keeps uncommitted changes, and
// when the server restarts it reconnects by itself (no call of its own),
// replays them in transno order flagged as replays with their old
// transnos and first replies, then says replay done. The same holds when
// the calls ran directly in the server's process (Client.Direct).
func TestReplayAfterRestart(t *testing.T) {
	for _, direct := range []bool{false, true} {
		t.Run(fmt.Sprintf("direct=%v", direct), func(t *testing.T) {
			Shortcut = direct
			defer func() { Shortcut = false }()
			rs, addr := startReplayServer(t, "127.0.0.1:0", 100)
			c := NewClient(addr, "t")
			c.Replay, c.Direct = true, direct
			defer c.Close()
			for i := 0; i < 3; i++ {
				call := &Call{Method: mEcho, Req: &echoReq{N: int64(i)}, Resp: &echoResp{}, Replay: true}
				if err := c.Do(context.Background(), call); err != nil {
					t.Fatal(err)
				}
				if call.Direct != direct {
					t.Fatalf("call %d ran directly: %v", i, call.Direct)
				}
			}
			// A read-only call is not kept.
			if err := c.Do(context.Background(), &Call{Method: mEcho, Req: &echoReq{}, Resp: &echoResp{}}); err != nil {
				t.Fatal(err)
			}
			rs.s.Close()
			rs2, _ := startReplayServer(t, addr, 500)
			select {
			case <-rs2.doneCh:
			case <-time.After(10 * time.Second):
				t.Fatal("the client did not come back to replay by itself")
			}
			rs2.mu.Lock()
			got := fmt.Sprint(rs2.log)
			rs2.mu.Unlock()
			want := fmt.Sprint([]string{"flags=3 old=101 kept=true first=101", "flags=3 old=102 kept=true first=102", "flags=3 old=103 kept=true first=103", "done"})
			if got != want {
				t.Fatalf("after restart the server saw\n %s\nwant\n %s", got, want)
			}
			rs.mu.Lock()
			defer rs.mu.Unlock()
			if rs.log[0] != "flags=1 old=0 kept=true first=-1" || rs.log[3] != "flags=0 old=0 kept=false first=-1" {
				t.Fatalf("first start saw %v", rs.log)
			}
			if n := c.Replayed.Load(); n != 3 {
				t.Fatalf("Replayed = %d, want 3", n)
			}
			// After the replay, calls run directly in the new server.
			call := &Call{Method: mEcho, Req: &echoReq{}, Resp: &echoResp{}, Replay: true}
			if err := c.Do(context.Background(), call); err != nil || call.Direct != direct {
				t.Fatalf("a call after the replay: %v, direct %v", err, call.Direct)
			}
		})
	}
}

// TestResentFlag: a call sent again under the XID of its first send (a
// caller's retry after ErrDisconnected, or a replay) reaches the handler
// marked resent, and a first send does not, over a connection and
// directly; the server looks for already-done requests among those only.
func TestResentFlag(t *testing.T) {
	for _, direct := range []bool{false, true} {
		t.Run(fmt.Sprintf("direct=%v", direct), func(t *testing.T) {
			Shortcut = direct
			defer func() { Shortcut = false }()
			s := NewServer("test")
			var mu sync.Mutex
			var seen []bool
			s.Handle(mEcho, func(ctx context.Context, r *Request) (Reply, error) {
				c, _ := CallerFrom(ctx)
				mu.Lock()
				defer mu.Unlock()
				seen = append(seen, c.Resent)
				return Reply{Msg: &echoResp{}}, nil
			})
			l, err := Listen("127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			go s.Serve(l)
			defer s.Close()
			c := NewClient(l.Addr().String(), "t")
			c.Direct = direct
			defer c.Close()
			call := &Call{Method: mEcho, Req: &echoReq{}, Resp: &echoResp{}}
			for range 2 {
				if err := c.Do(context.Background(), call); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.Do(context.Background(), &Call{Method: mEcho, Req: &echoReq{}, Resp: &echoResp{}}); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if fmt.Sprint(seen) != "[false true false]" || call.Direct != direct {
				t.Fatalf("resent as the handler saw it: %v (direct %v)", seen, call.Direct)
			}
		})
	}
}
