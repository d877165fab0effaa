package ost

import (
	"bytes"
	"errors"
	"syscall"
	"testing"

	"github.com/stripefs/stripefs/proto"
)

// fallocate on an object is charged as writes are: what it allocates
// counts against the owner's usage and the OST's space, past the
// capacity it is ENOSPC, a punch gives blocks back, and zeroing writes
// zeros.
func TestFallocateAccounting(t *testing.T) {
	to := startOST(t, Config{Index: 0, Capacity: 8 << 20})
	c := to.client(9, uid1000)
	falloc := func(mode uint8, off, n uint64) error {
		return c.call(proto.OFallocate, &proto.OFallocateReq{Obj: obj(1), Off: off, Len: n, Mode: mode, Owner: uid1000}, &proto.Empty{})
	}
	user := proto.QuotaKey{Type: proto.QuotaUser, ID: 1000}
	must(t, falloc(proto.FallocAllocate, 0, 2<<20))
	if u := c.usage(user); u.Usage < 2<<20 || u.Usage > 2<<20+4096 {
		t.Errorf("usage %d after allocating 2 MiB", u.Usage)
	}
	// Allocating what is allocated costs nothing more.
	must(t, falloc(proto.FallocAllocate, 1<<20, 1<<20))
	if u := c.usage(user); u.Usage > 2<<20+4096 {
		t.Errorf("usage %d after allocating an allocated range again", u.Usage)
	}
	if err := falloc(proto.FallocAllocate, 4<<20, 16<<20); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("allocating past the capacity: %v, want ENOSPC", err)
	}
	must(t, c.write(obj(1), 0, pattern(64<<10, 3)))
	must(t, falloc(proto.FallocZero, 4096, 8192))
	want := pattern(64<<10, 3)
	clear(want[4096 : 4096+8192])
	if got := c.read(obj(1), 0, 64<<10); !bytes.Equal(got, want) {
		t.Error("zeroed range does not read as zeros beside the data")
	}
	before := c.usage(user).Usage
	must(t, falloc(proto.FallocPunch, 1<<20, 1<<20))
	if after := c.usage(user).Usage; after > before-(1<<20)+4096 {
		t.Errorf("usage %d → %d after punching 1 MiB", before, after)
	}
	for _, bad := range []proto.OFallocateReq{{Obj: obj(1), Len: 0}, {Obj: obj(1), Off: 1 << 51, Len: 1}, {Obj: obj(1), Len: 1, Mode: 9}} {
		if err := c.call(proto.OFallocate, &bad, &proto.Empty{}); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("%+v: %v, want EINVAL", bad, err)
		}
	}
}
