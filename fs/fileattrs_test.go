package fs

import (
	"syscall"
	"testing"

	"github.com/stripefs/stripefs/proto"
)

// TestFileAttrs walks the record of a regular file's attributes through
// sequences of reads (a request leaves, its reply comes back) and of this
// client's own changes: a reply is kept only if no change of the file (or
// by name, of any file) happened after its request left, nothing answers
// while a change is in flight, and a change whose reply says what it left
// is kept only if nothing else touched the file meanwhile.
func TestFileAttrs(t *testing.T) {
	file := proto.FID{Seq: 0x200000400, Oid: 7}
	other := proto.FID{Seq: 0x200000400, Oid: 8}
	const lock, none = 41, ^uint64(0) // none: no lock
	type step struct {
		op   string // leave, reply, begin, end, all, flood, spoil, kept, dir
		id   int    // which request or change
		size uint64 // reply, end: the reply's size (0 with end: none); kept: wanted (0: nothing)
		fid  proto.FID
		lock uint64 // reply, end: the lock (0: lock); spoil: the lock spoiled
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"a reply is kept", []step{
			{op: "leave", id: 1}, {op: "reply", id: 1, size: 10}, {op: "kept", size: 10}, {op: "kept", size: 10},
		}},
		{"no lock, nothing kept", []step{
			{op: "leave", id: 1}, {op: "reply", id: 1, size: 10, lock: none}, {op: "kept"},
		}},
		{"a change forgets", []step{
			{op: "leave", id: 1}, {op: "reply", id: 1, size: 10}, {op: "begin", id: 2}, {op: "kept"}, {op: "end", id: 2}, {op: "kept"},
		}},
		{"a reply whose request left before a change is not kept", []step{
			{op: "leave", id: 1}, {op: "begin", id: 2}, {op: "end", id: 2}, {op: "reply", id: 1, size: 10}, {op: "kept"},
		}},
		{"nor while a change is in flight", []step{
			{op: "begin", id: 2}, {op: "leave", id: 1}, {op: "reply", id: 1, size: 10}, {op: "kept"}, {op: "end", id: 2}, {op: "kept"},
		}},
		{"a request that left after the change ended is kept", []step{
			{op: "begin", id: 2}, {op: "end", id: 2}, {op: "leave", id: 1}, {op: "reply", id: 1, size: 10}, {op: "kept", size: 10},
		}},
		{"a change's reply is kept when alone", []step{
			{op: "begin", id: 2}, {op: "end", id: 2, size: 20}, {op: "kept", size: 20},
		}},
		{"two changes overlapped: neither reply is kept", []step{
			{op: "begin", id: 2}, {op: "begin", id: 3}, {op: "end", id: 3, size: 30}, {op: "kept"}, {op: "end", id: 2, size: 20}, {op: "kept"},
		}},
		{"a change of another file does not matter", []step{
			{op: "leave", id: 1}, {op: "begin", id: 2, fid: other}, {op: "end", id: 2, fid: other}, {op: "reply", id: 1, size: 10}, {op: "kept", size: 10},
		}},
		{"a change by name forgets every file", []step{
			{op: "leave", id: 1}, {op: "reply", id: 1, size: 10}, {op: "all"}, {op: "kept"},
		}},
		{"and refuses replies that left before it", []step{
			{op: "leave", id: 1}, {op: "all"}, {op: "reply", id: 1, size: 10}, {op: "kept"},
			{op: "leave", id: 2}, {op: "reply", id: 2, size: 11}, {op: "kept", size: 11},
		}},
		{"a spoiled lock keeps nothing, a new one does", []step{
			{op: "spoil", lock: lock}, {op: "leave", id: 1}, {op: "reply", id: 1, size: 10}, {op: "kept"},
			{op: "leave", id: 2}, {op: "reply", id: 2, size: 11, lock: lock + 1}, {op: "kept", size: 11},
		}},
		{"the cache starting again refuses replies on their way", []step{
			{op: "leave", id: 1}, {op: "flood"}, {op: "reply", id: 1, size: 10}, {op: "kept"},
		}},
		{"directories are not kept", []step{
			{op: "leave", id: 1}, {op: "dir", id: 1, size: 10}, {op: "kept"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f fileAttrs
			left := map[int]uint64{}
			ends := map[int]func(*proto.Attr, uint64, uint64){}
			for i, s := range tc.steps {
				fid := s.fid
				if fid.IsZero() {
					fid = file
				}
				lk := s.lock
				switch {
				case lk == none:
					lk = 0
				case lk == 0 && s.op != "spoil":
					lk = lock
				}
				a := &proto.Attr{FID: fid, Mode: syscall.S_IFREG | 0o644, Size: s.size}
				switch s.op {
				case "leave":
					left[s.id] = f.now()
				case "reply":
					f.keep(a, left[s.id], 0, lk)
				case "dir":
					a.Mode = syscall.S_IFDIR | 0o755
					f.keep(a, left[s.id], 0, lk)
				case "begin":
					ends[s.id] = f.changing(fid)
				case "end":
					if s.size == 0 {
						a = nil
					}
					ends[s.id](a, 0, lk)
				case "all":
					f.changingAll()()
				case "flood": // more files than are kept
					for i := range maxFileAttrs {
						f.event(proto.FID{Seq: 0x200000401, Oid: uint32(i)})
					}
				case "spoil":
					f.spoil(fid, s.lock)
				case "kept":
					got, _, gotLock, ok := f.kept(file, true)
					switch {
					case s.size == 0 && ok:
						t.Fatalf("step %d: kept size %d, want nothing", i, got.Size)
					case s.size != 0 && !ok:
						t.Fatalf("step %d: nothing kept, want size %d", i, s.size)
					case ok && (got.Size != s.size || gotLock == 0):
						t.Fatalf("step %d: kept size %d under lock %d, want size %d", i, got.Size, gotLock, s.size)
					}
				default:
					t.Fatalf("step %d: unknown op %q", i, s.op)
				}
			}
		})
	}
}
