package mds

import (
	"reflect"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/stripefs/stripefs/internal/storeguard"
	"github.com/stripefs/stripefs/mds/dtx"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/wire"
)

// TestUpgradeFromFormat2 writes a database as format 2 code did (layouts
// without erasure-coding fields) and checks that opening it rewrites
// every record in the current form, once.
func TestUpgradeFromFormat2(t *testing.T) {
	mem := vfs.NewMem()
	db := memDB(t, mem)
	fileFID, dirFID := proto.FID{Seq: proto.MDTSeq(0, 2), Oid: 7}, proto.FID{Seq: proto.MDTSeq(0, 2), Oid: 8}
	lay := layoutV2{StripeSize: 1 << 20, StripeCount: 2, FirstOST: 1, OSTs: []uint32{1, 2}}
	file := inodeV2{Attr: attrV2{FID: fileFID, Mode: sIFREG | 0o644, Nlink: 1, Size: 12345, Layout: lay}}
	dir := inodeV2{Attr: attrV2{FID: dirFID, Mode: sIFDIR | 0o755, Nlink: 2}, Parent: proto.RootFID,
		DefLayout: layoutV2{StripeSize: 65536, StripeCount: 4, FirstOST: -1}, DefDir: DirLayout{Set: true, Index: -1, Count: 1}}
	root := inodeV2{Attr: attrV2{FID: proto.RootFID, Mode: sIFDIR | 0o755, Nlink: 3}, Parent: proto.RootFID}
	rec := dtx.Record{ID: dtx.OpID{Coord: 0, Epoch: 1, Seq: 1}, Op: "mkdir",
		Updates: []dtx.Update{{Kind: dtx.CreateInode, MDT: 1, Inode: wire.Marshal(nil, &dir)}}}
	cfg := configV2{FSName: "old", OSTs: []proto.Target{{Kind: proto.KindOST, Index: 0, Addr: "x"}},
		Default: layoutV2{StripeSize: 1 << 20, StripeCount: 1, FirstOST: -1}}
	m := upgradeOld(t, db, 0, rec, cfg, map[proto.FID]inodeV2{fileFID: file, dirFID: dir, proto.RootFID: root})
	n, err := m.getInode(fileFID)
	if err != nil {
		t.Fatal(err)
	}
	if n.Attr.Size != 12345 || n.Attr.Layout.String() != lay.current().String() || n.Attr.Layout.IsEC() {
		t.Fatalf("file after upgrade: %+v", n.Attr)
	}
	d, err := m.getInode(dirFID)
	if err != nil || d.DefLayout.StripeCount != 4 || !d.DefDir.Set || d.Parent != proto.RootFID {
		t.Fatalf("directory after upgrade: %+v %v", d, err)
	}
	got := storedRecord(t, db, txnKey(rec.ID))
	var inRec inode
	if err := unmarshalInode(got.Updates[0].Inode, &inRec); err != nil || inRec.DefLayout.StripeSize != 65536 {
		t.Fatalf("inode in an update-log record after upgrade: %+v %v", inRec, err)
	}
	if c := stored[proto.Config](t, db, keyConfig); c.FSName != "old" || c.Default.StripeSize != 1<<20 || len(c.OSTs) != 1 {
		t.Fatalf("cluster map after upgrade: %+v", c)
	}
	db.Close()

	// A database marked with a newer format is refused, not misread.
	db = memDB(t, mem)
	defer db.Close()
	if err := db.Set(keyFormat, encode(&struct{ Format uint32 }{dbFormat + 1}), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	s := &store{db: db, guard: storeguard.New("mdt0")}
	if err := s.upgradeFormat(); err == nil {
		t.Fatal("a newer format was accepted")
	}
}

// TestUpgradeFromFormat3 writes a database as format 3 code did (inodes
// without ACLs), with an update-log record holding an inode, an xattr
// value and a request's xid, and checks that opening it rewrites the
// inodes and only them.
func TestUpgradeFromFormat3(t *testing.T) {
	db := memDB(t, vfs.NewMem())
	defer db.Close()
	fileFID, dirFID := proto.FID{Seq: proto.MDTSeq(0, 2), Oid: 7}, proto.FID{Seq: proto.MDTSeq(0, 2), Oid: 8}
	lay := layoutV3{StripeSize: 1 << 20, StripeCount: 6, FirstOST: 0, OSTs: []uint32{0, 1, 2, 3, 4, 5}, ECData: 4, ECParity: 2}
	file := inodeV3{Attr: attrV3{FID: fileFID, Mode: sIFREG | 0o640, Nlink: 1, Uid: 7, Size: 4321, Layout: lay}}
	dir := inodeV3{Attr: attrV3{FID: dirFID, Mode: sIFDIR | 0o2775, Nlink: 2}, Parent: proto.RootFID,
		DefLayout: lay, DefDir: DirLayout{Set: true, Index: 1, Count: 2}}
	lmv := []byte("an xattr value, not an inode")
	rec := dtx.Record{ID: dtx.OpID{Coord: 0, Epoch: 1, Seq: 1}, Op: "mkdir_striped", Updates: []dtx.Update{
		{Kind: dtx.CreateInode, MDT: 1, Inode: wire.Marshal(nil, &dir)},
		{Kind: dtx.SetXattr, MDT: 1, FID: dirFID, Name: proto.LMVXattr, Inode: lmv},
		dtx.Done(0, "client-1", 99, 1),
	}}
	cfg := configV3{FSName: "three", Default: layoutV3{StripeSize: 1 << 20, StripeCount: 1, FirstOST: -1}}
	m := upgradeOld(t, db, 3, rec, cfg, map[proto.FID]inodeV3{fileFID: file, dirFID: dir})
	n, err := m.getInode(fileFID)
	if err != nil || n.Attr.Size != 4321 || n.Attr.Uid != 7 || n.Attr.Layout.String() != lay.current().String() || n.Attr.ACL != "" {
		t.Fatalf("file after upgrade: %+v %v", n, err)
	}
	d, err := m.getInode(dirFID)
	if err != nil || d.Attr.Mode != sIFDIR|0o2775 || d.DefDir != dir.DefDir || !d.DefLayout.IsEC() || d.DefACL != "" {
		t.Fatalf("directory after upgrade: %+v %v", d, err)
	}
	got := storedRecord(t, db, txnKey(rec.ID))
	var inRec inode
	if err := unmarshalInode(got.Updates[0].Inode, &inRec); err != nil || inRec.Attr.FID != dirFID {
		t.Fatalf("inode in an update-log record after upgrade: %+v %v", inRec, err)
	}
	if string(got.Updates[1].Inode) != string(lmv) {
		t.Fatalf("xattr value in an update-log record changed: %q", got.Updates[1].Inode)
	}
	if xid, ok := dtx.DoneXID(got.Updates[2]); !ok || xid != 99 {
		t.Fatalf("client_done in an update-log record changed: %+v", got.Updates[2])
	}
	if c := stored[proto.Config](t, db, keyConfig); c.FSName != "three" {
		t.Fatalf("cluster map after upgrade: %+v", c)
	}
}

// TestUpgradeFromFormat4 writes a database as format 4 code did (layouts
// without components) and checks that the ACLs and layouts survive the
// rewrite and the cluster map is readable after it.
func TestUpgradeFromFormat4(t *testing.T) {
	db := memDB(t, vfs.NewMem())
	defer db.Close()
	fileFID, dirFID := proto.FID{Seq: proto.MDTSeq(0, 2), Oid: 7}, proto.FID{Seq: proto.MDTSeq(0, 2), Oid: 8}
	lay := layoutV3{StripeSize: 1 << 20, StripeCount: 2, FirstOST: 1, OSTs: []uint32{1, 2}}
	file := inodeV4{Attr: attrV4{FID: fileFID, Mode: sIFREG | 0o640, Nlink: 1, Size: 99, Layout: lay, ACL: "file-acl"}}
	dir := inodeV4{Attr: attrV4{FID: dirFID, Mode: sIFDIR | 0o755, Nlink: 2, ACL: "dir-acl"}, Parent: proto.RootFID,
		DefLayout: layoutV3{StripeSize: 65536, StripeCount: 3, FirstOST: -1}, DefACL: "default-acl"}
	rec := dtx.Record{ID: dtx.OpID{Coord: 0, Epoch: 1, Seq: 1}, Op: "mkdir",
		Updates: []dtx.Update{{Kind: dtx.CreateInode, MDT: 1, Inode: wire.Marshal(nil, &dir)}}}
	cfg := configV3{FSName: "four", OSTs: []proto.Target{{Kind: proto.KindOST, Index: 0, Addr: "x"}},
		Default: layoutV3{StripeSize: 4 << 20, StripeCount: 1, FirstOST: -1}}
	m := upgradeOld(t, db, 4, rec, cfg, map[proto.FID]inodeV4{fileFID: file, dirFID: dir})
	n, err := m.getInode(fileFID)
	if err != nil || n.Attr.Size != 99 || n.Attr.ACL != "file-acl" || n.Attr.Layout.String() != lay.current().String() ||
		n.Attr.Layout.IsComposite() {
		t.Fatalf("file after upgrade: %+v %v", n, err)
	}
	d, err := m.getInode(dirFID)
	if err != nil || d.Attr.ACL != "dir-acl" || d.DefACL != "default-acl" || d.DefLayout.StripeCount != 3 {
		t.Fatalf("directory after upgrade: %+v %v", d, err)
	}
	got := storedRecord(t, db, txnKey(rec.ID))
	var inRec inode
	if err := unmarshalInode(got.Updates[0].Inode, &inRec); err != nil || inRec.DefACL != "default-acl" {
		t.Fatalf("inode in an update-log record after upgrade: %+v %v", inRec, err)
	}
	if c := stored[proto.Config](t, db, keyConfig); c.FSName != "four" || c.Default.StripeSize != 4<<20 || len(c.OSTs) != 1 {
		t.Fatalf("cluster map after upgrade: %+v", c)
	}
}

// memDB opens an MDT database on mem, as a test's "disk".
func memDB(t *testing.T, mem vfs.FS) *pebble.DB {
	t.Helper()
	db, err := pebble.Open("/mdt0/db", &pebble.Options{FS: mem, Logger: storeguard.New("test").Logger()})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// storedRecord reads the update-log record at key of db.
func storedRecord(t *testing.T, db *pebble.DB, key []byte) dtx.Record {
	t.Helper()
	v, closer, err := db.Get(key)
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	var rec dtx.Record
	if err := rec.Unmarshal(v); err != nil {
		t.Fatalf("%q: %v", key, err)
	}
	return rec
}

// TestUpgradeFromFormat5 writes a database as format 5 code did (the last
// positional records: composite layouts, ACLs) and checks that the
// components, the ACLs and the update-log record's inode come through
// the move to protocol buffers.
func TestUpgradeFromFormat5(t *testing.T) {
	db := memDB(t, vfs.NewMem())
	defer db.Close()
	fileFID, dirFID := proto.FID{Seq: proto.MDTSeq(0, 2), Oid: 7}, proto.FID{Seq: proto.MDTSeq(0, 2), Oid: 8}
	lay := layoutV5{StripeSize: 65536, StripeCount: 1, FirstOST: -1, Comps: []compV5{
		{Start: 0, End: 1 << 20, StripeSize: 65536, StripeCount: 1, FirstOST: 2, Base: 0, Inst: true},
		{Start: 1 << 20, End: proto.ExtentEOF, StripeSize: 1 << 20, StripeCount: 4, FirstOST: -1, ECData: 2, ECParity: 1, Base: 1}}}
	file := inodeV5{Attr: attrV5{FID: fileFID, Mode: sIFREG | 0o640, Nlink: 1, Uid: 5, Gid: 6, Size: 77777,
		Atime: -5, Mtime: 1 << 62, Ctime: 3, Layout: lay, ACL: "\x02\x00\xff"}}
	dir := inodeV5{Attr: attrV5{FID: dirFID, Mode: sIFDIR | 0o755, Nlink: 2}, Parent: proto.RootFID, Target: "",
		DefLayout: lay, DefDir: DirLayout{Set: true, Index: -1, Count: 2}, DefACL: "default-acl"}
	link := inodeV5{Attr: attrV5{FID: proto.FID{Seq: proto.MDTSeq(0, 2), Oid: 9}, Mode: 0o120777, Nlink: 1}, Target: "a/\xffb"}
	rec := dtx.Record{ID: dtx.OpID{Coord: 0, Epoch: 1, Seq: 1}, Op: "mkdir", Started: 42, Updates: []dtx.Update{
		{Kind: dtx.CreateInode, MDT: 1, FID: dirFID, Inode: wire.Marshal(nil, &dir)},
		{Kind: dtx.InsertDirent, MDT: 0, Parent: proto.RootFID, Name: "d\xfe", FID: dirFID, Mode: sIFDIR},
		{Kind: dtx.ParentLink, MDT: 0, Parent: proto.RootFID, Delta: -1, Time: 9}}}
	cfg := proto.Config{FSName: "five", Default: lay.current()}
	m := upgradeOld(t, db, 5, rec, cfg, map[proto.FID]inodeV5{fileFID: file, dirFID: dir, link.Attr.FID: link})
	n, err := m.getInode(fileFID)
	if err != nil || n.Attr.Size != 77777 || n.Attr.Uid != 5 || n.Attr.Gid != 6 || n.Attr.Atime != -5 || n.Attr.Mtime != 1<<62 ||
		n.Attr.ACL != file.Attr.ACL || n.Attr.Layout.String() != lay.current().String() || len(n.Attr.Layout.Comps) != 2 ||
		n.Attr.Layout.Comps[1] != lay.current().Comps[1] {
		t.Fatalf("file after upgrade: %+v %v", n, err)
	}
	d, err := m.getInode(dirFID)
	if err != nil || d.DefDir != dir.DefDir || d.DefACL != "default-acl" || len(d.DefLayout.Comps) != 2 || d.Parent != proto.RootFID {
		t.Fatalf("directory after upgrade: %+v %v", d, err)
	}
	if l, err := m.getInode(link.Attr.FID); err != nil || l.Target != link.Target {
		t.Fatalf("symlink after upgrade: %+v %v", l, err)
	}
	got := storedRecord(t, db, txnKey(rec.ID))
	var inRec inode
	if err := unmarshalInode(got.Updates[0].Inode, &inRec); err != nil || inRec.DefACL != "default-acl" || len(inRec.DefLayout.Comps) != 2 {
		t.Fatalf("inode in an update-log record after upgrade: %+v %v", inRec, err)
	}
	got.Updates[0].Inode, rec.Updates[0].Inode = nil, nil
	if !reflect.DeepEqual(got, rec) {
		t.Fatalf("update-log record after upgrade:\n got %+v\nwant %+v", got, rec)
	}
	if c := stored[proto.Config](t, db, keyConfig); c.FSName != "five" || len(c.Default.Comps) != 2 {
		t.Fatalf("cluster map after upgrade: %+v", c)
	}
}

// stored reads the record at key of db into a value of type T.
func stored[T any](t *testing.T, db *pebble.DB, key []byte) T {
	t.Helper()
	var out T
	v, closer, err := db.Get(key)
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	if err := wire.Unmarshal(v, &out); err != nil {
		t.Fatalf("%q: %v", key, err)
	}
	return out
}

// upgradeOld stores what format's code stored (0: format 2, which had no
// marker): inodes in their old form, a directory entry, an update-log
// record and a cluster map; then opens the upgrade twice (the second
// finds the marker) and checks the entry.
func upgradeOld[I, C any](t *testing.T, db *pebble.DB, format uint32, rec dtx.Record, cfg C, inodes map[proto.FID]I) *store {
	t.Helper()
	b := db.NewBatch()
	for fid, n := range inodes {
		b.Set(inodeKey(fid), wire.Marshal(nil, &n), nil)
	}
	entry := direntV5{FID: proto.FID{Seq: proto.MDTSeq(0, 2), Oid: 7}, Mode: sIFREG}
	b.Set(direntKey(proto.RootFID, "old-entry"), wire.Marshal(nil, &entry), nil)
	b.Set(txnKey(rec.ID), wire.Marshal(nil, &rec), nil) // by reflection: the positional bytes of formats 2 to 5
	b.Set(keyConfig, wire.Marshal(nil, &cfg), nil)
	if format != 0 {
		b.Set(keyFormat, encode(&struct{ Format uint32 }{format}), nil)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	m := &store{db: db, guard: storeguard.New("mdt0")}
	for pass := 0; pass < 2; pass++ {
		if err := m.upgradeFormat(); err != nil {
			t.Fatal(err)
		}
	}
	if d, err := m.getDirent(proto.RootFID, "old-entry"); err != nil || d.FID != entry.FID || d.Mode != entry.Mode {
		t.Fatalf("directory entry after upgrade: %+v %v", d, err)
	}
	return m
}
