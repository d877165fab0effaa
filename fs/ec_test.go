package fs_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"syscall"
	"testing"

	"github.com/stripefs/stripefs/cluster"
	"github.com/stripefs/stripefs/fs"
	"github.com/stripefs/stripefs/internal/testcluster"
	"github.com/stripefs/stripefs/layout"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// startWith is start with client options.
func startWith(t *testing.T, mdts, osts int, opts fs.Options) (*fs.Client, *cluster.Cluster) {
	t.Helper()
	return testcluster.InProc(t, mdts, osts, opts)
}

func createWithLayout(t *testing.T, c *fs.Client, name, lay string) (*proto.Attr, *fs.File) {
	t.Helper()
	ctx := context.Background()
	a, f, err := c.Create(ctx, proto.RootFID, name, syscall.S_IFREG|0o644, 0, true, true, syscall.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Setxattr(ctx, a.FID, proto.LayoutXattr, []byte(lay), 0); err != nil {
		t.Fatal(err)
	}
	a, err = c.Getattr(ctx, a.FID)
	if err != nil {
		t.Fatal(err)
	}
	return a, f
}

func readAll(ctx context.Context, f *fs.File, n int) ([]byte, error) {
	got := make([]byte, n+10)
	k, err := f.ReadAt(ctx, got, 0)
	return got[:k], err
}

// TestECAgainstFlatBuffer drives erasure-coded files with random vectored
// writes, reads, truncates, fsyncs and reopens, with up to M OSTs left out
// of reads at random, and checks every read against a flat buffer. Rows
// are small (64 KiB units) so that writes cover whole and partial rows,
// and sizes fall anywhere in a row. The composite layouts have an
// erasure-coded component after a plain one, last or in the middle, so
// writes, reads and truncates cross from plain stripes to rows and back.
func TestECAgainstFlatBuffer(t *testing.T) {
	c, _ := startWith(t, 1, 6, fs.Options{})
	ctx := context.Background()
	layouts := []struct {
		spec string
		m    int
	}{
		{"stripe_size=65536 ec=4+2", 2},
		{"stripe_size=131072 ec=2+1", 1},
		{"stripe_size=65536 ec=3+3", 3},
		{"extent=0-262144 stripe_size=65536 stripe_count=2\nextent=262144-EOF stripe_size=65536 ec=4+2", 2},
		{"extent=0-131072 stripe_size=65536 stripe_count=1\nextent=131072-655360 stripe_size=65536 ec=2+1\nextent=655360-EOF ec=none stripe_count=3", 1},
	}
	for seed := int64(1); seed <= 10; seed++ {
		rng := rand.New(rand.NewSource(seed))
		lay := layouts[seed%int64(len(layouts))]
		a, f := createWithLayout(t, c, fmt.Sprintf("ec%d", seed), lay.spec)
		if ep, ok := layout.ECPartOf(a.Layout); !ok || a.Layout.IsEC() == a.Layout.IsComposite() || a.Layout.IsEC() && !ep.Instantiated() {
			t.Fatalf("layout %+v", a.Layout)
		}
		var model []byte
		degraded := fs.CounterOf(c, "degraded_reads")
		down := map[uint32]bool{}
		setDown := func(n int) {
			for o := range down {
				fs.SetOSTDown(c, o, false)
			}
			clear(down)
			cur, err := c.Getattr(ctx, a.FID)
			if err != nil {
				t.Fatal(err)
			}
			ep, _ := layout.ECPartOf(cur.Layout) // only its OSTs: the plain stripes have no redundancy
			if !ep.Instantiated() {
				return
			}
			for _, i := range rng.Perm(len(ep.Layout.OSTs))[:n] {
				down[ep.Layout.OSTs[i]] = true
				fs.SetOSTDown(c, ep.Layout.OSTs[i], true)
			}
		}
		for op := 0; op < 250; op++ {
			switch r := rng.Intn(20); {
			case r < 10:
				model = randomWriteV(t, ctx, rng, f, model, 300_000, fmt.Sprintf("seed %d op %d", seed, op))
			case r < 15:
				off, n := rng.Intn(len(model)+1), rng.Intn(600_000)
				got := make([]byte, n)
				k, err := f.ReadAt(ctx, got, int64(off))
				if err != nil {
					t.Fatalf("seed %d op %d: read with %d OSTs down: %v", seed, op, len(down), err)
				}
				want := model[min(off, len(model)):min(off+n, len(model))]
				if !bytes.Equal(got[:k], want) {
					t.Fatalf("seed %d op %d: read [%d,+%d) with OSTs %v down differs from the model", seed, op, off, n, down)
				}
			case r < 16:
				model = randomTruncate(t, ctx, rng, c, a.FID, model, fmt.Sprintf("seed %d op %d", seed, op))
			case r < 17:
				if err := f.Fsync(ctx); err != nil {
					t.Fatalf("seed %d op %d: fsync: %v", seed, op, err)
				}
			case r < 19:
				setDown(rng.Intn(lay.m + 1))
			default: // close and reopen: reads come from the OSTs only
				if err := f.Release(ctx); err != nil {
					t.Fatalf("seed %d op %d: close: %v", seed, op, err)
				}
				var err error
				if f, err = c.Open(ctx, a.FID, syscall.O_RDWR); err != nil {
					t.Fatal(err)
				}
				got, err := readAll(ctx, f, len(model))
				if err != nil || !bytes.Equal(got, model) {
					t.Fatalf("seed %d op %d: after reopen with OSTs %v down: %d bytes, %v; %s", seed, op, down, len(got), err, firstDiff(got, model))
				}
			}
		}
		setDown(lay.m)
		if err := f.Release(ctx); err != nil {
			t.Fatal(err)
		}
		g, err := c.Open(ctx, a.FID, syscall.O_RDONLY)
		if err != nil {
			t.Fatal(err)
		}
		got, err := readAll(ctx, g, len(model))
		if err != nil || !bytes.Equal(got, model) {
			t.Fatalf("seed %d: with %d OSTs down after close the file differs from the model (%d bytes, %v)", seed, lay.m, len(got), err)
		}
		g.Release(ctx)
		setDown(0)
		// Each file's rows were rebuilt from parity at least once, the
		// composite ones' in their erasure-coded component.
		cur, err := c.Getattr(ctx, a.FID)
		if ep, ok := layout.ECPartOf(cur.Layout); err != nil || !ok || !ep.Instantiated() || fs.CounterOf(c, "degraded_reads") == degraded {
			t.Fatalf("seed %d: layout %q (%v): degraded reads %d before the file, %d after", seed, cur.Layout, err, degraded, fs.CounterOf(c, "degraded_reads"))
		}
	}
	if fs.CounterOf(c, "degraded_reads") == 0 || fs.CounterOf(c, "ec_unrecoverable_reads") != 0 {
		t.Fatalf("degraded_reads %d, ec_unrecoverable_reads %d", fs.CounterOf(c, "degraded_reads"), fs.CounterOf(c, "ec_unrecoverable_reads"))
	}
}

// TestECWholeRowsReadNothing: sequential whole-row writes, even in odd
// pieces, compute parity with no reads; the partial last row of a new
// file reads nothing either (past the end is zeros); rewriting part of a
// row in an existing file is a counted read-modify-write.
func TestECWholeRowsReadNothing(t *testing.T) {
	c, _ := startWith(t, 1, 6, fs.Options{})
	ctx := context.Background()
	a, f := createWithLayout(t, c, "seq", "stripe_size=65536 ec=4+2")
	row := 4 * 65536
	data := make([]byte, 8*row+12345)
	rand.New(rand.NewSource(1)).Read(data)
	reads0 := c.Stats.Snapshot()
	for off := 0; off < len(data); {
		n := min(len(data)-off, 3500+off%9000)
		if _, err := f.WriteV(ctx, int64(off), [][]byte{data[off : off+n]}); err != nil {
			t.Fatal(err)
		}
		off += n
	}
	if err := f.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := fs.CounterOf(c, "read_modify_writes"); n != 0 {
		t.Fatalf("%d read-modify-writes for a sequential write", n)
	}
	if full, part := fs.CounterOf(c, "ec_rows_full"), fs.CounterOf(c, "ec_rows_partial"); full != 8 || part != 1 {
		t.Fatalf("rows written whole %d, in part %d; want 8 and 1", full, part)
	}
	if r := ostReads(c.Stats.Snapshot()) - ostReads(reads0); r != 0 {
		t.Fatalf("%d OST reads for a pure write", r)
	}
	f, err := c.Open(ctx, a.FID, syscall.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(ctx, []byte("patch"), int64(row+100)); err != nil {
		t.Fatal(err)
	}
	if err := f.Release(ctx); err != nil {
		t.Fatal(err)
	}
	copy(data[row+100:], "patch")
	if n := fs.CounterOf(c, "read_modify_writes"); n != 1 {
		t.Fatalf("%d read-modify-writes for one small overwrite, want 1", n)
	}
	// Every unit of the patched row can be lost alone.
	for _, o := range a.Layout.OSTs {
		fs.SetOSTDown(c, o, true)
		g, _ := c.Open(ctx, a.FID, syscall.O_RDONLY)
		got, err := readAll(ctx, g, len(data))
		g.Release(ctx)
		fs.SetOSTDown(c, o, false)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("ost%d down: %d bytes, %v", o, len(got), err)
		}
	}
}

func ostReads(s []rpc.MethodCount) int64 {
	for _, m := range s {
		if m.Method == proto.ORead {
			return m.Calls
		}
	}
	return 0
}

// TestECCrashBetweenDataAndParity drops the parity writes of rows being
// rewritten, as a client crash after its data writes would, then loses
// data units: each read must give EIO or, unit by unit, the old or the new
// content, never anything else.
func TestECCrashBetweenDataAndParity(t *testing.T) {
	var drop func(fid proto.FID, row uint64, unit int) bool
	c, _ := startWith(t, 1, 6, fs.Options{DropECWrite: func(fid proto.FID, row uint64, unit int) bool {
		return drop != nil && drop(fid, row, unit)
	}})
	ctx := context.Background()
	const unit = 65536
	a, f := createWithLayout(t, c, "crash", "stripe_size=65536 ec=4+2")
	row := 4 * unit
	oldC := bytes.Repeat([]byte("old!"), 3*row/4)
	newC := bytes.Repeat([]byte("NEW?"), 3*row/4)
	if _, err := f.WriteAt(ctx, oldC, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Fsync(ctx); err != nil {
		t.Fatal(err)
	}
	// Row 0: data written, parity dropped. Row 1: parity and two data
	// units written, two data units dropped. Row 2: all written.
	drop = func(_ proto.FID, r uint64, j int) bool {
		return r == 0 && j >= 4 || r == 1 && (j == 1 || j == 2)
	}
	if _, err := f.WriteAt(ctx, newC, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Release(ctx); err != nil {
		t.Fatal(err)
	}
	drop = nil
	results := map[string]int{}
	for i, o1 := range a.Layout.OSTs {
		for _, o2 := range a.Layout.OSTs[i:] {
			fs.SetOSTDown(c, o1, true)
			fs.SetOSTDown(c, o2, true)
			g, err := c.Open(ctx, a.FID, syscall.O_RDONLY)
			if err != nil {
				t.Fatal(err)
			}
			for r := 0; r < 3; r++ {
				got := make([]byte, row)
				n, err := g.ReadAt(ctx, got, int64(r*row))
				switch {
				case errors.Is(err, syscall.EIO):
					results[fmt.Sprintf("row %d EIO", r)]++
					continue
				case err != nil:
					t.Fatalf("row %d with ost%d and ost%d down: %v", r, o1, o2, err)
				}
				for j := 0; j*unit < n; j++ {
					s, e := r*row+j*unit, r*row+min((j+1)*unit, n)
					u := got[j*unit : e-r*row]
					switch {
					case bytes.Equal(u, newC[s:e]):
						results[fmt.Sprintf("row %d new", r)]++
					case bytes.Equal(u, oldC[s:e]):
						results[fmt.Sprintf("row %d old", r)]++
					default:
						t.Fatalf("row %d unit %d with ost%d and ost%d down: neither old nor new content", r, j, o1, o2)
					}
				}
			}
			g.Release(ctx)
			fs.SetOSTDown(c, o1, false)
			fs.SetOSTDown(c, o2, false)
		}
	}
	t.Logf("outcomes over every pair of OSTs down: %v", results)
	if results["row 0 EIO"] == 0 || results["row 2 EIO"] != 0 {
		t.Fatalf("a row with stale parity must fail when a data unit is lost, a whole row never: %v", results)
	}
}

// TestECScrubAndRebuild damages rows (stale parity, a wiped object) and
// checks that the check reports them, the repair fixes them, and that
// afterwards every unit can be lost.
func TestECScrubAndRebuild(t *testing.T) {
	var drop func(fid proto.FID, row uint64, unit int) bool
	c, _ := startWith(t, 1, 6, fs.Options{DropECWrite: func(fid proto.FID, row uint64, unit int) bool {
		return drop != nil && drop(fid, row, unit)
	}})
	ctx := context.Background()
	a, f := createWithLayout(t, c, "scrub", "stripe_size=65536 ec=4+2")
	data := make([]byte, 5*4*65536+777)
	rand.New(rand.NewSource(5)).Read(data)
	drop = func(_ proto.FID, r uint64, j int) bool { return r == 2 && j == 5 } // stale parity in row 2
	if _, err := f.WriteAt(ctx, data, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Release(ctx); err != nil {
		t.Fatal(err)
	}
	drop = nil
	if a, err := c.Getattr(ctx, a.FID); err != nil || a.Size != uint64(len(data)) {
		t.Fatalf("size %v %v", a, err)
	}
	a.Size = uint64(len(data))
	rep, err := c.CheckEC(ctx, a, fs.ECCheck{})
	if err != nil || len(rep.Findings) != 1 || rep.Findings[0].Row != 2 || fmt.Sprint(rep.Findings[0].BadParity) != "[5]" {
		t.Fatalf("check of a dropped parity write: %+v, %v", rep, err)
	}
	if rep, err = c.CheckEC(ctx, a, fs.ECCheck{Repair: true}); err != nil || !rep.Findings[0].Repaired {
		t.Fatalf("repair: %+v, %v", rep, err)
	}
	if rep, err = c.CheckEC(ctx, a, fs.ECCheck{}); err != nil || len(rep.Findings) != 0 {
		t.Fatalf("check after repair: %+v, %v", rep, err)
	}
	// Wipe the objects of one OST, as a replaced disk would be, and
	// rebuild it.
	lostOST := a.Layout.OSTs[3]
	cfg := c.Config()
	var addr string
	for _, tg := range cfg.OSTs {
		if tg.Index == lostOST {
			addr = tg.Addr
		}
	}
	oc := rpc.NewClient(addr, "test")
	defer oc.Close()
	for s, o := range a.Layout.OSTs {
		if o == lostOST {
			if _, err := rpc.Invoke[proto.Empty](ctx, oc, proto.ODestroy, &proto.ODestroyReq{Obj: proto.ObjID{FID: a.FID, Stripe: uint32(s)}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if rep, err = c.CheckEC(ctx, a, fs.ECCheck{Lost: true, LostOST: lostOST}); err != nil || len(rep.Findings) != 6 {
		t.Fatalf("rebuild: %+v, %v", rep, err)
	}
	if rep, err = c.CheckEC(ctx, a, fs.ECCheck{}); err != nil || len(rep.Findings) != 0 {
		t.Fatalf("check after rebuild: %+v, %v", rep, err)
	}
	for i, o1 := range a.Layout.OSTs {
		for _, o2 := range a.Layout.OSTs[i+1:] {
			fs.SetOSTDown(c, o1, true)
			fs.SetOSTDown(c, o2, true)
			g, _ := c.Open(ctx, a.FID, syscall.O_RDONLY)
			got, err := readAll(ctx, g, len(data))
			g.Release(ctx)
			fs.SetOSTDown(c, o1, false)
			fs.SetOSTDown(c, o2, false)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("ost%d and ost%d down after rebuild: %d bytes, %v", o1, o2, len(got), err)
			}
		}
	}
}

func TestECLayoutRules(t *testing.T) {
	c, _ := startWith(t, 1, 6, fs.Options{})
	ctx := context.Background()
	a, f, err := c.Create(ctx, proto.RootFID, "f", syscall.S_IFREG|0o644, 0, true, true, syscall.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release(ctx)
	for _, bad := range []string{"ec=4+3", "ec=0+2", "ec=4+0", "ec=4", "ec=4+2 stripe_count=5", "ec=2+1 stripe_size=67108864", "ec=300+1"} {
		if err := c.Setxattr(ctx, a.FID, proto.LayoutXattr, []byte(bad), 0); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("setstripe %q: %v, want EINVAL", bad, err)
		}
	}
	if err := c.Setxattr(ctx, a.FID, proto.LayoutXattr, []byte("ec=4+2"), 0); err != nil {
		t.Fatal(err)
	}
	v, err := c.Getxattr(ctx, a.FID, proto.LayoutXattr)
	if err != nil || !bytes.Contains(v, []byte("stripe_count=6")) || !bytes.Contains(v, []byte("ec=4+2")) {
		t.Fatalf("getstripe: %q %v", v, err)
	}
	// A directory default is inherited, and a plain count turns it off.
	d, err := c.Mkdir(ctx, proto.RootFID, "d", 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Setxattr(ctx, d.FID, proto.LayoutXattr, []byte("ec=3+2 stripe_size=131072"), 0); err != nil {
		t.Fatal(err)
	}
	child, cf, err := c.Create(ctx, d.FID, "x", syscall.S_IFREG|0o644, 0, true, true, syscall.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	cf.Release(ctx)
	l := child.Layout
	if l.ECData != 3 || l.ECParity != 2 || len(l.OSTs) != 5 || l.StripeSize != 131072 {
		t.Fatalf("inherited layout %+v", l)
	}
	if err := c.Setxattr(ctx, d.FID, proto.LayoutXattr, []byte("stripe_count=2"), 0); err != nil {
		t.Fatal(err)
	}
	child, cf, err = c.Create(ctx, d.FID, "y", syscall.S_IFREG|0o644, 0, true, true, syscall.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	cf.Release(ctx)
	if child.Layout.IsEC() || len(child.Layout.OSTs) != 2 {
		t.Fatalf("plain count over an EC default: %+v", child.Layout)
	}
}

func firstDiff(got, want []byte) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			e := i
			for e < min(len(got), len(want)) && got[e] != want[e] {
				e++
			}
			return fmt.Sprintf("first difference at %d (%d bytes differ from there), %d bytes vs %d", i, e-i, len(got), len(want))
		}
	}
	return fmt.Sprintf("%d bytes vs %d", len(got), len(want))
}

// TestECRowFetchedWhileDirty: a degraded read fetches a whole row and
// keeps it for the reads that follow; if the row had unflushed data, the
// kept copy must not outlive the flush (it would read back the old data).
func TestECRowFetchedWhileDirty(t *testing.T) {
	c, _ := startWith(t, 1, 6, fs.Options{})
	ctx := context.Background()
	a, f := createWithLayout(t, c, "f", "stripe_size=65536 ec=2+1")
	row := 2 * 65536
	if _, err := f.WriteAt(ctx, bytes.Repeat([]byte{1}, 3*row), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Fsync(ctx); err != nil {
		t.Fatal(err)
	}
	fs.SetOSTDown(c, a.Layout.OSTs[1], true)
	patch := bytes.Repeat([]byte{2}, 1000)
	if _, err := f.WriteAt(ctx, patch, int64(row+10)); err != nil { // row 1 stays dirty
		t.Fatal(err)
	}
	want := bytes.Repeat([]byte{1}, 3*row)
	copy(want[row+10:], patch)
	for i := 0; i < 2; i++ { // before and after the flush
		got := make([]byte, 3*row)
		if _, err := f.ReadAt(ctx, got, 0); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("read %d: %v, %s", i, err, firstDiff(got, want))
		}
		if err := f.Fsync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	f.Release(ctx)
}
