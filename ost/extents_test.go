package ost

import (
	"bytes"
	"context"
	"errors"
	"syscall"
	"testing"

	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// TestWriteExtents checks a write of several extents in one request: each
// lands where it says, the reply's size is the furthest end and carries a
// grant, and a request whose extents do not match its bulk, has too many
// or carries a tag is refused with EINVAL.
func TestWriteExtents(t *testing.T) {
	to := startOST(t, Config{Index: 0})
	c := to.client(1, proto.Owner{})
	o := obj(1)
	call := func(ext []proto.Extent, tag []byte, bulk ...[]byte) (*proto.OWriteReply, error) {
		var r proto.OWriteReply
		err := c.rc.Do(context.Background(), &rpc.Call{Method: proto.OWrite,
			Req:     &proto.OWriteReq{Obj: o, Extents: ext, Tag: tag, Grant: proto.WriteGrant{Client: c.id, Want: c.want}},
			BulkOut: bulk, Resp: &r})
		return &r, err
	}
	r, err := call([]proto.Extent{{Off: 8192, Len: 3}, {Off: 100, Len: 2}, {Off: 70000, Len: 4}}, nil,
		[]byte("abc"), []byte("de"), []byte("fghi"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Size != 70004 || r.Grant.Seq == 0 {
		t.Errorf("reply %+v: want size 70004 and a grant", r)
	}
	got := c.read(o, 0, 80000)
	want := make([]byte, 70004)
	copy(want[8192:], "abc")
	copy(want[100:], "de")
	copy(want[70000:], "fghi")
	if !bytes.Equal(got, want) {
		t.Errorf("object after an extents write differs at %d", firstDifference(got, want))
	}
	for _, tc := range []struct {
		name string
		ext  []proto.Extent
		tag  []byte
		bulk [][]byte
	}{
		{"bulk shorter than the extents", []proto.Extent{{Off: 0, Len: 4}, {Off: 10, Len: 4}}, nil, [][]byte{[]byte("abcd")}},
		{"bulk longer than the extents", []proto.Extent{{Off: 0, Len: 1}, {Off: 10, Len: 1}}, nil, [][]byte{[]byte("abcd")}},
		{"too many extents", make([]proto.Extent, proto.MaxWriteExtents+1), nil, nil},
		{"a tag", []proto.Extent{{Off: 0, Len: 1}, {Off: 10, Len: 1}}, []byte("t"), [][]byte{[]byte("ab")}},
	} {
		if _, err := call(tc.ext, tc.tag, tc.bulk...); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("%s: %v, want EINVAL", tc.name, err)
		}
	}
	if got := c.read(o, 0, 80000); !bytes.Equal(got, want) {
		t.Error("a refused request changed the object")
	}
}

func firstDifference(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
