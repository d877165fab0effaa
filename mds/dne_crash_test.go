package mds

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/stripefs/stripefs/fsck"
	"github.com/stripefs/stripefs/layout"
	"github.com/stripefs/stripefs/mds/dtx"
	"github.com/stripefs/stripefs/mds/mgs"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
	"github.com/stripefs/stripefs/wire"
)

// pair is two MDTs in this process on crashable in-memory filesystems,
// talking over the in-process transport.
type pair struct {
	t    testing.TB
	name string
	fs   [2]*vfs.MemFS
	mdt  [2]*MDT
	cl   [2]*rpc.Client
	hook [2]*testHooks
	// commit is the MDTs' group commit interval (5 ms unless a test
	// needs changes to stay unsynced longer).
	commit time.Duration
}

func (p *pair) addr(i int) string { return fmt.Sprintf("inproc:%s/mdt%d", p.name, i) }

func (p *pair) open(i int) {
	p.t.Helper()
	l, err := rpc.Listen(p.addr(i))
	if err != nil {
		p.t.Fatal(err)
	}
	p.hook[i] = &testHooks{}
	m, err := Open(Config{Index: i, DataDir: fmt.Sprintf("/mdt%d", i), FS: p.fs[i], MGS: p.addr(0), Addr: p.addr(i),
		CommitInterval: p.commit, TxnAskAfter: time.Nanosecond, hooks: p.hook[i]})
	if err != nil {
		p.t.Fatal(err)
	}
	go m.Serve(l)
	if i > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := mgs.Register(ctx, p.addr(0), proto.Target{Kind: proto.KindMDT, Index: uint32(i), Addr: p.addr(i)}); err != nil {
			p.t.Fatal(err)
		}
	}
	p.mdt[i] = m
	p.cl[i] = rpc.NewClient(p.addr(i), "test")
	p.cl[i].Role = rpc.RoleServer // the test stands in for peers as well as clients
	p.cl[i].RetryFor = 5 * time.Second
}

func (p *pair) close(i int) {
	p.cl[i].Close()
	p.mdt[i].Close()
}

func newPair(t testing.TB, name string) *pair {
	return newPairCommit(t, name, 5*time.Millisecond)
}

func newPairCommit(t testing.TB, name string, commit time.Duration) *pair {
	p := &pair{t: t, name: name, fs: [2]*vfs.MemFS{vfs.NewCrashableMem(), vfs.NewCrashableMem()}, commit: commit}
	p.open(0)
	p.open(1)
	return p
}

// crashAndCheck crashes one or both MDTs at random, lets recovery and the
// sweepers finish, and checks the namespace with the test's fsck and with
// stripefs fsck.
func (p *pair) crashAndCheck(t *testing.T, rng *rand.Rand) (which [2]bool) {
	t.Helper()
	which = [2]bool{rng.IntN(2) == 0, rng.IntN(2) == 0}
	if !which[0] && !which[1] {
		which[rng.IntN(2)] = true
	}
	p.crash(rng, which)
	p.converge()
	if err := p.fsck(); err != nil {
		t.Fatalf("after crashing %v: %v", which, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if rep, err := fsck.Run(ctx, p.addr(0), false); err != nil || len(rep.Findings) > 0 {
		t.Fatalf("after crashing %v: stripefs fsck: %v %v", which, err, rep.Findings)
	}
	return which
}

// crash simulates power loss on the MDTs in which: each keeps only what it
// had synced (plus, at random, some of what it had not), then all restart.
func (p *pair) crash(rng *rand.Rand, which [2]bool) {
	clones := p.fs
	for i := range p.fs {
		if which[i] { // dead at this instant: no more RPCs, no more commits
			p.cl[i].Close()
			p.mdt[i].halt()
			clones[i] = p.fs[i].CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(3) * 40, RNG: rng})
		}
	}
	for i := range p.fs {
		if which[i] {
			p.mdt[i].db.Close()
		} else {
			p.close(i)
		}
	}
	p.fs = clones
	p.open(0)
	p.open(1)
}

func (p *pair) call(i int, method uint16, req, resp any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return p.cl[i].Do(ctx, &rpc.Call{Method: method, Req: req, Resp: resp})
}

// converge waits for every distributed record to be cancelled: recovery
// and the sweepers are done.
func (p *pair) converge() {
	p.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if len(p.mdt[0].records()) == 0 && len(p.mdt[1].records()) == 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	for _, g := range strings.Split(string(buf[:n]), "\n\n") {
		if strings.Contains(g, "sweep") {
			p.t.Log(g)
		}
	}
	p.t.Fatalf("update records never drained: %d on mdt0, %d on mdt1", len(p.mdt[0].records()), len(p.mdt[1].records()))
}

