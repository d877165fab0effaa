package dtx

import (
	"reflect"
	"testing"
)

// TestPlanSweep: coordinator 0 holds four records with participant 1
// (mkdir) and one with participants 1 and 2; which are cancelled, redone
// or left for a later sweep, from what the participants say is durable.
func TestPlanSweep(t *testing.T) {
	rec := func(seq uint64, parts ...uint32) *Record {
		r := &Record{ID: OpID{Coord: 0, Epoch: 1, Seq: seq}, Op: "mkdir", Updates: []Update{{Kind: InsertDirent, MDT: 0}}}
		for _, p := range parts {
			r.Updates = append(r.Updates, Update{Kind: CreateInode, MDT: p})
		}
		return r
	}
	recs := []*Record{rec(1, 1), rec(2, 1), rec(3, 1, 2), rec(4, 1)}
	id := func(i int) OpID { return recs[i].ID }
	never := func(*Record) bool { return false }
	tests := []struct {
		name     string
		durable  map[uint32][]bool
		young    func(*Record) bool
		cancel   []OpID
		cancelAt map[uint32][]OpID
		redo     map[uint64][]uint32 // by sequence
	}{
		{"all durable: all go", map[uint32][]bool{1: {true, true, true, true}, 2: {true, true, true, true}}, never,
			[]OpID{id(0), id(1), id(2), id(3)}, map[uint32][]OpID{1: {id(0), id(1), id(2), id(3)}, 2: {id(2)}}, nil},
		{"a part lost in a crash: redone, and nothing after it goes", map[uint32][]bool{1: {true, false, true, true}, 2: {true, true, true, true}}, never,
			[]OpID{id(0)}, map[uint32][]OpID{1: {id(0)}}, map[uint64][]uint32{2: {1}}},
		{"two lost parts: both redone in one sweep", map[uint32][]bool{1: {false, true, true, false}, 2: {true, true, true, true}}, never,
			nil, nil, map[uint64][]uint32{1: {1}, 4: {1}}},
		{"a young lost part ends the sweep", map[uint32][]bool{1: {true, false, true, false}, 2: {true, true, true, true}},
			func(r *Record) bool { return r.ID.Seq == 2 }, []OpID{id(0)}, map[uint32][]OpID{1: {id(0)}}, nil},
		{"a third MDT's lost part", map[uint32][]bool{1: {true, true, true, true}, 2: {true, true, false, true}}, never,
			[]OpID{id(0), id(1)}, map[uint32][]OpID{1: {id(0), id(1)}}, map[uint64][]uint32{3: {2}}},
		{"a participant with no answer for a record counts it lost", map[uint32][]bool{1: {true}}, never,
			[]OpID{id(0)}, map[uint32][]OpID{1: {id(0)}}, map[uint64][]uint32{2: {1}, 3: {1, 2}, 4: {1}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := PlanSweep(0, recs, tc.durable, tc.young)
			if !reflect.DeepEqual(s.Cancel, tc.cancel) {
				t.Errorf("cancel %v, want %v", s.Cancel, tc.cancel)
			}
			if !reflect.DeepEqual(s.CancelAt, tc.cancelAt) {
				t.Errorf("cancel at %v, want %v", s.CancelAt, tc.cancelAt)
			}
			redo := map[uint64][]uint32{}
			for _, r := range s.Redo {
				redo[r.Rec.ID.Seq] = r.To
			}
			if len(redo) == 0 {
				redo = nil
			}
			if !reflect.DeepEqual(redo, tc.redo) {
				t.Errorf("redo %v, want %v", redo, tc.redo)
			}
		})
	}
}
