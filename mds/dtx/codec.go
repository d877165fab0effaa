package dtx

import (
	"fmt"

	"github.com/stripefs/stripefs/internal/recordpb"
)

// A record's bytes are what an MDT keeps in its update log and what it
// sends its peers (push, redo, recovery): protocol buffers, package
// recordpb, so a field added to Update is read as zero from the records
// of an older build.

// Marshal is r's stored form.
func (r *Record) Marshal() []byte {
	p := &recordpb.Record{Id: &recordpb.OpID{Coord: r.ID.Coord, Epoch: r.ID.Epoch, Seq: r.ID.Seq}, Op: r.Op, Started: r.Started,
		Updates: make([]*recordpb.Update, len(r.Updates))}
	us := make([]recordpb.Update, len(r.Updates)) // one allocation for them all
	for i := range r.Updates {
		u := &r.Updates[i]
		us[i] = recordpb.Update{Kind: u.Kind, Mdt: u.MDT, Fid: recordpb.NewFID(u.FID), Parent: recordpb.NewFID(u.Parent), Name: []byte(u.Name),
			Mode: u.Mode, Delta: u.Delta, Time: u.Time, Inode: u.Inode}
		p.Updates[i] = &us[i]
	}
	b, _ := p.MarshalVT() // fails only for a message whose size changes while it is written
	return b
}

// Unmarshal reads a record's stored form into r.
func (r *Record) Unmarshal(b []byte) error {
	var p recordpb.Record
	if err := p.UnmarshalVT(b); err != nil {
		return fmt.Errorf("update-log record: %w", err)
	}
	*r = Record{ID: OpID{Coord: p.Id.GetCoord(), Epoch: p.Id.GetEpoch(), Seq: p.Id.GetSeq()}, Op: p.Op, Started: p.Started}
	if len(p.Updates) > 0 {
		r.Updates = make([]Update, len(p.Updates))
		for i, u := range p.Updates {
			r.Updates[i] = Update{Kind: u.Kind, MDT: u.Mdt, FID: u.Fid.Value(), Parent: u.Parent.Value(), Name: string(u.Name),
				Mode: u.Mode, Delta: u.Delta, Time: u.Time, Inode: u.Inode}
			if len(u.Inode) == 0 {
				// A present but empty field reads as empty, an absent one
				// as nil; Marshal writes neither: both are no inode.
				r.Updates[i].Inode = nil
			}
		}
	}
	return nil
}
