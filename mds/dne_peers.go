package mds

// Connections to the other MDTs, and calls to them that survive a peer's
// restart.

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/stripefs/stripefs/rpc"
)

// untilStop returns parent, also cancelled when the MDT stops: a closing
// MDT must not wait for an absent peer.
func (m *MDT) untilStop(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	go func() {
		select {
		case <-m.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// peer returns a connection to another MDT.
func (m *MDT) peer(ctx context.Context, idx uint32) (*rpc.Client, error) {
	m.peerMu.Lock()
	defer m.peerMu.Unlock()
	if c := m.peers[idx]; c != nil {
		return c, nil
	}
	cfg, err := m.config(ctx)
	if err != nil {
		return nil, err
	}
	for _, t := range cfg.MDTs {
		if t.Index == idx {
			c := rpc.NewClient(t.Addr, m.Srv.Name)
			c.Role = rpc.RoleServer
			c.RetryFor = 30 * time.Second
			c.Direct = true // a peer in this process (stripefs up) runs our calls in our goroutine
			m.peers[idx] = c
			return c, nil
		}
	}
	return nil, fmt.Errorf("mdt%d: mdt%d is not in the cluster map: %w", m.cfg.Index, idx, syscall.EIO)
}

func (m *MDT) numMDTs(ctx context.Context) int {
	cfg, err := m.config(ctx)
	if err != nil {
		return 1
	}
	n := 0
	for _, t := range cfg.MDTs {
		n = max(n, int(t.Index)+1)
	}
	return n
}

// invokePeer is rpc.Invoke for a call to another MDT, sent again under
// the same XID while the connection breaks before the reply (the peer
// restarting), for up to the client's RetryFor: a peer's restart then
// costs a client's request a wait, not EIO. Only for methods a peer may
// receive twice: reads, and changes it recognises or that waste nothing
// but a reservation.
func invokePeer[Resp any](ctx context.Context, c *rpc.Client, method uint16, req any) (*Resp, error) {
	resp := new(Resp)
	call := &rpc.Call{Method: method, Req: req, Resp: resp}
	if err := rpc.DoResending(ctx, c, call, c.RetryFor, nil); err != nil {
		return nil, err
	}
	return resp, nil
}
