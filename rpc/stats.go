package rpc

import "sync/atomic"

// Stats counts calls and bulk bytes per method, like Lustre's per-target
// rpc_stats. Counters are atomics so the hot path takes no lock.
type Stats struct {
	m [256]methodStats
}

type methodStats struct {
	calls, bytesIn, bytesOut atomic.Int64
}

// MethodCount is a snapshot of one method's counters.
type MethodCount struct {
	Method                   uint16
	Calls, BytesIn, BytesOut int64
}

// NewStats returns zeroed counters.
func NewStats() *Stats { return &Stats{} }

// request records one call and the bulk bytes it carried.
func (s *Stats) request(m uint16, bulk int64) {
	if s == nil || int(m) >= len(s.m) {
		return
	}
	s.m[m].calls.Add(1)
	s.m[m].bytesIn.Add(bulk)
}

// reply records the bulk bytes of one reply.
func (s *Stats) reply(m uint16, bulk int64) {
	if s == nil || int(m) >= len(s.m) {
		return
	}
	s.m[m].bytesOut.Add(bulk)
}

// Snapshot returns the methods that were called at least once.
func (s *Stats) Snapshot() []MethodCount {
	var out []MethodCount
	for i := range s.m {
		ms := &s.m[i]
		if c := ms.calls.Load(); c > 0 {
			out = append(out, MethodCount{Method: uint16(i), Calls: c, BytesIn: ms.bytesIn.Load(), BytesOut: ms.bytesOut.Load()})
		}
	}
	return out
}
