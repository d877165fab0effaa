package proto

import (
	"errors"
	"strings"
	"syscall"
	"testing"
)

// TestDoMLayout: a pattern=mdt first component parses, instantiates on
// the file's MDT at create, prints and reads back, and bad ones are
// refused with EINVAL and a reason.
func TestDoMLayout(t *testing.T) {
	l, err := ParseLayout("extent=0-65536 pattern=mdt\nextent=65536-EOF stripe_count=2", Layout{StripeSize: mib, StripeCount: 1, FirstOST: -1})
	if err != nil {
		t.Fatal(err)
	}
	if !l.Comps[0].IsDoM() || l.Comps[0].StripeSize != 64<<10 || l.DoMEnd() != 64<<10 || l.Comps[1].StripeSize != mib || l.Comps[1].IsDoM() {
		t.Fatalf("parsed %+v", l.Comps)
	}
	if err := l.Validate(4); err != nil {
		t.Fatal(err)
	}
	f := l.Instantiate(4, 1, 3)
	if len(f.OSTs) != 1 || f.OSTs[0] != DoMTarget(3) || !IsDoMOST(f.OSTs[0]) || DoMIndex(f.OSTs[0]) != 3 || f.InstEnd() != 64<<10 || f.CheckFile() != nil {
		t.Fatalf("instantiated %+v (%v)", f, f.CheckFile())
	}
	g := f.InstantiateTo(mib, 4, 1, 3)
	if len(g.OSTs) != 3 || IsDoMOST(g.OSTs[1]) || g.Comps[1].Base != 1 || g.CheckFile() != nil {
		t.Fatalf("grown %+v (%v)", g, g.CheckFile())
	}
	s := g.String()
	if !strings.HasPrefix(s, "extent=0-65536 pattern=mdt osts=mdt3\n") {
		t.Errorf("String = %q", s)
	}
	back, err := ParseLayout(s, Layout{})
	if err != nil || !back.Comps[0].IsDoM() || back.Comps[0].Inst || back.Comps[1].StripeCount != 2 {
		t.Errorf("round trip of %q: %+v %v", s, back, err)
	}
	if err := f.CheckDoMMax(DefaultDoMMax); err != nil {
		t.Errorf("64 KiB under the default: %v", err)
	}
	for _, tc := range []struct {
		max  uint64
		want string
	}{{32 << 10, "allows at most 32768"}, {0, "keep no file data"}} {
		if err := f.CheckDoMMax(tc.max); !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CheckDoMMax(%d) = %v, want EINVAL saying %q", tc.max, err, tc.want)
		}
	}

	// An object of a DoM component on an OST, or of an OST one on an
	// MDT, is a damaged layout.
	bad := g
	bad.OSTs = []uint32{0, 1, 2}
	if err := bad.CheckFile(); !errors.Is(err, syscall.EIO) {
		t.Errorf("DoM object on an OST: %v", err)
	}
	bad.OSTs = []uint32{DoMTarget(3), DoMTarget(3), 2}
	if err := bad.CheckFile(); !errors.Is(err, syscall.EIO) {
		t.Errorf("OST object on an MDT: %v", err)
	}

	for _, tc := range []struct{ val, want string }{
		{"extent=0-1048576 stripe_count=1\nextent=1048576-2097152 pattern=mdt", "only the first component"},
		{"extent=0-EOF pattern=mdt", "reaches EOF"},
		{"extent=0-100000 pattern=mdt\nextent=100000-EOF", "multiple of 64 KiB"},
		{"extent=0-131072 pattern=mdt stripe_count=2\nextent=131072-EOF", "takes no striping keys"},
		{"extent=0-131072 pattern=raid5", "the patterns are raid0 and mdt"},
		{"pattern=mdt", "component of a composite layout"},
	} {
		l, err := ParseLayout(tc.val, Layout{StripeSize: mib, StripeCount: 1, FirstOST: -1})
		if err == nil {
			err = l.Validate(4)
		}
		if !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want EINVAL saying %q", tc.val, err, tc.want)
		}
	}
}
