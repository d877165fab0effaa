package ost

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
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
	for seed := 1; seed <= crashSeeds(100); seed++ {
		if !t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { indexPowerLoss(t, uint64(seed)) }) {
			t.Fatalf("failed at seed %d (rerun: -run %s/seed%d)", seed, t.Name(), seed)
		}
	}
}

// crashSeeds is how many seeds a power-loss test runs: STRIPEFS_CRASH_SEEDS,
// or def.
func crashSeeds(def int) int {
	if s, err := strconv.Atoi(os.Getenv("STRIPEFS_CRASH_SEEDS")); err == nil {
		return s
	}
	return def
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

	checkAccounting(t, "after the crash", to.o, func(id proto.ObjID) proto.Owner { return owners[ownerOf(id.FID.Oid)] })
	sn := to.o.space.snapshot()
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

// TestObjectPowerLoss cuts the power of the object files and of the index
// at once. Two clients (two owners) write, rewrite, punch, destroy and
// sync objects at random, writes NoCache or not, with the object files'
// descriptors kept open or closed between a write and its sync; then the
// object files lose what they had not synced (crashFS: all, some or none
// of it), the index likewise (vfs.NewCrashableMem), and the OST restarts
// on what is left. Twice per seed, the second time on the first crash's
// remains. After each restart:
//
//   - every byte a successful OSync covered and that nothing changed
//     since reads back as synced, and so does the size when nothing
//     changed it;
//   - the index agrees with the object files, as its reconcile must make
//     it: each file's record (blocks, size, the owner that wrote it), no
//     record without a file, the space used and each owner's usage;
//   - the OST never promises or allocates space it does not have: what is
//     used and granted stays within the capacity, before the crashes as
//     after them (where a crash that undid destroys or punches may leave
//     more used than that: then nothing is granted).
//
// Seeds: STRIPEFS_CRASH_SEEDS (default 100; 25 under the race detector,
// which makes a seed five times dearer and finds nothing more in the
// later ones: the test is sequential).
func TestObjectPowerLoss(t *testing.T) {
	// A hundred seeds in make test, which runs them under the race
	// detector (about 25 s; 5 s without it).
	var inline inlineCounts
	for seed := 1; seed <= crashSeeds(100); seed++ {
		if !t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { objectPowerLoss(t, uint64(seed), &inline) }) {
			t.Fatalf("failed at seed %d (rerun: -run %s/seed%d)", seed, t.Name(), seed)
		}
	}
	if crashSeeds(100) >= 10 && (inline.writes == 0 || inline.spills == 0) {
		t.Fatalf("the inline seeds made %d inline writes and %d spills: the inline paths went untested", inline.writes, inline.spills)
	}
	t.Logf("inline seeds: %d inline writes, %d spills", inline.writes, inline.spills)
}

// inlineCounts sums what the OSTs of a power-loss run did inline.
type inlineCounts struct{ writes, spills int64 }

func (c *inlineCounts) add(o *OST) {
	c.writes += o.ctr.inlineWrites.Load()
	c.spills += o.ctr.spills.Load()
}

