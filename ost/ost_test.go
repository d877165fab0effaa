package ost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

var listenSeq atomic.Int64

// testOST is an OST served on the in-process transport.
type testOST struct {
	t    testing.TB
	cfg  Config
	o    *OST
	addr string
}

func startOST(t testing.TB, cfg Config) *testOST {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	to := &testOST{t: t, cfg: cfg}
	to.open()
	t.Cleanup(func() {
		if to.o != nil {
			to.o.Close()
		}
	})
	return to
}

func (to *testOST) open() {
	to.t.Helper()
	o, err := Open(to.cfg)
	if err != nil {
		to.t.Fatal(err)
	}
	to.addr = fmt.Sprintf("inproc:ost-test-%d", listenSeq.Add(1))
	l, err := rpc.Listen(to.addr)
	if err != nil {
		to.t.Fatal(err)
	}
	go o.Serve(l)
	to.o = o
}

// restart closes the OST cleanly and opens it again on a new address.
func (to *testOST) restart() {
	to.t.Helper()
	to.o.Close()
	to.o = nil
	to.open()
}

// client is one writer with a grant identity.
type client struct {
	t     testing.TB
	rc    *rpc.Client
	id    uint64
	owner proto.Owner
	want  uint64
	grant proto.GrantReply
	// noCache marks its writes NoCache (written O_DIRECT when aligned).
	noCache bool
}

func (to *testOST) client(id uint64, owner proto.Owner) *client {
	rc := rpc.NewClient(to.addr, "test")
	rc.RetryFor = time.Second
	to.t.Cleanup(func() { rc.Close() })
	return &client{t: to.t, rc: rc, id: id, owner: owner, want: 8 << 20}
}

func obj(oid uint32) proto.ObjID {
	return proto.ObjID{FID: proto.FID{Seq: 0x400, Oid: oid}}
}

func (c *client) write(o proto.ObjID, off uint64, data []byte) error {
	var r proto.OWriteReply
	err := c.rc.Do(context.Background(), &rpc.Call{Method: proto.OWrite,
		Req:     &proto.OWriteReq{Obj: o, Off: off, NoCache: c.noCache, Grant: proto.WriteGrant{Client: c.id, Owner: c.owner, Want: c.want}},
		BulkOut: [][]byte{data}, Resp: &r})
	if err == nil && r.Grant.Seq > c.grant.Seq {
		c.grant = r.Grant
	}
	return err
}

func (c *client) read(o proto.ObjID, off uint64, n int) []byte {
	c.t.Helper()
	buf := make([]byte, n)
	var r proto.OReadReply
	call := &rpc.Call{Method: proto.ORead, Req: &proto.OReadReq{Obj: o, Off: off, Len: uint32(n)}, Resp: &r, BulkIn: buf}
	if err := c.rc.Do(context.Background(), call); err != nil {
		c.t.Fatal(err)
	}
	return buf[:call.NBulkIn]
}

func (c *client) call(method uint16, req, resp any) error {
	return c.rc.Do(context.Background(), &rpc.Call{Method: method, Req: req, Resp: resp})
}

func (c *client) usage(k proto.QuotaKey) *proto.QuotaGetReply {
	c.t.Helper()
	var r proto.QuotaGetReply
	if err := c.call(proto.OQuotaGet, &proto.QuotaGetReq{Key: k}, &r); err != nil {
		c.t.Fatal(err)
	}
	return &r
}

func counter(o *OST, name string) int64 {
	for _, c := range o.counters() {
		if c.Name == name {
			return c.Value
		}
	}
	panic("no counter " + name)
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) + seed
	}
	return b
}

var uid1000 = proto.Owner{Uid: 1000, Gid: 100, Projid: 7}

