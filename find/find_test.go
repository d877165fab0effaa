package find

import (
	"syscall"
	"testing"
)

func TestSize(t *testing.T) {
	for _, tc := range []struct {
		arg  string
		size uint64
		want bool
	}{
		{"0", 0, true}, {"1", 1, true}, {"1", 512, true}, {"1", 513, false}, {"2", 513, true},
		{"100c", 100, true}, {"100c", 101, false}, {"+4k", 4096, false}, {"+4k", 4097, true},
		{"-1k", 0, true}, {"-1k", 1, false}, {"2M", 2 << 20, true}, {"2M", 1<<20 + 1, true}, {"2M", 2<<20 + 1, false},
		{"+0", 1, true}, {"-2", 512, true}, {"-2", 513, false},
	} {
		z, err := ParseSize(tc.arg)
		if err != nil {
			t.Fatalf("%s: %v", tc.arg, err)
		}
		if got := z.match(tc.size); got != tc.want {
			t.Errorf("-size %s on %d bytes: %v, want %v (find(1) rounds up to whole units)", tc.arg, tc.size, got, tc.want)
		}
	}
	for _, bad := range []string{"", "+", "k", "1x", "-1.5M"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("-size %q parsed", bad)
		}
	}
}

func TestMatch(t *testing.T) {
	file := &Entry{Path: "/m/d/a.txt", Mode: syscall.S_IFREG | 0o644, Size: 5000, Mtime: 100, MDT: 1, OSTs: []uint32{2, 3}}
	dir := &Entry{Path: "/m/d", Mode: syscall.S_IFDIR | 0o755, MDT: 0}
	two := &Size{Cmp: 1, N: 4, Unit: 1024}
	for _, tc := range []struct {
		name string
		p    Pred
		e    *Entry
		want bool
	}{
		{"all", Pred{MDT: NoMDT, OST: NoOST}, file, true},
		{"name", Pred{Name: "*.txt", MDT: NoMDT, OST: NoOST}, file, true},
		{"name on the last element only", Pred{Name: "d*", MDT: NoMDT, OST: NoOST}, file, false},
		{"type f", Pred{Type: 'f', MDT: NoMDT, OST: NoOST}, dir, false},
		{"type d", Pred{Type: 'd', MDT: NoMDT, OST: NoOST}, dir, true},
		{"size", Pred{Size: two, MDT: NoMDT, OST: NoOST}, file, true},
		{"newer: strictly after", Pred{Newer: 100, HasNewer: true, MDT: NoMDT, OST: NoOST}, file, false},
		{"newer", Pred{Newer: 99, HasNewer: true, MDT: NoMDT, OST: NoOST}, file, true},
		{"mdt", Pred{MDT: 1, OST: NoOST}, file, true},
		{"mdt other", Pred{MDT: 0, OST: NoOST}, file, false},
		{"ost", Pred{MDT: NoMDT, OST: 3}, file, true},
		{"ost none on a directory", Pred{MDT: NoMDT, OST: 0}, dir, false},
		{"all of them", Pred{Name: "a*", Type: 'f', Size: two, MDT: 1, OST: 2}, file, true},
	} {
		if got := tc.p.Match(tc.e); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
