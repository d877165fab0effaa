package rpc

import (
	"testing"
	"time"
)

// A latency lands in the bucket whose bound is the next power of two
// microseconds above it; the last bucket takes everything longer.
func TestLatencyBuckets(t *testing.T) {
	s := NewStats()
	for _, tc := range []struct {
		d      time.Duration
		bucket int
	}{
		{0, 0}, {999 * time.Nanosecond, 0}, {time.Microsecond, 0}, {2 * time.Microsecond, 1}, {3 * time.Microsecond, 1},
		{4 * time.Microsecond, 2}, {100 * time.Microsecond, 6}, {time.Second, 19}, {time.Hour, LatencyBuckets - 1},
	} {
		before := s.m[7].lat[tc.bucket].Load()
		s.latency(7, tc.d)
		if s.m[7].lat[tc.bucket].Load() != before+1 {
			t.Errorf("%v not in bucket %d (bound %v)", tc.d, tc.bucket, LatencyBound(tc.bucket))
		}
		if tc.bucket < LatencyBuckets-1 && tc.d >= LatencyBound(tc.bucket) {
			t.Errorf("%v is not below its bucket's bound %v", tc.d, LatencyBound(tc.bucket))
		}
	}
	l := s.Latencies()
	if len(l) != 1 || l[0].Method != 7 || l[0].Sum != time.Hour+time.Second+110*time.Microsecond+999*time.Nanosecond {
		t.Errorf("latencies %+v", l)
	}
}
