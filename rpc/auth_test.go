package rpc

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stripefs/stripefs/wire"
)

const (
	mAdminOnly  uint16 = 20
	mServerOnly uint16 = 21
	mWhoAmI     uint16 = 22
)

type whoami struct {
	Role  Role
	Group string
	Cred  Cred
	Has   bool
}

// keyedServer is newServer with the given key and lowest flavour, and
// methods that only admins and servers may call, and one that says who
// called.
func keyedServer(t *testing.T, key *Key, flavor Flavor) (*Server, string) {
	t.Helper()
	s := NewServer("keyed")
	s.Key, s.MinFlavor = key, flavor
	ok := func(ctx context.Context, r *Request) (Reply, error) { return Reply{Msg: &echoResp{N: 1}}, nil }
	s.Handle(mAdminOnly, ok)
	s.Handle(mServerOnly, ok)
	s.Require(RoleAdmin, mAdminOnly)
	s.Require(RoleServer, mServerOnly)
	s.Handle(mWhoAmI, func(ctx context.Context, r *Request) (Reply, error) {
		p := PeerFrom(ctx)
		w := &whoami{Role: p.Role, Group: p.Group, Has: p.Cred != nil}
		if p.Cred != nil {
			w.Cred = *p.Cred
		}
		return Reply{Msg: w}, nil
	})
	s.Handle(mEcho, func(ctx context.Context, r *Request) (Reply, error) {
		var req echoReq
		if err := r.Decode(&req); err != nil {
			return Reply{}, err
		}
		return Reply{Msg: &echoResp{N: req.N, Text: req.Text, Got: int64(len(r.Bulk))}, Bulk: [][]byte{append([]byte(nil), r.Bulk...)}}, nil
	})
	l, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(l)
	t.Cleanup(func() { s.Close() })
	return s, l.Addr().String()
}

func mustKey(t *testing.T, fsname string) *Key {
	t.Helper()
	k, err := NewMasterKey(fsname)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func derive(t *testing.T, k *Key, role Role, group string) *Key {
	t.Helper()
	d, err := k.Derive(role, group)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func call(c *Client, m uint16) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := Invoke[echoResp](ctx, c, m, &echoReq{N: 1})
	return err
}

// Keys are refused with a message that says why, on the client's side
// (the server's side logs the same words), before any request is read.
func TestAuthRefusals(t *testing.T) {
	master := mustKey(t, "alpha")
	other := mustKey(t, "beta")
	sameName := mustKey(t, "alpha") // another filesystem that took the same name
	_, addr := keyedServer(t, master, FlavorAuth)
	cases := []struct {
		name string
		key  *Key
		role Role
		want string
	}{
		{"another filesystem's key", derive(t, other, RoleClient, ""), 0, `key of filesystem "beta"; this server belongs to "alpha"`},
		{"same name, other secret", derive(t, sameName, RoleClient, ""), 0, `does not hold filesystem "alpha"'s client key`},
		{"client key asking for admin", derive(t, master, RoleClient, ""), RoleAdmin, "is a client key; this needs the admin key"},
		{"admin key of another filesystem", derive(t, sameName, RoleAdmin, ""), 0, `does not hold filesystem "alpha"'s admin key`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := NewClient(addr, "intruder")
			c.Key, c.Role, c.RetryFor = tc.key, tc.role, 0
			defer c.Close()
			err := call(c, mEcho)
			if err == nil || !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an authentication error saying %q", err, tc.want)
			}
		})
	}
	// A client of another filesystem that is a server itself proves
	// nothing to us either: the signature is over its own key.
	_, fake := keyedServer(t, sameName, FlavorAuth)
	c := NewClient(fake, "victim")
	c.Key, c.RetryFor = derive(t, master, RoleClient, ""), 0
	defer c.Close()
	if err := call(c, mEcho); err == nil || !strings.Contains(err.Error(), "does not hold") && !strings.Contains(err.Error(), "did not prove") {
		t.Fatalf("client talking to another filesystem's server: %v", err)
	}
}

