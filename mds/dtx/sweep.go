package dtx

import "slices"

// Sweep is what a coordinator's sweeper does with the records it holds,
// once every participant has said which of its parts are durable.
type Sweep struct {
	// Redo lists records with a part lost in a crash, and who applies it
	// again. The records after one are cancelled on a later sweep, once
	// the redo is durable.
	Redo []SweepRedo
	// Cancel is the longest prefix of the records (in ID order) whose
	// every part is durable: they go, in that order.
	Cancel []OpID
	// CancelAt lists, for each participant other than the coordinator,
	// the records of Cancel it takes part in.
	CancelAt map[uint32][]OpID
}

// SweepRedo is one record to apply again on some participants.
type SweepRedo struct {
	Rec *Record
	To  []uint32
}

// PlanSweep decides coordinator self's sweep of recs, sorted by ID:
// durable[p][i] says whether participant p's part of recs[i] is durable
// (self's are: the caller synced first). A record with a lost part that
// is young (its push most likely still on the way) ends the sweep there:
// nothing at or after it is redone or cancelled this time.
func PlanSweep(self uint32, recs []*Record, durable map[uint32][]bool, young func(*Record) bool) Sweep {
	var s Sweep
	prefix := true // Cancel stays a prefix of recs
	for i, r := range recs {
		applied := map[uint32]bool{self: true}
		for _, p := range r.Participants() {
			if p != self {
				applied[p] = i < len(durable[p]) && durable[p][i]
			}
		}
		if redo := Recover(r, applied).Redo; len(redo) > 0 {
			if young(r) {
				break
			}
			s.Redo = append(s.Redo, SweepRedo{Rec: r, To: redo})
			prefix = false
			continue
		}
		if !CanCancel(r, applied) {
			prefix = false
			continue
		}
		if prefix {
			s.Cancel = append(s.Cancel, r.ID)
		}
	}
	for i := range s.Cancel {
		for _, p := range recs[i].Participants() {
			if p == self {
				continue
			}
			if s.CancelAt == nil {
				s.CancelAt = map[uint32][]OpID{}
			}
			s.CancelAt[p] = append(s.CancelAt[p], recs[i].ID)
		}
	}
	return s
}

// ParticipantsOf lists every participant of recs once, in first-seen
// order.
func ParticipantsOf(recs []*Record) []uint32 {
	var out []uint32
	for _, r := range recs {
		for _, p := range r.Participants() {
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}
