package proto

import (
	"errors"
	"strings"
	"syscall"
	"testing"
)

func TestParseLayoutEC(t *testing.T) {
	plain := Layout{StripeSize: 1 << 20, StripeCount: 1, FirstOST: -1}
	ec42 := Layout{StripeSize: 1 << 20, StripeCount: 6, FirstOST: -1, ECData: 4, ECParity: 2}
	tests := []struct {
		in   string
		base Layout
		want Layout
		err  string
	}{
		{"ec=4+2", plain, ec42, ""},
		{"ec=4+2 stripe_count=6", plain, ec42, ""},
		{"stripe_count=6 ec=4+2", plain, ec42, ""},
		{"ec=4+2 stripe_count=5", plain, Layout{}, "does not match ec=4+2"},
		{"stripe_size=65536", ec42, Layout{StripeSize: 65536, StripeCount: 6, FirstOST: -1, ECData: 4, ECParity: 2}, ""},
		{"stripe_count=3", ec42, Layout{StripeSize: 1 << 20, StripeCount: 3, FirstOST: -1}, ""},
		{"ec=none", ec42, Layout{StripeSize: 1 << 20, StripeCount: 6, FirstOST: -1}, ""},
		{"ec=4", plain, Layout{}, "is not K+M"},
		{"ec=0+2", plain, Layout{}, "at least 1 data and 1 parity"},
		{"ec=4+0", plain, Layout{}, "at least 1 data and 1 parity"},
		{"ec=200+100", plain, Layout{}, "at most 256"},
		{"ec=a+b", plain, Layout{}, "is not K+M"},
		{"ec=99999+1", plain, Layout{}, "is not K+M"},
	}
	for _, tc := range tests {
		got, err := ParseLayout(tc.in, tc.base)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, syscall.EINVAL) {
				t.Errorf("ParseLayout(%q) = %v, want an EINVAL saying %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got.String() != tc.want.String() {
			t.Errorf("ParseLayout(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	// String and ParseLayout round trip, osts left out.
	l := ec42.Instantiate(8, 3, 0)
	back, err := ParseLayout(l.String(), Layout{})
	if err != nil || back.ECData != 4 || back.ECParity != 2 || back.StripeCount != 6 || back.FirstOST != 3 {
		t.Fatalf("round trip of %q: %+v %v", l, back, err)
	}
}

func TestValidateEC(t *testing.T) {
	base := Layout{StripeSize: 1 << 20, StripeCount: 6, FirstOST: -1, ECData: 4, ECParity: 2}
	tests := []struct {
		name string
		mod  func(*Layout)
		nOST int
		err  string
	}{
		{"ok", func(*Layout) {}, 6, ""},
		{"too few OSTs", func(*Layout) {}, 5, "needs 6 OSTs, the filesystem has 5"},
		{"count mismatch", func(l *Layout) { l.StripeCount = 4 }, 6, "stripe count must be 6"},
		{"all OSTs", func(l *Layout) { l.StripeCount = AllOSTs }, 6, "stripe count must be 6, not -1"},
		{"no parity", func(l *Layout) { l.ECParity = 0 }, 6, "at least 1 data and 1 parity"},
		{"row too big", func(l *Layout) { l.StripeSize = 32 << 20 }, 6, "over the 64 MiB limit"},
		{"repeated OST", func(l *Layout) { l.OSTs = []uint32{0, 1, 2, 3, 4, 0} }, 6, "holds two units"},
	}
	for _, tc := range tests {
		l := base
		tc.mod(&l)
		err := l.Validate(tc.nOST)
		if tc.err == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
		}
	}
	// A file's layout from the wire: OSTs must match the count.
	l := base.Instantiate(6, 0, 0)
	if err := l.CheckFile(); err != nil {
		t.Fatal(err)
	}
	l.OSTs = l.OSTs[:5]
	if err := l.CheckFile(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("short OST list: %v", err)
	}
}

// FuzzParseLayout: any xattr value a program sets either parses to a
// layout or is refused; a parsed one survives String and back.
func FuzzParseLayout(f *testing.F) {
	for _, s := range []string{"ec=4+2", "stripe_count=6 ec=4+2 stripe_size=65536", "ec=none", "stripe_count=-1", "ec=+", "ec=1+65535"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseLayout(s, Layout{StripeSize: 1 << 20, StripeCount: 1, FirstOST: -1})
		if err != nil {
			return
		}
		_ = l.Validate(8)
		back, err := ParseLayout(l.String(), Layout{})
		if err != nil || back.String() != l.String() {
			t.Fatalf("%q parsed to %q, which reads back as %q (%v)", s, l, back, err)
		}
	})
}