// fsck checks the namespace across both MDTs: every entry names an
// existing inode, every directory but the root is named by exactly one
// entry (no orphan) whose directory its ".." names, every directory's
// nlink is 2 + its subdirectories, and every file's nlink is the number of
// entries naming it.
func (p *pair) fsck() error {
	type dirInfo struct {
		n       *inode
		named   int
		subdirs uint32
	}
	dirs := map[proto.FID]*dirInfo{}
	files := map[proto.FID]*dirInfo{}
	for _, m := range p.mdt {
		it, _ := m.db.NewIter(&pebble.IterOptions{LowerBound: []byte{pInode}, UpperBound: []byte{pInode + 1}})
		for ok := it.First(); ok; ok = it.Next() {
			n := new(inode)
			if err := unmarshalInode(it.Value(), n); err != nil {
				return err
			}
			if n.isDir() {
				dirs[n.Attr.FID] = &dirInfo{n: n}
			} else {
				files[n.Attr.FID] = &dirInfo{n: n}
			}
		}
		it.Close()
	}
	for _, m := range p.mdt {
		it, _ := m.db.NewIter(&pebble.IterOptions{LowerBound: []byte{pDirent}, UpperBound: []byte{pDirent + 1}})
		for ok := it.First(); ok; ok = it.Next() {
			k := it.Key()
			parent, _ := proto.FIDFromKey(k[1:17])
			name := string(k[25:])
			var d dirent
			if err := unmarshalDirent(it.Value(), &d); err != nil {
				return err
			}
			if d.Mode == sIFDIR {
				child := dirs[d.FID]
				if child == nil {
					it.Close()
					return fmt.Errorf("dangling entry %s/%q → %s", parent, name, d.FID)
				}
				child.named++
				want := parent
				if pd := dirs[parent]; pd != nil {
					want = dirParentOf(pd.n) // an entry of a stripe names the master as its parent
				}
				if child.n.Parent != want {
					it.Close()
					return fmt.Errorf("%s is named in %s but its parent says %s", d.FID, parent, child.n.Parent)
				}
				if pd := dirs[parent]; pd != nil {
					pd.subdirs++
				}
			} else if f := files[d.FID]; f == nil {
				it.Close()
				return fmt.Errorf("dangling entry %s/%q → %s", parent, name, d.FID)
			} else {
				f.named++
			}
		}
		it.Close()
	}
	for fid := range dirs {
		if !fid.IsStripedDir() {
			continue
		}
		l, err := p.mdt[fid.MDT()].getLMV(fid)
		if err != nil {
			return fmt.Errorf("striped directory %s: %v", fid, err)
		}
		for i, s := range l.Stripes {
			sd := dirs[s]
			if sd == nil {
				return fmt.Errorf("striped directory %s: stripe %d %s is missing", fid, i, s)
			}
			if sd.n.Parent != fid {
				return fmt.Errorf("stripe %s of %s names %s as its master", s, fid, sd.n.Parent)
			}
			sd.named++
		}
	}
	// Files: every one named (nobody has one open here) as often as its
	// nlink says, wherever its names live.
	for fid, named := range files {
		if named.n.Attr.Nlink != uint32(named.named) {
			return fmt.Errorf("file %s has nlink %d and %d names", fid, named.n.Attr.Nlink, named.named)
		}
	}
	for fid, d := range dirs {
		if fid != proto.RootFID && d.named != 1 {
			return fmt.Errorf("directory %s is named %d times (orphan if 0)", fid, d.named)
		}
		if d.n.Attr.Nlink != 2+d.subdirs {
			return fmt.Errorf("directory %s has nlink %d, want %d", fid, d.n.Attr.Nlink, 2+d.subdirs)
		}
	}
	return nil
}

// mkdirRemote makes /name on MDT1 through MDT0, the coordinator.
func (p *pair) mkdirRemote(name string) proto.AttrReply {
	p.t.Helper()
	var a proto.AttrReply
	if err := p.call(0, proto.MMkdir, &proto.MkdirReq{Parent: proto.RootFID, Name: name, Mode: 0o755, MDT: 1}, &a); err != nil {
		p.t.Fatal(err)
	}
	return a
}

func (p *pair) lookup(parent proto.FID, name string) (proto.FID, error) {
	parent, err := p.route(parent, name)
	if err != nil {
		return proto.FID{}, err
	}
	var r proto.AttrReply
	err = p.call(parent.MDT(), proto.MLookup, &proto.LookupReq{Parent: parent, Name: name}, &r)
	return r.Attr.FID, err
}

// route is what the client does in a striped directory: the stripe the
// name hashes to holds it.
func (p *pair) route(dir proto.FID, name string) (proto.FID, error) {
	if !dir.IsStripedDir() {
		return dir, nil
	}
	var r proto.XattrReply
	if err := p.call(dir.MDT(), proto.MGetxattr, &proto.XattrReq{FID: dir, Name: proto.LMVXattr}, &r); err != nil {
		return proto.FID{}, err
	}
	var l proto.LMV
	if err := wire.Unmarshal(r.Value, &l); err != nil {
		return proto.FID{}, err
	}
	return l.Stripes[layout.DirStripe(name, len(l.Stripes))], nil
}

// TestCrashRecoveryDNE runs random cross-MDT workloads (mkdir, rmdir,
// files created and unlinked, renames of files and directories between
// the MDTs, over existing targets too, hard links whose name and inode
// live on different MDTs), crashes one or both MDTs at a random point
// (power loss: unsynced Pebble data is lost), restarts them and checks: no
// dangling entry, no orphan, right nlink for directories and files, every
// directory's ".." right, and every name acknowledged before the last
// fsync of both MDTs and not touched since still names the same inode.
// Seeds: STRIPEFS_CRASH_SEEDS (default 120).
func TestCrashRecoveryDNE(t *testing.T) { crashSeeds(t, 120, crashRun) }

// crashSeeds runs one crash workload over seeds 1..STRIPEFS_CRASH_SEEDS
// (def when unset, 20 with -short), stopping at the first that fails.
func crashSeeds(t *testing.T, def int, run func(*testing.T, int64)) {
	seeds := def
	if s, err := strconv.Atoi(os.Getenv("STRIPEFS_CRASH_SEEDS")); err == nil {
		seeds = s
	}
	if testing.Short() {
		seeds = 20
	}
	for seed := 1; seed <= seeds; seed++ {
		if !t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { run(t, int64(seed)) }) {
			t.Fatalf("failed at seed %d (rerun: -run %s/seed%d)", seed, t.Name(), seed)
		}
	}
}

// newCrashPair starts the MDT pair of one crash run with the parents of
// everything it makes, durable: the root on mdt0 and a directory on mdt1.
func newCrashPair(t *testing.T, seed int64) (*pair, []proto.FID) {
	p := newPair(t, fmt.Sprintf("crash%d-%d", seed, time.Now().UnixNano()))
	var a proto.AttrReply
	if err := p.call(0, proto.MMkdir, &proto.MkdirReq{Parent: proto.RootFID, Name: "on1", Mode: 0o755, MDT: 1}, &a); err != nil {
		t.Fatal(err)
	}
	p.call(0, proto.MSync, &proto.SyncReq{}, &proto.Empty{})
	p.call(1, proto.MSync, &proto.SyncReq{}, &proto.Empty{})
	return p, []proto.FID{proto.RootFID, a.Attr.FID}
}

