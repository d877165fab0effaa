package rpc

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// Stats counts calls, bulk bytes and latencies per method, like Lustre's
// per-target rpc_stats. Counters are atomics so the hot path takes no
// lock: a call costs a few atomic adds and a clock read at each end.
type Stats struct {
	m [256]methodStats
}

// LatencyBuckets is how many latency buckets a method keeps: bucket i
// counts calls of less than 2^(i+1) µs (the last, all longer ones), so
// they run from 2 µs to about 16 s.
const LatencyBuckets = 24

type methodStats struct {
	calls, bytesIn, bytesOut atomic.Int64
	lat                      [LatencyBuckets]atomic.Int64
	latSum                   atomic.Int64 // ns
}

// MethodCount is a snapshot of one method's counters (what the stats
// method sends).
type MethodCount struct {
	Method                   uint16
	Calls, BytesIn, BytesOut int64
}

// MethodLatency is a snapshot of one method's latencies: the count of
// each bucket (not cumulative) and their total.
type MethodLatency struct {
	Method  uint16
	Buckets [LatencyBuckets]int64
	Sum     time.Duration
}

// LatencyBound is the upper bound of bucket i (the last is unbounded).
func LatencyBound(i int) time.Duration { return time.Duration(1<<(i+1)) * time.Microsecond }

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

// latency records how long one call took, from the request's arrival
// to its reply's departure on a server, from sending to the reply on a
// client.
func (s *Stats) latency(m uint16, d time.Duration) {
	if s == nil || int(m) >= len(s.m) {
		return
	}
	us := uint64(max(d, 0) / time.Microsecond)
	i := min(max(bits.Len64(us), 1)-1, LatencyBuckets-1)
	s.m[m].lat[i].Add(1)
	s.m[m].latSum.Add(int64(d))
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

// Latencies returns the latencies of the methods that were timed.
func (s *Stats) Latencies() []MethodLatency {
	var out []MethodLatency
	for i := range s.m {
		ms := &s.m[i]
		ml := MethodLatency{Method: uint16(i), Sum: time.Duration(ms.latSum.Load())}
		n := int64(0)
		for b := range ms.lat {
			ml.Buckets[b] = ms.lat[b].Load()
			n += ml.Buckets[b]
		}
		if n > 0 {
			out = append(out, ml)
		}
	}
	return out
}
