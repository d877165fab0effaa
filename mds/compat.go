package mds

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/cockroachdb/pebble/v2"

	"github.com/stripefs/stripefs/mds/dtx"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/wire"
)

// The format of an MDT's records. Format 3 added the erasure-coding
// fields to layouts, format 4 the ACLs to inodes, format 5 the components
// of composite layouts (PFL); until then records were in package wire's
// positional codec, which has no optional fields, so each change meant
// rewriting every record. Format 6 stores inodes, directory entries and
// update-log records as protocol buffers (package recordpb), where a new
// field needs no conversion. A database written by older code is
// rewritten once, when this code first opens it, before anything else
// reads it. The key keyFormat says which format the database holds (none:
// format 2, or a new database).
const dbFormat = 6

var keyFormat = []byte("Mformat")

// The v2 types are frozen copies of the records of format 2: never edit
// them.

type layoutV2 struct {
	StripeSize  uint32
	StripeCount uint32
	FirstOST    int32
	OSTs        []uint32
}

func (l layoutV2) current() proto.Layout { return l.v3().current() }

func (l layoutV2) v3() layoutV3 {
	return layoutV3{StripeSize: l.StripeSize, StripeCount: l.StripeCount, FirstOST: l.FirstOST, OSTs: l.OSTs}
}

type attrV2 struct {
	FID                 proto.FID
	Mode                uint32
	Nlink               uint32
	Uid, Gid            uint32
	Rdev                uint32
	Size                uint64
	Atime, Mtime, Ctime int64
	Layout              layoutV2
}

type inodeV2 struct {
	Attr      attrV2
	Parent    proto.FID
	Target    string
	DefLayout layoutV2
	DefDir    DirLayout
}

// The v3 types are frozen copies of the records of format 3.

type layoutV3 struct {
	StripeSize       uint32
	StripeCount      uint32
	FirstOST         int32
	OSTs             []uint32
	ECData, ECParity uint16
}

func (l layoutV3) current() proto.Layout {
	return proto.Layout{StripeSize: l.StripeSize, StripeCount: l.StripeCount, FirstOST: l.FirstOST, OSTs: l.OSTs,
		ECData: l.ECData, ECParity: l.ECParity}
}

type attrV3 struct {
	FID                 proto.FID
	Mode                uint32
	Nlink               uint32
	Uid, Gid            uint32
	Rdev                uint32
	Size                uint64
	Atime, Mtime, Ctime int64
	Layout              layoutV3
}

type inodeV3 struct {
	Attr      attrV3
	Parent    proto.FID
	Target    string
	DefLayout layoutV3
	DefDir    DirLayout
}

// inodeFromV3 reads a format 3 inode record.
func inodeFromV3(b []byte) (*inode, error) {
	var old inodeV3
	if err := wire.Unmarshal(b, &old); err != nil {
		return nil, err
	}
	return old.v4().current(), nil
}

// v4 is a format 3 inode in the form of format 4: no ACLs.
func (old *inodeV3) v4() *inodeV4 {
	a := old.Attr
	return &inodeV4{
		Attr: attrV4{FID: a.FID, Mode: a.Mode, Nlink: a.Nlink, Uid: a.Uid, Gid: a.Gid, Rdev: a.Rdev, Size: a.Size,
			Atime: a.Atime, Mtime: a.Mtime, Ctime: a.Ctime, Layout: a.Layout},
		Parent: old.Parent, Target: old.Target, DefLayout: old.DefLayout, DefDir: old.DefDir,
	}
}

// The v4 types are frozen copies of the records of format 4: layouts
// are still those of format 3 (no components).

type attrV4 struct {
	FID                 proto.FID
	Mode                uint32
	Nlink               uint32
	Uid, Gid            uint32
	Rdev                uint32
	Size                uint64
	Atime, Mtime, Ctime int64
	Layout              layoutV3
	ACL                 string
}

type inodeV4 struct {
	Attr      attrV4
	Parent    proto.FID
	Target    string
	DefLayout layoutV3
	DefDir    DirLayout
	DefACL    string
}

// inodeFromV4 reads a format 4 inode record.
func inodeFromV4(b []byte) (*inode, error) {
	var old inodeV4
	if err := wire.Unmarshal(b, &old); err != nil {
		return nil, err
	}
	return old.current(), nil
}

// current is a format 4 inode in the current form: plain layouts.
func (old *inodeV4) current() *inode {
	a := old.Attr
	return &inode{
		Attr: proto.Attr{FID: a.FID, Mode: a.Mode, Nlink: a.Nlink, Uid: a.Uid, Gid: a.Gid, Rdev: a.Rdev, Size: a.Size,
			Atime: a.Atime, Mtime: a.Mtime, Ctime: a.Ctime, Layout: a.Layout.current(), ACL: a.ACL},
		Parent: old.Parent, Target: old.Target, DefLayout: old.DefLayout.current(), DefDir: old.DefDir, DefACL: old.DefACL,
	}
}