func crashRun(t *testing.T, seed int64) {
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	p, parents := newCrashPair(t, seed)
	defer func() { p.close(1); p.close(0) }()

	type key struct {
		parent proto.FID
		name   string
	}
	type entry struct {
		fid proto.FID
		dir bool
	}
	live := map[key]entry{}      // what the MDTs acknowledged
	committed := map[key]entry{} // acknowledged before the last fsync of both
	touched := map[key]bool{}    // names changed since that fsync: either state may survive
	// Every operation's outcome is the model's (live): the errno it must
	// get, or success. Directories made here stay empty (names are only
	// ever made in the two parents), so ENOTEMPTY never is right.
	check := func(op int, what string, want syscall.Errno, err error) bool {
		t.Logf("op %d: %s: %v (model: %v)", op, what, err, want)
		if want == 0 && err != nil || want != 0 && !errors.Is(err, want) {
			t.Fatalf("op %d %s: got %v, the model says %v", op, what, err, errnoName(want))
		}
		return err == nil
	}
	exists := func(k key) syscall.Errno {
		if _, ok := live[k]; ok {
			return syscall.EEXIST
		}
		return 0
	}
	randKey := func() key { return key{parents[rng.IntN(2)], fmt.Sprintf("n%d", rng.IntN(10))} }
	nops := 5 + rng.IntN(40)
	for op := 0; op < nops; op++ {
		k := randKey()
		r := rng.IntN(20)
		switch {
		case r < 4:
			target := int32(rng.IntN(2))
			var ar proto.AttrReply
			err := p.call(k.parent.MDT(), proto.MMkdir, &proto.MkdirReq{Parent: k.parent, Name: k.name, Mode: 0o755, MDT: target}, &ar)
			touched[k] = true
			if check(op, fmt.Sprintf("mkdir %s/%s on mdt%d", k.parent, k.name, target), exists(k), err) {
				live[k] = entry{ar.Attr.FID, true}
			}
		case r < 6:
			var ar proto.AttrReply
			err := p.call(k.parent.MDT(), proto.MCreate, &proto.CreateReq{Parent: k.parent, Name: k.name, Mode: syscall.S_IFIFO | 0o644, Excl: true}, &ar)
			touched[k] = true
			if check(op, fmt.Sprintf("mknod %s/%s", k.parent, k.name), exists(k), err) {
				live[k] = entry{ar.Attr.FID, false}
			}
		case r < 9:
			dir := rng.IntN(2) == 0
			err := p.call(k.parent.MDT(), proto.MUnlink, &proto.UnlinkReq{Parent: k.parent, Name: k.name, Dir: dir}, &proto.UnlinkReply{})
			touched[k] = true
			var want syscall.Errno
			switch e, ok := live[k]; {
			case !ok:
				want = syscall.ENOENT
			case e.dir && !dir:
				want = syscall.EISDIR
			case !e.dir && dir:
				want = syscall.ENOTDIR
			}
			if check(op, fmt.Sprintf("unlink(dir=%v) %s/%s", dir, k.parent, k.name), want, err) {
				delete(live, k)
			}
		case r < 14:
			src, dst := k, randKey()
			var flags uint32
			if rng.IntN(4) == 0 {
				flags = proto.RenameNoReplace
			}
			err := p.call(src.parent.MDT(), proto.MRename, &proto.RenameReq{SrcParent: src.parent, SrcName: src.name,
				DstParent: dst.parent, DstName: dst.name, Flags: flags}, &proto.RenameReply{})
			touched[src], touched[dst] = true, true
			var want syscall.Errno
			se, sok := live[src]
			de, dok := live[dst]
			switch {
			case !sok:
				want = syscall.ENOENT
			case dok && flags&proto.RenameNoReplace != 0:
				want = syscall.EEXIST // even onto itself, as Linux's renameat2
			case src == dst || dok && de == se:
				// The same name, or two links of one file: nothing to do.
			case dok && se.dir && !de.dir:
				want = syscall.ENOTDIR
			case dok && !se.dir && de.dir:
				want = syscall.EISDIR
			}
			if check(op, fmt.Sprintf("rename(%d) %s/%s → %s/%s", flags, src.parent, src.name, dst.parent, dst.name), want, err) {
				if e := live[src]; live[dst] != e {
					live[dst] = e
					delete(live, src)
				}
			}
		case r < 17:
			// A hard link to a random file, in either directory.
			var files []key
			for k, e := range live {
				if !e.dir {
					files = append(files, k)
				}
			}
			if len(files) == 0 {
				continue
			}
			slices.SortFunc(files, func(a, b key) int { return strings.Compare(a.parent.String()+a.name, b.parent.String()+b.name) })
			e := live[files[rng.IntN(len(files))]]
			err := p.call(k.parent.MDT(), proto.MLink, &proto.LinkReq{FID: e.fid, Parent: k.parent, Name: k.name}, &proto.AttrReply{})
			touched[k] = true
			if check(op, fmt.Sprintf("link %s as %s/%s", e.fid, k.parent, k.name), exists(k), err) {
				live[k] = e
			}
		default:
			e0 := p.call(0, proto.MSync, &proto.SyncReq{}, &proto.Empty{})
			e1 := p.call(1, proto.MSync, &proto.SyncReq{}, &proto.Empty{})
			t.Logf("op %d: fsync: %v %v", op, e0, e1)
			committed, touched = map[key]entry{}, map[key]bool{}
			for k, e := range live {
				committed[k] = e
			}
		}
		if rng.IntN(8) == 0 {
			time.Sleep(time.Duration(rng.IntN(15)) * time.Millisecond) // let group commits and sweeps run
		}
	}
	which := p.crashAndCheck(t, rng)
	for k, e := range committed {
		if touched[k] {
			continue // changed after the fsync: either state is allowed
		}
		if fid, err := p.lookup(k.parent, k.name); err != nil || fid != e.fid {
			t.Fatalf("after crashing %v: %s/%s was committed naming %s but names %s: %v", which, k.parent, k.name, e.fid, fid, err)
		}
	}
}

// TestCrashRecoveryStriped runs random cross-MDT mkdir/rmdir workloads
// with directories striped over both MDTs and subdirectories in them, crashes
// one or both MDTs at a random point (power loss: unsynced Pebble data is
// lost), restarts them and checks: no dangling entry, no orphan directory,
// right nlink, and every operation acknowledged before the last fsync of
// both MDTs is still there. Seeds: STRIPEFS_CRASH_SEEDS (default 60).
func TestCrashRecoveryStriped(t *testing.T) { crashSeeds(t, 60, crashRunStriped) }