// A rewrite of allocated blocks costs no grant, no quota and no
// accounting, and the counters say which path each write took.
func TestRewriteSkipsAccounting(t *testing.T) {
	to := startOST(t, Config{Index: 0})
	c := to.client(42, uid1000)
	o := obj(1)
	must(t, c.write(o, 0, pattern(1<<20, 1)))
	if n := counter(to.o, "new_allocations"); n != 1 {
		t.Fatalf("new_allocations %d after a first write", n)
	}
	u := c.usage(proto.QuotaKey{Type: proto.QuotaUser, ID: 1000})
	if u.Usage < 1<<20 || u.Usage > 1<<20+64<<10 {
		t.Fatalf("usage %d after writing 1 MiB", u.Usage)
	}
	grant := to.o.space.grantOf(42)
	if grant == 0 || c.grant.Grant != grant {
		t.Fatalf("client sees grant %d, OST holds %d", c.grant.Grant, grant)
	}
	for i := 0; i < 3; i++ {
		must(t, c.write(o, 0, pattern(1<<20, 2)))
		must(t, c.write(o, 4096+100, pattern(5000, 3))) // unaligned, inside
	}
	if n := counter(to.o, "rewrites_skipped_accounting"); n != 6 {
		t.Errorf("rewrites_skipped_accounting %d, want 6", n)
	}
	// The 1 MiB rewrites start their disk write at once, as the first
	// write did: left to fsync, they made rewrite+fsync dearer than
	// write+fsync. The 5000-byte ones are too small to.
	if n := counter(to.o, "early_writebacks"); n != 4 {
		t.Errorf("early_writebacks %d after one 1 MiB write and three 1 MiB rewrites, want 4", n)
	}
	if n := counter(to.o, "new_allocations"); n != 1 {
		t.Errorf("new_allocations %d after rewrites, want 1", n)
	}
	if u2 := c.usage(proto.QuotaKey{Type: proto.QuotaUser, ID: 1000}); u2.Usage != u.Usage || u2.SpaceUsed != u.SpaceUsed {
		t.Errorf("rewrite changed usage: %d→%d, space %d→%d", u.Usage, u2.Usage, u.SpaceUsed, u2.SpaceUsed)
	}
	if g := to.o.space.grantOf(42); g != grant {
		t.Errorf("rewrite changed the grant: %d→%d", grant, g)
	}
	want := pattern(1<<20, 2)
	copy(want[4096+100:], pattern(5000, 3))
	if got := c.read(o, 0, 1<<20); !bytes.Equal(got, want) {
		t.Error("data read back differs")
	}
	// A write that extends the object allocates again.
	must(t, c.write(o, 1<<20, pattern(4096, 4)))
	if n := counter(to.o, "new_allocations"); n != 2 {
		t.Errorf("new_allocations %d after an extending write, want 2", n)
	}
}

// When FIEMAP fails (EFAULT, the field report's error), the check falls
// back to SEEK_DATA/SEEK_HOLE: the rewrite still skips accounting and
// still costs no more than the first write did.
func TestFiemapFailureFallsBack(t *testing.T) {
	to := startOST(t, Config{Index: 0})
	var calls atomic.Int64
	to.o.setFiemap(func(uintptr, *fiemapBuf) error {
		calls.Add(1)
		return syscall.EFAULT
	})
	c := to.client(1, uid1000)
	must(t, c.write(obj(1), 0, pattern(256<<10, 1)))
	must(t, c.write(obj(1), 512<<10, pattern(256<<10, 1))) // leaves a hole
	before := c.usage(proto.QuotaKey{Type: proto.QuotaProject, ID: 7})
	must(t, c.write(obj(1), 0, pattern(256<<10, 2)))
	must(t, c.write(obj(1), 512<<10+4096, pattern(8192, 2)))
	if n := counter(to.o, "rewrites_skipped_accounting"); n != 2 {
		t.Errorf("rewrites_skipped_accounting %d with FIEMAP failing, want 2", n)
	}
	if calls.Load() == 0 || counter(to.o, "fiemap_fallbacks") != counter(to.o, "fiemap_calls") {
		t.Errorf("fiemap calls %d, fallbacks %d of %d", calls.Load(), counter(to.o, "fiemap_fallbacks"), counter(to.o, "fiemap_calls"))
	}
	if counter(to.o, "alloc_check_failures") != 0 {
		t.Error("the fallback failed too")
	}
	if after := c.usage(proto.QuotaKey{Type: proto.QuotaProject, ID: 7}); after.Usage != before.Usage {
		t.Errorf("rewrite with FIEMAP failing changed usage %d→%d", before.Usage, after.Usage)
	}
	// The hole is still a hole: writing into it allocates.
	must(t, c.write(obj(1), 300<<10, pattern(4096, 3)))
	if n := counter(to.o, "new_allocations"); n != 3 {
		t.Errorf("new_allocations %d after filling the hole, want 3", n)
	}
	// set_param turns the real call back on.
	var e proto.Empty
	must(t, c.call(proto.OSetParam, &proto.OSetParamReq{Name: "fiemap_fail", Value: "0"}, &e))
	fb := counter(to.o, "fiemap_fallbacks")
	must(t, c.write(obj(1), 0, pattern(4096, 4)))
	if counter(to.o, "fiemap_fallbacks") != fb {
		t.Error("fallback taken after fiemap_fail=0")
	}
}

