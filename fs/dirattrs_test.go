package fs

import (
	"testing"
	"time"

	"github.com/stripefs/stripefs/proto"
)

// TestDirAttrs walks the record of a directory's attributes through
// sequences of changes: only a reply no other change of the directory
// overlapped may answer, once, within the timeout, and nothing a rename
// overlapped.
func TestDirAttrs(t *testing.T) {
	dir := proto.FID{Seq: 0x200000400, Oid: 7}
	other := proto.FID{Seq: 0x200000400, Oid: 8}
	attr := func(nlink uint32) *proto.Attr { return &proto.Attr{FID: dir, Nlink: nlink} }
	type step struct {
		op    string // begin, end, rename, renamed, take, sleep
		id    int    // which change
		nlink uint32 // end: the reply's; take: wanted (0: a miss)
		fid   proto.FID
	}
	for _, tc := range []struct {
		name  string
		ttl   time.Duration
		steps []step
	}{
		{"one change answers once", time.Minute, []step{
			{op: "begin", id: 1}, {op: "end", id: 1, nlink: 3}, {op: "take", nlink: 3}, {op: "take"},
		}},
		{"off", 0, []step{
			{op: "begin", id: 1}, {op: "end", id: 1, nlink: 3}, {op: "take"},
		}},
		{"expired", time.Millisecond, []step{
			{op: "begin", id: 1}, {op: "end", id: 1, nlink: 3}, {op: "sleep"}, {op: "take"},
		}},
		{"a failed change forgets", time.Minute, []step{
			{op: "begin", id: 1}, {op: "end", id: 1, nlink: 3},
			{op: "begin", id: 2}, {op: "end", id: 2}, {op: "take"},
		}},
		{"nothing while a change is in flight", time.Minute, []step{
			{op: "begin", id: 1}, {op: "end", id: 1, nlink: 3},
			{op: "begin", id: 2}, {op: "take"}, {op: "end", id: 2, nlink: 4}, {op: "take", nlink: 4},
		}},
		{"overlapping changes", time.Minute, []step{
			{op: "begin", id: 1}, {op: "begin", id: 2}, {op: "end", id: 2, nlink: 4}, {op: "end", id: 1, nlink: 3}, {op: "take"},
			{op: "begin", id: 3}, {op: "end", id: 3, nlink: 5}, {op: "take", nlink: 5},
		}},
		{"a reply about another directory", time.Minute, []step{
			{op: "begin", id: 1}, {op: "end", id: 1, nlink: 3, fid: other}, {op: "take"},
		}},
		{"a rename overlapped", time.Minute, []step{
			{op: "begin", id: 1}, {op: "rename"}, {op: "end", id: 1, nlink: 3}, {op: "renamed"}, {op: "take"},
		}},
		{"a rename clears", time.Minute, []step{
			{op: "begin", id: 1}, {op: "end", id: 1, nlink: 3}, {op: "rename"}, {op: "renamed"}, {op: "take"},
		}},
		{"a change started during a rename", time.Minute, []step{
			{op: "rename"}, {op: "begin", id: 1}, {op: "renamed"}, {op: "end", id: 1, nlink: 3}, {op: "take"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d dirAttrs
			d.keep(tc.ttl)
			done := map[int]func(*proto.Attr){}
			var renamed func()
			for i, s := range tc.steps {
				switch s.op {
				case "begin":
					done[s.id] = d.changing(dir)
				case "end":
					var a *proto.Attr
					if s.nlink != 0 {
						a = attr(s.nlink)
						if !s.fid.IsZero() {
							a.FID = s.fid
						}
					}
					done[s.id](a)
				case "rename":
					renamed = d.changingAll()
				case "renamed":
					renamed()
				case "sleep":
					time.Sleep(5 * time.Millisecond)
				case "take":
					a, ok := d.take(dir)
					if ok != (s.nlink != 0) || ok && a.Nlink != s.nlink {
						t.Fatalf("step %d: take = nlink %d, %v; want nlink %d", i, a.Nlink, ok, s.nlink)
					}
				}
			}
			if tc.ttl > 0 && len(d.m) != 0 {
				t.Fatalf("%d records left after the last change was taken or dropped", len(d.m))
			}
		})
	}
}

// TestDirAttrsBounded: directories changed and never asked about again
// do not pile up.
func TestDirAttrsBounded(t *testing.T) {
	var d dirAttrs
	d.keep(time.Minute)
	for i := 0; i < 3*maxDirAttrs; i++ {
		f := proto.FID{Seq: 0x200000400, Oid: uint32(i + 1)}
		d.changing(f)(&proto.Attr{FID: f, Nlink: 2})
	}
	if len(d.m) > maxDirAttrs {
		t.Fatalf("%d records kept, bound %d", len(d.m), maxDirAttrs)
	}
}
