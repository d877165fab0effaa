package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/stripefs/stripefs/internal/testcluster"
	"github.com/stripefs/stripefs/proto"
)

// Composite layouts (Lustre's PFL): components get objects as files grow
// into them, every mount sees the data wherever it lies, and a layout
// that makes no sense is refused.

// pflLayout is the directory default the tests give: one object up to
// 1 MiB, two up to 8 MiB, every OST after that.
var pflLayout = []string{"-E", "1M", "-c", "1", "-E", "8M", "-c", "2", "-E", "-1", "-c", "-1"}

// pflComp is one component as getstripe --json shows it.
type pflComp struct {
	Flags   string   `json:"lcme_flags"`
	Start   uint64   `json:"lcme_extent.e_start"`
	End     string   `json:"lcme_extent.e_end"`
	Count   int32    `json:"lmm_stripe_count"`
	Pattern string   `json:"lmm_pattern"`
	OSTs    []string `json:"osts"`
}

// pflComps is getstripe --json's list of components of path.
func pflComps(t *testing.T, c *testcluster.Cluster, path string) []pflComp {
	t.Helper()
	var out struct {
		Count int       `json:"lcm_entry_count"`
		Comps []pflComp `json:"components"`
	}
	must(t, json.Unmarshal([]byte(sfRun(t, c, "getstripe", "--json", path)), &out))
	if out.Count != len(out.Comps) || out.Count == 0 {
		t.Fatalf("getstripe %s: %d components listed, count %d", path, len(out.Comps), out.Count)
	}
	return out.Comps
}

// pflInit is how many of path's components have objects.
func pflInit(t *testing.T, c *testcluster.Cluster, path string) int {
	t.Helper()
	n := 0
	for _, cp := range pflComps(t, c, path) {
		if cp.Flags == "init" {
			n++
		}
	}
	return n
}

// rpcCalls is how many calls of method the mount at mnt has made.
func rpcCalls(t *testing.T, mnt, method string) int64 {
	t.Helper()
	for _, m := range clientStats(t, mnt).Methods {
		if m.Name == method {
			return m.Calls
		}
	}
	return 0
}