// fiemapHoles pages through more extents than one call returns, and
// counts delayed and unwritten extents as allocated.
func TestFiemapHolesPaging(t *testing.T) {
	const bs = 4096
	// Extents of one block every other block over [0, 200 blocks).
	fake := func(fd uintptr, b *fiemapBuf) error {
		n := 0
		for blk := b.Hdr.Start / bs; blk*bs < b.Hdr.Start+b.Hdr.Length && blk < 200 && n < int(b.Hdr.ExtentCount); blk++ {
			if blk%2 == 0 {
				b.Extents[n] = fiemapExtent{Logical: blk * bs, Length: bs, Flags: 4 /* delalloc */}
				if blk == 198 {
					b.Extents[n].Flags |= fiemapExtentLast
				}
				n++
			}
		}
		b.Hdr.MappedExtents = uint32(n)
		return nil
	}
	holes, err := fiemapHoles(fake, 0, 0, 200*bs)
	if err != nil || holes != 100*bs {
		t.Fatalf("holes %d, %v; want %d", holes, err, 100*bs)
	}
	holes, err = fiemapHoles(fake, 0, 10*bs, 11*bs)
	if err != nil || holes != 0 {
		t.Fatalf("allocated block: holes %d, %v", holes, err)
	}
	if _, err := fiemapHoles(failingFiemap, 0, 0, bs); !errors.Is(err, syscall.EFAULT) {
		t.Fatalf("failing fiemap: %v", err)
	}
}

// The real FIEMAP and the SEEK_DATA fallback agree on a sparse file.
func TestFiemapAndSeekAgree(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "sparse"))
	must(t, err)
	defer f.Close()
	for _, off := range []int64{0, 3 << 20, 3<<20 + 8192, 9 << 20} {
		_, err := f.WriteAt(pattern(5000, 1), off)
		must(t, err)
	}
	var ctr counters
	x := extentChecker{fiemap: ioctlFiemap, blockSize: 4096, ctr: &ctr}
	y := extentChecker{fiemap: failingFiemap, blockSize: 4096, ctr: &ctr}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 500; i++ {
		off := rng.Uint64N(10 << 20)
		end := off + 1 + rng.Uint64N(2<<20)
		a, ka := x.unallocated(f.Fd(), off, end)
		b, kb := y.unallocated(f.Fd(), off, end)
		if !ka || !kb || a != b {
			t.Fatalf("[%d,%d): fiemap %d (%v), seek %d (%v)", off, end, a, ka, b, kb)
		}
	}
	if n, _ := x.unallocated(f.Fd(), 3<<20+100, 3<<20+12000); n != 0 {
		t.Errorf("written range reported %d bytes unallocated", n)
	}
	if n, _ := x.unallocated(f.Fd(), 5<<20, 5<<20+1); n != 4096 {
		t.Errorf("hole reported %d bytes unallocated, want a block", n)
	}
}

