package rpc

import (
	"context"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stripefs/stripefs/wire"
)

func FuzzDecodeHeader(f *testing.F) {
	b := make([]byte, HeaderSize)
	(&Header{Kind: KindRequest, Method: 3, ReqID: 9, MsgLen: 10, BulkLen: 20}).Encode(b)
	f.Add(b)
	f.Add([]byte("SFS1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodeHeader(b)
		if err != nil {
			return
		}
		if h.MsgLen > MaxMsg || h.BulkLen > MaxBulk {
			t.Fatalf("accepted lengths %d/%d", h.MsgLen, h.BulkLen)
		}
		out := make([]byte, HeaderSize)
		h.Encode(out)
		if h2, err := DecodeHeader(out); err != nil || h2 != h {
			t.Fatalf("round trip %+v -> %+v %v", h, h2, err)
		}
	})
}

// FuzzServerConn feeds arbitrary bytes after a valid hello to a server
// connection: it must never panic or hang.
func FuzzServerConn(f *testing.F) {
	req := make([]byte, HeaderSize)
	msg := wire.Marshal(nil, &echoReq{N: 1, Text: "hi"})
	(&Header{Kind: KindRequest, Method: mEcho, ReqID: 1, MsgLen: uint32(len(msg)), BulkLen: 3}).Encode(req)
	f.Add(append(append(req, msg...), 1, 2, 3))
	f.Add([]byte{0, 1, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		s := NewServer("fuzz")
		s.Handle(mEcho, func(ctx context.Context, r *Request) (Reply, error) {
			var req echoReq
			if err := r.Decode(&req); err != nil {
				return Reply{}, err
			}
			return Reply{Msg: &echoResp{N: req.N}, Bulk: [][]byte{r.Bulk}}, nil
		})
		a, b := net.Pipe()
		s.mu.Lock()
		s.conns[b] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		done := make(chan struct{})
		go func() { s.serveConn(b); close(done) }()
		key, _ := ProcessKey()
		a.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := (&Client{Name: "f", UUID: NewUUID()}).clientHandshake(context.Background(), a, key, RoleClient); err != nil {
			t.Fatal(err)
		}
		go func() { // drain replies
			buf := make([]byte, 4096)
			for {
				if _, err := a.Read(buf); err != nil {
					return
				}
			}
		}()
		a.Write(data)
		a.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("server connection did not end after the peer closed")
		}
	})
}

// FuzzHandshake feeds arbitrary bytes to a server as a client's
// handshake: it must never panic or hang, and never serve a request, as
// no proof can be made without the key.
func FuzzHandshake(f *testing.F) {
	key, _ := ProcessKey()
	frame := func(kind uint8, v any) []byte {
		msg := wire.Marshal(nil, v)
		b := make([]byte, HeaderSize)
		(&Header{Kind: kind, MsgLen: uint32(len(msg))}).Encode(b)
		return append(b, msg...)
	}
	hi := frame(KindHello, &hello{Version: Version, Name: "f", FSName: key.FSName, Role: RoleClient, Flavor: FlavorAuth,
		Nonce: make([]byte, nonceSize), DH: make([]byte, 32)})
	proof := frame(KindAuth, &authProof{MAC: make([]byte, 32)})
	req := make([]byte, HeaderSize)
	(&Header{Kind: KindRequest, Method: mEcho, ReqID: 1}).Encode(req)
	f.Add(append(append(append([]byte(nil), hi...), proof...), req...))
	f.Add(append(append([]byte(nil), hi...), req...))
	f.Add(hi[:HeaderSize+5])
	f.Add([]byte("SFS1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s := NewServer("fuzz")
		s.Limits.HelloTimeout = 500 * time.Millisecond
		var served atomic.Bool
		s.Handle(mEcho, func(ctx context.Context, r *Request) (Reply, error) {
			served.Store(true)
			return Reply{}, nil
		})
		a, b := net.Pipe()
		s.mu.Lock()
		s.conns[b] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		done := make(chan struct{})
		go func() { s.serveConn(b); close(done) }()
		go io.Copy(io.Discard, a)
		a.SetWriteDeadline(time.Now().Add(time.Second))
		a.Write(data)
		a.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("server connection did not end after the peer closed")
		}
		if served.Load() {
			t.Fatal("a request was served without a valid proof")
		}
	})
}