// A server that knows a client key (every client does) cannot pose as a
// server: the client checks the servers' signature.
func TestAuthServerMustSign(t *testing.T) {
	master := mustKey(t, "alpha")
	client := derive(t, master, RoleClient, "")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		nc, err := l.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		// An impostor speaking the protocol with only the client secret.
		r := bufio.NewReader(nc)
		_, cmsg, err := readSmall(r, KindHello)
		if err != nil {
			return
		}
		sh := hello{Version: Version, Name: "impostor", Flavor: FlavorAuth, Nonce: randomBytes(nonceSize), DH: make([]byte, 32)}
		smsg := wire.Marshal(nil, &sh)
		w := &frameWriter{c: nc}
		w.write(Header{Kind: KindHello}, smsg, nil)
		if _, _, err := readSmall(r, KindAuth); err != nil {
			return
		}
		th := transcript(cmsg, smsg, nil)
		w.write(Header{Kind: KindAuth}, wire.Marshal(nil, &authReply{Sig: clientProof(client.Secret, th)}), nil)
		io.Copy(io.Discard, r)
	}()
	c := NewClient(l.Addr().String(), "victim")
	c.Key, c.RetryFor = client, 0
	defer c.Close()
	if err := call(c, mEcho); err == nil || !strings.Contains(err.Error(), "did not prove it holds") {
		t.Fatalf("impostor accepted: %v", err)
	}
}

// Methods a role may not call answer EPERM; the roles a key grants.
func TestAuthRoles(t *testing.T) {
	master := mustKey(t, "alpha")
	_, addr := keyedServer(t, master, FlavorAuth)
	for _, tc := range []struct {
		key               *Key
		role              Role
		admin, serverOnly error
	}{
		{derive(t, master, RoleClient, ""), 0, syscall.EPERM, syscall.EPERM},
		{derive(t, master, RoleAdmin, ""), 0, nil, syscall.EPERM},
		{master, 0, nil, syscall.EPERM}, // a server key's tools act as admin unless told
		{master, RoleClient, syscall.EPERM, syscall.EPERM},
		{master, RoleServer, nil, nil},
	} {
		c := NewClient(addr, "t")
		c.Key, c.Role = tc.key, tc.role
		if err := call(c, mAdminOnly); !errors.Is(err, tc.admin) && !(err == nil && tc.admin == nil) {
			t.Errorf("%s key as %s: admin method: %v, want %v", tc.key.Role, tc.role, err, tc.admin)
		}
		if err := call(c, mServerOnly); !errors.Is(err, tc.serverOnly) && !(err == nil && tc.serverOnly == nil) {
			t.Errorf("%s key as %s: server method: %v, want %v", tc.key.Role, tc.role, err, tc.serverOnly)
		}
		c.Close()
	}
}

// The role, group and credential a request carries reach the handler,
// over a socket, over the in-process pipe and in a direct call.
func TestAuthIdentityReachesHandler(t *testing.T) {
	master := mustKey(t, "alpha")
	_, addr := keyedServer(t, master, FlavorAuth)
	c := NewClient(addr, "t")
	c.Key = derive(t, master, RoleClient, "lab")
	defer c.Close()
	cred := &Cred{Uid: 1000, Gid: 100, Groups: []uint32{10, 20}}
	var w whoami
	if err := c.Do(WithCred(context.Background(), cred), &Call{Method: mWhoAmI, Resp: &w}); err != nil {
		t.Fatal(err)
	}
	if w.Role != RoleClient || w.Group != "lab" || !w.Has || w.Cred.Uid != 1000 || w.Cred.Gid != 100 || len(w.Cred.Groups) != 2 {
		t.Fatalf("handler saw %+v", w)
	}
	w = whoami{}
	if err := c.Do(context.Background(), &Call{Method: mWhoAmI, Resp: &w}); err != nil || w.Has {
		t.Fatalf("without a credential the handler saw %+v (%v)", w, err)
	}
}

// tamperProxy relays a TCP connection, recording what the client sends
// and flipping the client's byte at offset flip (-1: none).
type tamperProxy struct {
	l    net.Listener
	mu   sync.Mutex
	seen bytes.Buffer
	flip int
}

func newTamperProxy(t *testing.T, target string, flip int) *tamperProxy {
	p := &tamperProxy{flip: flip}
	p.l = relay(t, target, func(b []byte) {
		p.mu.Lock()
		defer p.mu.Unlock()
		off := p.seen.Len()
		p.seen.Write(b)
		if p.flip >= off && p.flip < off+len(b) {
			b[p.flip-off] ^= 0x40
		}
	}, nil)
	return p
}

