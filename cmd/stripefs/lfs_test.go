package main

import "testing"

func TestParseLfsUnits(t *testing.T) {
	tests := []struct {
		in   string
		unit uint64
		want uint64
		ok   bool
	}{
		{"1048576", 1, 1 << 20, true},
		{"64k", 1, 64 << 10, true},
		{"1M", 1, 1 << 20, true},
		{"4g", 1, 4 << 30, true},
		{"10", 1 << 10, 10 << 10, true}, // setquota: bare numbers are KiB
		{"2t", 1 << 10, 2 << 40, true},
		{"", 1, 0, false},
		{"k", 1, 0, false},
		{"-1", 1, 0, false},
		{"12x", 1, 0, false},
		{"99999999999999999999t", 1, 0, false},
	}
	for _, tc := range tests {
		got, err := parseLfsUnits(tc.in, tc.unit)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseLfsUnits(%q, %d) = %d, %v; want %d, ok=%v", tc.in, tc.unit, got, err, tc.want, tc.ok)
		}
	}
}
