package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"math/rand"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stripefs/stripefs/internal/testcluster"
	"github.com/stripefs/stripefs/rpc"
	"github.com/stripefs/stripefs/wire"
)

// TestBadInputToServers sends garbage, truncated and oversized frames, and
// well-framed requests with random message bodies for every method number,
// to every MDT and OST process. Each must answer with an error or close
// the connection, never hang or die, and the mount must keep working.
func TestBadInputToServers(t *testing.T) {
	c, mnt := mount(t)
	hello := func() []byte {
		msg := wire.Marshal(nil, &struct {
			Version uint32
			Name    string
		}{rpc.Version, "fuzzer"})
		b := make([]byte, rpc.HeaderSize)
		(&rpc.Header{Kind: rpc.KindHello, MsgLen: uint32(len(msg))}).Encode(b)
		return append(b, msg...)
	}
	frame := func(h rpc.Header, body []byte) []byte {
		b := make([]byte, rpc.HeaderSize)
		h.Encode(b)
		return append(b, body...)
	}
	rng := rand.New(rand.NewSource(1))
	var random []byte
	for m := 0; m < 256; m++ {
		body := make([]byte, rng.Intn(64))
		rng.Read(body)
		random = append(random, frame(rpc.Header{Kind: rpc.KindRequest, Method: uint16(m), ReqID: uint64(m), MsgLen: uint32(len(body))}, body)...)
	}
	oversize := make([]byte, rpc.HeaderSize)
	(&rpc.Header{Kind: rpc.KindRequest, Method: 1, MsgLen: 1}).Encode(oversize)
	binary.LittleEndian.PutUint32(oversize[20:], 0xffffffff)
	inputs := map[string][]byte{
		"garbage":            bytes.Repeat([]byte("not a stripefs frame "), 20),
		"truncated frame":    append(hello(), frame(rpc.Header{Kind: rpc.KindRequest, Method: 1, MsgLen: 500}, []byte{1, 2, 3})...),
		"oversized length":   append(hello(), oversize...),
		"random bodies":      append(hello(), random...),
		"huge bulk announce": append(hello(), frame(rpc.Header{Kind: rpc.KindRequest, Method: 64, BulkLen: rpc.MaxBulk + 1}, nil)...),
	}
	for _, p := range append(append([]*testcluster.Proc(nil), c.MDTs...), c.OSTs...) {
		for name, in := range inputs {
			nc, err := net.Dial("tcp", p.Addr)
			if err != nil {
				t.Fatalf("%s: %v", p.Name, err)
			}
			nc.Write(in)
			nc.(*net.TCPConn).CloseWrite()
			nc.SetReadDeadline(time.Now().Add(10 * time.Second))
			buf := make([]byte, 64<<10)
			for {
				if _, err := nc.Read(buf); err != nil {
					if ne, ok := err.(net.Error); ok && ne.Timeout() {
						t.Errorf("%s: %s: no answer and no close within 10s", p.Name, name)
					}
					break
				}
			}
			nc.Close()
		}
		if !p.Running() {
			t.Fatalf("%s died on bad input", p.Name)
		}
		rc := rpc.NewClient(p.Addr, "check")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := rc.Do(ctx, &rpc.Call{Method: 15, Req: &struct{}{}}) // removexattr, empty message
		cancel()
		rc.Close()
		if err == nil {
			t.Errorf("%s: method 15 with an empty message succeeded", p.Name)
		}
	}
	writeFile(t, filepath.Join(mnt, "still-works"), []byte("yes"))
	if got := readFile(t, filepath.Join(mnt, "still-works")); string(got) != "yes" {
		t.Fatalf("mount after bad input reads %q", got)
	}
	for _, p := range append(append([]*testcluster.Proc(nil), c.MDTs...), c.OSTs...) {
		if b, _ := os.ReadFile(p.Log); bytes.Contains(b, []byte("panic")) {
			t.Errorf("%s logged a panic:\n%s", p.Name, b)
		}
	}
}