// A full OST (capacity reached) refuses new allocations with ENOSPC,
// keeps what was written, and still takes rewrites of what it holds:
// those change neither usage nor grant.
func TestCapacityENOSPC(t *testing.T) {
	to := startOST(t, Config{Index: 0, Capacity: 4 << 20})
	c := to.client(9, uid1000)
	c.want = 64 << 20
	var written int
	var err error
	for i := 0; i < 24; i++ {
		if err = c.write(obj(1), uint64(i)<<18, pattern(256<<10, byte(i))); err != nil {
			break
		}
		written++
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("writing past capacity: %v after %d writes", err, written)
	}
	if written < 12 || written > 16 {
		t.Errorf("%d KiB written into 4 MiB", written*256)
	}
	// Usage is what the filesystem allocated (st_blocks), which may hold
	// a block of its own (ext4's extent tree) past the data it admitted,
	// as the e2e test of a full OST allows too.
	const fsBlock = 4096
	sn := to.o.space.snapshot()
	if sn.used+sn.granted > 4<<20+fsBlock {
		t.Errorf("used %d + granted %d exceed the capacity and a block", sn.used, sn.granted)
	}
	before := c.usage(proto.QuotaKey{Type: proto.QuotaUser, ID: 1000})
	grant := to.o.space.grantOf(9)
	for i := 0; i < written; i++ {
		must(t, c.write(obj(1), uint64(i)<<18, pattern(256<<10, byte(i+100))))
	}
	after := c.usage(proto.QuotaKey{Type: proto.QuotaUser, ID: 1000})
	if after.Usage != before.Usage || after.SpaceUsed != before.SpaceUsed || to.o.space.grantOf(9) != grant {
		t.Errorf("rewrite of a full object: usage %d→%d, space %d→%d, grant %d→%d",
			before.Usage, after.Usage, before.SpaceUsed, after.SpaceUsed, grant, to.o.space.grantOf(9))
	}
	for i := 0; i < written; i++ {
		if got := c.read(obj(1), uint64(i)<<18, 256<<10); !bytes.Equal(got, pattern(256<<10, byte(i+100))) {
			t.Fatalf("block %d lost", i)
		}
	}
	// Freeing space (destroy) lets writes in again.
	var e proto.Empty
	must(t, c.call(proto.ODestroy, &proto.ODestroyReq{Obj: obj(1)}, &e))
	must(t, c.write(obj(2), 0, pattern(1<<20, 1)))
	if u := c.usage(proto.QuotaKey{Type: proto.QuotaUser, ID: 1000}); u.Usage > 1<<20+64<<10 {
		t.Errorf("usage %d after destroy and a 1 MiB write", u.Usage)
	}
}

