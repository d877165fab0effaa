package rpc

import (
	"context"
	"fmt"
)

// MethodStats is the method number every server answers with its counters
// (calls and bulk bytes per method, plus the server's own counters), the
// way Lustre targets export their stats through lctl get_param.
const MethodStats uint16 = 255

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
	return Reply{Msg: out}, nil
}