// TestPFL follows one composite file through two mounts, each a client
// process of its own: created with its first component only, grown into
// the second and third by writes from either mount (each growth one
// layout_intent, none for a write inside what is there), read byte-exact
// by the mount whose copy of the layout is older, truncated back, grown
// by ftruncate without objects and then by an mmap store, stopped at the
// end of a last component that does not reach EOF (EFBIG), and all of it
// again after the MDTs restart, with fsck clean.
func TestPFL(t *testing.T) {
	c, mnts := coherent(t, 2)
	a, b := mnts[0], mnts[1]
	dir := filepath.Join(a, "pfl")
	must(t, os.Mkdir(dir, 0o755))
	sfRun(t, c, append(append([]string{"setstripe"}, pflLayout...), dir)...)
	if comps := pflComps(t, c, dir); len(comps) != 3 || comps[0].Flags == "init" || comps[2].End != "EOF" || comps[2].Count != -1 {
		t.Fatalf("directory default: %+v", comps)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	model := make([]byte, 100<<10)
	randBytes(rng, model)
	name := "f"
	pa, pb := filepath.Join(a, "pfl", name), filepath.Join(b, "pfl", name)
	writeFile(t, pa, model)
	if n := pflInit(t, c, pb); n != 1 {
		t.Fatalf("a 100 KiB file has %d components instantiated, want 1", n)
	}
	if v := fsxPathLayout(pb); strings.Count(v, "osts=") != 1 || strings.Count(v, "extent=") != 3 {
		t.Fatalf("lustre.lov of a 100 KiB file: %q", v)
	}

	// b opens the file now: its layout has one component.
	fb, err := os.OpenFile(pb, os.O_RDWR, 0)
	must(t, err)
	defer fb.Close()
	check := func(what string, f *os.File) {
		t.Helper()
		got := make([]byte, len(model)+4096)
		n, err := f.ReadAt(got, 0)
		if n != len(model) || !bytes.Equal(got[:n], model) {
			t.Fatalf("%s: read %d bytes (%v), want %d; first difference at %d", what, n, err, len(model), firstDiff(got[:n], model))
		}
	}
	check("b, first component", fb)

	pwrite := func(f *os.File, off int, n int) {
		t.Helper()
		p := make([]byte, n)
		randBytes(rng, p)
		_, err := f.WriteAt(p, int64(off))
		must(t, err)
		if off+n > len(model) {
			model = append(model, make([]byte, off+n-len(model))...)
		}
		copy(model[off:], p)
	}
	fa, err := os.OpenFile(pa, os.O_RDWR, 0)
	must(t, err)
	defer fa.Close()
	intents := rpcCalls(t, a, "layout_intent")
	pwrite(fa, 3<<20+12345, 70000) // into the second component
	must(t, fa.Sync())
	if d := rpcCalls(t, a, "layout_intent") - intents; d != 1 {
		t.Errorf("growing into the second component took %d layout_intents, want 1", d)
	}
	if n := pflInit(t, c, pb); n != 2 {
		t.Fatalf("after a write at 3 MiB: %d components instantiated, want 2", n)
	}
	check("b, second component written by a (b's layout older)", fb)

	intents = rpcCalls(t, b, "layout_intent")
	pwrite(fb, 20<<20-5, 300000) // b: into the third, across OSTs
	pwrite(fb, 8<<20-1000, 3000) // across the second's end: no new objects
	must(t, fb.Sync())
	if d := rpcCalls(t, b, "layout_intent") - intents; d != 1 {
		t.Errorf("b grew the file into the third component with %d layout_intents, want 1", d)
	}
	comps := pflComps(t, c, pa)
	if comps[2].Flags != "init" || len(comps[2].OSTs) != 4 || len(comps[1].OSTs) != 2 || len(comps[0].OSTs) != 1 {
		t.Fatalf("after writes into every component: %+v", comps)
	}
	check("a, after b's writes", fa)

	// Appends from both mounts, each one crossing nothing new.
	for i := range 6 {
		f := [...]*os.File{fa, fb}[i%2]
		ap, err := os.OpenFile(f.Name(), os.O_WRONLY|os.O_APPEND, 0)
		must(t, err)
		line := bytes.Repeat([]byte{byte('a' + i)}, 5000+i)
		_, err = ap.Write(line)
		must(t, err)
		must(t, ap.Close())
		model = append(model, line...)
	}
	check("a, after appends from both", fa)
	check("b, after appends from both", fb)

	// Back into the first component: the later objects are cut, their
	// components stay instantiated; a write at 2 MiB then needs no intent.
	must(t, fa.Truncate(500<<10))
	model = model[:500<<10]
	check("b, after a truncated into the first component", fb)
	intents = rpcCalls(t, a, "layout_intent")
	pwrite(fa, 2<<20, 4096)
	must(t, fa.Sync())
	if d := rpcCalls(t, a, "layout_intent") - intents; d != 0 {
		t.Errorf("a write into an instantiated component took %d layout_intents", d)
	}
	check("b, after the write at 2 MiB", fb)

	// Grown without objects (ftruncate), read as zeros from either mount,
	// then written through a shared mapping on b.
	pg := filepath.Join(b, "pfl", "g")
	g, err := os.OpenFile(pg, os.O_RDWR|os.O_CREATE, 0o644)
	must(t, err)
	defer g.Close()
	must(t, g.Truncate(3<<20))
	if n := pflInit(t, c, pg); n != 1 {
		t.Fatalf("ftruncate up instantiated %d components, want 1 (no data)", n)
	}
	zeros := readFile(t, filepath.Join(a, "pfl", "g"))
	if len(zeros) != 3<<20 || !bytes.Equal(zeros, make([]byte, 3<<20)) {
		t.Fatalf("a file grown by ftruncate reads %d bytes, not all zero", len(zeros))
	}
	m, err := unix.Mmap(int(g.Fd()), 0, 3<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	must(t, err)
	copy(m[2<<20+100:], "stored through a mapping")
	must(t, unix.Msync(m, unix.MS_SYNC))
	must(t, unix.Munmap(m))
	if n := pflInit(t, c, pg); n != 2 {
		t.Fatalf("an mmap store at 2 MiB left %d components instantiated, want 2", n)
	}
	if got := readFile(t, filepath.Join(a, "pfl", "g")); string(got[2<<20+100:2<<20+124]) != "stored through a mapping" {
		t.Fatalf("a reads %q where b stored through a mapping", got[2<<20+100:2<<20+124])
	}

	// A last component short of EOF: writes stop at its end.
	short := filepath.Join(a, "short")
	sfRun(t, c, "setstripe", "-E", "1M", "-E", "2M", "-c", "2", short)
	s, err := os.OpenFile(short, os.O_RDWR, 0)
	must(t, err)
	_, err = s.WriteAt(make([]byte, 4096), 2<<20-4096)
	must(t, err)
	_, err = s.WriteAt([]byte{1}, 2<<20)
	wantErrno(t, "a write past the last component's end", err, syscall.EFBIG)
	must(t, s.Close())

	// Servers restart; everything reads back the same, fsck is clean.
	must(t, fa.Close())
	must(t, fb.Close())
	for _, p := range c.MDTs {
		c.Stop(p)
		c.Restart(p)
	}
	if got := readFile(t, pb); !bytes.Equal(got, model) {
		t.Fatalf("after the MDTs restarted: %d bytes, want %d; first difference at %d", len(got), len(model), firstDiff(got, model))
	}
	if n := pflInit(t, c, pa); n != 3 {
		t.Fatalf("after restart %d components instantiated, want 3", n)
	}
	sfRun(t, c, "fsck", a)
}

// TestPFLBadLayouts checks that layouts whose components overlap, leave
// gaps, come out of order, end off their stripe size, put data on the MDT
// past its limit or ask for what is not built are refused with EINVAL and a message, by setstripe and by
// the xattr itself.
func TestPFLBadLayouts(t *testing.T) {
	c := testcluster.Start(t, 1, 2)
	mnt := c.MountFS()
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"-E", "8M", "-E", "4M", "-E", "-1"}, "is empty"},
		{[]string{"-E", "-1", "-E", "8M"}, "reaches EOF but is not the last"},
		{[]string{"-E", "1536k", "-S", "1M", "-E", "-1"}, "not a multiple of its stripe size"},
		{[]string{"-E", "1M", "-E", "-1", "--ec", "2+1"}, "must start and end on its rows of 2097152 bytes"},
		{[]string{"-E", "2M", "-E", "-1", "--ec", "2+1"}, "needs 3 OSTs, the filesystem has 2"},
		{[]string{"-E", "2M", "--ec", "1+1", "-E", "-1"}, "one erasure-coded component"},
		{[]string{"-E", "2M", "-L", "mdt", "-E", "-1"}, "the MDT refused a Data-on-MDT component of 2097152 bytes"},
		{[]string{"-E", "1M", "-E", "2M", "-L", "mdt", "-E", "-1"}, "only the first component may be on the MDT"},
		{[]string{"-E", "2+1"}, "erasure coding is --ec"},
	} {
		out, err := exec.Command(c.Bin, append(append([]string{"setstripe"}, tc.args...), filepath.Join(mnt, "x"))...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.msg) {
			t.Errorf("setstripe %q: %v: %s (want %q)", tc.args, err, out, tc.msg)
		}
	}
	if _, err := os.Stat(filepath.Join(mnt, "x")); !os.IsNotExist(err) {
		t.Errorf("a refused setstripe left its file behind: %v", err)
	}
	dir := filepath.Join(mnt, "d")
	must(t, os.Mkdir(dir, 0o755))
	for _, v := range []string{
		"extent=0-2097152 stripe_count=1;extent=1048576-EOF stripe_count=2", // overlap
		"extent=0-1048576;extent=2097152-EOF",                               // gap
		"extent=1048576-EOF",                                                // not from 0
		"extent=0-1048576 stripe_count=7;extent=1048576-EOF",                // wider than fits? shrinks: valid
	} {
		err := syscall.Setxattr(dir, proto.LayoutXattr, []byte(v), 0)
		if strings.Contains(v, "stripe_count=7") {
			if err != nil {
				t.Errorf("setxattr %q: %v (a count wider than the OSTs shrinks as it does for a plain default)", v, err)
			}
			continue
		}
		wantErrno(t, "setxattr "+v, err, syscall.EINVAL)
	}
}