// Flavours: the client and server agree on the higher of their lowest;
// integrity catches a flipped byte that auth lets through, and privacy
// hides the data from the wire.
func TestAuthFlavors(t *testing.T) {
	master := mustKey(t, "alpha")
	secret := bytes.Repeat([]byte("TOP-SECRET-PAYLOAD"), 4096) // 72 KiB
	for _, tc := range []struct {
		server, client Flavor
		want           Flavor
		detects, hides bool
	}{
		{FlavorAuth, FlavorAuth, FlavorAuth, false, false},
		{FlavorIntegrity, FlavorAuth, FlavorIntegrity, true, false},
		{FlavorAuth, FlavorIntegrity, FlavorIntegrity, true, false},
		{FlavorIntegrity, FlavorPrivacy, FlavorPrivacy, true, true},
		{FlavorPrivacy, FlavorAuth, FlavorPrivacy, true, true},
	} {
		name := tc.server.String() + "/" + tc.client.String()
		t.Run(name, func(t *testing.T) {
			_, addr := keyedServer(t, master, tc.server)
			// A clean run first: the flavour works, and what the wire shows.
			p := newTamperProxy(t, addr, -1)
			c := NewClient(p.l.Addr().String(), "t")
			c.Key, c.Flavor = derive(t, master, RoleClient, ""), tc.client
			var resp echoResp
			in := make([]byte, len(secret))
			if err := c.Do(context.Background(), &Call{Method: mEcho, Req: &echoReq{N: 7}, BulkOut: [][]byte{secret}, Resp: &resp, BulkIn: in}); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(in, secret) || resp.N != 7 {
				t.Fatal("echo came back wrong")
			}
			c.Close()
			p.mu.Lock()
			leaked := bytes.Contains(p.seen.Bytes(), []byte("TOP-SECRET-PAYLOAD"))
			handshake := bytes.Index(p.seen.Bytes(), []byte("TOP-SECRET")) // where the bulk starts, when visible
			total := p.seen.Len()
			p.mu.Unlock()
			if leaked == tc.hides {
				t.Fatalf("payload visible on the wire: %v, want %v", leaked, !tc.hides)
			}
			// Then a byte of the bulk flipped on its way.
			flip := total - len(secret)/2
			if handshake > 0 {
				flip = handshake + 1000
			}
			p2 := newTamperProxy(t, addr, flip)
			c2 := NewClient(p2.l.Addr().String(), "t")
			c2.Key, c2.Flavor, c2.RetryFor = derive(t, master, RoleClient, ""), tc.client, 0
			defer c2.Close()
			clear(in)
			err := c2.Do(context.Background(), &Call{Method: mEcho, Req: &echoReq{N: 7}, BulkOut: [][]byte{secret}, Resp: &resp, BulkIn: in})
			p2.mu.Lock()
			flipped := p2.seen.Len() > flip
			p2.mu.Unlock()
			if !flipped {
				t.Fatalf("the proxy saw %d bytes: the flip at %d never happened", p2.seen.Len(), flip)
			}
			if tc.detects {
				if err == nil {
					t.Fatal("a flipped byte went unnoticed")
				}
			} else if err != nil || bytes.Equal(in, secret) {
				t.Fatalf("auth flavour: err %v, data intact %v: the flip should pass unseen", err, bytes.Equal(in, secret))
			}
		})
	}
}

// A peer that starts a frame and stalls is cut off after FrameTimeout;
// a connection in its handshake after HelloTimeout; neither holds up
// others, and a header's lengths alone do not allocate their bytes.
func TestAuthSlowAndOversizedFrames(t *testing.T) {
	_, addr := newServer(t, "127.0.0.1:0", func(s *Server) {
		s.Limits.FrameTimeout = 300 * time.Millisecond
		s.Limits.HelloTimeout = 300 * time.Millisecond
	})
	good := NewClient(addr, "good")
	defer good.Close()
	if err := call(good, mEcho); err != nil {
		t.Fatal(err)
	}
	closedWithin := func(nc net.Conn, d time.Duration) bool {
		nc.SetReadDeadline(time.Now().Add(d))
		buf := make([]byte, 64)
		for {
			if _, err := nc.Read(buf); err != nil {
				var ne net.Error
				return !(errors.As(err, &ne) && ne.Timeout())
			}
		}
	}
	// A frame started and never finished.
	nc := authed(t, addr)
	defer nc.Close()
	hb := make([]byte, HeaderSize)
	(&Header{Kind: KindRequest, Method: mEcho, BulkLen: 10 << 20}).Encode(hb)
	nc.Write(append(hb, 1, 2, 3))
	start := time.Now()
	if !closedWithin(nc, 5*time.Second) {
		t.Fatal("stalled frame: connection still open after 5 s")
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Fatalf("closed after %v, before the frame timeout", d)
	}
	// A handshake never finished.
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.Write([]byte("SFS1"))
	if !closedWithin(raw, 5*time.Second) {
		t.Fatal("stalled hello: connection still open after 5 s")
	}
	// Headers announcing 60 MiB each, a few bytes sent: the server
	// must not hold 60 MiB per connection.
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	// On a server whose frames may take their time (the bytes must not
	// be cut off before they are measured).
	_, patient := newServer(t, "127.0.0.1:0", func(s *Server) { s.Limits.FrameTimeout = 10 * time.Second })
	var conns []net.Conn
	for range 16 {
		nc := authed(t, patient)
		conns = append(conns, nc)
		(&Header{Kind: KindRequest, Method: mEcho, BulkLen: 60 << 20}).Encode(hb)
		nc.Write(append(hb, 1, 2, 3))
	}
	time.Sleep(200 * time.Millisecond)
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapInuse) - int64(before.HeapInuse)
	for _, nc := range conns {
		nc.Close()
	}
	if grown > 16<<20 {
		t.Fatalf("16 connections announcing 60 MiB frames grew the heap by %d MiB", grown>>20)
	}
	t.Logf("heap grew %d KiB for 16 announced 60 MiB frames", grown>>10)
	if err := call(good, mEcho); err != nil {
		t.Fatalf("the good client after the bad ones: %v", err)
	}
	other := NewClient(patient, "good")
	defer other.Close()
	if err := call(other, mEcho); err != nil {
		t.Fatalf("a client of the server with 16 announced frames: %v", err)
	}
}

