package dtx

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stripefs/stripefs/proto"
)

func mkdirRecord() *Record {
	return &Record{ID: OpID{Coord: 0, Epoch: 3, Seq: 7}, Op: "mkdir", Updates: []Update{
		{Kind: CreateInode, MDT: 1},
		{Kind: InsertDirent, MDT: 0, Name: "d"},
		{Kind: ParentLink, MDT: 0, Delta: 1},
	}}
}

func TestParticipantsCoordinatorLast(t *testing.T) {
	r := mkdirRecord()
	if got := r.Participants(); !slices.Equal(got, []uint32{1, 0}) {
		t.Fatalf("participants %v, want remote first then the coordinator", got)
	}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(slices.Collect(r.Part(0))) != 2 || len(slices.Collect(r.Part(1))) != 1 {
		t.Fatal("parts split wrong")
	}
}

func TestRecover(t *testing.T) {
	r := mkdirRecord()
	tests := []struct {
		name    string
		applied map[uint32]bool
		redo    []uint32
	}{
		{"both applied", map[uint32]bool{0: true, 1: true}, nil},
		{"coordinator lost its batch", map[uint32]bool{0: false, 1: true}, []uint32{0}},
		{"participant lost its batch", map[uint32]bool{0: true, 1: false}, []uint32{1}},
		{"nobody applied", map[uint32]bool{0: false, 1: false}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Recover(r, tc.applied).Redo; !slices.Equal(got, tc.redo) {
				t.Fatalf("redo %v, want %v", got, tc.redo)
			}
		})
	}
}

func TestAppliedAfterCancel(t *testing.T) {
	id := OpID{Coord: 0, Epoch: 1, Seq: 10}
	if !Applied(false, 10, id) || !Applied(true, 0, id) || Applied(false, 9, id) {
		t.Fatal("a cancelled record must count as applied, a missing uncancelled one not")
	}
}

func TestCanCancel(t *testing.T) {
	r := mkdirRecord()
	if CanCancel(r, map[uint32]bool{0: true}) || !CanCancel(r, map[uint32]bool{0: true, 1: true}) {
		t.Fatal("cancel needs every part durable")
	}
}

func TestValidateRejects(t *testing.T) {
	for _, r := range []*Record{
		{ID: OpID{Coord: 0}},
		{ID: OpID{Coord: 0}, Updates: []Update{{Kind: "explode", MDT: 0}}},
		{ID: OpID{Coord: 0}, Updates: []Update{{Kind: CreateInode, MDT: 1}}},
		// The client's request is done where the client sent it.
		{ID: OpID{Coord: 0}, Updates: []Update{{Kind: CreateInode, MDT: 0}, Done(1, "c", 7, 0)}},
		{ID: OpID{Coord: 0}, Updates: []Update{{Kind: CreateInode, MDT: 0}, {Kind: ClientDone, MDT: 0, Name: "c"}}},
	} {
		if r.Validate() == nil {
			t.Errorf("accepted %+v", r)
		}
	}
}

func fid(mdt int, oid uint32) proto.FID { return proto.FID{Seq: proto.MDTSeq(mdt, 2), Oid: oid} }

// kinds lists a part's updates as "kind" or "kind±delta" for link changes.
func kinds(us []Update) []string {
	var out []string
	for _, u := range us {
		s := u.Kind
		if u.Kind == ParentLink || u.Kind == InodeLink {
			s = fmt.Sprintf("%s%+d", u.Kind, u.Delta)
		}
		out = append(out, s)
	}
	return out
}

