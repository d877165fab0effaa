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

func (c *client) writeTagged(o proto.ObjID, off uint64, data []byte, tag []byte, tagOff uint64) error {
	return c.rc.Do(context.Background(), &rpc.Call{Method: proto.OWrite,
		Req:     &proto.OWriteReq{Obj: o, Off: off, Grant: proto.WriteGrant{Client: c.id, Owner: c.owner, Want: c.want}, Tag: tag, TagOff: tagOff},
		BulkOut: [][]byte{data}, Resp: &proto.OWriteReply{}})
}

func (c *client) readTagged(o proto.ObjID, off uint64, n int, tagOff uint64, mustExist bool) ([]byte, []byte, error) {
	buf := make([]byte, n)
	var r proto.OReadReply
	call := &rpc.Call{Method: proto.ORead, Req: &proto.OReadReq{Obj: o, Off: off, Len: uint32(n), MustExist: mustExist, WantTag: true, TagOff: tagOff},
		Resp: &r, BulkIn: buf}
	err := c.rc.Do(context.Background(), call)
	return buf[:call.NBulkIn], r.Tag, err
}

// TestUnitTags checks the OST side of erasure coding: tags stored with
// writes (and alone), read back, dropped by punch and destroy, kept
// across a restart; and reads that must find their object.
func TestUnitTags(t *testing.T) {
	to := startOST(t, Config{})
	c := to.client(1, proto.Owner{})
	o := obj(1)
	if err := c.writeTagged(o, 0, []byte("unit zero"), []byte("tag0"), 0); err != nil {
		t.Fatal(err)
	}
	if err := c.writeTagged(o, 4096+3, []byte("unit one"), []byte("tag1"), 4096); err != nil {
		t.Fatal(err)
	}
	if err := c.writeTagged(o, 0, nil, []byte("tag0b"), 0); err != nil { // tag-only
		t.Fatal(err)
	}
	data, tag, err := c.readTagged(o, 0, 9, 0, true)
	if err != nil || string(data) != "unit zero" || string(tag) != "tag0b" {
		t.Fatalf("read unit 0: %q %q %v", data, tag, err)
	}
	if _, tag, _ := c.readTagged(o, 4096, 10, 4096, true); string(tag) != "tag1" {
		t.Fatalf("tag of unit 1: %q", tag)
	}
	if _, tag, _ := c.readTagged(o, 8192, 10, 8192, true); tag != nil {
		t.Fatalf("tag of an untagged offset: %q", tag)
	}
	to.restart()
	c = to.client(1, proto.Owner{})
	if _, tag, _ := c.readTagged(o, 4096, 10, 4096, true); string(tag) != "tag1" {
		t.Fatalf("tag of unit 1 after restart: %q", tag)
	}
	// A punch inside unit 1 keeps its tag (the client re-tags the cut
	// unit); one at its start drops it.
	if err := c.call(proto.OPunch, &proto.OPunchReq{Obj: o, Size: 4100}, &proto.Empty{}); err != nil {
		t.Fatal(err)
	}
	if _, tag, _ := c.readTagged(o, 4096, 10, 4096, true); string(tag) != "tag1" {
		t.Fatalf("tag of a unit cut in the middle: %q", tag)
	}
	if err := c.call(proto.OPunch, &proto.OPunchReq{Obj: o, Size: 4096}, &proto.Empty{}); err != nil {
		t.Fatal(err)
	}
	if _, tag, _ := c.readTagged(o, 4096, 10, 4096, true); tag != nil {
		t.Fatalf("tag of a unit punched away: %q", tag)
	}
	if _, tag, _ := c.readTagged(o, 0, 10, 0, true); string(tag) != "tag0b" {
		t.Fatalf("tag of unit 0 after the punch: %q", tag)
	}
	if err := c.call(proto.ODestroy, &proto.ODestroyReq{Obj: o}, &proto.Empty{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.readTagged(o, 0, 10, 0, true); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("must-exist read of a destroyed object: %v", err)
	}
	data, tag, err = c.readTagged(o, 0, 10, 0, false)
	if err != nil || len(data) != 0 || tag != nil {
		t.Fatalf("read of a destroyed object: %q %q %v", data, tag, err)
	}
	// Tags from the wire are bounded.
	if err := c.writeTagged(o, 0, nil, bytes.Repeat([]byte{1}, proto.MaxTag+1), 0); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("oversized tag: %v", err)
	}
	if err := c.writeTagged(o, 0, nil, []byte("x"), 1<<60); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("tag offset past the limit: %v", err)
	}
}
