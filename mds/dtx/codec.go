package dtx

import (
	"encoding/binary"
	"slices"

	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/wire"
)

// A record is encoded and decoded several times per remote mkdir (the
// coordinator's log, the push, the participant's log): by reflection that
// was a tenth of an MDT's CPU in a remote mkdir storm. These write and
// read the very bytes wire.Marshal and wire.Unmarshal do (codec_test.go
// compares them); a field added to Record or Update must be added here.

var le = binary.LittleEndian

// AppendWire implements wire.Appender.
func (r *Record) AppendWire(b []byte) []byte {
	n := 32 + len(r.Op)
	for i := range r.Updates {
		u := &r.Updates[i]
		n += 72 + len(u.Kind) + len(u.Name) + len(u.Inode)
	}
	b = slices.Grow(b, n) // one allocation, not one per doubling
	b = le.AppendUint32(b, r.ID.Coord)
	b = le.AppendUint32(b, r.ID.Epoch)
	b = le.AppendUint64(b, r.ID.Seq)
	b = wire.AppendString(b, r.Op)
	b = le.AppendUint64(b, uint64(r.Started))
	b = wire.AppendLen(b, len(r.Updates))
	for i := range r.Updates {
		u := &r.Updates[i]
		b = wire.AppendString(b, u.Kind)
		b = le.AppendUint32(b, u.MDT)
		b = proto.AppendFID(b, u.FID)
		b = proto.AppendFID(b, u.Parent)
		b = wire.AppendString(b, u.Name)
		b = le.AppendUint32(b, u.Mode)
		b = le.AppendUint32(b, uint32(u.Delta))
		b = le.AppendUint64(b, uint64(u.Time))
		b = wire.AppendBytes(b, u.Inode)
	}
	return b
}

// UnmarshalWire implements wire.Unmarshaler.
func (r *Record) UnmarshalWire(w *wire.Reader) {
	r.ID = OpID{Coord: w.Uint32(), Epoch: w.Uint32(), Seq: w.Uint64()}
	r.Op = w.String()
	r.Started = w.Int64()
	r.Updates = nil
	if n := w.Len(); n > 0 {
		r.Updates = make([]Update, n)
		for i := range r.Updates {
			u := &r.Updates[i]
			u.Kind = kind(w.Raw())
			u.MDT = w.Uint32()
			u.FID = proto.ReadFID(w)
			u.Parent = proto.ReadFID(w)
			u.Name = w.String()
			u.Mode = w.Uint32()
			u.Delta = w.Int32()
			u.Time = w.Int64()
			u.Inode = w.Bytes()
		}
	}
}

// kind returns the constant for a known update kind, so that decoding
// one allocates nothing.
func kind(p []byte) string {
	switch string(p) {
	case CreateInode:
		return CreateInode
	case DeleteInode:
		return DeleteInode
	case InsertDirent:
		return InsertDirent
	case DeleteDirent:
		return DeleteDirent
	case ParentLink:
		return ParentLink
	case InodeLink:
		return InodeLink
	case SetParent:
		return SetParent
	case SetXattr:
		return SetXattr
	case ClientDone:
		return ClientDone
	}
	return string(p)
}