func TestBuilders(t *testing.T) {
	s0, d1 := fid(0, 10), fid(1, 20) // source and destination directories
	file0, file1, dir0, dir1 := fid(0, 1), fid(1, 2), fid(0, 3), fid(1, 4)
	const reg, dir = 0o100000, 0o040000
	tests := []struct {
		name  string
		coord uint32
		ups   []Update
		want  map[uint32][]string
	}{
		{"file moves to another MDT's directory", 0,
			Rename(RenamePlan{SrcParent: s0, SrcName: "a", DstParent: d1, DstName: "b", Src: file0, SrcMode: reg}),
			map[uint32][]string{
				0: {DeleteDirent, ParentLink + "+0", InodeLink + "+0"},
				1: {InsertDirent, ParentLink + "+0"},
			}},
		{"directory moves: link counts and its parent pointer follow", 0,
			Rename(RenamePlan{SrcParent: s0, SrcName: "a", DstParent: d1, DstName: "b", Src: dir1, SrcMode: dir}),
			map[uint32][]string{
				0: {DeleteDirent, ParentLink + "-1"},
				1: {InsertDirent, ParentLink + "+1", SetParent},
			}},
		{"file over an existing file: the replaced one loses a link", 0,
			Rename(RenamePlan{SrcParent: s0, SrcName: "a", DstParent: d1, DstName: "b", Src: file0, SrcMode: reg, Dst: file1, DstMode: reg}),
			map[uint32][]string{
				0: {DeleteDirent, ParentLink + "+0", InodeLink + "+0"},
				1: {DeleteDirent, ParentLink + "+0", InsertDirent, ParentLink + "+0", InodeLink + "-1"},
			}},
		{"directory over an empty directory on the coordinator", 1,
			Rename(RenamePlan{SrcParent: d1, SrcName: "a", DstParent: s0, DstName: "b", Src: dir1, SrcMode: dir, Dst: dir0, DstMode: dir}),
			map[uint32][]string{
				1: {DeleteDirent, ParentLink + "-1", SetParent},
				0: {DeleteDirent, ParentLink + "-1", InsertDirent, ParentLink + "+1", DeleteInode},
			}},
		{"remote link", 1, Link(d1, "l", file0, 0, 1), map[uint32][]string{
			0: {InodeLink + "+1"},
			1: {InsertDirent, ParentLink + "+0"},
		}},
		{"remote unlink", 1, Unlink(d1, "l", file0, reg, 1), map[uint32][]string{
			0: {InodeLink + "-1"},
			1: {DeleteDirent, ParentLink + "+0"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &Record{ID: OpID{Coord: tc.coord, Epoch: 1, Seq: 1}, Updates: tc.ups}
			if err := r.Validate(); err != nil {
				t.Fatal(err)
			}
			if p := r.Participants(); p[len(p)-1] != tc.coord || len(p) != len(tc.want) {
				t.Fatalf("participants %v", p)
			}
			for mdt, want := range tc.want {
				if got := kinds(slices.Collect(r.Part(mdt))); !slices.Equal(got, want) {
					t.Errorf("mdt%d: %v, want %v", mdt, got, want)
				}
			}
			// Every link-count change names the entry update it belongs to.
			for _, u := range r.Updates {
				if u.Kind == ParentLink && u.FID.IsZero() {
					t.Errorf("untied %+v", u)
				}
			}
		})
	}
}

// stripedMkdirRecord is a directory striped over MDTs 1, 2 and 0 created
// by its parent's MDT 0: the master and stripe 0 on MDT 1, a stripe on
// each other MDT, and the name on the coordinator.
func stripedMkdirRecord() *Record {
	return &Record{ID: OpID{Coord: 0, Epoch: 2, Seq: 9}, Op: "mkdir_striped", Updates: []Update{
		{Kind: CreateInode, MDT: 1}, {Kind: SetXattr, MDT: 1, Name: "\x00lmv"},
		{Kind: CreateInode, MDT: 1}, {Kind: SetXattr, MDT: 1, Name: "\x00lmv"},
		{Kind: CreateInode, MDT: 2}, {Kind: SetXattr, MDT: 2, Name: "\x00lmv"},
		{Kind: CreateInode, MDT: 0}, {Kind: SetXattr, MDT: 0, Name: "\x00lmv"},
		{Kind: InsertDirent, MDT: 0, Name: "d"},
		{Kind: ParentLink, MDT: 0, Delta: 1},
	}}
}

func TestStripedMkdirRecord(t *testing.T) {
	r := stripedMkdirRecord()
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := r.Participants(); !slices.Equal(got, []uint32{1, 2, 0}) {
		t.Fatalf("participants %v, want the stripes' MDTs in order, then the coordinator", got)
	}
	for mdt, want := range map[uint32]int{0: 4, 1: 4, 2: 2} {
		if got := len(slices.Collect(r.Part(mdt))); got != want {
			t.Errorf("mdt%d has %d updates, want %d (its inodes with their layouts)", mdt, got, want)
		}
	}
	tests := []struct {
		name    string
		applied map[uint32]bool
		redo    []uint32
	}{
		{"all applied", map[uint32]bool{0: true, 1: true, 2: true}, nil},
		{"one stripe lost", map[uint32]bool{0: true, 1: true, 2: false}, []uint32{2}},
		{"only the coordinator kept it", map[uint32]bool{0: true, 1: false, 2: false}, []uint32{1, 2}},
		{"only a stripe kept it", map[uint32]bool{0: false, 1: false, 2: true}, []uint32{1, 0}},
		{"nobody", map[uint32]bool{0: false, 1: false, 2: false}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Recover(r, tc.applied).Redo; !slices.Equal(got, tc.redo) {
				t.Fatalf("redo %v, want %v", got, tc.redo)
			}
			want := tc.redo == nil && tc.applied[0]
			if got := CanCancel(r, tc.applied); got != want {
				t.Fatalf("cancel %v, want %v", got, want)
			}
		})
	}
}