// Many clients writing at once never make the OST promise more than it
// has: used + granted stays within the capacity, and a client's grant
// covers its writes even when the OST is full.
func TestGrantsNeverOverpromise(t *testing.T) {
	const capacity = 16 << 20
	to := startOST(t, Config{Index: 0, Capacity: capacity})
	// A client that takes a grant first and keeps it while others fill
	// the OST: its grant is its own space.
	keeper := to.client(99, proto.Owner{Uid: 1999})
	keeper.want = 1 << 20
	if err := keeper.write(obj(99), 0, pattern(4096, 1)); err != nil {
		t.Fatal(err)
	}
	if keeper.grant.Grant < 512<<10 {
		t.Fatalf("a client asking for 1 MiB of an empty 16 MiB OST got %d", keeper.grant.Grant)
	}
	const writers = 6
	// An object's allocation may pass its data by the filesystem's
	// extent-tree blocks (one per object here, files of at most 4 MiB in
	// 128 KiB pieces): the OST counts what the disk allocated.
	slack := uint64(writers+1) * fsBlock(t, to.o.dir)
	var wg sync.WaitGroup
	var stop atomic.Bool
	var violations atomic.Int64
	var worst atomic.Uint64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			sn := to.o.space.snapshot()
			if total := sn.used + sn.granted + sn.pending; total > capacity {
				for w := worst.Load(); total-capacity > w && !worst.CompareAndSwap(w, total-capacity); w = worst.Load() {
				}
				if total > capacity+slack {
					violations.Add(1)
				}
			}
			time.Sleep(100 * time.Microsecond)
		}
	}()
	var clients []*client
	for i := 0; i < writers; i++ {
		c := to.client(uint64(100+i), proto.Owner{Uid: uint32(2000 + i)})
		c.want = 32 << 20
		clients = append(clients, c)
	}
	var cw sync.WaitGroup
	var refused atomic.Int64
	for i, c := range clients {
		cw.Add(1)
		go func() {
			defer cw.Done()
			for j := 0; j < 32; j++ {
				if err := c.write(obj(uint32(10+i)), uint64(j)<<17, pattern(128<<10, byte(j))); err != nil {
					if !errors.Is(err, syscall.ENOSPC) {
						t.Error(err)
					}
					refused.Add(1)
					return
				}
			}
		}()
	}
	cw.Wait()
	stop.Store(true)
	wg.Wait()
	if refused.Load() == 0 {
		t.Fatal("24 MiB into a 16 MiB OST and no ENOSPC: the test filled nothing")
	}
	if v := violations.Load(); v > 0 {
		t.Errorf("%d samples promised more than the capacity and %d bytes of extent blocks (worst %d over)", v, slack, worst.Load())
	}
	sn := to.o.space.snapshot()
	if sn.used > capacity+slack {
		t.Errorf("used %d past capacity %d (+%d of extent blocks)", sn.used, capacity, slack)
	}
	if g := to.o.space.grantOf(keeper.id); g < 512<<10 {
		t.Fatalf("the keeper's grant fell to %d while others filled the OST", g)
	}
	if err := keeper.write(obj(99), 4096, pattern(512<<10, 2)); err != nil {
		t.Errorf("a write within the keeper's grant on the full OST: %v", err)
	}
}

// fsBlock is the block size of the filesystem under dir.
func fsBlock(t *testing.T, dir string) uint64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return uint64(st.Bsize)
}

// Grants come back when a client disconnects and stays away for the
// grace period; a clean restart keeps them for clients that return.
func TestGrantLifecycle(t *testing.T) {
	to := startOST(t, Config{Index: 0, GrantGrace: 300 * time.Millisecond})
	a := to.client(1, uid1000)
	b := to.client(2, uid1000)
	must(t, a.write(obj(1), 0, pattern(64<<10, 1)))
	must(t, b.write(obj(2), 0, pattern(64<<10, 1)))
	ga, gb := to.o.space.grantOf(1), to.o.space.grantOf(2)
	if ga == 0 || gb == 0 {
		t.Fatalf("grants %d, %d after first writes", ga, gb)
	}
	a.rc.Close()
	waitFor(t, "a's grant to come back", func() bool { return to.o.space.grantOf(1) == 0 })
	if to.o.space.grantOf(2) != gb {
		t.Errorf("b's grant changed: %d→%d", gb, to.o.space.grantOf(2))
	}
	if counter(to.o, "grant_evictions") != 1 {
		t.Errorf("grant_evictions %d", counter(to.o, "grant_evictions"))
	}
	if sn := to.o.space.snapshot(); sn.granted != gb {
		t.Errorf("outstanding %d, want b's %d", sn.granted, gb)
	}

	// Restart: b's grant is loaded, and kept because b comes back.
	to.cfg.GrantGrace = 2 * time.Second
	to.restart()
	if g := to.o.space.grantOf(2); g != gb {
		t.Fatalf("grant after restart %d, want %d", g, gb)
	}
	b2 := to.client(2, uid1000)
	must(t, b2.write(obj(2), 0, pattern(4096, 2))) // a rewrite: reconnects only
	if b2.grant.Seq <= b.grant.Seq {
		// A client keeps the reply of the highest sequence number: this one
		// would be ignored.
		t.Errorf("grant sequence %d after the restart, %d before", b2.grant.Seq, b.grant.Seq)
	}
	time.Sleep(2500 * time.Millisecond)
	if g := to.o.space.grantOf(2); g != gb {
		t.Errorf("returning client lost its grant: %d→%d", gb, g)
	}
}