// configV3 is the cluster map of formats 3 and 4.
type configV3 struct {
	FSName  string
	MDTs    []proto.Target
	OSTs    []proto.Target
	Default layoutV3
}

type configV2 struct {
	FSName  string
	MDTs    []proto.Target
	OSTs    []proto.Target
	Default layoutV2
}

// inodeFromV2 reads a format 2 inode record, through format 3 (layouts
// without erasure coding).
func inodeFromV2(b []byte) (*inode, error) {
	var old inodeV2
	if err := wire.Unmarshal(b, &old); err != nil {
		return nil, err
	}
	a := old.Attr
	v3 := inodeV3{
		Attr: attrV3{FID: a.FID, Mode: a.Mode, Nlink: a.Nlink, Uid: a.Uid, Gid: a.Gid, Rdev: a.Rdev, Size: a.Size,
			Atime: a.Atime, Mtime: a.Mtime, Ctime: a.Ctime, Layout: a.Layout.v3()},
		Parent: old.Parent, Target: old.Target, DefLayout: old.DefLayout.v3(), DefDir: old.DefDir,
	}
	return v3.v4().current(), nil
}

// The v5 types are frozen copies of the records of format 5, the last
// in package wire's positional codec.

type compV5 struct {
	Start, End       uint64
	StripeSize       uint32
	StripeCount      uint32
	FirstOST         int32
	ECData, ECParity uint16
	Base             uint32
	Inst             bool
}

type layoutV5 struct {
	StripeSize       uint32
	StripeCount      uint32
	FirstOST         int32
	OSTs             []uint32
	ECData, ECParity uint16
	Comps            []compV5
}

func (l layoutV5) current() proto.Layout {
	c := proto.Layout{StripeSize: l.StripeSize, StripeCount: l.StripeCount, FirstOST: l.FirstOST, OSTs: l.OSTs,
		ECData: l.ECData, ECParity: l.ECParity}
	for _, o := range l.Comps {
		c.Comps = append(c.Comps, proto.Comp{Start: o.Start, End: o.End, StripeSize: o.StripeSize, StripeCount: o.StripeCount,
			FirstOST: o.FirstOST, ECData: o.ECData, ECParity: o.ECParity, Base: o.Base, Inst: o.Inst})
	}
	return c
}

type attrV5 struct {
	FID                 proto.FID
	Mode                uint32
	Nlink               uint32
	Uid, Gid            uint32
	Rdev                uint32
	Size                uint64
	Atime, Mtime, Ctime int64
	Layout              layoutV5
	ACL                 string
}

type inodeV5 struct {
	Attr      attrV5
	Parent    proto.FID
	Target    string
	DefLayout layoutV5
	DefDir    DirLayout
	DefACL    string
}

// inodeFromV5 reads a format 5 inode record.
func inodeFromV5(b []byte) (*inode, error) {
	var old inodeV5
	if err := wire.Unmarshal(b, &old); err != nil {
		return nil, err
	}
	a := old.Attr
	return &inode{
		Attr: proto.Attr{FID: a.FID, Mode: a.Mode, Nlink: a.Nlink, Uid: a.Uid, Gid: a.Gid, Rdev: a.Rdev, Size: a.Size,
			Atime: a.Atime, Mtime: a.Mtime, Ctime: a.Ctime, Layout: a.Layout.current(), ACL: a.ACL},
		Parent: old.Parent, Target: old.Target, DefLayout: old.DefLayout.current(), DefDir: old.DefDir, DefACL: old.DefACL,
	}, nil
}

// direntV5 is a directory entry of formats 2 to 5.
type direntV5 struct {
	FID  proto.FID
	Mode uint32
}

// recordV5 is an update-log record of formats 2 to 5; a CreateInode's
// Inode is an inode record of the database's format.
type recordV5 struct {
	ID struct {
		Coord, Epoch uint32
		Seq          uint64
	}
	Op      string
	Started int64
	Updates []struct {
		Kind   string
		MDT    uint32
		FID    proto.FID
		Parent proto.FID
		Name   string
		Mode   uint32
		Delta  int32
		Time   int64
		Inode  []byte
	}
}

