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
// fields to layouts, format 4 the ACLs to inodes, format 5 the
// components of composite layouts (PFL); the codec has no
// optional fields, so a database written by older code is rewritten
// once, when this code first opens it, before anything else reads it:
// inodes, the inodes inside update-log records and the cluster map. The key keyFormat says which format the database holds
// (none: format 2, or a new database).
const dbFormat = 5

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

// inodeFromV3 re-encodes a format 3 inode record in the current form.
func inodeFromV3(b []byte) ([]byte, error) {
	var old inodeV3
	if err := wire.Unmarshal(b, &old); err != nil {
		return nil, err
	}
	return encode(old.v4().current()), nil
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

// inodeFromV4 re-encodes a format 4 inode record in the current form.
func inodeFromV4(b []byte) ([]byte, error) {
	var old inodeV4
	if err := wire.Unmarshal(b, &old); err != nil {
		return nil, err
	}
	return encode(old.current()), nil
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

// inodeFromV2 re-encodes a format 2 inode record in the current form,
// through format 3 (layouts without erasure coding).
func inodeFromV2(b []byte) ([]byte, error) {
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
	return encode(v3.v4().current()), nil
}

// upgradeFormat rewrites a database of format 2 to 4 in the current format,
// in one synced batch, and marks a new database as current.
func (m *MDT) upgradeFormat() error {
	from := uint32(2)
	v, closer, err := m.db.Get(keyFormat)
	if err == nil {
		var f struct{ Format uint32 }
		err := wire.Unmarshal(v, &f)
		closer.Close()
		if err != nil {
			return fmt.Errorf("mdt%d: corrupt format record: %w", m.cfg.Index, err)
		}
		if f.Format == dbFormat {
			return nil
		}
		if f.Format < 3 || f.Format > dbFormat {
			return fmt.Errorf("mdt%d: database format %d, this version reads formats 2 to %d", m.cfg.Index, f.Format, dbFormat)
		}
		from = f.Format
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return fmt.Errorf("mdt%d: read format: %w", m.cfg.Index, err)
	}
	convert := map[uint32]func([]byte) ([]byte, error){2: inodeFromV2, 3: inodeFromV3, 4: inodeFromV4}[from]
	b := m.db.NewBatch()
	defer b.Close()
	inodes, records := 0, 0
	it, err := m.db.NewIter(&pebble.IterOptions{LowerBound: []byte{pInode}, UpperBound: []byte{pInode + 1}})
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		nv, err := convert(it.Value())
		if err != nil {
			it.Close()
			return fmt.Errorf("mdt%d: upgrade: inode %x: %w", m.cfg.Index, it.Key(), err)
		}
		b.Set(it.Key(), nv, nil)
		inodes++
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("mdt%d: upgrade: %w", m.cfg.Index, err)
	}
	it, err = m.db.NewIter(&pebble.IterOptions{LowerBound: []byte{pTxn}, UpperBound: []byte{pTxn + 1}})
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		var rec dtx.Record
		if err := wire.Unmarshal(it.Value(), &rec); err != nil {
			it.Close()
			return fmt.Errorf("mdt%d: upgrade: update-log record %x: %w", m.cfg.Index, it.Key(), err)
		}
		for i := range rec.Updates {
			if u := &rec.Updates[i]; u.Kind == dtx.CreateInode { // the others' Inode is an xattr value or an xid
				if u.Inode, err = convert(u.Inode); err != nil {
					it.Close()
					return fmt.Errorf("mdt%d: upgrade: update-log record %x: %w", m.cfg.Index, it.Key(), err)
				}
			}
		}
		b.Set(it.Key(), encode(&rec), nil)
		records++
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("mdt%d: upgrade: %w", m.cfg.Index, err)
	}
	if err := m.upgradeConfig(b, from); err != nil {
		return err
	}
	b.Set(keyFormat, encode(&struct{ Format uint32 }{dbFormat}), nil)
	if err := m.write(b, pebble.Sync); err != nil {
		return fmt.Errorf("mdt%d: upgrade: %w", m.cfg.Index, err)
	}
	if inodes+records > 0 {
		m.logf(slog.LevelInfo, "database upgraded to format %d: %d inodes, %d update-log records", dbFormat, inodes, records)
	}
	return nil
}

// upgradeConfig rewrites a cluster map of format from, if there is one,
// in b.
func (m *MDT) upgradeConfig(b *pebble.Batch, from uint32) error {
	v, closer, err := m.db.Get(keyConfig)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil
	} else if err != nil {
		return fmt.Errorf("mdt%d: upgrade: cluster map: %w", m.cfg.Index, err)
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
		return fmt.Errorf("mdt%d: upgrade: cluster map: %w", m.cfg.Index, err)
	}
	b.Set(keyConfig, encode(&cfg), nil)
	return nil
}