func objectPowerLoss(t *testing.T, seed uint64, inline *inlineCounts) {
	rng := rand.New(rand.NewPCG(seed, 17))
	capacity := uint64(8 << 20)
	if rng.IntN(2) == 0 {
		capacity = 3 << 20 // full, and writes refused, within a few operations
	}
	mem := vfs.NewCrashableMem()
	cfs := newCrashFS()
	cfg := Config{Index: 0, Capacity: capacity, IndexFS: mem, ObjectFS: cfs}
	if rng.IntN(2) == 0 {
		cfg.MaxOpenFiles = 2 // an object's sync often opens it anew
	}
	if seed%2 == 0 {
		// Objects inline while below 64 KiB, and spilled to files by the
		// writes and punches past it (inline.go).
		cfg.InlineMax = 64 << 10
	}
	to := startOST(t, cfg)
	owners := []proto.Owner{{Uid: 1001, Gid: 1001}, {Uid: 1002, Gid: 1002}}
	ownerOf := func(oid uint32) int { return int(oid % 2) } // object → owner
	var clients []*client
	connect := func() {
		clients = []*client{to.client(11, owners[0]), to.client(12, owners[1])}
		for _, c := range clients {
			c.want = 1 << 20
		}
	}
	connect()
	// An object's extent-tree block is allocated beyond the data it was
	// admitted for (see TestGrantsNeverOverpromise).
	const objects = 6
	slack := objects * fsBlock(t, to.o.dir)
	// ceiling is the most the OST may hold: the capacity, or after a
	// crash what the crash left, which can be more. The OST makes neither
	// a destroy nor a punch durable, so a crash can give their blocks back
	// after the space they freed went to other writes (a soft cap only: a
	// disk does not reuse freed blocks before its journal commits the
	// free). Past the capacity it must then allocate and grant nothing
	// until it is back under.
	ceiling := capacity + slack
	withinCapacity := func(when string) {
		t.Helper()
		sn := to.o.space.snapshot()
		if sn.used > ceiling || sn.granted+sn.pending > sub(ceiling, sn.used) {
			t.Fatalf("%s: %d used + %d granted + %d pending of a %d capacity (%d allowed)", when, sn.used, sn.granted, sn.pending, capacity, ceiling)
		}
		ceiling = max(capacity+slack, min(ceiling, sn.used))
	}
	model := map[uint32]*objModel{}
	for oid := uint32(1); oid <= objects; oid++ {
		model[oid] = &objModel{}
	}
	// Writes are slices of random bytes: a byte written to the wrong
	// place never reads back as right (pattern repeats every 256 bytes,
	// and a page shifted by whole pages would pass).
	noise := make([]byte, 2<<20)
	rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)}).Read(noise)
	for round := 1; round <= 2; round++ {
		for op, n := 0, 10+rng.IntN(50); op < n; op++ {
			oid := uint32(1 + rng.IntN(objects))
			c, m := clients[ownerOf(oid)], model[oid]
			// Half the operations of an inline run stay below InlineMax.
			small := cfg.InlineMax > 0 && op%2 == 0
			var err error
			switch r := rng.IntN(10); {
			case r < 5:
				off := rng.IntN(12) * 64 << 10
				size := 4096 * (1 + rng.IntN(48)) // aligned: NoCache goes O_DIRECT
				if rng.IntN(2) == 0 {
					off += rng.IntN(8192)
					size = 1 + rng.IntN(192<<10)
				}
				if small {
					off, size = off/16, max(size/8, 1)
				}
				start := rng.IntN(len(noise) - size)
				data := noise[start : start+size]
				c.noCache = rng.IntN(3) == 0
				switch err = c.write(obj(oid), uint64(off), data); {
				case err == nil:
					m.write(off, data)
				case errors.Is(err, syscall.ENOSPC):
					err = nil // refused before a byte was written
				}
			case r < 6:
				size := rng.IntN(900 << 10)
				if small {
					size /= 16
				}
				if err = c.call(proto.OPunch, &proto.OPunchReq{Obj: obj(oid), Size: uint64(size)}, &proto.Empty{}); err == nil {
					m.punch(size)
				}
			case r < 7:
				if err = c.call(proto.ODestroy, &proto.ODestroyReq{Obj: obj(oid)}, &proto.Empty{}); err == nil {
					*m = objModel{}
				}
			default:
				objs := []proto.ObjID{obj(oid)}
				other := uint32(1 + rng.IntN(objects))
				if rng.IntN(3) == 0 && other != oid {
					objs = append(objs, obj(other))
				}
				if err = c.call(proto.OSync, &proto.OSyncReq{Objs: objs}, &proto.Empty{}); err == nil {
					for _, id := range objs {
						model[id.FID.Oid].sync()
					}
				}
			}
			if err != nil {
				t.Fatalf("round %d, operation %d on object %d: %v", round, op, oid, err)
			}
			if rng.IntN(6) == 0 {
				to.o.idx.sync() // the index's group commit (every 100 ms) comes now
			}
			withinCapacity(fmt.Sprintf("round %d, operation %d", round, op))
		}

		// Power off: the index and the object files lose what they had
		// not synced (all, some or none of it), each in its own way.
		crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(3) * 50, RNG: rand.New(rand.NewPCG(seed, uint64(100+round)))})
		keep := []float64{0, 0, 0.5, 1}[rng.IntN(4)]
		inline.add(to.o)
		to.o.Close()
		to.o = nil
		must(t, cfs.Crash(rand.New(rand.NewPCG(seed, uint64(200+round))), keep))
		mem, to.cfg.IndexFS = crashed, crashed
		to.open()
		connect() // the same clients, at the new address

		where := fmt.Sprintf("after crash %d (objects keeping %v of what was unsynced)", round, keep)
		for oid := uint32(1); oid <= objects; oid++ {
			m := model[oid]
			exists, got := readObject(t, clients[0], obj(oid))
			m.check(t, fmt.Sprintf("%s: object %d", where, oid), got)
			// What the crash left is on the disk, and all of it durable:
			// the next round starts from it.
			*m = objModel{}
			if exists {
				m.write(0, got)
				m.sync()
			}
		}
		checkAccounting(t, where, to.o, func(id proto.ObjID) proto.Owner { return owners[ownerOf(id.FID.Oid)] })
		ceiling = max(capacity+slack, to.o.space.snapshot().used)
		withinCapacity(where)
	}
	// The OST still works: a client writes and reads back.
	data := pattern(64<<10, 9)
	clients[1].noCache = false
	if err := clients[1].write(obj(99), 0, data); err != nil && !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write after the crash: %v", err)
	} else if err == nil {
		if got := clients[1].read(obj(99), 0, len(data)); !bytes.Equal(got, data) {
			t.Fatal("read after the crash differs")
		}
	}
}

