// Package fsck checks a stripefs filesystem across all its targets:
// entries that name missing inodes, inodes no entry names, wrong link
// counts and OST objects no file owns. Check is pure; Run gathers the
// targets' contents over RPC and applies repairs.
package fsck

import (
	"fmt"
	"sort"

	"github.com/stripefs/stripefs/proto"
)

// View is everything fsck looks at.
type View struct {
	Inodes  []proto.ScanInode
	Dirents []proto.ScanDirent
	// Objects lists each OST's objects by OST index.
	Objects map[uint32][]proto.ObjID
}

// Kinds of finding.
const (
	Dangling   = "dangling_entry" // an entry names an inode that does not exist
	Orphan     = "orphan_inode"   // an inode no entry names (and nobody has open)
	WrongNlink = "wrong_nlink"
	OrphanObj  = "orphan_object" // an OST object no file's layout holds
	// MissingStripe: a striped directory's master lists a stripe that does
	// not exist (FID; Parent is the master), or has no layout at all (FID
	// is the master). The entries that stripe held are lost with it.
	MissingStripe = "missing_stripe"
	lostAndFound  = "lost+found"
)

// Finding is one problem.
type Finding struct {
	Kind   string      `json:"kind"`
	FID    proto.FID   `json:"fid"`
	Parent proto.FID   `json:"parent,omitempty"`
	Name   string      `json:"name,omitempty"`
	Mode   uint32      `json:"mode,omitempty"`
	Have   uint32      `json:"have,omitempty"` // nlink found
	Want   uint32      `json:"want,omitempty"` // nlink expected
	OST    uint32      `json:"ost,omitempty"`
	Obj    proto.ObjID `json:"object,omitempty"`
}

func (f Finding) String() string {
	switch f.Kind {
	case Dangling:
		return fmt.Sprintf("dangling entry %s/%q → %s", f.Parent, f.Name, f.FID)
	case Orphan:
		return fmt.Sprintf("orphan inode %s (mode %o): no entry names it", f.FID, f.Mode)
	case WrongNlink:
		return fmt.Sprintf("inode %s has nlink %d, entries say %d", f.FID, f.Have, f.Want)
	case OrphanObj:
		if proto.IsDoMOST(f.OST) {
			return fmt.Sprintf("orphan object %s in %s's file data", f.Obj, proto.OSTName(f.OST))
		}
		return fmt.Sprintf("orphan object %s on ost%d", f.Obj, f.OST)
	case MissingStripe:
		if f.Parent.IsZero() {
			return fmt.Sprintf("striped directory %s has no layout", f.FID)
		}
		return fmt.Sprintf("stripe %s of striped directory %s is missing", f.FID, f.Parent)
	}
	return f.Kind
}

// Check finds every problem in v, in a stable order.
func Check(v *View) []Finding {
	var out []Finding
	inodes := map[proto.FID]*proto.ScanInode{}
	for i := range v.Inodes {
		inodes[v.Inodes[i].Attr.FID] = &v.Inodes[i]
	}
	named := map[proto.FID]uint32{}   // entries naming each inode
	subdirs := map[proto.FID]uint32{} // subdirectory entries in each directory
	for _, d := range v.Dirents {
		if _, ok := inodes[d.FID]; !ok {
			out = append(out, Finding{Kind: Dangling, FID: d.FID, Parent: d.Parent, Name: d.Name, Mode: d.Mode})
			continue
		}
		named[d.FID]++
		if d.Mode == 0o040000 {
			subdirs[d.Parent]++
		}
	}
	fids := make([]proto.FID, 0, len(inodes))
	for f := range inodes {
		fids = append(fids, f)
	}
	sort.Slice(fids, func(i, j int) bool { return less(fids[i], fids[j]) })
	for _, f := range fids {
		n := inodes[f]
		isDir := n.Attr.Mode&0o170000 == 0o040000
		if f.IsStripedDir() {
			if len(n.Stripes) == 0 {
				out = append(out, Finding{Kind: MissingStripe, FID: f, Mode: n.Attr.Mode})
			}
			for _, s := range n.Stripes {
				if _, ok := inodes[s]; !ok {
					out = append(out, Finding{Kind: MissingStripe, FID: s, Parent: f, Mode: n.Attr.Mode})
				}
			}
		}
		if f.IsDirStripe() && stripeOf(inodes, n) {
			named[f]++ // a stripe is named by its master's layout, not by an entry
		}
		if f != proto.RootFID && named[f] == 0 && !n.Open {
			out = append(out, Finding{Kind: Orphan, FID: f, Mode: n.Attr.Mode, Parent: n.Parent})
			continue
		}
		want := named[f]
		if isDir {
			want = 2 + subdirs[f]
		}
		if n.Open && named[f] == 0 {
			want = 0 // unlinked, kept for its open handles
		}
		if n.Attr.Nlink != want {
			out = append(out, Finding{Kind: WrongNlink, FID: f, Have: n.Attr.Nlink, Want: want, Mode: n.Attr.Mode})
		}
	}
	osts := make([]uint32, 0, len(v.Objects))
	for o := range v.Objects {
		osts = append(osts, o)
	}
	sort.Slice(osts, func(i, j int) bool { return osts[i] < osts[j] })
	for _, ost := range osts {
		for _, obj := range v.Objects[ost] {
			n := inodes[obj.FID]
			if n == nil || int(obj.Stripe) >= len(n.Attr.Layout.OSTs) || n.Attr.Layout.OSTs[obj.Stripe] != ost {
				out = append(out, Finding{Kind: OrphanObj, OST: ost, Obj: obj, FID: obj.FID})
			}
		}
	}
	return out
}

func less(a, b proto.FID) bool {
	ka, kb := a.Key(), b.Key()
	return string(ka[:]) < string(kb[:])
}

// stripeOf reports whether stripe n is one its master lists.
func stripeOf(inodes map[proto.FID]*proto.ScanInode, n *proto.ScanInode) bool {
	m := inodes[n.Master]
	i := int(n.StripeIndex)
	return m != nil && i >= 0 && i < len(m.Stripes) && m.Stripes[i] == n.Attr.FID
}