func crashRunStriped(t *testing.T, seed int64) {
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	p, parents := newCrashPair(t, seed)
	defer func() { p.close(1); p.close(0) }()

	type key struct {
		parent proto.FID
		name   string
	}
	live := map[key]bool{}      // what the MDTs acknowledged
	committed := map[key]bool{} // acknowledged before the last fsync of both
	touched := map[key]bool{}   // names changed since that fsync: either state may survive
	var striped []proto.FID     // striped directories made, live or not
	nops := 5 + rng.IntN(40)
	for op := 0; op < nops; op++ {
		parent := parents[rng.IntN(2)]
		name := fmt.Sprintf("d%d", rng.IntN(12))
		r := rng.IntN(14)
		if r >= 10 && len(striped) > 0 { // a subdirectory of a striped directory, on the stripe its name picks
			parent, name = striped[rng.IntN(len(striped))], fmt.Sprintf("c%d", rng.IntN(6))
		}
		k := key{parent, name}
		if r != 9 {
			touched[k] = true
		}
		switch {
		case r == 4 || r == 5 || r == 10 && len(striped) == 0:
			first := rng.IntN(2)
			v := fmt.Sprintf("name=%s mdt_index=%d mdt_count=2", name, first)
			var a proto.AttrReply
			err := p.call(parent.MDT(), proto.MSetxattr, &proto.XattrReq{FID: parent, Name: MkdirXattr, Value: []byte(v)}, &proto.Empty{})
			if err == nil {
				err = p.call(parent.MDT(), proto.MLookup, &proto.LookupReq{Parent: parent, Name: name}, &a)
			}
			t.Logf("op %d: mkdir -c 2 -i %d %s/%s: %v", op, first, parent, name, err)
			if err == nil {
				live[k] = true
				striped = append(striped, a.Attr.FID)
			} else if !errors.Is(err, syscall.EEXIST) {
				t.Fatalf("op %d mkdir -c 2: %v", op, err)
			}
		case r >= 10 && r < 12:
			holder, err := p.route(parent, name)
			if err == nil {
				err = p.call(holder.MDT(), proto.MMkdir, &proto.MkdirReq{Parent: holder, Name: name, Mode: 0o755, MDT: int32(rng.IntN(2))}, &proto.AttrReply{})
			}
			t.Logf("op %d: mkdir in striped %s/%s: %v", op, parent, name, err)
			if err == nil {
				live[k] = true
			} else if !errors.Is(err, syscall.EEXIST) && !errors.Is(err, syscall.ENOENT) { // ENOENT: the striped directory is gone
				t.Fatalf("op %d mkdir in a striped directory: %v", op, err)
			}
		case r >= 12:
			holder, err := p.route(parent, name)
			if err == nil {
				err = p.call(holder.MDT(), proto.MUnlink, &proto.UnlinkReq{Parent: holder, Name: name, Dir: true}, &proto.UnlinkReply{})
			}
			t.Logf("op %d: rmdir in striped %s/%s: %v", op, parent, name, err)
			if err == nil {
				delete(live, k)
			} else if !errors.Is(err, syscall.ENOENT) {
				t.Fatalf("op %d rmdir in a striped directory: %v", op, err)
			}
		case r < 4:
			target := int32(rng.IntN(2))
			err := p.call(parent.MDT(), proto.MMkdir, &proto.MkdirReq{Parent: parent, Name: name, Mode: 0o755, MDT: target}, &proto.AttrReply{})
			t.Logf("op %d: mkdir %s/%s on mdt%d: %v", op, parent, name, target, err)
			if err == nil {
				live[k] = true
			} else if !errors.Is(err, syscall.EEXIST) {
				t.Fatalf("op %d mkdir: %v", op, err)
			}
		case r < 9:
			err := p.call(parent.MDT(), proto.MUnlink, &proto.UnlinkReq{Parent: parent, Name: name, Dir: true}, &proto.UnlinkReply{})
			t.Logf("op %d: rmdir %s/%s: %v", op, parent, name, err)
			if err == nil {
				delete(live, k)
			} else if !errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.ENOTEMPTY) { // a striped one with subdirectories
				t.Fatalf("op %d rmdir: %v", op, err)
			}
		default:
			e0 := p.call(0, proto.MSync, &proto.SyncReq{}, &proto.Empty{})
			e1 := p.call(1, proto.MSync, &proto.SyncReq{}, &proto.Empty{})
			t.Logf("op %d: fsync: %v %v", op, e0, e1)
			committed, touched = map[key]bool{}, map[key]bool{}
			for k := range live {
				committed[k] = true
			}
		}
		if rng.IntN(8) == 0 {
			time.Sleep(time.Duration(rng.IntN(15)) * time.Millisecond) // let group commits and sweeps run
		}
	}
	which := p.crashAndCheck(t, rng)
	for k := range committed {
		if touched[k] {
			continue // changed after the fsync: either state is allowed
		}
		if _, err := p.lookup(k.parent, k.name); err != nil {
			t.Fatalf("after crashing %v: %s/%s was committed but is gone: %v", which, k.parent, k.name, err)
		}
	}
}

// TestRemoteSyncTunable checks remote_sync=1 takes the synchronous path
// (counted) and that it is off by default.
func TestRemoteSyncTunable(t *testing.T) {
	p := newPair(t, fmt.Sprintf("rsync-%d", time.Now().UnixNano()))
	defer func() { p.close(1); p.close(0) }()
	mk := func(name string) {
		if err := p.call(0, proto.MMkdir, &proto.MkdirReq{Parent: proto.RootFID, Name: name, Mode: 0o755, MDT: 1}, &proto.AttrReply{}); err != nil {
			t.Fatal(err)
		}
	}
	mk("a")
	p.converge() // its background push lands before remote_sync changes
	if n := p.mdt[0].ctr.remoteSyncCommits.Load() + p.mdt[1].ctr.remoteSyncCommits.Load(); n != 0 {
		t.Fatalf("%d synchronous commits with remote_sync off", n)
	}
	for i := range p.mdt {
		if err := p.call(i, proto.MSetParam, &proto.SetParamReq{Name: "mdt.remote_sync", Value: "1"}, &proto.Empty{}); err != nil {
			t.Fatal(err)
		}
	}
	mk("b")
	if c0, c1 := p.mdt[0].ctr.remoteSyncCommits.Load(), p.mdt[1].ctr.remoteSyncCommits.Load(); c0 != 1 || c1 != 1 {
		t.Fatalf("remote_sync=1: synchronous commits %d on the coordinator and %d on the participant, want 1 and 1", c0, c1)
	}
	if err := p.call(0, proto.MSetParam, &proto.SetParamReq{Name: "mdt.remote_sync", Value: "maybe"}, &proto.Empty{}); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("bad value: %v", err)
	}
}

