package fsck

import (
	"testing"

	"github.com/stripefs/stripefs/proto"
)

func fid(oid uint32) proto.FID { return proto.FID{Seq: proto.MDTSeq(0, 2), Oid: oid} }

func remote(oid uint32) proto.FID { return proto.FID{Seq: proto.MDTSeq(1, 2), Oid: oid} }

func dir(f, parent proto.FID, nlink uint32) proto.ScanInode {
	return proto.ScanInode{Attr: proto.Attr{FID: f, Mode: 0o040755, Nlink: nlink}, Parent: parent}
}

func file(f proto.FID, nlink uint32, osts ...uint32) proto.ScanInode {
	return proto.ScanInode{Attr: proto.Attr{FID: f, Mode: 0o100644, Nlink: nlink, Layout: proto.Layout{StripeCount: uint32(len(osts)), OSTs: osts}}}
}

func ent(parent proto.FID, name string, f proto.FID, mode uint32) proto.ScanDirent {
	return proto.ScanDirent{Parent: parent, Name: name, FID: f, Mode: mode}
}

func TestCheck(t *testing.T) {
	root := proto.RootFID
	good := func() *View {
		return &View{
			Inodes: []proto.ScanInode{dir(root, root, 3), dir(fid(1), root, 2), file(fid(2), 2, 0, 1)},
			Dirents: []proto.ScanDirent{ent(root, "d", fid(1), 0o040000), ent(root, "f", fid(2), 0o100000),
				ent(fid(1), "hard", fid(2), 0o100000)},
			Objects: map[uint32][]proto.ObjID{0: {{FID: fid(2), Stripe: 0}}, 1: {{FID: fid(2), Stripe: 1}}},
		}
	}
	tests := []struct {
		name   string
		break_ func(v *View)
		kinds  []string
	}{
		{"consistent", func(v *View) {}, nil},
		{"entry to a missing inode", func(v *View) { v.Dirents = append(v.Dirents, ent(root, "ghost", fid(9), 0o100000)) }, []string{Dangling}},
		{"inode nobody names", func(v *View) { v.Inodes = append(v.Inodes, file(fid(7), 1)) }, []string{Orphan}},
		{"open unlinked file is no orphan", func(v *View) {
			n := file(fid(7), 0)
			n.Open = true
			v.Inodes = append(v.Inodes, n)
		}, nil},
		{"file nlink off", func(v *View) { v.Inodes[2].Attr.Nlink = 1 }, []string{WrongNlink}},
		// Remote entries: names on one MDT of inodes on another (cross-MDT
		// link and rename) count like any other name.
		{"file on mdt1 named on mdt0 and mdt1", func(v *View) {
			v.Inodes = append(v.Inodes, file(remote(1), 2))
			v.Dirents = append(v.Dirents, ent(root, "r", remote(1), 0o100000), ent(fid(1), "r2", remote(1), 0o100000))
		}, nil},
		{"remote entry's nlink off", func(v *View) {
			v.Inodes = append(v.Inodes, file(remote(1), 1))
			v.Dirents = append(v.Dirents, ent(root, "r", remote(1), 0o100000), ent(fid(1), "r2", remote(1), 0o100000))
		}, []string{WrongNlink}},
		{"open file whose last remote name went", func(v *View) {
			n := file(remote(1), 0)
			n.Open = true
			v.Inodes = append(v.Inodes, n)
		}, nil},
		{"remote entry to a missing inode", func(v *View) { v.Dirents = append(v.Dirents, ent(root, "r", remote(9), 0o100000)) }, []string{Dangling}},
		{"dir nlink off", func(v *View) { v.Inodes[0].Attr.Nlink = 2 }, []string{WrongNlink}},
		{"object of no file", func(v *View) { v.Objects[3] = []proto.ObjID{{FID: fid(8)}} }, []string{OrphanObj}},
		{"object on the wrong OST", func(v *View) { v.Objects[2] = []proto.ObjID{{FID: fid(2), Stripe: 0}} }, []string{OrphanObj}},
		{"stripe past the layout", func(v *View) { v.Objects[0] = append(v.Objects[0], proto.ObjID{FID: fid(2), Stripe: 5}) }, []string{OrphanObj}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := good()
			tc.break_(v)
			got := Check(v)
			if len(got) != len(tc.kinds) {
				t.Fatalf("findings %v, want kinds %v", got, tc.kinds)
			}
			for i := range got {
				if got[i].Kind != tc.kinds[i] {
					t.Fatalf("finding %d is %s, want %s", i, got[i], tc.kinds[i])
				}
			}
		})
	}
}

// TestCheckStriped: a striped directory's stripes are named by its
// master's layout, not by entries, and count their own subdirectories; a
// stripe the master lists that does not exist is reported.
func TestCheckStriped(t *testing.T) {
	root := proto.RootFID
	master := proto.FID{Seq: proto.MDTSeq(1, proto.StripedSeqLocal), Oid: 1}
	s0 := proto.FID{Seq: proto.MDTSeq(1, proto.StripeSeqLocal), Oid: 1}
	s1 := proto.FID{Seq: proto.MDTSeq(0, proto.StripeSeqLocal), Oid: 1}
	stripe := func(f proto.FID, i int32, nlink uint32) proto.ScanInode {
		n := dir(f, master, nlink)
		n.Master, n.StripeIndex = master, i
		return n
	}
	good := func() *View {
		m := dir(master, root, 2)
		m.Master, m.StripeIndex, m.Stripes = master, -1, []proto.FID{s0, s1}
		return &View{
			Inodes: []proto.ScanInode{dir(root, root, 3), m, stripe(s0, 0, 3), stripe(s1, 1, 2),
				dir(fid(1), master, 2), file(fid(2), 1)},
			Dirents: []proto.ScanDirent{ent(root, "striped", master, 0o040000),
				ent(s0, "sub", fid(1), 0o040000), ent(s1, "f", fid(2), 0o100000)},
		}
	}
	tests := []struct {
		name   string
		break_ func(v *View)
		kinds  []string
	}{
		{"consistent", func(v *View) {}, nil},
		{"stripe lost", func(v *View) { v.Inodes = append(v.Inodes[:3], v.Inodes[4:]...) }, []string{MissingStripe}},
		{"master without layout", func(v *View) { v.Inodes[1].Stripes = nil }, []string{Orphan, Orphan, MissingStripe}},
		{"stripe of another master", func(v *View) { v.Inodes[3].StripeIndex = 0 }, []string{Orphan}},
		{"stripe nlink off", func(v *View) { v.Inodes[2].Attr.Nlink = 2 }, []string{WrongNlink}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := good()
			tc.break_(v)
			got := Check(v)
			var kinds []string
			for _, f := range got {
				kinds = append(kinds, f.Kind)
			}
			if len(kinds) != len(tc.kinds) {
				t.Fatalf("findings %v, want kinds %v", got, tc.kinds)
			}
			for i := range kinds {
				if kinds[i] != tc.kinds[i] {
					t.Fatalf("findings %v, want kinds %v", got, tc.kinds)
				}
			}
		})
	}
}