// objModel is what a test knows of an object: what a read returns now,
// and what the last OSync of it made durable.
type objModel struct {
	exists bool
	cur    []byte
	// synced is nil when there is no promise (never synced, or destroyed
	// since). It may share cur's array until cur changes.
	synced    []byte
	shared    bool
	dirty     [][2]int // ranges that may differ from synced
	sizeDirty bool     // the size changed since the sync
}

// changed notes that [lo, hi) may differ from what was synced.
func (m *objModel) changed(lo, hi int) {
	if lo < hi {
		m.dirty = append(m.dirty, [2]int{lo, hi})
	}
	if m.shared {
		m.cur, m.shared = bytes.Clone(m.cur), false
	}
}

func (m *objModel) write(off int, b []byte) {
	m.exists = true
	end := off + len(b)
	m.changed(off, end)
	if end > len(m.cur) {
		m.changed(len(m.cur), end)
		m.sizeDirty = true
		m.cur = append(m.cur, make([]byte, end-len(m.cur))...)
	}
	copy(m.cur[off:], b)
}

// punch is OPunch: truncate, or create when the object is missing and
// the size is not 0.
func (m *objModel) punch(size int) {
	if !m.exists && size == 0 {
		return
	}
	m.exists = true
	if old := len(m.cur); size != old {
		m.changed(min(old, size), max(old, size))
		m.sizeDirty = true
		if size < old {
			m.cur = m.cur[:size]
		} else {
			m.cur = append(m.cur, make([]byte, size-old)...)
		}
	}
}

func (m *objModel) sync() {
	m.synced, m.shared = nil, false
	if m.exists {
		m.synced, m.shared = m.cur[:len(m.cur):len(m.cur)], true
	}
	m.dirty, m.sizeDirty = nil, false
}

// check checks that got, all an object holds, keeps what the last sync
// made durable wherever nothing changed it since, and the size if
// nothing changed that.
func (m *objModel) check(t *testing.T, what string, got []byte) {
	t.Helper()
	if m.synced == nil {
		return
	}
	if !m.sizeDirty && len(got) != len(m.synced) {
		t.Errorf("%s has %d bytes, synced with %d and not resized since", what, len(got), len(m.synced))
	}
	// The clean ranges are the gaps between the dirty ones.
	slices.SortFunc(m.dirty, func(a, b [2]int) int { return a[0] - b[0] })
	lo := 0
	for _, r := range append(m.dirty, [2]int{len(m.synced), len(m.synced)}) {
		if hi := min(r[0], len(m.synced)); lo < hi {
			if hi > len(got) || !bytes.Equal(got[lo:hi], m.synced[lo:hi]) {
				bad := lo
				for bad < min(hi, len(got)) && got[bad] == m.synced[bad] {
					bad++
				}
				t.Errorf("%s lost synced bytes: [%d, %d) differs from byte %d on (it holds %d, synced with %d)", what, lo, hi, bad, len(got), len(m.synced))
				return
			}
		}
		lo = max(lo, r[1])
	}
}