// Grants restored at a start are cut, each in proportion, to what the
// OST has left: after an unclean stop the object files may hold more
// than the index recorded (TestObjectPowerLoss), and here the capacity
// shrank while the OST was down.
func TestGrantsFitAtStart(t *testing.T) {
	to := startOST(t, Config{Index: 0, Capacity: 8 << 20})
	a, b := to.client(1, uid1000), to.client(2, uid1000)
	a.want, b.want = 4<<20, 4<<20
	must(t, a.write(obj(1), 0, pattern(1<<20, 1)))
	must(t, b.write(obj(2), 0, pattern(1<<20, 1)))
	ga, gb := to.o.space.grantOf(1), to.o.space.grantOf(2)
	if ga == 0 || gb == 0 {
		t.Fatalf("grants %d, %d after first writes", ga, gb)
	}
	const capacity = 3 << 20
	to.cfg.Capacity = capacity
	to.restart()
	sn := to.o.space.snapshot()
	if sn.used+sn.granted > capacity {
		t.Fatalf("after a restart on a smaller capacity: %d used + %d granted of %d", sn.used, sn.granted, capacity)
	}
	ga2, gb2 := to.o.space.grantOf(1), to.o.space.grantOf(2)
	if ga2 == 0 || gb2 == 0 || ga2 >= ga || gb2 >= gb {
		t.Fatalf("grants %d, %d cut to %d, %d", ga, gb, ga2, gb2)
	}
	if r1, r2 := float64(ga2)/float64(ga), float64(gb2)/float64(gb); r1/r2 < 0.99 || r1/r2 > 1.01 {
		t.Errorf("grants %d, %d cut to %d, %d: not in proportion", ga, gb, ga2, gb2)
	}
	// The cut grants are what the index holds now.
	to.restart()
	if g1, g2 := to.o.space.grantOf(1), to.o.space.grantOf(2); g1 != ga2 || g2 != gb2 {
		t.Errorf("grants %d, %d after another restart, want %d, %d", g1, g2, ga2, gb2)
	}
}

// The index rebuilds from the object files alone (what an unclean stop
// that lost the index would need): sizes from fstat, owners from the
// objects' xattrs.
func TestIndexRebuiltFromObjects(t *testing.T) {
	dir := t.TempDir()
	to := startOST(t, Config{Index: 0, DataDir: dir})
	c := to.client(1, uid1000)
	other := to.client(2, proto.Owner{Uid: 3000, Gid: 300, Projid: 9})
	must(t, c.write(obj(1), 0, pattern(1<<20, 1)))
	must(t, c.write(obj(2), 5<<20, pattern(100<<10, 1)))
	must(t, other.write(obj(3), 0, pattern(300<<10, 1)))
	u1 := c.usage(proto.QuotaKey{Type: proto.QuotaUser, ID: 1000})
	u3 := c.usage(proto.QuotaKey{Type: proto.QuotaProject, ID: 9})
	to.o.Close()
	to.o = nil
	must(t, os.RemoveAll(filepath.Join(dir, "index")))
	to.open()
	c = to.client(1, uid1000)
	if got := c.usage(proto.QuotaKey{Type: proto.QuotaUser, ID: 1000}); got.Usage != u1.Usage || got.SpaceUsed != u1.SpaceUsed {
		t.Errorf("uid 1000 after rebuild: %d (space %d), want %d (%d)", got.Usage, got.SpaceUsed, u1.Usage, u1.SpaceUsed)
	}
	if got := c.usage(proto.QuotaKey{Type: proto.QuotaProject, ID: 9}); got.Usage != u3.Usage {
		t.Errorf("project 9 after rebuild: %d, want %d", got.Usage, u3.Usage)
	}
}

