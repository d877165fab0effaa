package fs

import (
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// Extended attributes every path of a mount answers (not listed), the
// way lctl reads a client's parameters: what tools on the client node
// ask of the mount.
const (
	// ClientXattr holds the client's Report as JSON.
	ClientXattr = "stripefs.client_stats"
	// MGSXattr holds the MGS address the client was started with.
	MGSXattr = "stripefs.mgs"
	// KeyFileXattr holds the path of the key file the client proves
	// itself with (not the key), so that root's tools find it.
	KeyFileXattr = "stripefs.keyfile"
)

// MethodCount is one RPC method's call and bulk byte counts.
type MethodCount struct {
	Name     string `json:"name"`
	Calls    int64  `json:"calls"`
	BytesIn  int64  `json:"bytes_in"`
	BytesOut int64  `json:"bytes_out"`
}

// Report is what a client reports of itself: its RPCs by method, and its
// counters with the process's memory (as a server's stats carry them).
type Report struct {
	Methods  []MethodCount    `json:"methods"`
	Counters map[string]int64 `json:"counters"`
}

// Report is c's report now.
func (c *Client) Report() Report {
	r := Report{Methods: NamedMethods(c.Stats.Snapshot()), Counters: map[string]int64{}}
	for _, k := range c.Counters() {
		r.Counters[k.Name] = k.Value
	}
	for _, pc := range rpc.ProcessCounters() {
		r.Counters[pc.Name] = pc.Value
	}
	return r
}

// NamedMethods names the methods of RPC counters.
func NamedMethods(ms []rpc.MethodCount) []MethodCount {
	out := make([]MethodCount, 0, len(ms))
	for _, m := range ms {
		name := proto.MethodName(m.Method)
		if m.Method == rpc.MethodStats {
			name = "stats"
		}
		out = append(out, MethodCount{Name: name, Calls: m.Calls, BytesIn: m.BytesIn, BytesOut: m.BytesOut})
	}
	return out
}