// TestSlowCoordinatorIsNotRedone holds a remote_sync mkdir's
// coordinator after its participant applied: the participant's sweeper,
// asking at once (TxnAskAfter is 1ns here), must not have the coordinator
// redo a part it is still about to commit itself.
func TestSlowCoordinatorIsNotRedone(t *testing.T) {
	p := newPair(t, fmt.Sprintf("slowcoord-%d", time.Now().UnixNano()))
	defer func() { p.close(1); p.close(0) }()
	for i := range p.mdt {
		p.mdt[i].remoteSync.Store(true)
	}
	gate := make(chan struct{})
	p.hook[0].ownPart.Store(&gate)
	done := make(chan error, 1)
	go func() {
		done <- p.call(0, proto.MMkdir, &proto.MkdirReq{Parent: proto.RootFID, Name: "d", Mode: 0o755, MDT: 1}, &proto.AttrReply{})
	}()
	deadline := time.Now().Add(5 * time.Second)
	for len(p.mdt[1].records()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the participant never applied its part")
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // several sweeps of the participant
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := p.mdt[0].ctr.dtxRedone.Load(); n != 0 {
		t.Fatalf("the coordinator redid %d parts of its own running operation", n)
	}
	if n := p.mdt[0].ctr.remoteSyncCommits.Load(); n != 1 {
		t.Fatalf("coordinator's synchronous commits: %d, want 1", n)
	}
	if _, err := p.lookup(proto.RootFID, "d"); err != nil {
		t.Fatal(err)
	}
}

// TestFsckRepairs breaks the namespace behind the MDTs' backs (an entry
// to nowhere, an inode nobody names, a wrong link count) and checks that
// stripefs fsck finds each and --repair leaves a clean filesystem.
func TestFsckRepairs(t *testing.T) {
	p := newPair(t, fmt.Sprintf("fsck-%d", time.Now().UnixNano()))
	defer func() { p.close(1); p.close(0) }()
	p.mkdirRemote("d")
	m0, m1 := p.mdt[0], p.mdt[1]
	b := m0.db.NewBatch()
	ghost := proto.FID{Seq: proto.MDTSeq(0, 2), Oid: 999}
	b.Set(direntKey(proto.RootFID, "ghost"), (&dirent{FID: ghost, Mode: sIFREG}).marshal(), nil)
	root, _ := m0.getInode(proto.RootFID)
	root.Attr.Nlink = 7
	m0.putInode(b, root)
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	b = m1.db.NewBatch()
	lost := &inode{Attr: proto.Attr{FID: proto.FID{Seq: proto.MDTSeq(1, 2), Oid: 4242}, Mode: sIFREG | 0o644, Nlink: 1}}
	m1.putInode(b, lost)
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rep, err := fsck.Run(ctx, p.addr(0), false)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, f := range rep.Findings {
		kinds[f.Kind]++
	}
	if kinds[fsck.Dangling] != 1 || kinds[fsck.Orphan] != 1 || kinds[fsck.WrongNlink] != 1 {
		t.Fatalf("findings %v", rep.Findings)
	}
	if _, err := fsck.Run(ctx, p.addr(0), true); err != nil {
		t.Fatal(err)
	}
	if rep, err := fsck.Run(ctx, p.addr(0), false); err != nil || len(rep.Findings) != 0 {
		t.Fatalf("after repair: %v %v", err, rep.Findings)
	}
	if err := p.fsck(); err != nil {
		t.Fatal(err)
	}
}

// TestRemoteMkdirBeforePush checks the remote mkdir that replies before
// its participant has the directory: requests that reach the participant
// first pull the record from the coordinator, and the push arriving later
// changes nothing.
func TestRemoteMkdirBeforePush(t *testing.T) {
	p := newPair(t, fmt.Sprintf("pull-%d", time.Now().UnixNano()))
	defer func() { p.close(1); p.close(0) }()
	gate := make(chan struct{})
	p.hook[0].push.Store(&gate)
	var a proto.AttrReply
	if err := p.call(0, proto.MMkdir, &proto.MkdirReq{Parent: proto.RootFID, Name: "a", Mode: 0o755, MDT: 1}, &a); err != nil {
		t.Fatal(err)
	}
	if a.Attr.FID.MDT() != 1 {
		t.Fatalf("mkdir -i 1 made %s", a.Attr.FID)
	}
	if _, err := p.mdt[1].getInode(a.Attr.FID); err == nil {
		t.Fatal("mdt1 has the directory although its push is held")
	}
	var got proto.AttrReply
	if err := p.call(1, proto.MGetattr, &proto.GetattrReq{FID: a.Attr.FID}, &got); err != nil {
		t.Fatalf("getattr on mdt1 before the push: %v", err)
	}
	if got.Attr.FID != a.Attr.FID || got.Attr.Nlink != 2 || got.Attr.Mode != a.Attr.Mode {
		t.Fatalf("getattr on mdt1: %+v, mkdir said %+v", got.Attr, a.Attr)
	}
	if err := p.call(1, proto.MMkdir, &proto.MkdirReq{Parent: a.Attr.FID, Name: "b", Mode: 0o755, MDT: -1}, &proto.AttrReply{}); err != nil {
		t.Fatalf("mkdir inside it: %v", err)
	}
	if n := p.mdt[1].grants.pulls.Load(); n != 1 {
		t.Fatalf("%d pulls, want 1", n)
	}
	// The root is durable: that pull did not sync the coordinator. A
	// parent made since its last WAL sync must be durable before mdt1
	// holds a record that names it (deps.go): that pull syncs, once.
	if n := p.mdt[0].ctr.dtxDepSyncs.Load(); n != 0 {
		t.Fatalf("a pull under the root synced mdt0 %d times", n)
	}
	var fresh, c proto.AttrReply
	p.hook[0].holdSyncs.Store(true) // "fresh" stays not durable
	if err := p.call(0, proto.MMkdir, &proto.MkdirReq{Parent: proto.RootFID, Name: "fresh", Mode: 0o755, MDT: 0}, &fresh); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if err := p.call(0, proto.MMkdir, &proto.MkdirReq{Parent: fresh.Attr.FID, Name: fmt.Sprint("c", i), Mode: 0o755, MDT: 1}, &c); err != nil {
			t.Fatal(err)
		}
		if err := p.call(1, proto.MGetattr, &proto.GetattrReq{FID: c.Attr.FID}, &got); err != nil {
			t.Fatalf("getattr on mdt1 of a directory under a fresh parent: %v", err)
		}
	}
	if n := p.mdt[0].ctr.dtxDepSyncs.Load(); n != 1 {
		t.Fatalf("two pulls under a parent made a moment ago synced mdt0 %d times, want 1", n)
	}
	p.hook[0].holdSyncs.Store(false)
	// A FID nobody was granted is not pulled for.
	stray := proto.FID{Seq: a.Attr.FID.Seq, Oid: a.Attr.FID.Oid + fidBlock(proto.FIDPlain) + 100}
	if err := p.call(1, proto.MGetattr, &proto.GetattrReq{FID: stray}, &got); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("getattr of a FID never used: %v", err)
	}
	close(gate)
	p.converge()
	if err := p.fsck(); err != nil {
		t.Fatal(err)
	}
	if n := p.mdt[1].grants.pulls.Load(); n != 3 {
		t.Fatalf("%d pulls after the push, want 3", n)
	}
}