// An object file that lacks its owner xattr gets it at its next
// allocating write, whatever the index says: a crash can keep the file's
// creation and the index's record and lose the xattr, and a file written
// on without it gave its blocks to root once another crash lost the
// record too (TestObjectPowerLoss).
func TestOwnerXattrRewritten(t *testing.T) {
	to := startOST(t, Config{Index: 0})
	c := to.client(1, uid1000)
	must(t, c.write(obj(1), 0, pattern(4096, 1)))
	p := to.o.objPath(obj(1))
	to.o.Close()
	to.o = nil
	must(t, unix.Removexattr(p, ownerXattr)) // as the crash left it
	to.open()
	c = to.client(1, uid1000)
	must(t, c.write(obj(1), 1<<20, pattern(4096, 2))) // allocates
	if got := readOwnerXattr(p); got != uid1000 {
		t.Errorf("the object file's owner after an allocating write: %+v, want %+v", got, uid1000)
	}
}

// Punch and destroy give space back to the owner that was charged.
func TestPunchAndDestroyRelease(t *testing.T) {
	to := startOST(t, Config{Index: 0})
	c := to.client(1, uid1000)
	k := proto.QuotaKey{Type: proto.QuotaGroup, ID: 100}
	must(t, c.write(obj(1), 0, pattern(2<<20, 1)))
	full := c.usage(k).Usage
	var e proto.Empty
	must(t, c.call(proto.OPunch, &proto.OPunchReq{Obj: obj(1), Size: 1 << 20}, &e))
	if u := c.usage(k).Usage; u > full/2+64<<10 || u < full/2-64<<10 {
		t.Errorf("after punch to half: %d of %d", u, full)
	}
	must(t, c.call(proto.ODestroy, &proto.ODestroyReq{Obj: obj(1)}, &e))
	if u := c.usage(k); u.Usage != 0 || u.SpaceUsed != 0 {
		t.Errorf("after destroy: usage %d, space %d", u.Usage, u.SpaceUsed)
	}
}

// A file that changes hands (chown on the MDT) moves its blocks to the
// new owner at its next allocating write.
func TestOwnerChangeMovesUsage(t *testing.T) {
	to := startOST(t, Config{Index: 0})
	c := to.client(1, uid1000)
	must(t, c.write(obj(1), 0, pattern(1<<20, 1)))
	c.owner = proto.Owner{Uid: 1001, Gid: 100}
	must(t, c.write(obj(1), 1<<20, pattern(1<<20, 1)))
	if u := c.usage(proto.QuotaKey{Type: proto.QuotaUser, ID: 1000}).Usage; u != 0 {
		t.Errorf("old owner still charged %d", u)
	}
	if u := c.usage(proto.QuotaKey{Type: proto.QuotaUser, ID: 1001}).Usage; u < 2<<20 {
		t.Errorf("new owner charged %d, want the whole 2 MiB", u)
	}
}

// fakeMaster is a quota master in memory with one limit.
type fakeMaster struct {
	mu     sync.Mutex
	limits []proto.QuotaLimit
	alloc  map[string]uint64
}

func (m *fakeMaster) QuotaLimits(context.Context) ([]proto.QuotaLimit, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]proto.QuotaLimit(nil), m.limits...), nil
}

func (m *fakeMaster) QuotaAcquire(_ context.Context, r *proto.QuotaAcquireReq) (*proto.QuotaAcquireReply, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var hard uint64
	for _, l := range m.limits {
		if l.Key == r.Key {
			hard = l.Hard(r.Kind)
		}
	}
	if hard == 0 {
		return &proto.QuotaAcquireReply{Granted: r.Usage + r.Need}, nil
	}
	if m.alloc == nil {
		m.alloc = map[string]uint64{}
	}
	g := r.Usage + r.Need
	switch {
	case r.Release:
		g = r.Usage
	case g > hard:
		g = max(r.Usage, min(m.alloc[r.Target], hard))
	}
	m.alloc[r.Target] = g
	return &proto.QuotaAcquireReply{Granted: g, Limited: true}, nil
}