// readObject reads all an object holds.
func readObject(t *testing.T, c *client, id proto.ObjID) (exists bool, data []byte) {
	t.Helper()
	var g proto.OGetattrReply
	must(t, c.call(proto.OGetattr, &proto.OGetattrReq{Obj: id}, &g))
	if !g.Exists {
		return false, nil
	}
	if data = c.read(id, 0, int(g.Size)); len(data) != int(g.Size) {
		t.Fatalf("%v: read %d bytes of %d", id, len(data), g.Size)
	}
	return true, data
}

// checkAccounting checks the index against the object files: a record
// for each file with its blocks and size and, once it has blocks, the
// owner that wrote it; no record without a file, unless the object is
// inline (and then no file, and its allocation that of its bytes); the
// space used and each owner's usage their sums.
func checkAccounting(t *testing.T, where string, o *OST, ownerOf func(proto.ObjID) proto.Owner) {
	t.Helper()
	var used uint64
	usage := map[uint32]uint64{}
	files := map[proto.ObjID]bool{}
	err := filepath.WalkDir(o.dir, func(p string, d os.DirEntry, err error) error {
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
		files[id] = true
		b := uint64(st.Blocks) * 512
		used += b
		usage[ownerOf(id).Uid] += b
		rec, had, err := o.idx.object(id)
		switch {
		case err != nil:
			return err
		case !had:
			t.Errorf("%s: object %v (%d bytes, %d allocated) has no record", where, id, st.Size, b)
		case rec.Bytes != b || rec.Size != uint64(st.Size):
			t.Errorf("%s: object %v: record of %d bytes, %d allocated; the file has %d, %d", where, id, rec.Size, rec.Bytes, st.Size, b)
		case b > 0 && rec.Owner != ownerOf(id):
			t.Errorf("%s: object %v: owner %+v, written by %+v", where, id, rec.Owner, ownerOf(id))
		}
		return nil
	})
	must(t, err)
	must(t, o.idx.scan(func(id proto.ObjID, r objRecord) {
		switch {
		case r.Inline && files[id]:
			t.Errorf("%s: inline object %v has a file too", where, id)
		case r.Inline:
			data, err := o.idx.inlineBytes(id)
			must(t, err)
			if r.Bytes != o.inlineAlloc(len(data)) || r.Size < uint64(len(data)) || r.Size > uint64(o.cfg.InlineMax) {
				t.Errorf("%s: inline object %v: record of %d bytes, %d allocated, holding %d", where, id, r.Size, r.Bytes, len(data))
			}
			if r.Bytes > 0 && r.Owner != ownerOf(id) {
				t.Errorf("%s: inline object %v: owner %+v, written by %+v", where, id, r.Owner, ownerOf(id))
			}
			used += r.Bytes
			usage[ownerOf(id).Uid] += r.Bytes
		case !files[id]:
			t.Errorf("%s: a record for object %v (%d allocated), which has no file", where, id, r.Bytes)
		}
	}, func(uint64, uint64) {}))
	if sn := o.space.snapshot(); sn.used != used {
		t.Errorf("%s: the OST counts %d bytes used, its object files hold %d", where, sn.used, used)
	}
	if ids, err := o.idx.inlineObjects(proto.ObjID{}); err != nil || int64(len(ids)) != o.space.snapshot().inline {
		t.Errorf("%s: the OST counts %d inline objects, its index holds %d (%v)", where, o.space.snapshot().inline, len(ids), err)
	}
	for uid, n := range usage {
		if got := o.space.usageOf(proto.QuotaKey{Type: proto.QuotaUser, ID: uid}); got != n {
			t.Errorf("%s: uid %d: %d bytes counted, its objects hold %d", where, uid, got, n)
		}
	}
	if got := o.space.usageOf(proto.QuotaKey{Type: proto.QuotaUser, ID: 0}); got != usage[0] {
		t.Errorf("%s: root is charged %d bytes, holds %d", where, got, usage[0])
	}
}
