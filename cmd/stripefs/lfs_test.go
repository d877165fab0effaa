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

func TestFormatLMV(t *testing.T) {
	striped := formatLMV("lmv_stripe_count=2 lmv_stripe_offset=1 lmv_hash_type=fnv_1a_64 mdt_index=1 fid=[0x1ffffff:0x1:0x0] " +
		"stripe0=1:[0x1fffffe:0x1:0x0] stripe1=0:[0xfffffe:0x1:0x0]")
	want := "lmv_stripe_count: 2 lmv_stripe_offset: 1 lmv_hash_type: fnv_1a_64\n" +
		"master: mdt1 [0x1ffffff:0x1:0x0]\n" +
		"mdtidx\t\t FID[seq:oid:ver]\n" +
		"     1\t\t [0x1fffffe:0x1:0x0]\n" +
		"     0\t\t [0xfffffe:0x1:0x0]\n"
	if striped != want {
		t.Errorf("striped:\n%q\nwant\n%q", striped, want)
	}
	if plain := formatLMV("mdt_index=1 mdt_count=1 fid=[0x1000002:0x1:0x0]"); plain != "  mdt_index=1\n  mdt_count=1\n  fid=[0x1000002:0x1:0x0]\n" {
		t.Errorf("plain: %q", plain)
	}
}