// TestFsckStripes: a striped directory with entries on both stripes is
// clean to fsck (its stripes are named by its layout, not by entries);
// losing a stripe is reported as such.
func TestFsckStripes(t *testing.T) {
	p := newPair(t, fmt.Sprintf("fsckstripes-%d", time.Now().UnixNano()))
	defer func() { p.close(1); p.close(0) }()
	v := []byte("name=s mdt_index=1 mdt_count=2")
	if err := p.call(0, proto.MSetxattr, &proto.XattrReq{FID: proto.RootFID, Name: MkdirXattr, Value: v}, &proto.Empty{}); err != nil {
		t.Fatal(err)
	}
	s, err := p.lookup(proto.RootFID, "s")
	if err != nil || !s.IsStripedDir() || s.MDT() != 1 {
		t.Fatalf("striped directory %s: %v", s, err)
	}
	for i := 0; i < 8; i++ {
		name := fmt.Sprint("sub", i)
		holder, err := p.route(s, name)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.call(holder.MDT(), proto.MMkdir, &proto.MkdirReq{Parent: holder, Name: name, Mode: 0o755, MDT: -1}, &proto.AttrReply{}); err != nil {
			t.Fatal(err)
		}
		// The wrong stripe refuses the name: only a confused client sends it there.
		l, _ := p.mdt[1].getLMV(s)
		other := l.Stripes[1-layout.DirStripe(name, 2)]
		if err := p.call(other.MDT(), proto.MMkdir, &proto.MkdirReq{Parent: other, Name: name, Mode: 0o755, MDT: -1}, &proto.AttrReply{}); !errors.Is(err, syscall.EREMCHG) {
			t.Fatalf("mkdir %q on the wrong stripe: %v", name, err)
		}
	}
	if err := p.call(0, proto.MUnlink, &proto.UnlinkReq{Parent: proto.RootFID, Name: "s", Dir: true}, &proto.UnlinkReply{}); !errors.Is(err, syscall.ENOTEMPTY) {
		t.Fatalf("rmdir of a striped directory with subdirectories: %v", err)
	}
	ctx := context.Background()
	if rep, err := fsck.Run(ctx, p.addr(0), false); err != nil || len(rep.Findings) != 0 {
		t.Fatalf("fsck of a sound striped directory: %v %v", err, rep.Findings)
	}
	if err := p.fsck(); err != nil {
		t.Fatal(err)
	}
	// Lose stripe 1 (on mdt0) behind the MDTs' backs.
	l, _ := p.mdt[1].getLMV(s)
	b := p.mdt[0].db.NewBatch()
	p.mdt[0].deleteInode(b, l.Stripes[1])
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	rep, err := fsck.Run(ctx, p.addr(0), false)
	if err != nil {
		t.Fatal(err)
	}
	missing := 0
	for _, f := range rep.Findings {
		if f.Kind == fsck.MissingStripe && f.FID == l.Stripes[1] && f.Parent == s {
			missing++
		}
	}
	if missing != 1 {
		t.Fatalf("a lost stripe gave findings %v", rep.Findings)
	}
}

// TestRmdirWaitsForPush checks that a cross-MDT operation the coordinator
// runs synchronously (rmdir) waits for its pushes to that participant:
// the directory an async mkdir told the client about must be there.
func TestRmdirWaitsForPush(t *testing.T) {
	p := newPair(t, fmt.Sprintf("flush-%d", time.Now().UnixNano()))
	defer func() { p.close(1); p.close(0) }()
	gate := make(chan struct{})
	p.hook[0].push.Store(&gate)
	if err := p.call(0, proto.MMkdir, &proto.MkdirReq{Parent: proto.RootFID, Name: "a", Mode: 0o755, MDT: 1}, &proto.AttrReply{}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- p.call(0, proto.MUnlink, &proto.UnlinkReq{Parent: proto.RootFID, Name: "a", Dir: true}, &proto.UnlinkReply{})
	}()
	select {
	case err := <-done:
		t.Fatalf("rmdir finished (%v) while the mkdir's push was held", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(gate)
	if err := <-done; err != nil {
		t.Fatalf("rmdir after the push: %v", err)
	}
	p.converge()
	if err := p.fsck(); err != nil {
		t.Fatal(err)
	}
}

// TestFIDNotReusedAfterCrash: a FID handed out with a change a power loss
// then loses is not handed out again (a client may have written objects
// under it, which a new file must not inherit). Directories take their
// FIDs from the same allocator as files.
func TestFIDNotReusedAfterCrash(t *testing.T) {
	// Group commits an hour apart: the mkdir below stays unsynced.
	p := newPairCommit(t, fmt.Sprintf("fidreuse-%d", time.Now().UnixNano()), time.Hour)
	defer func() { p.close(1); p.close(0) }()
	create := func(name string) proto.FID {
		t.Helper()
		var a proto.AttrReply
		if err := p.call(0, proto.MMkdir, &proto.MkdirReq{Parent: proto.RootFID, Name: name, Mode: 0o755, MDT: 0}, &a); err != nil {
			t.Fatal(err)
		}
		return a.Attr.FID
	}
	create("kept")
	if err := p.call(0, proto.MSync, &proto.SyncReq{}, &proto.Empty{}); err != nil {
		t.Fatal(err)
	}
	lost := create("lost")
	p.crash(crashRNG(0), [2]bool{true, false}) // keeps nothing unsynced
	if _, err := p.lookup(proto.RootFID, "lost"); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("the unsynced mkdir survived the crash (%v): the test proves nothing", err)
	}
	if again := create("new"); again == lost || again.Seq == lost.Seq && again.Oid < lost.Oid {
		t.Fatalf("after the crash a new directory got %s; %s was handed out before it", again, lost)
	}
}

// TestFIDPoolRefillsAhead: a coordinator's pool of another MDT's FIDs is
// refilled in the background once three quarters of a block are used, so
// a long run of remote mkdirs does not stop for a reservation.
func TestFIDPoolRefillsAhead(t *testing.T) {
	p := newPair(t, fmt.Sprintf("refill-%d", time.Now().UnixNano()))
	defer func() { p.close(1); p.close(0) }()
	block := int(fidBlock(proto.FIDPlain))
	for i := 0; i < block*3/4+1; i++ {
		if err := p.call(0, proto.MMkdir, &proto.MkdirReq{Parent: proto.RootFID, Name: fmt.Sprint("d", i), Mode: 0o755, MDT: 1}, &proto.AttrReply{}); err != nil {
			t.Fatal(err)
		}
	}
	pool := func() int {
		p.mdt[0].pools.mu.Lock()
		defer p.mdt[0].pools.mu.Unlock()
		return len(p.mdt[0].pools.fids[poolKey{1, proto.FIDPlain}])
	}
	deadline := time.Now().Add(5 * time.Second)
	for pool() < block {
		if time.Now().After(deadline) {
			t.Fatalf("%d FIDs in the pool after %d of a block of %d were used, and no refill came", pool(), block*3/4+1, block)
		}
		time.Sleep(time.Millisecond)
	}
	if n := p.mdt[1].grants.given.Load(); n != 2 {
		t.Fatalf("mdt1 reserved %d blocks for mdt0, want 2", n)
	}
}

// TestFsckWaitsForPushes: fsck --repair run while a remote mkdir's push
// is still held must neither report the new directory's entry as
// dangling nor remove it: every MDT first puts in place what it owes
// the others.
func TestFsckWaitsForPushes(t *testing.T) {
	p := newPair(t, fmt.Sprintf("fsckpush-%d", time.Now().UnixNano()))
	defer func() { p.close(1); p.close(0) }()
	gate := make(chan struct{})
	p.hook[0].push.Store(&gate)
	a := p.mkdirRemote("d")
	var rep *fsck.Report
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		rep, err = fsck.Run(context.Background(), p.addr(0), true)
	}()
	select {
	case <-done:
		t.Fatalf("fsck finished while a push was held: %v %v", err, rep)
	case <-time.After(200 * time.Millisecond):
	}
	close(gate)
	<-done
	if err != nil || len(rep.Findings) != 0 {
		t.Fatalf("fsck: %v %v", err, rep.Findings)
	}
	if fid, err := p.lookup(proto.RootFID, "d"); err != nil || fid != a.Attr.FID {
		t.Fatalf("d after fsck --repair: %v %v", fid, err)
	}
}

