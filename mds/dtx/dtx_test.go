package dtx

import (
	"slices"
	"testing"
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
	if len(r.Part(0)) != 2 || len(r.Part(1)) != 1 {
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
	} {
		if r.Validate() == nil {
			t.Errorf("accepted %+v", r)
		}
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
		if got := len(r.Part(mdt)); got != want {
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
