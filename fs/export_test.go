package fs

import "time"

// SetOSTDown makes c's erasure-coded reads fail on ost as if it could not
// be reached (or takes it back): tests of degraded reads.
func SetOSTDown(c *Client, ost uint32, down bool) {
	c.ec.init()
	c.ec.mu.Lock()
	defer c.ec.mu.Unlock()
	if c.ec.unreachable == nil {
		c.ec.unreachable = map[uint32]bool{}
	}
	c.ec.unreachable[ost] = down
	delete(c.ec.down, ost)
}

// CounterOf returns one of c's counters by name.
func CounterOf(c *Client, name string) int64 {
	for _, ct := range c.Counters() {
		if ct.Name == name {
			return ct.Value
		}
	}
	return -1
}

// SetGrantFresh changes how long an OST's word on a grant is taken, for
// the test's duration.
func SetGrantFresh(t interface{ Cleanup(func()) }, d time.Duration) {
	old := grantFresh
	grantFresh = d
	t.Cleanup(func() { grantFresh = old })
}
