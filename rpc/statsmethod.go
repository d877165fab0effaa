package rpc

import (
	"context"
	"fmt"
)

// MethodStats is the method number every server answers with its counters
// (calls and bulk bytes per method, plus the server's own counters), the
// way Lustre targets export their stats through lctl get_param.
const MethodStats uint16 = 255

// Methods of client recovery, answered by servers that keep a recovery
// window (MDTs); others answer ENOSYS, which clients ignore.
const (
	// MethodReplayDone ends a client's replay after a server restart: it
	// has sent every change it kept (possibly none), so the server's
	// recovery window need not wait for it any longer.
	MethodReplayDone uint16 = 254
	// MethodDisconnect is a clean goodbye (unmount): the server forgets
	// the client, and will not wait for it after its next restart.
	MethodDisconnect uint16 = 253
	// MethodPing asks whether the server still reads its connection: the
	// server answers it from its read loop, before any handler runs, so
	// a busy server answers and only a dead, stopped or cut-off one does
	// not (Client.DeadAfter).
	MethodPing uint16 = 252
)

// Counter is one named server counter.
type Counter struct {
	Name  string
	Value int64
}

// StatsReply is the answer to MethodStats.
type StatsReply struct {
	Server   string
	Methods  []MethodCount
	Counters []Counter
}

// QueryStats asks the server behind c for its counters.
func QueryStats(ctx context.Context, c *Client) (*StatsReply, error) {
	r, err := Invoke[StatsReply](ctx, c, MethodStats, nil)
	if err != nil {
		return nil, fmt.Errorf("stats from %s: %w", c.Addr, err)
	}
	return r, nil
}

func (s *Server) serveStats(ctx context.Context, r *Request) (Reply, error) {
	out := &StatsReply{Server: s.Name, Methods: s.Stats.Snapshot()}
	if s.Counters != nil {
		out.Counters = s.Counters()
	}
	out.Counters = append(out.Counters, ProcessCounters()...)
	return Reply{Msg: out}, nil
}