func TestQuotaEDQUOT(t *testing.T) {
	m := &fakeMaster{limits: []proto.QuotaLimit{{Key: proto.QuotaKey{Type: proto.QuotaUser, ID: 1000}, BlockHard: 2 << 20}}}
	to := startOST(t, Config{Index: 0, QuotaMaster: m})
	c := to.client(1, uid1000)
	var e proto.QuotaGetReply
	must(t, c.call(proto.OQuotaGet, &proto.QuotaGetReq{Key: proto.QuotaKey{Type: proto.QuotaUser, ID: 1000}, Refresh: true}, &e))
	var err error
	n := 0
	for ; n < 8; n++ {
		if err = c.write(obj(1), uint64(n)<<19, pattern(512<<10, 1)); err != nil {
			break
		}
	}
	if !errors.Is(err, syscall.EDQUOT) || n != 4 {
		t.Fatalf("after %d writes of 512 KiB under a 2 MiB limit: %v", n, err)
	}
	// Rewrites of what the user has are still allowed.
	must(t, c.write(obj(1), 0, pattern(512<<10, 2)))
	// Another user is not limited.
	d := to.client(2, proto.Owner{Uid: 1001})
	must(t, d.write(obj(2), 0, pattern(4<<20, 1)))
	if counter(to.o, "quota_edquot_errors") == 0 {
		t.Error("quota_edquot_errors not counted")
	}

	// Destroying the object hands the freed quota back to the master at
	// once (other OSTs may need it), and the user can write again.
	var empty proto.Empty
	must(t, c.call(proto.ODestroy, &proto.ODestroyReq{Obj: obj(1)}, &empty))
	waitFor(t, "the allowance to go back", func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.alloc["ost0"] == 0
	})
	must(t, c.write(obj(3), 0, pattern(1<<20, 1)))

	// A lowered limit applies at the next refresh, whatever allowance the
	// OST held under the old one.
	m.mu.Lock()
	m.limits[0].BlockHard = 1 << 20
	m.mu.Unlock()
	var r proto.QuotaGetReply
	must(t, c.call(proto.OQuotaGet, &proto.QuotaGetReq{Key: proto.QuotaKey{Type: proto.QuotaUser, ID: 1000}, Refresh: true}, &r))
	if err := c.write(obj(3), 1<<20, pattern(64<<10, 1)); !errors.Is(err, syscall.EDQUOT) {
		t.Errorf("write past a lowered limit: %v", err)
	}
}

// Concurrent writers, allocating and rewriting the same and different
// objects, end with usage equal to the blocks the files really have.
func TestConcurrentAccounting(t *testing.T) {
	to := startOST(t, Config{Index: 0})
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		c := to.client(uint64(w+1), proto.Owner{Uid: uint32(w % 2)})
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			for i := 0; i < 60; i++ {
				off := rng.Uint64N(4<<20) &^ 4095
				if err := c.write(obj(uint32(1+rng.IntN(3))), off, pattern(int(4096+rng.Uint64N(200<<10)), byte(i))); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	var real uint64
	for i := 1; i <= 3; i++ {
		var st unix.Stat_t
		if unix.Stat(to.o.objPath(obj(uint32(i))), &st) == nil {
			real += uint64(st.Blocks) * 512
		}
	}
	sn := to.o.space.snapshot()
	u0 := to.o.space.usageOf(proto.QuotaKey{Type: proto.QuotaUser, ID: 0})
	u1 := to.o.space.usageOf(proto.QuotaKey{Type: proto.QuotaUser, ID: 1})
	if sn.used != real || u0+u1 != real || sn.pending != 0 {
		t.Errorf("accounted %d (users %d+%d, pending %d), files have %d", sn.used, u0, u1, sn.pending, real)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// BenchmarkWritePath compares allocating writes with rewrites of the same
// records, over the in-process transport (so the wire costs little).
func BenchmarkWritePath(b *testing.B) {
	for _, fail := range []bool{false, true} {
		b.Run(fmt.Sprintf("fiemap_fail=%v", fail), func(b *testing.B) {
			to := startOST(b, Config{Index: 0, FiemapFail: fail})
			c := to.client(1, uid1000)
			data := pattern(1<<20, 1)
			const records = 64
			for _, pass := range []string{"write", "rewrite"} {
				b.Run(pass, func(b *testing.B) {
					b.SetBytes(1 << 20)
					for i := 0; i < b.N; i++ {
						id := obj(uint32(1 + i/records))
						if err := c.write(id, uint64(i%records)<<20, data); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}