// Connections in their handshake are bounded per address: past the
// limit the oldest are shut, while established clients keep being served
// and a new one gets in.
func TestAuthHelloFlood(t *testing.T) {
	_, addr := newServer(t, "127.0.0.1:0", func(s *Server) { s.Limits.MaxHellosPerAddr = 8 })
	good := NewClient(addr, "good")
	defer good.Close()
	if err := call(good, mEcho); err != nil {
		t.Fatal(err)
	}
	var refused atomic.Int64
	var idle []net.Conn
	for range 40 {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, nc)
	}
	defer func() {
		for _, nc := range idle {
			nc.Close()
		}
	}()
	time.Sleep(300 * time.Millisecond) // the server takes them in, in its own order
	for _, nc := range idle {
		nc.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if _, err := nc.Read(make([]byte, 1)); err == io.EOF {
			refused.Add(1)
		}
	}
	if n := refused.Load(); n != 32 {
		t.Fatalf("%d of 40 idle connections shut, want 32: all but the limit of 8", n)
	}
	start := time.Now()
	if err := call(good, mEcho); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("a call of an established client took %v during the flood", d)
	}
	// A new client gets in past the idle handshakes, which it pushes out.
	fresh := NewClient(addr, "fresh")
	defer fresh.Close()
	start = time.Now()
	if err := call(fresh, mEcho); err != nil {
		t.Fatalf("a new client during the flood: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("a new client took %v to get in during the flood", d)
	}
}

func TestKeyFile(t *testing.T) {
	master := mustKey(t, "alpha")
	dir := t.TempDir()
	for _, k := range []*Key{master, derive(t, master, RoleAdmin, ""), derive(t, master, RoleClient, "lab")} {
		path := dir + "/" + k.Role.String() + ".key"
		if err := WriteKey(path, k); err != nil {
			t.Fatal(err)
		}
		got, err := LoadKey(path)
		if err != nil {
			t.Fatal(err)
		}
		if got.FSName != k.FSName || got.Role != k.Role || got.Group != k.Group || !bytes.Equal(got.Secret, k.Secret) || !got.Public.Equal(k.Public) {
			t.Fatalf("%s key changed in its file: %+v", k.Role, got)
		}
		if err := WriteKey(path, k); err == nil {
			t.Fatal("WriteKey replaced a key file")
		}
	}
	bad := map[string]string{
		"no secret":       "fsname a\nrole client\npublic " + strings.Repeat("00", 32) + "\n",
		"unknown role":    "fsname a\nrole root\n",
		"unknown field":   "fsname a\nshell /bin/sh\n",
		"forged public":   strings.Replace(string(master.Marshal()), "\npublic ", "\npublic 00", 1),
		"short secret":    "fsname a\nrole client\nsecret abcd\npublic " + strings.Repeat("00", 32) + "\n",
		"server mismatch": strings.Replace(string(master.Marshal()), "\nsecret ", "\nsecret 00", 1),
	}
	for name, text := range bad {
		if _, err := ParseKey([]byte(text)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}