// TestFsckOnALiveFilesystem: a scan that catches an operation half done
// (here: a remote directory's entry scanned before its inode was) must
// not lead fsck --repair to remove the directory, and an MDT refuses a
// repair whose object changed after the scan.
func TestFsckOnALiveFilesystem(t *testing.T) {
	p := newPair(t, fmt.Sprintf("fscklive-%d", time.Now().UnixNano()))
	defer func() { p.close(1); p.close(0) }()
	a := p.mkdirRemote("d")
	d := a.Attr.FID
	p.converge()
	scans := 0
	midMkdir := func(ctx context.Context, mgs string) (*fsck.View, *proto.Config, error) {
		v, cfg, err := fsck.Gather(ctx, mgs)
		if scans++; scans == 1 && err == nil {
			v.Inodes = slices.DeleteFunc(v.Inodes, func(n proto.ScanInode) bool { return n.Attr.FID == d })
		}
		return v, cfg, err
	}
	rep, err := fsck.RunOptions(context.Background(), p.addr(0), fsck.Options{Repair: true, Gather: midMkdir})
	if err != nil || len(rep.Findings) != 0 || rep.Settled == 0 || rep.Repaired != 0 {
		t.Fatalf("fsck --repair over a half-done mkdir: %v, report %+v", err, rep)
	}
	if fid, err := p.lookup(proto.RootFID, "d"); err != nil || fid != d {
		t.Fatalf("d after fsck --repair: %v %v", fid, err)
	}
	// Repairs are conditional on what the scan saw.
	stale := []struct {
		mdt int
		req proto.FsckFixReq
	}{
		{0, proto.FsckFixReq{Action: proto.FixDropDirent, Parent: proto.RootFID, Name: "d", FID: proto.FID{Seq: d.Seq, Oid: d.Oid + 1}}},
		{1, proto.FsckFixReq{Action: proto.FixSetNlink, FID: d, Have: a.Attr.Nlink + 1, Nlink: 7}},
	}
	for _, s := range stale {
		if err := p.call(s.mdt, proto.MFsckFix, &s.req, &proto.Empty{}); !errors.Is(err, syscall.ESTALE) {
			t.Errorf("%s on what changed since the scan: %v, want ESTALE", s.req.Action, err)
		}
	}
	var got proto.AttrReply
	if err := p.call(1, proto.MGetattr, &proto.GetattrReq{FID: d}, &got); err != nil || got.Attr.Nlink != a.Attr.Nlink {
		t.Fatalf("d after refused repairs: nlink %d (was %d), %v", got.Attr.Nlink, a.Attr.Nlink, err)
	}
	if rep, err := fsck.Run(context.Background(), p.addr(0), false); err != nil || len(rep.Findings) != 0 {
		t.Fatalf("fsck: %v %v", err, rep)
	}
}

