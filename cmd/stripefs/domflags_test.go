package main

import "testing"

// TestParseDoMFlags reads --dom-max and --dom-inline as mds.Config spells
// them, and refuses what an MDT cannot keep with a message.
func TestParseDoMFlags(t *testing.T) {
	for _, c := range []struct {
		max, inline string
		wantMax     int64
		wantInline  int
		ok          bool
	}{
		{"1M", "64k", 1 << 20, 64 << 10, true},
		{"0", "0", -1, -1, true},
		{"64k", "1M", 64 << 10, 1 << 20, true},
		{"100k", "64k", 0, 0, false},
		{"1M", "2M", 0, 0, false},
		{"1M", "lots", 0, 0, false},
	} {
		m, err1 := parseDoMMax(c.max)
		i, err2 := parseDoMInline(c.inline)
		ok := err1 == nil && err2 == nil
		if ok != c.ok || (ok && (m != c.wantMax || i != c.wantInline)) {
			t.Errorf("--dom-max %s --dom-inline %s: %d %d (%v, %v)", c.max, c.inline, m, i, err1, err2)
		}
	}
}
