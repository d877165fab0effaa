package rpc

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"
)

// freezeProxy relays TCP connections until frozen: then it stops
// forwarding in both directions, keeping the sockets open, as a stopped
// server process or a cut-off network does (no RST, no FIN).
type freezeProxy struct {
	l      net.Listener
	frozen chan struct{}
}

func newFreezeProxy(t *testing.T, target string) *freezeProxy {
	p := &freezeProxy{frozen: make(chan struct{})}
	hold := func([]byte) {
		select {
		case <-p.frozen:
			<-make(chan struct{}) // hold the bytes and the socket
		default:
		}
	}
	p.l = relay(t, target, hold, hold)
	return p
}

func (p *freezeProxy) freeze() { close(p.frozen) }

// A server whose handler takes longer than DeadAfter is alive (it answers
// pings); one that goes silent is given up within DeadAfter and a bit.
func TestDeadAfter(t *testing.T) {
	const deadAfter = 400 * time.Millisecond
	s, addr := newServer(t, "127.0.0.1:0")
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	const mHold uint16 = 9
	s.Handle(mHold, func(ctx context.Context, r *Request) (Reply, error) {
		<-release
		return Reply{Msg: &echoResp{N: 1}}, nil
	})
	p := newFreezeProxy(t, addr)
	c := NewClient(p.l.Addr().String(), "t")
	c.DeadAfter, c.RetryFor = deadAfter, 0
	defer c.Close()

	slow := make(chan error, 1)
	go func() { slow <- c.Do(context.Background(), &Call{Method: mHold, Resp: &echoResp{}}) }()
	select {
	case err := <-slow:
		t.Fatalf("a call to a busy server ended after less than %s: %v", 4*deadAfter, err)
	case <-time.After(4 * deadAfter):
	}
	pings := int64(0)
	for _, m := range s.Stats.Snapshot() {
		if m.Method == MethodPing {
			pings = m.Calls
		}
	}
	if pings == 0 {
		t.Fatal("the busy server answered no ping: what kept the call alive?")
	}
	once.Do(func() { close(release) })
	if err := <-slow; err != nil {
		t.Fatalf("a call to a busy server: %v", err)
	}

	p.freeze()
	start := time.Now()
	err := c.Do(context.Background(), &Call{Method: mEcho, Req: &echoReq{N: 2}, Resp: &echoResp{}})
	took := time.Since(start)
	if !errors.Is(err, ErrDisconnected) {
		t.Fatalf("a call over a frozen link: %v, want ErrDisconnected", err)
	}
	if took < deadAfter-deadAfter/4 || took > 2*deadAfter {
		t.Fatalf("a call over a frozen link failed after %s, want about %s", took, deadAfter)
	}
}
