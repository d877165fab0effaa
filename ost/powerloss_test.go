package ost

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"

	"github.com/stripefs/stripefs/proto"
)

// TestIndexPowerLoss runs random writes, truncates, destroys and syncs
// from two clients (two owners), cuts the power of the OST's index at a
// random point (vfs.NewCrashableMem: its unsynced Pebble data is lost,
// in part or whole), restarts the OST and checks that the accounting
// agrees with the object files: every object's size and blocks, the
// space used, each owner's usage, and grants that, with what is used,
// never pass the capacity. The object files are on the real disk and
// keep every write: what is tested is the index's recovery from them.
// Seeds: STRIPEFS_CRASH_SEEDS (default 100).
func TestIndexPowerLoss(t *testing.T) {
	seeds := 100
	if s, err := strconv.Atoi(os.Getenv("STRIPEFS_CRASH_SEEDS")); err == nil {
		seeds = s
	}
	for seed := 1; seed <= seeds; seed++ {
		if !t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { indexPowerLoss(t, uint64(seed)) }) {
			t.Fatalf("failed at seed %d (rerun: -run %s/seed%d)", seed, t.Name(), seed)
		}
	}
}

func indexPowerLoss(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	const capacity = 8 << 20
	mem := vfs.NewCrashableMem()
	to := startOST(t, Config{Index: 0, Capacity: capacity, IndexFS: mem})
	owners := []proto.Owner{{Uid: 1001, Gid: 1001}, {Uid: 1002, Gid: 1002}}
	clients := []*client{to.client(11, owners[0]), to.client(12, owners[1])}
	for _, c := range clients {
		c.want = 1 << 20
	}
	ownerOf := func(oid uint32) int { return int(oid % 2) } // object → owner
	for op, n := 0, 10+rng.IntN(60); op < n; op++ {
		oid := uint32(1 + rng.IntN(6))
		c := clients[ownerOf(oid)]
		switch r := rng.IntN(10); {
		case r < 6:
			off := uint64(rng.IntN(16)) * 64 << 10
			_ = c.write(obj(oid), off, pattern(1+rng.IntN(256<<10), byte(op))) // ENOSPC is fine
		case r < 7:
			_ = c.call(proto.OPunch, &proto.OPunchReq{Obj: obj(oid), Size: uint64(rng.IntN(512 << 10))}, &proto.Empty{})
		case r < 8:
			_ = c.call(proto.ODestroy, &proto.ODestroyReq{Obj: obj(oid)}, &proto.Empty{})
		default:
			_ = c.call(proto.OSync, &proto.OSyncReq{Objs: []proto.ObjID{obj(oid)}}, &proto.Empty{})
		}
		if rng.IntN(6) == 0 {
			to.o.idx.sync() // the index's group commit (every 100 ms) comes now
		}
	}
	// Power off the index: what it had not synced is lost (all, some
	// or none of it), the object files stay as written.
	crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(3) * 50, RNG: rand.New(rand.NewPCG(seed, 8))})
	to.o.Close()
	to.cfg.IndexFS = crashed
	to.open()
	clients = []*client{to.client(11, owners[0]), to.client(12, owners[1])} // the same clients, at the new address

	var used uint64
	usage := map[uint32]uint64{}
	err := filepath.WalkDir(to.o.dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		id, ok := parseObjName(d.Name())
		if !ok {
			return nil
		}
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			return err
		}
		b := uint64(st.Blocks) * 512
		used += b
		usage[owners[ownerOf(id.FID.Oid)].Uid] += b
		var g proto.OGetattrReply
		if err := clients[0].call(proto.OGetattr, &proto.OGetattrReq{Obj: id}, &g); err != nil || !g.Exists || g.Size != uint64(st.Size) {
			t.Errorf("object %v after the crash: %+v %v, its file has %d bytes", id, g, err, st.Size)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sn := to.o.space.snapshot()
	if sn.used != used {
		t.Errorf("after the crash the OST counts %d bytes used, its object files hold %d", sn.used, used)
	}
	for _, ow := range owners {
		k := proto.QuotaKey{Type: proto.QuotaUser, ID: ow.Uid}
		if got := to.o.space.usageOf(k); got != usage[ow.Uid] {
			t.Errorf("uid %d: %d bytes counted, its objects hold %d", ow.Uid, got, usage[ow.Uid])
		}
	}
	if sn.used+sn.granted > capacity+uint64(len(clients))*fsBlock(t, to.o.dir) {
		t.Errorf("after the crash: %d used + %d granted of a %d capacity", sn.used, sn.granted, capacity)
	}
	// The OST still works: a client writes and reads back.
	data := pattern(64<<10, 9)
	if err := clients[1].write(obj(99), 0, data); err != nil {
		t.Fatalf("write after the crash: %v", err)
	}
	if got := clients[1].read(obj(99), 0, len(data)); string(got) != string(data) {
		t.Fatal("read after the crash differs")
	}
}