// TestPFLFsx runs the fsx model over composite files whose components
// end at 256 KiB and 2 MiB, so its writes, truncates and mappings cross
// from one component into the next and back, then checks every file
// reads the same after a remount and that fsck finds the objects where
// the layouts say.
func TestPFLFsx(t *testing.T) {
	compositeFsx(t, "extent=0-262144 stripe_count=1 stripe_size=65536;extent=262144-2097152 stripe_count=2;extent=2097152-EOF stripe_count=-1")
}

// TestDoMFsx is TestPFLFsx with the first 128 KiB of every file on the
// MDT (Data-on-MDT): writes, truncates and mappings cross between the
// MDT's part and the OSTs'.
func TestDoMFsx(t *testing.T) {
	compositeFsx(t, "extent=0-131072 pattern=mdt;extent=131072-2097152 stripe_count=2;extent=2097152-EOF stripe_count=-1")
}

// TestECComponentFsx is TestPFLFsx over Data-on-MDT, a plain component
// and an erasure-coded one from 256 KiB (rows of 128 KiB): writes,
// truncates and mappings cross from the MDT to plain stripes to rows,
// whose parity fsck's scrub then checks.
func TestECComponentFsx(t *testing.T) {
	compositeFsx(t, "extent=0-131072 pattern=mdt;extent=131072-262144 stripe_count=2 stripe_size=65536;extent=262144-EOF stripe_size=65536 ec=2+1")
}

