package rpc

import (
	"context"
	"net"
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
		go func() { // drain replies
			buf := make([]byte, 4096)
			for {
				if _, err := a.Read(buf); err != nil {
					return
				}
			}
		}()
		hello := wire.Marshal(nil, &hello{Version: Version, Name: "f"})
		hb := make([]byte, HeaderSize)
		(&Header{Kind: KindHello, MsgLen: uint32(len(hello))}).Encode(hb)
		a.SetWriteDeadline(time.Now().Add(2 * time.Second))
		a.Write(append(hb, hello...))
		a.Write(data)
		a.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("server connection did not end after the peer closed")
		}
	})
}
