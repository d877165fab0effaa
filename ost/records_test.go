package ost

import (
	"log/slog"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/wire"
)

// TestIndexUpgradeFromFormat1 writes an index as format 1 code did
// (positional values, no marker) and checks that opening it rewrites the
// object and grant records, once, and that a newer format is refused.
func TestIndexUpgradeFromFormat1(t *testing.T) {
	mem := vfs.NewMem()
	db, err := pebble.Open("/index", &pebble.Options{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	id := proto.ObjID{FID: proto.FID{Seq: proto.MDTSeq(0, 2), Oid: 9}, Stripe: 3}
	old := objRecordV1{Bytes: 8192, Size: 5000}
	old.Owner.Uid, old.Owner.Gid, old.Owner.Projid = 1000, 100, 7
	b := db.NewBatch()
	b.Set(objKey(id), wire.Marshal(nil, &old), nil)
	b.Set(grantKey(42), wire.Marshal(nil, &grantRecordV1{Grant: 1 << 20}), nil)
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	var logged []string
	logf := func(_ slog.Level, format string, _ ...any) { logged = append(logged, format) }
	for pass := 0; pass < 2; pass++ {
		x, _, err := openIndex("/index", "ost0", mem, false, logf)
		if err != nil {
			t.Fatal(err)
		}
		r, ok, err := x.object(id)
		if err != nil || !ok || r != (objRecord{Owner: proto.Owner{Uid: 1000, Gid: 100, Projid: 7}, Bytes: 8192, Size: 5000}) {
			t.Fatalf("pass %d: object record %+v %v %v", pass, r, ok, err)
		}
		grants := map[uint64]uint64{}
		if err := x.scan(func(proto.ObjID, objRecord) {}, func(c, g uint64) { grants[c] = g }); err != nil || grants[42] != 1<<20 {
			t.Fatalf("pass %d: grants %v %v", pass, grants, err)
		}
		if err := x.close(); err != nil {
			t.Fatal(err)
		}
	}
	if len(logged) != 1 {
		t.Fatalf("upgrade logged %d times, want once: %q", len(logged), logged)
	}

	db, err = pebble.Open("/index", &pebble.Options{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Set(keyFormat, wire.Marshal(nil, &struct{ Format uint32 }{indexFormat + 1}), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if x, _, err := openIndex("/index", "ost0", mem, false, logf); err == nil {
		x.close()
		t.Fatal("an index of a newer format was opened")
	}
}