// TestResendAfterCoordinatorRedo: a remote mkdir whose coordinator
// crashed before its part reached the disk is redone from the
// participant's log at restart, and the client's resend of the request
// (same client, same XID: it never got the reply) is answered as done,
// with the directory made, not failed with EEXIST.
func TestResendAfterCoordinatorRedo(t *testing.T) {
	// Group commits an hour apart: MDT0's part stays unsynced.
	p := newPairCommit(t, fmt.Sprintf("resend-%d", time.Now().UnixNano()), time.Hour)
	defer func() { p.close(1); p.close(0) }()
	mkdir := func() (proto.AttrReply, error) {
		c := rpc.NewClient(p.addr(0), "resender")
		c.UUID = "resender-uuid"
		defer c.Close()
		var a proto.AttrReply
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := c.Do(ctx, &rpc.Call{Method: proto.MMkdir, XID: 77, Req: &proto.MkdirReq{Parent: proto.RootFID, Name: "d", Mode: 0o755, MDT: 1}, Resp: &a})
		return a, err
	}
	first, err := mkdir()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.mdt[0].flushPushes(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if len(p.mdt[1].records()) != 1 {
		t.Fatalf("mdt1 holds %d records after the push, want 1", len(p.mdt[1].records()))
	}
	p.crash(crashRNG(0), [2]bool{true, false})
	again, err := mkdir() // held until recovery is over
	if n := p.mdt[0].ctr.dtxRedone.Load(); n != 1 {
		t.Fatalf("mdt0 redid %d parts at restart, want 1: the test proves nothing", n)
	}
	if err != nil {
		t.Fatalf("the resend after the redo: %v", err)
	}
	if again.Attr.FID != first.Attr.FID {
		t.Fatalf("the resend answered %s, the mkdir made %s", again.Attr.FID, first.Attr.FID)
	}
	// The entry is all the coordinator has: the reply says the
	// attributes are the other MDT's (fs.Mkdir asks there), rather than
	// passing a mode without permission bits and no links for the new
	// directory's.
	if !again.Remote {
		t.Fatalf("the resend answered attributes of its own for a directory on mdt1: %+v", again.Attr)
	}
}

// crashRNG returns an rng under which CrashClone keeps that many fifths
// of what was not synced: 0, 2 or 4 (its percentage is the rng's first
// draw times 40).
func crashRNG(fifths int) *rand.Rand {
	for s := uint64(1); ; s++ {
		if rand.New(rand.NewPCG(s, 0)).IntN(3)*2 == fifths {
			return rand.New(rand.NewPCG(s, 0))
		}
	}
}

// TestPushAppliesEachRecordOrNone: a participant commits a whole push at
// once, yet a record of it that fails leaves nothing of itself and stops
// none of the others, and a record sent twice is applied once.
func TestPushAppliesEachRecordOrNone(t *testing.T) {
	p := newPair(t, fmt.Sprintf("push-%d", time.Now().UnixNano()))
	defer func() { p.close(1); p.close(0) }()
	noPushes := make(chan struct{}) // no pushes of its own
	p.hook[0].push.Store(&noPushes)
	var fids proto.ReserveFIDsReply
	if err := p.call(1, proto.MReserveFIDs, &proto.ReserveFIDsReq{Kind: proto.FIDPlain, N: 3, Coord: 0}, &fids); err != nil {
		t.Fatal(err)
	}
	rec := func(seq uint64, fid proto.FID, inodeBytes []byte) []byte {
		r := &dtx.Record{ID: dtx.OpID{Coord: 0, Epoch: p.mdt[0].epoch, Seq: 1000 + seq}, Op: "mkdir", Started: now(), Updates: []dtx.Update{
			{Kind: dtx.CreateInode, MDT: 1, FID: fid, Inode: inodeBytes},
			{Kind: dtx.InsertDirent, MDT: 0, Parent: proto.RootFID, Name: fmt.Sprint("d", seq), FID: fid, Mode: sIFDIR},
		}}
		return r.Marshal()
	}
	dir := func(fid proto.FID) []byte {
		return (&inode{Attr: proto.Attr{FID: fid, Mode: sIFDIR | 0o755, Nlink: 2}, Parent: proto.RootFID}).marshal()
	}
	good0, bad, good2 := fids.FIDs[0], fids.FIDs[1], fids.FIDs[2]
	req := &proto.TxnApplyBatchReq{Records: [][]byte{
		rec(0, good0, dir(good0)),
		rec(1, bad, []byte{0xff}), // an inode that does not decode
		rec(2, good2, dir(good2)),
		rec(2, good2, dir(good2)),
	}}
	before := p.mdt[1].ctr.dtxPending.Load()
	if err := p.call(1, proto.MTxnApplyBatch, req, &proto.Empty{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		fid  proto.FID
		want bool
	}{{good0, true}, {bad, false}, {good2, true}} {
		if _, err := p.mdt[1].getInode(c.fid); (err == nil) != c.want {
			t.Errorf("inode %s after the push: %v, want it there: %v", c.fid, err, c.want)
		}
	}
	if n := p.mdt[1].ctr.dtxPending.Load() - before; n != 2 {
		t.Errorf("%d records held after the push, want 2", n)
	}
	for _, c := range []struct {
		seq  uint64
		want bool
	}{{0, true}, {1, false}, {2, true}} {
		if got := p.mdt[1].hasRecord(dtx.OpID{Coord: 0, Epoch: p.mdt[0].epoch, Seq: 1000 + c.seq}); got != c.want {
			t.Errorf("record %d held: %v, want %v", c.seq, got, c.want)
		}
	}
}

// TestPeerRestartDuringReservation: a remote mkdir whose coordinator is
// reserving FIDs on the other MDT when that MDT restarts (the connection
// breaks with the request in flight) waits for it and succeeds, as the
// client's own requests do, rather than failing with EIO.
func TestPeerRestartDuringReservation(t *testing.T) {
	p := newPair(t, fmt.Sprintf("peer-restart-%d", time.Now().UnixNano()))
	defer func() { p.close(1); p.close(0) }()
	gate, entered := make(chan struct{}), make(chan struct{}, 1)
	p.mdt[1].Srv.Wrap(proto.MReserveFIDs, func(next rpc.Handler) rpc.Handler {
		return func(ctx context.Context, r *rpc.Request) (rpc.Reply, error) {
			entered <- struct{}{}
			<-gate
			return next(ctx, r)
		}
	})
	done := make(chan error, 1)
	go func() {
		done <- p.call(0, proto.MMkdir, &proto.MkdirReq{Parent: proto.RootFID, Name: "d", Mode: 0o755, MDT: 1}, &proto.AttrReply{})
	}()
	<-entered // the first block of mdt1's FIDs is being reserved
	time.AfterFunc(50*time.Millisecond, func() { close(gate) })
	p.close(1)
	p.open(1)
	if err := <-done; err != nil {
		t.Fatalf("mkdir across a restart of the other MDT: %v", err)
	}
	if _, err := p.lookup(proto.RootFID, "d"); err != nil {
		t.Fatal(err)
	}
}

// errnoName is "success" for 0, the errno's text otherwise.
func errnoName(e syscall.Errno) string {
	if e == 0 {
		return "success"
	}
	return e.Error()
}

// testHooks holds an MDT where a test says (hooks.go).
type testHooks struct {
	ownPart   atomic.Pointer[chan struct{}] // a coordinator waits for it to close before its own part
	push      atomic.Pointer[chan struct{}] // pushes wait for it to close
	holdSyncs atomic.Bool
}

func (h *testHooks) pushGate() <-chan struct{} {
	if ch := h.push.Load(); ch != nil {
		return *ch
	}
	return nil
}

func (h *testHooks) beforeOwnPart() {
	if ch := h.ownPart.Load(); ch != nil {
		<-*ch
	}
}

func (h *testHooks) syncsHeld() bool { return h.holdSyncs.Load() }
