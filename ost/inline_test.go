package ost

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/stripefs/stripefs/internal/storeguard"
	"github.com/stripefs/stripefs/proto"
)

// TestInlineObjects walks one object through an inline OST's life: kept
// in the index while small (no file; blocks, quota and reads as a file's
// would be), a truncate up leaving a hole, a spill to a file when a write
// passes InlineMax, a fallocate spilling another, both kinds listed,
// a restart and an unclean stop keeping them, a destroy freeing them.
func TestInlineObjects(t *testing.T) {
	const inlineMax = 64 << 10
	to := startOST(t, Config{Index: 0, InlineMax: inlineMax})
	owner := proto.Owner{Uid: 1001, Gid: 1001}
	c := to.client(1, owner)
	id := obj(7)
	uid := proto.QuotaKey{Type: proto.QuotaUser, ID: 1001}
	blk := to.o.ext.blockSize

	model := []byte{}
	write := func(off int, data []byte) {
		t.Helper()
		must(t, c.write(id, uint64(off), data))
		if end := off + len(data); end > len(model) {
			model = append(model, make([]byte, end-len(model))...)
		}
		copy(model[off:], data)
	}
	hasFile := func(id proto.ObjID) bool {
		_, err := os.Stat(to.o.objPath(id))
		return !errors.Is(err, os.ErrNotExist)
	}
	check := func(what string, wantFile bool, wantBytes uint64) {
		t.Helper()
		var g proto.OGetattrReply
		must(t, c.call(proto.OGetattr, &proto.OGetattrReq{Obj: id}, &g))
		if !g.Exists || g.Size != uint64(len(model)) {
			t.Fatalf("%s: getattr %+v, want size %d", what, g, len(model))
		}
		if got := c.read(id, 0, len(model)+100); !bytes.Equal(got, model) {
			t.Fatalf("%s: read %d bytes, differing from the %d written", what, len(got), len(model))
		}
		if hasFile(id) != wantFile {
			t.Fatalf("%s: object file exists %v, want %v", what, !wantFile, wantFile)
		}
		// What an MDT's open reply carries: the bytes of an inline object
		// only, zeros past what it holds.
		buf := bytes.Repeat([]byte{0xff}, len(model))
		if ok, err := to.o.ReadInline(id, buf); err != nil || ok == wantFile || (ok && !bytes.Equal(buf, model)) {
			t.Fatalf("%s: ReadInline ok=%v err=%v (a file: %v), bytes as written: %v", what, ok, err, wantFile, bytes.Equal(buf, model))
		}
		if wantBytes != ^uint64(0) {
			if g.Blocks*512 != wantBytes {
				t.Fatalf("%s: %d blocks, want %d bytes", what, g.Blocks, wantBytes)
			}
			if u := c.usage(uid); u.Usage != wantBytes {
				t.Fatalf("%s: uid 1001 charged %d bytes, want %d", what, u.Usage, wantBytes)
			}
			if b, ok := to.o.Blocks(id); !ok || b*512 != wantBytes {
				t.Fatalf("%s: Blocks %d %v", what, b, ok)
			}
		}
	}

	write(0, pattern(3901, 1))
	check("3901 bytes", false, blk)
	write(100, pattern(50, 2)) // a rewrite
	write(20000, pattern(1000, 3))
	check("grown with a hole", false, (21000+blk-1)/blk*blk)
	must(t, c.call(proto.OPunch, &proto.OPunchReq{Obj: id, Size: 2000}, &proto.Empty{}))
	model = model[:2000]
	check("truncated down", false, blk)
	must(t, c.call(proto.OPunch, &proto.OPunchReq{Obj: id, Size: 30000}, &proto.Empty{}))
	model = append(model, make([]byte, 28000)...)
	check("truncated up", false, blk)
	must(t, c.call(proto.OSync, &proto.OSyncReq{Objs: []proto.ObjID{id}}, &proto.Empty{}))

	// A new object made by a truncate is inline too, and its first write
	// charges it to its owner.
	other := obj(8)
	must(t, c.call(proto.OPunch, &proto.OPunchReq{Obj: other, Size: 5000}, &proto.Empty{}))
	if hasFile(other) {
		t.Fatal("a truncate made a file for a new small object")
	}
	if err := to.client(2, proto.Owner{Uid: 1002, Gid: 1002}).write(other, 10, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if u := c.usage(proto.QuotaKey{Type: proto.QuotaUser, ID: 1002}); u.Usage != blk {
		t.Fatalf("the truncated object's writer is charged %d bytes, want %d", u.Usage, blk)
	}

	to.restart()
	c = to.client(1, owner)
	check("after a restart", false, blk)
	if n := counter(to.o, "inline_objects_now"); n != 2 {
		t.Fatalf("%d inline objects counted after the restart, want 2", n)
	}
	if n := counter(to.o, "inline_spills"); n != 0 {
		t.Fatalf("%d spills before any object passed InlineMax", n)
	}

	write(inlineMax-10, pattern(100, 4)) // past InlineMax: a file now
	check("spilled by a write", true, ^uint64(0))
	if n := counter(to.o, "inline_spills"); n != 1 {
		t.Fatalf("%d spills, want 1", n)
	}
	var list proto.OListReply
	must(t, c.call(proto.OList, &proto.OListReq{Max: 10}, &list))
	if len(list.Objs) != 2 || list.Objs[0] != id || list.Objs[1] != other {
		t.Fatalf("listed %v, want %v and %v", list.Objs, id, other)
	}
	must(t, c.call(proto.OFallocate, &proto.OFallocateReq{Obj: other, Off: 0, Len: 4096, Mode: proto.FallocAllocate, Owner: owner}, &proto.Empty{}))
	if !hasFile(other) || counter(to.o, "inline_spills") != 2 || counter(to.o, "inline_objects_now") != 0 {
		t.Fatal("a fallocate did not spill its inline object")
	}

	// An unclean stop between a spill's file and its record: the record
	// says inline, the file is the leftover, and the start deletes it.
	third := obj(9)
	must(t, c.write(third, 0, pattern(500, 5)))
	must(t, c.call(proto.OSync, &proto.OSyncReq{Objs: []proto.ObjID{third}}, &proto.Empty{}))
	stale := to.o.objPath(third)
	to.o.Close()
	to.o = nil
	db, err := pebble.Open(filepath.Join(to.cfg.DataDir, "index"), &pebble.Options{Logger: storeguard.New("test").Logger()})
	must(t, err)
	must(t, db.Delete(keyClean, pebble.Sync)) // no clean marker: the open reconciles
	must(t, db.Close())
	must(t, os.MkdirAll(filepath.Dir(stale), 0o755))
	must(t, os.WriteFile(stale, pattern(9000, 6), 0o600))
	to.open()
	c = to.client(1, owner)
	if hasFile(third) {
		t.Fatal("the reconcile kept a file beside an inline object")
	}
	if got := c.read(third, 0, 1000); !bytes.Equal(got, pattern(500, 5)) {
		t.Fatalf("inline object after the unclean stop: %d bytes, not the 500 written", len(got))
	}
	for _, o := range []proto.ObjID{id, other, third} {
		must(t, c.call(proto.ODestroy, &proto.ODestroyReq{Obj: o}, &proto.Empty{}))
	}
	if u := c.usage(uid); u.Usage != 0 || counter(to.o, "inline_objects_now") != 0 {
		t.Fatalf("uid 1001 charged %d bytes after every object was destroyed, %d inline objects", u.Usage, counter(to.o, "inline_objects_now"))
	}
	list = proto.OListReply{}
	must(t, c.call(proto.OList, &proto.OListReq{Max: 10}, &list))
	if len(list.Objs) != 0 {
		t.Fatalf("listed %v after every object was destroyed", list.Objs)
	}
}

// Writes racing to a new object, one within the inline limit and one
// past it, each from its own client: whichever comes first, the object
// ends as one thing, an inline value or a file, holding both writes. The
// write past the limit once decided "a file" but made the file only after
// letting go of the allocation lock, so the other could still record the
// object inline: its first bytes inline, the rest in a file nothing read
// (and fsck later found the file orphaned).
func TestInlineRaceWithFileWrite(t *testing.T) {
	const inlineMax = 64 << 10
	to := startOST(t, Config{Index: 0, InlineMax: inlineMax})
	owner := proto.Owner{Uid: 1001, Gid: 1001}
	small, big := to.client(1, owner), to.client(2, owner)
	head, tail := bytes.Repeat([]byte{'h'}, inlineMax), bytes.Repeat([]byte{'t'}, inlineMax)
	want := append(append([]byte(nil), head...), tail...)
	for i := range 200 {
		id := obj(uint32(1000 + i))
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); must(t, small.write(id, 0, head)) }()
		go func() { defer wg.Done(); must(t, big.write(id, inlineMax, tail)) }()
		wg.Wait()
		if got := small.read(id, 0, 2*inlineMax+100); !bytes.Equal(got, want) {
			t.Fatalf("object %d: read %d bytes, not the two writes' %d", i, len(got), len(want))
		}
	}
	checkAccounting(t, "after the races", to.o, func(proto.ObjID) proto.Owner { return owner })
}