// recordFromV5 reads an update-log record of formats 2 to 5, its new
// inodes read by inodeOf.
func recordFromV5(b []byte, inodeOf func([]byte) (*inode, error)) (*dtx.Record, error) {
	var old recordV5
	if err := wire.Unmarshal(b, &old); err != nil {
		return nil, err
	}
	rec := &dtx.Record{ID: dtx.OpID(old.ID), Op: old.Op, Started: old.Started}
	for _, u := range old.Updates {
		nu := dtx.Update(u)
		if u.Kind == dtx.CreateInode { // the others' Inode is an xattr value or an xid
			n, err := inodeOf(u.Inode)
			if err != nil {
				return nil, err
			}
			nu.Inode = n.marshal()
		}
		rec.Updates = append(rec.Updates, nu)
	}
	return rec, nil
}

// upgradeFormat rewrites a database of formats 2 to 5 in the current
// format, in one synced batch, and marks a new database as current.
func (s *store) upgradeFormat() error {
	from := uint32(2)
	v, closer, err := s.db.Get(keyFormat)
	if err == nil {
		var f struct{ Format uint32 }
		err := wire.Unmarshal(v, &f)
		closer.Close()
		if err != nil {
			return fmt.Errorf("mdt%d: corrupt format record: %w", s.index, err)
		}
		if f.Format == dbFormat {
			return nil
		}
		if f.Format < 3 || f.Format > dbFormat {
			return fmt.Errorf("mdt%d: database format %d, this version reads formats 2 to %d", s.index, f.Format, dbFormat)
		}
		from = f.Format
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return fmt.Errorf("mdt%d: read format: %w", s.index, err)
	}
	inodeOf := map[uint32]func([]byte) (*inode, error){2: inodeFromV2, 3: inodeFromV3, 4: inodeFromV4, 5: inodeFromV5}[from]
	b := s.db.NewBatch()
	defer b.Close()
	var counts [3]int
	for i, kind := range []struct {
		prefix  byte
		what    string
		convert func([]byte) ([]byte, error)
	}{
		{pInode, "inode", func(v []byte) ([]byte, error) {
			n, err := inodeOf(v)
			if err != nil {
				return nil, err
			}
			return n.marshal(), nil
		}},
		{pDirent, "entry", func(v []byte) ([]byte, error) {
			var d direntV5
			if err := wire.Unmarshal(v, &d); err != nil {
				return nil, err
			}
			return (&dirent{FID: d.FID, Mode: d.Mode}).marshal(), nil
		}},
		{pTxn, "update-log record", func(v []byte) ([]byte, error) {
			rec, err := recordFromV5(v, inodeOf)
			if err != nil {
				return nil, err
			}
			return rec.Marshal(), nil
		}},
	} {
		it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{kind.prefix}, UpperBound: []byte{kind.prefix + 1}})
		if err != nil {
			return fmt.Errorf("mdt%d: upgrade: %w", s.index, err)
		}
		for ok := it.First(); ok; ok = it.Next() {
			nv, err := kind.convert(it.Value())
			if err != nil {
				it.Close()
				return fmt.Errorf("mdt%d: upgrade: %s %x: %w", s.index, kind.what, it.Key(), err)
			}
			b.Set(it.Key(), nv, nil)
			counts[i]++
		}
		if err := it.Close(); err != nil {
			return fmt.Errorf("mdt%d: upgrade: %w", s.index, err)
		}
	}
	if err := s.upgradeConfig(b, from); err != nil {
		return err
	}
	b.Set(keyFormat, encode(&struct{ Format uint32 }{dbFormat}), nil)
	if err := s.write(b, pebble.Sync); err != nil {
		return fmt.Errorf("mdt%d: upgrade: %w", s.index, err)
	}
	if counts != [3]int{} {
		s.logf(slog.LevelInfo, "database upgraded from format %d to %d: %d inodes, %d entries, %d update-log records", from, dbFormat, counts[0], counts[1], counts[2])
	}
	return nil
}

// upgradeConfig rewrites a cluster map of format from, if there is one,
// in b: the layouts of formats 2 to 4 lack fields.
func (s *store) upgradeConfig(b *pebble.Batch, from uint32) error {
	if from >= 5 {
		return nil
	}
	v, closer, err := s.db.Get(keyConfig)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil
	} else if err != nil {
		return fmt.Errorf("mdt%d: upgrade: cluster map: %w", s.index, err)
	}
	defer closer.Close()
	var cfg proto.Config
	if from == 2 {
		var old configV2
		err = wire.Unmarshal(v, &old)
		cfg = proto.Config{FSName: old.FSName, MDTs: old.MDTs, OSTs: old.OSTs, Default: old.Default.current()}
	} else {
		var old configV3
		err = wire.Unmarshal(v, &old)
		cfg = proto.Config{FSName: old.FSName, MDTs: old.MDTs, OSTs: old.OSTs, Default: old.Default.current()}
	}
	if err != nil {
		return fmt.Errorf("mdt%d: upgrade: cluster map: %w", s.index, err)
	}
	b.Set(keyConfig, encode(&cfg), nil)
	return nil
}
