package ost

import (
	"bytes"
	"errors"
	"syscall"
	"testing"

	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// ost_copy within one OST: the bytes land, charged to the owner as a
// write is; past the source's end and from a source never written the
// destination reads as zeros; bad requests are EINVAL and an unknown
// peer address an error, not a hang.
func TestCopyRange(t *testing.T) {
	to := startOST(t, Config{Index: 0, Capacity: 64 << 20})
	c := to.client(9, uid1000)
	cp := func(r proto.OCopyReq) error {
		r.Owner = uid1000
		return c.call(proto.OCopy, &r, &proto.Empty{})
	}
	src := pattern(300<<10, 5)
	must(t, c.write(obj(1), 0, src))
	must(t, c.write(obj(2), 0, pattern(400<<10, 7)))
	must(t, cp(proto.OCopyReq{Obj: obj(2), Off: 4096, Src: obj(1), SrcOff: 100, Len: 200 << 10}))
	want := pattern(400<<10, 7)
	copy(want[4096:], src[100:100+200<<10])
	if got := c.read(obj(2), 0, 400<<10); !bytes.Equal(got, want) {
		t.Fatal("copied range differs")
	}
	// 100 KiB asked from 50 KiB before the source's end.
	must(t, cp(proto.OCopyReq{Obj: obj(2), Off: 0, Src: obj(1), SrcOff: 250 << 10, Len: 100 << 10}))
	copy(want, src[250<<10:])
	clear(want[50<<10 : 100<<10])
	if got := c.read(obj(2), 0, 400<<10); !bytes.Equal(got, want) {
		t.Fatal("copy past the source's end: the tail is not zeros")
	}
	must(t, cp(proto.OCopyReq{Obj: obj(2), Off: 200 << 10, Src: obj(3), Len: 8192}))
	clear(want[200<<10 : 200<<10+8192])
	if got := c.read(obj(2), 0, 400<<10); !bytes.Equal(got, want) {
		t.Fatal("copy from a source never written: not zeros")
	}
	// 700 KiB written, 58 KiB of it punched by the copies' zeros.
	if u := c.usage(proto.QuotaKey{Type: proto.QuotaUser, ID: 1000}); u.Usage < 642<<10 || u.Usage > 650<<10 {
		t.Errorf("usage %d, want 642 KiB and a few blocks", u.Usage)
	}
	for _, bad := range []proto.OCopyReq{{Obj: obj(2), Src: obj(1)}, {Obj: obj(2), Src: obj(1), Len: rpc.MaxBulk + 1},
		{Obj: obj(2), Src: obj(1), Len: 1, SrcOff: 1 << 51}, {Obj: obj(2), Src: obj(1), Len: 1, Off: 1 << 51}} {
		if err := cp(bad); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("%+v: %v, want EINVAL", bad, err)
		}
	}
	if err := cp(proto.OCopyReq{Obj: obj(2), Src: obj(1), Len: 1, SrcOST: 5}); err == nil {
		t.Error("a copy from another OST without its address succeeded")
	}
}
