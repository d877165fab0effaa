package rpc

import (
	"context"
	"testing"
	"time"
)

// TestBackoff: each wait lies within ±50% of a schedule that doubles up
// to its most, the waits of two loops are not in step, and Wait ends
// with its context.
func TestBackoff(t *testing.T) {
	b := NewBackoff(10*time.Millisecond, 80*time.Millisecond)
	for i, base := range []time.Duration{10, 20, 40, 80, 80, 80} {
		base *= time.Millisecond
		if d := b.Next(); d < base/2 || d > base*3/2 {
			t.Errorf("wait %d: %v, want within 50%% of %v", i, d, base)
		}
	}
	same := 0
	for range 20 {
		x, y := NewBackoff(time.Second, time.Second), NewBackoff(time.Second, time.Second)
		if x.Next() == y.Next() {
			same++
		}
	}
	if same > 1 {
		t.Errorf("two schedules drew the same wait %d times in 20: no jitter", same)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if err := NewBackoff(time.Hour, time.Hour).Wait(ctx); err != context.Canceled || time.Since(start) > time.Second {
		t.Errorf("Wait with an ended context: %v after %v", err, time.Since(start))
	}
}