// compositeFsx runs the fsx model in directories whose default is lay,
// a composite layout of three components.
func compositeFsx(t *testing.T, lay string) {
	seed, nops := fsxParams(t, 1500)
	c := testcluster.Start(t, 1, 4)
	mnt := c.MountFS()
	x := newFsx(t, seed, nops, filepath.Join(mnt, "fsx"), filepath.Join(t.TempDir(), "fsx"))
	t.Cleanup(x.closeQuietly)
	for _, d := range append([]string{""}, fsxDirs...) {
		must(t, syscall.Setxattr(filepath.Join(mnt, "fsx", d), proto.LayoutXattr, []byte(lay), 0))
	}
	x.runOps()
	t.Logf("fsx: %s", x.summary())
	inst := map[int]int{}
	for _, p := range slices.Sorted(maps.Keys(x.files)) {
		l := fsxPathLayout(filepath.Join(x.root[fsxMnt], p))
		inst[strings.Count(l, "osts=")]++
		if strings.Count(l, "extent=") != 3 {
			t.Errorf("fsx: %s is not composite: %q", p, l)
		}
	}
	t.Logf("fsx: files by instantiated components: %v; layout_intents %d", inst, rpcCalls(t, mnt, "layout_intent"))
	x.finish(c)
	sfRun(t, c, "fsck", mnt)
	if strings.Contains(lay, "ec=") {
		// Files that reached the erasure-coded component have its rows
		// checked (fsx may have removed every file by the end).
		if out := sfRun(t, c, "scrub", mnt); !strings.Contains(out, " 0 rows with findings") || inst[3] > 0 && strings.Contains(out, " 0 erasure-coded files") {
			t.Fatalf("scrub after fsx:\n%s", out)
		}
	}
}

// TestPFLThroughNFS copies files into composite directories, one with
// Data-on-MDT, through the NFS gateway (another client of the
// filesystem): their writes instantiate every component they reach, and
// the FUSE mount and an NFS read both give each file back exact.
func TestPFLThroughNFS(t *testing.T) {
	c, mnt := mount(t)
	g := startNFS(t, c)
	for _, tc := range []struct {
		dir  string
		lay  []string
		size int64
		inst int
	}{
		{"pfl", pflLayout, 10<<20 + 12345, 3},
		{"dom", domLayout, 10<<20 + 12345, 3},
		{"dom", domLayout, 3901, 1}, // on the MDT alone
	} {
		dir := filepath.Join(mnt, tc.dir)
		if _, err := os.Stat(dir); err != nil {
			must(t, os.Mkdir(dir, 0o755))
			sfRun(t, c, append(append([]string{"setstripe"}, tc.lay...), dir)...)
		}
		name := fmt.Sprint(tc.size)
		src := filepath.Join(t.TempDir(), name)
		want := randomFile(t, src, int(tc.size), 7)
		mustNFS(t, "nfs-cp", src, g.url("/"+tc.dir+"/"+name))
		if got, n := fileSum(t, filepath.Join(dir, name)); got != want || int64(n) != tc.size {
			t.Fatalf("%s/%s through FUSE after nfs-cp in: %d bytes, checksum differs: %v", tc.dir, name, n, got != want)
		}
		if n := pflInit(t, c, filepath.Join(dir, name)); n != tc.inst {
			t.Errorf("%s/%s written over NFS has %d components instantiated, want %d", tc.dir, name, n, tc.inst)
		}
		back := src + ".back"
		mustNFS(t, "nfs-cp", g.url("/"+tc.dir+"/"+name), back)
		if got, n := fileSum(t, back); got != want || int64(n) != tc.size {
			t.Errorf("%s/%s after nfs-cp out: %d bytes, checksum differs: %v", tc.dir, name, n, got != want)
		}
	}
}
