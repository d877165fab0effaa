package mds

// Connections to the other MDTs, and calls to them that survive a peer's
// restart.

import (
	"context"
	"fmt"
	"sync"
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

// peerSet is an MDT's connections to the other MDTs, made on first use
// and kept until it closes.
type peerSet struct {
	mu    sync.Mutex
	conns map[uint32]*rpc.Client
}

func (s *peerSet) get(idx uint32) *rpc.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns[idx]
}

// add keeps c for idx, unless another caller made one meanwhile: that one
// is returned, and c closed.
func (s *peerSet) add(idx uint32, c *rpc.Client) *rpc.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	if have := s.conns[idx]; have != nil {
		c.Close()
		return have
	}
	if s.conns == nil {
		s.conns = map[uint32]*rpc.Client{}
	}
	s.conns[idx] = c
	return c
}

func (s *peerSet) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		c.Close()
	}
}

// peer returns a connection to another MDT. The cluster map is read
// without the set's lock: on MDTs other than 0 that may be an RPC.
func (m *MDT) peer(ctx context.Context, idx uint32) (*rpc.Client, error) {
	if c := m.peers.get(idx); c != nil {
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
			return m.peers.add(idx, c), nil
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
