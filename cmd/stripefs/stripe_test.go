package main

import (
	"strings"
	"testing"

	"github.com/stripefs/stripefs/proto"
)

// TestParseSetstripe checks that setstripe reads each -E's options as that
// component's, in Lustre's syntax, and refuses what makes no layout.
func TestParseSetstripe(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		path, val string
		err       string
	}{
		{args: []string{"-c", "2", "f"}, path: "f", val: "stripe_count=2"},
		{args: []string{"--ec", "4+2", "-S", "64k", "d"}, path: "d", val: "stripe_size=65536 ec=4+2"},
		{args: []string{"-E", "1M", "-c", "1", "-E", "64M", "-c", "4", "-S", "4M", "-E", "-1", "-c", "-1", "f"}, path: "f",
			val: "extent=0-1048576 stripe_count=1\nextent=1048576-67108864 stripe_count=4 stripe_size=4194304\nextent=67108864-EOF stripe_count=-1"},
		{args: []string{"f", "--component-end=8M", "-i", "2", "-Eeof"}, path: "f",
			val: "extent=0-8388608 stripe_offset=2\nextent=8388608-EOF"},
		{args: []string{"-S", "2M", "-E", "4M", "-E", "eof", "-c", "2", "f"}, path: "f",
			val: "extent=0-4194304 stripe_size=2097152\nextent=4194304-EOF stripe_count=2"},
		{args: []string{"-E", "4+2", "f"}, err: "erasure coding is --ec"},
		{args: []string{"-E", "1M", "-L", "mdt", "-E", "64M", "-c", "2", "-E", "-1", "f"}, path: "f",
			val: "extent=0-1048576 pattern=mdt\nextent=1048576-67108864 stripe_count=2\nextent=67108864-EOF"},
		{args: []string{"-E", "1M", "-L", "mdt", "-c", "2", "-E", "-1", "f"}, err: "takes no -c"},
		{args: []string{"-E", "1M", "-L", "ssd", "-E", "-1", "f"}, err: "the layouts are raid0"},
		{args: []string{"-E"}, err: "needs a component end"},
		{args: []string{"-E", "1X", "f"}, err: "bad size"},
		{args: []string{"f"}, err: "nothing to set"},
		{args: []string{"-c", "2", "f", "g"}, err: "exactly one path"},
		{args: []string{"-c", "0", "f"}, err: "positive count"},
		{args: []string{"--bogus", "f"}, err: "unknown flag"},
	} {
		path, val, err := parseSetstripe(tc.args)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want one with %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil || path != tc.path || val != tc.val {
			t.Errorf("%q: %q %q %v, want %q %q", tc.args, path, val, err, tc.path, tc.val)
		}
	}
	// What setstripe sends parses as the layout it means, and a layout
	// whose components overlap or leave gaps is refused with a reason.
	_, val, err := parseSetstripe([]string{"-E", "1M", "-c", "1", "-E", "64M", "-c", "4", "-E", "-1", "-c", "-1", "f"})
	if err != nil {
		t.Fatal(err)
	}
	l, err := proto.ParseLayout(val, proto.Layout{StripeSize: 1 << 20, StripeCount: 1, FirstOST: -1})
	if err != nil || l.Validate(8) != nil || len(l.Comps) != 3 || l.Comps[2].StripeCount != proto.AllOSTs || l.Comps[1].Start != 1<<20 {
		t.Fatalf("parsed %+v %v", l, err)
	}
	_, val, _ = parseSetstripe([]string{"-E", "8M", "-E", "4M", "-E", "-1", "f"})
	l, err = proto.ParseLayout(val, proto.Layout{StripeSize: 1 << 20, StripeCount: 1, FirstOST: -1})
	if err == nil {
		err = l.Validate(8)
	}
	if err == nil || !strings.Contains(err.Error(), "empty") && !strings.Contains(err.Error(), "in order") {
		t.Fatalf("unordered components: %v", err)
	}
}
