package fusefs

import (
	"strings"
	"testing"
	"time"
)

// ParseOptions is what mount(8) and fstab lines reach: the timeouts in
// seconds (fractions allowed), a bad value refused with the option's name.
func TestParseOptionsTimeouts(t *testing.T) {
	for _, tc := range []struct {
		opts                string
		attr, entry, locked time.Duration
		err                 string
	}{
		{opts: "", attr: time.Second, entry: time.Second, locked: DefaultLockedTimeout},
		{opts: "locked_timeout=300", attr: time.Second, entry: time.Second, locked: 300 * time.Second},
		{opts: "attr_timeout=0.5,entry_timeout=2,locked_timeout=0", attr: 500 * time.Millisecond, entry: 2 * time.Second, locked: 0},
		{opts: "no_default_permissions,locked_timeout=10", attr: time.Second, entry: 0, locked: 10 * time.Second},
		{opts: "locked_timeout", err: "locked_timeout needs a number of seconds"},
		{opts: "locked_timeout=-1", err: "locked_timeout needs a number of seconds"},
		{opts: "locked_timeout=1m", err: "locked_timeout needs a number of seconds"},
		{opts: "lockedtimeout=1", err: `unknown mount option "lockedtimeout"`},
	} {
		o, ok := parsed(t, tc.opts, tc.err)
		if !ok {
			continue
		}
		if o.AttrTimeout != tc.attr || o.EntryTimeout != tc.entry || o.LockedTimeout != tc.locked {
			t.Errorf("%q: attr %v entry %v locked %v, want %v %v %v", tc.opts, o.AttrTimeout, o.EntryTimeout, o.LockedTimeout, tc.attr, tc.entry, tc.locked)
		}
	}
}

// parsed applies opts to the default options. It reports a failure (an
// error where none was wanted, or one that does not say wantErr) and says
// whether o is left to check.
func parsed(t *testing.T, opts, wantErr string) (MountOptions, bool) {
	t.Helper()
	o := DefaultMountOptions()
	err := o.ParseOptions(opts)
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%q: error %v, want one saying %q", opts, err, wantErr)
		}
		return o, false
	}
	if err != nil {
		t.Errorf("%q: %v", opts, err)
		return o, false
	}
	return o, true
}

func TestParseOptionsSyncClose(t *testing.T) {
	o := DefaultMountOptions()
	if o.SyncClose {
		t.Fatal("sync_close on by default")
	}
	if err := o.ParseOptions("rw,sync_close,noatime"); err != nil || !o.SyncClose {
		t.Fatalf("sync_close: %v, %v", o.SyncClose, err)
	}
	if err := o.ParseOptions("sync_close=1"); err == nil || !strings.Contains(err.Error(), "sync_close takes no value") {
		t.Fatalf("sync_close=1: %v", err)
	}
}

// The request size and the read-ahead window: by default the window is
// one request, which is 4 MiB asked and what the kernel allows granted;
// a size out of range is refused with its bounds.
func TestParseOptionsRequestSize(t *testing.T) {
	for _, tc := range []struct {
		opts        string
		request, ra int // KiB asked; read-ahead at a 2 MiB request
		err         string
	}{
		{opts: "", request: DefaultMaxRequestKB, ra: 2048},
		{opts: "max_request_kb=1024", request: 1024, ra: 2048},
		{opts: "max_request_kb=256,read_ahead_kb=512", request: 256, ra: 512},
		{opts: "read_ahead_kb=0", request: DefaultMaxRequestKB, ra: 0},
		{opts: "max_request_kb=16384", request: 16384, ra: 2048},
		{opts: "max_request_kb=16388", err: "max_request_kb needs a number of KiB from 4 to 16384"},
		{opts: "max_request_kb=2", err: "max_request_kb needs a number of KiB from 4 to 16384"},
		{opts: "max_request_kb", err: "max_request_kb needs a number of KiB"},
		{opts: "max_request_kb=4M", err: "max_request_kb needs a number of KiB"},
	} {
		o, ok := parsed(t, tc.opts, tc.err)
		if !ok {
			continue
		}
		if o.requestKB() != tc.request || o.readAheadKB(2<<20) != tc.ra {
			t.Errorf("%q: request %d KiB, read-ahead %d KiB; want %d, %d", tc.opts, o.requestKB(), o.readAheadKB(2<<20), tc.request, tc.ra)
		}
	}
	if got, k := RequestBytes(1<<20), kernelMaxRequest(); got != k {
		t.Errorf("a mount asking 1 GiB gets %d bytes, want the kernel's bound %d", got, k)
	}
	if got := RequestBytes(4); got != 4<<10 {
		t.Errorf("a mount asking 4 KiB gets %d bytes", got)
	}
	// A zero MountOptions (built by hand, not from DefaultMountOptions)
	// asks for the default, not go-fuse's 128 KiB.
	if kb := (MountOptions{}).requestKB(); kb != DefaultMaxRequestKB {
		t.Errorf("zero options ask %d KiB", kb)
	}
}

// A spliced read needs a pipe of the next power of two above the request
// and the reply's header.
func TestSpliceNeeds(t *testing.T) {
	for _, tc := range []struct{ request, want int }{
		{1 << 20, 2 << 20},
		{4 << 20, 8 << 20},
		{128 << 10, 256 << 10},
		{1<<20 - spliceSlack, 1 << 20},
	} {
		if got := SpliceNeeds(tc.request); got != tc.want {
			t.Errorf("SpliceNeeds(%d) = %d, want %d", tc.request, got, tc.want)
		}
	}
}
