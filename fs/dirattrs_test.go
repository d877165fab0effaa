package fs

import (
	"testing"
	"time"

	"github.com/stripefs/stripefs/proto"
)

// TestDirAttrs walks the record of a directory's attributes through
// sequences of changes: the reply of the change with the highest transno
// answers every getattr soon after it; nothing answers while a change that
// did not say what it left is in flight, nor after a rename overlapped.
func TestDirAttrs(t *testing.T) {
	dir := proto.FID{Seq: 0x200000400, Oid: 7}
	other := proto.FID{Seq: 0x200000400, Oid: 8}
	type step struct {
		op    string // begin, end, rename, renamed, take, forget, sleep
		id    int    // which change; end: its transno too
		nlink uint32 // end: the reply's (0: none); take: wanted (0: a miss)
		fid   proto.FID
	}
	for _, tc := range []struct {
		name  string
		ttl   time.Duration
		steps []step
	}{
		{"one change answers every getattr while fresh", time.Minute, []step{
			{op: "begin", id: 1}, {op: "end", id: 1, nlink: 3}, {op: "take", nlink: 3}, {op: "take", nlink: 3},
		}},
		{"then no longer", 20 * time.Millisecond, []step{
			{op: "begin", id: 1}, {op: "end", id: 1, nlink: 3}, {op: "take", nlink: 3}, {op: "sleep"}, {op: "take"},
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
		{"answers while another change is in flight", time.Minute, []step{
			{op: "begin", id: 1}, {op: "end", id: 1, nlink: 3},
			{op: "begin", id: 2}, {op: "take", nlink: 3}, {op: "end", id: 2, nlink: 4}, {op: "take", nlink: 4},
		}},
		{"crossed replies: the later change wins", time.Minute, []step{
			{op: "begin", id: 1}, {op: "begin", id: 2}, {op: "end", id: 2, nlink: 4}, {op: "end", id: 1, nlink: 3}, {op: "take", nlink: 4},
		}},
		{"an overtaken reply does not come back", time.Minute, []step{
			{op: "begin", id: 1}, {op: "begin", id: 2}, {op: "end", id: 2, nlink: 4}, {op: "take", nlink: 4},
			{op: "end", id: 1, nlink: 3}, {op: "take", nlink: 4},
		}},
		{"nothing until a change that said nothing is over", time.Minute, []step{
			{op: "begin", id: 1}, {op: "begin", id: 2}, {op: "end", id: 1}, {op: "end", id: 2, nlink: 4}, {op: "take"},
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
		{"another client's change (the Update lock called back)", time.Minute, []step{
			{op: "begin", id: 1}, {op: "end", id: 1, nlink: 3}, {op: "take", nlink: 3}, {op: "forget"}, {op: "take"},
		}},
		{"nor does a reply of a change in flight at the callback", time.Minute, []step{
			{op: "begin", id: 1}, {op: "forget"}, {op: "end", id: 1, nlink: 3}, {op: "take"},
			{op: "begin", id: 2}, {op: "end", id: 2, nlink: 4}, {op: "take", nlink: 4},
		}},
		{"a change started during a rename", time.Minute, []step{
			{op: "rename"}, {op: "begin", id: 1}, {op: "renamed"}, {op: "end", id: 1, nlink: 3}, {op: "take"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d dirAttrs
			d.keep(tc.ttl)
			done := map[int]func(*proto.Attr, uint64){}
			var renamed func()
			for i, s := range tc.steps {
				switch s.op {
				case "begin":
					done[s.id] = d.changing(dir)
				case "end":
					var a *proto.Attr
					if s.nlink != 0 {
						a = &proto.Attr{FID: dir, Nlink: s.nlink}
						if !s.fid.IsZero() {
							a.FID = s.fid
						}
					}
					done[s.id](a, uint64(s.id))
				case "rename":
					renamed = d.changingAll()
				case "renamed":
					renamed()
				case "forget":
					d.forget(dir)
				case "sleep":
					time.Sleep(30 * time.Millisecond)
				case "take":
					a, ok := d.take(dir)
					if ok != (s.nlink != 0) || ok && a.Nlink != s.nlink {
						t.Fatalf("step %d: take = nlink %d, %v; want nlink %d", i, a.Nlink, ok, s.nlink)
					}
				}
			}
			// What is left answers, or goes at the next look once stale.
			for f, e := range d.m {
				if e.busy != 0 || !e.has {
					t.Fatalf("%v left with %d changes in flight, answer %v", f, e.busy, e.has)
				}
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
		d.changing(f)(&proto.Attr{FID: f, Nlink: 2}, 1)
	}
	if len(d.m) > maxDirAttrs {
		t.Fatalf("%d records kept, bound %d", len(d.m), maxDirAttrs)
	}
}
