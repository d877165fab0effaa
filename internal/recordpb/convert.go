package recordpb

import "github.com/stripefs/stripefs/proto"

// NewFID is f's stored form; nil for the zero FID, which is then not
// written at all.
func NewFID(f proto.FID) *FID {
	if f == (proto.FID{}) {
		return nil
	}
	return &FID{Seq: f.Seq, Oid: f.Oid, Ver: f.Ver}
}

// Value is the FID p stores; the zero FID for nil.
func (p *FID) Value() proto.FID {
	return proto.FID{Seq: p.GetSeq(), Oid: p.GetOid(), Ver: p.GetVer()}
}

// NewOwner is o's stored form.
func NewOwner(o proto.Owner) *Owner {
	if o == (proto.Owner{}) {
		return nil
	}
	return &Owner{Uid: o.Uid, Gid: o.Gid, Projid: o.Projid}
}

// Value is the owner p stores; root's for nil.
func (p *Owner) Value() proto.Owner {
	return proto.Owner{Uid: p.GetUid(), Gid: p.GetGid(), Projid: p.GetProjid()}
}
