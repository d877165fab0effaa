package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stripefs/stripefs/internal/testcluster"
)

const (
	fsxMaxIO      = 300 << 10        // largest single read or write
	fsxMaxFile    = 4<<20 + fsxMaxIO // no file grows past this
	fsxMaxHandles = 6                // open handles kept at once
	fsxHistory    = 60               // operations shown in a failure report
	fsxPage       = 4096             // mmap offsets are multiples of this
	fsxLayout     = "stripe_count=4 stripe_size=65536"
	fsxSmallUnit  = 64 << 10               // stripe unit of the striped directory
	fsxBigUnit    = 1 << 20                // default stripe unit
	fsxVerboseEnv = "STRIPEFS_FSX_VERBOSE" // set to log every operation
)

// The pool of names the operations work on: a few files in two
// directories, the second of which stripes new files over 4 OSTs.
var (
	fsxDirs  = []string{"plain", "striped"}
	fsxNames = []string{"f0", "f1", "f2"}
)

// TestFsx is a randomized file-operation test in the spirit of fsx. Every
// operation is applied both to a directory on a stripefs mount and to a
// directory on local disk, which serves as the reference: return values
// and errnos must match, and every byte read from stripefs must equal the
// byte read from the reference.
//
// The operations (fsxOps) work on a handful of files spread over two
// directories, one plain (1 MiB stripe units on one OST) and one striped
// over 4 OSTs in 64 KiB units, through file descriptors kept open across
// operations: pwrite and pread at random, often unaligned offsets of up to
// 4 MiB so that I/O straddles stripe units, ftruncate up and down, writes
// and reads through shared mmaps, fsync, fstat and stat, dropping the page
// cache, whole-file comparisons, open/close/reopen, and rename (within and
// across directories, over existing files) and unlink, which leave open
// descriptors on unlinked files. At the end both trees are compared in
// full, once as they are and once more after a remount, so data that only
// ever lived in the kernel's page cache is caught.
//
// STRIPEFS_FSX_SEED replays a run (the seed is always logged, and every
// failure names it with the operation index), STRIPEFS_FSX_OPS sets the
// number of operations (default 3000) and STRIPEFS_FSX_VERBOSE=1 logs every
// operation.
func TestFsx(t *testing.T) {
	seed, nops := fsxParams(t, 3000)

	c := testcluster.Start(t, 2, 4)
	mnt := c.MountFS()
	x := newFsx(t, seed, nops, filepath.Join(mnt, "fsx"), filepath.Join(t.TempDir(), "fsx"))
	t.Cleanup(x.closeQuietly) // runs before the cluster stops: a busy mount does not unmount

	start := time.Now()
	x.runOps()
	t.Logf("fsx: %d operations in %v: %s", nops, time.Since(start).Round(time.Millisecond), x.summary())

	for _, p := range slices.Sorted(maps.Keys(x.files)) {
		t.Logf("fsx: final %s: %s", p, fsxPathLayout(filepath.Join(x.root[fsxMnt], p)))
	}
	x.finish(c)
	t.Logf("fsx: done in %v", time.Since(start).Round(time.Millisecond))
}

// runOps does the run's operations, each picked at random.
func (x *fsx) runOps() {
	for x.op = 0; x.op < x.nops; x.op++ {
		op := x.pickOp()
		x.counts[op.name]++
		op.run(x)
	}
}

// finish closes every handle and compares both trees, then again after
// a remount of c, so data that only lived in the page cache is caught.
func (x *fsx) finish(c *testcluster.Cluster) {
	x.begin("final: close every handle")
	for len(x.handles) > 0 {
		x.closeHandle(x.handles[0])
	}
	x.begin("final: compare both trees")
	x.compareTree("")
	x.begin("final: remount and compare both trees")
	c.Unmount()
	c.MountFS()
	x.compareTree("")
}

// fsxOp is a kind of operation; it is picked with a probability
// proportional to its weight.
type fsxOp struct {
	name   string
	weight int
	run    func(*fsx)
}

var fsxOps = []fsxOp{
	{"write", 22, (*fsx).opWrite},
	{"read", 20, (*fsx).opRead},
	{"mapwrite", 6, (*fsx).opMapWrite},
	{"mapread", 4, (*fsx).opMapRead},
	{"truncate", 7, (*fsx).opTruncate},
	{"open", 4, (*fsx).opOpen},
	{"close", 3, (*fsx).opClose},
	{"reopen", 3, (*fsx).opReopen},
	{"rename", 4, (*fsx).opRename},
	{"unlink", 3, (*fsx).opUnlink},
	{"fsync", 2, (*fsx).opFsync},
	{"stat", 5, (*fsx).opStat},
	{"dropcache", 3, (*fsx).opDropCache},
	{"verify", 2, (*fsx).opVerify},
	{"readdir", 1, (*fsx).opReaddir},
}

// fsxSide is one of the two trees every operation is applied to.
type fsxSide int

const (
	fsxMnt fsxSide = iota // the stripefs mount, under test
	fsxRef                // local disk, the reference
)

var fsxSides = [...]fsxSide{fsxMnt, fsxRef}

func (s fsxSide) String() string { return [...]string{"stripefs", "local"}[s] }

// fsxNode is a file of the model: an inode, which names and handles refer to.
type fsxNode struct{ id int }

// fsxHandle is a file opened on both sides.
type fsxHandle struct {
	id     int
	node   *fsxNode
	opened string // the name it was opened by
	flags  int
	f      [2]*os.File
	fd     [2]int
}

func (h *fsxHandle) String() string {
	return fmt.Sprintf("h%d(file #%d, opened as %s %s)", h.id, h.node.id, h.opened, fsxFlags(h.flags))
}

// fsx is the state of a run: both trees, the model of their namespace and
// the open handles.
type fsx struct {
	t       *testing.T
	seed    uint64
	nops    int
	rng     *rand.Rand
	root    [2]string
	files   map[string]*fsxNode // model namespace: pool path → file
	handles []*fsxHandle
	nodes   int // files made so far
	nhandle int // handles opened so far

	op      int            // index of the current operation
	desc    string         // what it does
	history []string       // the last operations, for failure reports
	counts  map[string]int // operations run, by kind
	errnos  map[string]int // errors both sides agreed on, by call and errno
	verbose bool
}

func newFsx(t *testing.T, seed uint64, nops int, mountRoot, refRoot string) *fsx {
	x := &fsx{
		t:       t,
		seed:    seed,
		nops:    nops,
		rng:     rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		root:    [2]string{mountRoot, refRoot},
		files:   map[string]*fsxNode{},
		counts:  map[string]int{},
		errnos:  map[string]int{},
		verbose: os.Getenv(fsxVerboseEnv) != "",
		op:      -1,
	}
	x.begin("setup")
	for _, s := range fsxSides {
		for _, d := range append([]string{""}, fsxDirs...) {
			if err := os.Mkdir(filepath.Join(x.root[s], d), 0o755); err != nil {
				x.failf("%s: %v", s, err)
			}
		}
	}
	dir := filepath.Join(mountRoot, "striped")
	if err := syscall.Setxattr(dir, "lustre.lov", []byte(fsxLayout), 0); err != nil {
		t.Logf("fsx: setxattr lustre.lov %q on %s: %v; files there get the default layout", fsxLayout, dir, err)
	} else {
		t.Logf("fsx: %s: lustre.lov = %q", dir, fsxPathLayout(dir))
	}
	return x
}

func (x *fsx) pickOp() fsxOp {
	total := 0
	for _, o := range fsxOps {
		total += o.weight
	}
	r := x.rng.IntN(total)
	for _, o := range fsxOps {
		if r < o.weight {
			return o
		}
		r -= o.weight
	}
	panic("unreachable")
}

func (x *fsx) summary() string {
	var parts []string
	for _, o := range fsxOps {
		parts = append(parts, fmt.Sprintf("%s=%d", o.name, x.counts[o.name]))
	}
	var errs []string
	for e, n := range x.errnos {
		errs = append(errs, fmt.Sprintf("%s=%d", e, n))
	}
	slices.Sort(errs)
	return strings.Join(parts, " ") + "; matching errors: " + strings.Join(errs, " ")
}

// begin records what the current operation does.
func (x *fsx) begin(format string, args ...any) {
	x.desc = fmt.Sprintf(format, args...)
	line := fmt.Sprintf("  #%d %s", x.op, x.desc)
	x.history = append(x.history, line)
	if len(x.history) > fsxHistory {
		x.history = x.history[len(x.history)-fsxHistory:]
	}
	if x.verbose {
		x.t.Log(line)
	}
}

// failf ends the test with everything needed to replay the failure.
func (x *fsx) failf(format string, args ...any) {
	x.t.Helper()
	x.t.Fatalf("fsx: FAILED at op %d with seed %d: %s: %s\n"+
		"replay: STRIPEFS_FSX_SEED=%d STRIPEFS_FSX_OPS=%d go test ./e2e -run TestFsx -count=1 -v\n"+
		"last operations:\n%s",
		x.op, x.seed, x.desc, fmt.Sprintf(format, args...), x.seed, x.nops, strings.Join(x.history, "\n"))
}

// sameErr fails the test unless both sides returned the same errno, and
// reports whether both succeeded.
func (x *fsx) sameErr(what string, errs [2]error) bool {
	x.t.Helper()
	for _, s := range fsxSides {
		var errno syscall.Errno
		if errs[s] != nil && !errors.As(errs[s], &errno) {
			x.failf("%s on %s: unexpected error %v", what, s, errs[s])
		}
	}
	if fsxErrno(errs[fsxMnt]) != fsxErrno(errs[fsxRef]) {
		x.failf("%s: stripefs returned %s, local disk %s", what, fsxErrString(errs[fsxMnt]), fsxErrString(errs[fsxRef]))
	}
	if errs[fsxRef] != nil {
		x.errnos[strings.Fields(what)[0]+":"+unix.ErrnoName(fsxErrno(errs[fsxRef]))]++
	}
	return errs[fsxRef] == nil
}

func fsxErrno(err error) syscall.Errno {
	var errno syscall.Errno
	errors.As(err, &errno)
	return errno
}

func fsxErrString(err error) string {
	if err == nil {
		return "success"
	}
	return fmt.Sprintf("%s (%v)", unix.ErrnoName(fsxErrno(err)), err)
}

// fsxRetry retries a system call interrupted by a signal.
func fsxRetry[T any](f func() (T, error)) (T, error) {
	for {
		v, err := f()
		if err != syscall.EINTR {
			return v, err
		}
	}
}

// Choosing operands.

func (x *fsx) poolPath() string {
	return path.Join(fsxDirs[x.rng.IntN(len(fsxDirs))], fsxNames[x.rng.IntN(len(fsxNames))])
}

// existingPath is the name of a random file of the model, or "".
func (x *fsx) existingPath() string {
	if len(x.files) == 0 {
		return ""
	}
	names := make([]string, 0, len(x.files))
	for p := range x.files {
		names = append(names, p)
	}
	slices.Sort(names)
	return names[x.rng.IntN(len(names))]
}

// pathOf is the current name of n, or "" if it has none.
func (x *fsx) pathOf(n *fsxNode) string {
	var names []string
	for p, m := range x.files {
		if m == n {
			names = append(names, p)
		}
	}
	slices.Sort(names)
	if len(names) == 0 {
		return ""
	}
	return names[0]
}

// ioSize is a log-uniform transfer size of 1 B .. fsxMaxIO, a quarter of
// them whole pages.
func (x *fsx) ioSize() int64 {
	n := int64(math.Exp(x.rng.Float64() * math.Log(fsxMaxIO)))
	if x.rng.IntN(4) == 0 {
		n = max(n&^(fsxPage-1), fsxPage)
	}
	return min(max(n, 1), fsxMaxIO)
}

// offset is a file offset in [0, limit): uniform, page aligned, near a
// 64 KiB or 1 MiB stripe boundary, or near the end of the file.
func (x *fsx) offset(limit, size int64) int64 {
	var off int64
	switch x.rng.IntN(8) {
	case 0, 1, 2:
		off = x.rng.Int64N(limit)
	case 3, 4:
		off = x.rng.Int64N(limit) &^ (fsxPage - 1)
	case 5, 6:
		unit := [...]int64{fsxSmallUnit, fsxBigUnit}[x.rng.IntN(2)]
		off = x.rng.Int64N(limit/unit+1)*unit + x.rng.Int64N(2*fsxPage+1) - fsxPage
	default:
		off = size + x.rng.Int64N(2*fsxPage+1) - fsxPage
	}
	return min(max(off, 0), limit-1)
}

// handleFor returns a handle to operate on: mostly one already open, else
// a new one on an existing file (or on a new file if there is none).
func (x *fsx) handleFor() *fsxHandle {
	if n := len(x.handles); n > 0 && (n >= fsxMaxHandles || x.rng.IntN(8) != 0) {
		return x.handles[x.rng.IntN(n)]
	}
	p, flags := x.existingPath(), os.O_RDWR
	if p == "" {
		p, flags = x.poolPath(), os.O_RDWR|os.O_CREATE
	}
	x.begin("open %s %s", p, fsxFlags(flags))
	return x.open(p, flags)
}

// size is the reference size of h's file.
func (x *fsx) size(h *fsxHandle) int64 {
	var st syscall.Stat_t
	if _, err := fsxRetry(func() (int, error) { return 0, syscall.Fstat(h.fd[fsxRef], &st) }); err != nil {
		x.failf("fstat %s on local disk: %v", h, err)
	}
	return st.Size
}

// Data.

// fill puts into b the data op writes at file offset off. Each byte
// depends on the seed, the op and the byte's file offset, so data that is
// stale, or misplaced by any distance (a stripe unit, say), does not match.
func (x *fsx) fill(b []byte, op int, off int64) {
	for i := range b {
		p := uint64(off) + uint64(i)
		b[i] = byte(fsxMix(x.seed^uint64(op+1)<<40^p>>3) >> (8 * (p & 7)))
	}
}

func fsxMix(z uint64) uint64 { // splitmix64's finalizer
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// origin guesses where wrong data read at file offset off came from: zeros,
// or (most of) what an earlier operation wrote at that offset or at one a
// few stripe units away.
func (x *fsx) origin(got []byte, off int64) string {
	got = got[:min(len(got), 16)]
	if !slices.ContainsFunc(got, func(b byte) bool { return b != 0 }) {
		return "zeros"
	}
	shifts := []int64{0}
	for k := int64(1); k <= 4; k++ {
		shifts = append(shifts, k*fsxSmallUnit, -k*fsxSmallUnit, k*fsxBigUnit, -k*fsxBigUnit)
	}
	want := make([]byte, len(got))
	for op := x.op; op >= 0; op-- {
		for _, d := range shifts {
			if off+d < 0 {
				continue
			}
			x.fill(want, op, off+d)
			same := 0
			for i := range got {
				if got[i] == want[i] {
					same++
				}
			}
			if same*4 < len(got)*3 {
				continue
			}
			what := fmt.Sprintf("%d of %d bytes as op #%d wrote them", same, len(got), op)
			if d == 0 {
				return what + " at that offset"
			}
			return fmt.Sprintf("%s at file offset %d (misplaced by %+d)", what, off+d, -d)
		}
	}
	return "unknown data"
}

// checkData compares bytes read at file offset off from both sides.
func (x *fsx) checkData(what string, off int64, got, want []byte, layout string) {
	x.t.Helper()
	if bytes.Equal(got, want) {
		return
	}
	if len(got) != len(want) {
		x.failf("%s: stripefs returned %d bytes, local disk %d", what, len(got), len(want))
	}
	first, last, n := -1, -1, 0
	for i := range got {
		if got[i] != want[i] {
			if first < 0 {
				first = i
			}
			last, n = i, n+1
		}
	}
	at := off + int64(first)
	show := func(b []byte) []byte { return b[first:min(len(b), first+16)] }
	x.failf("%s: %d bytes differ in file range [%d, %d]; first at file offset %d "+
		"(64 KiB unit %d +%d, 1 MiB unit %d +%d)\n  want %x\n  got  %x = %s\n  stripefs layout: %s",
		what, n, off+int64(first), off+int64(last), at,
		at/fsxSmallUnit, at%fsxSmallUnit, at/fsxBigUnit, at%fsxBigUnit,
		show(want), show(got), x.origin(got[first:], at), layout)
}

func fsxPathLayout(p string) string {
	b := make([]byte, 512)
	n, err := unix.Getxattr(p, "lustre.lov", b)
	if err != nil {
		return err.Error()
	}
	return string(b[:n])
}

func (x *fsx) layoutOf(h *fsxHandle) string {
	b := make([]byte, 512)
	n, err := unix.Fgetxattr(h.fd[fsxMnt], "lustre.lov", b)
	if err != nil {
		return err.Error()
	}
	return string(b[:n])
}

// Handles.

// open opens p on both sides and adds the handle to the model; it returns
// nil if both sides failed alike.
func (x *fsx) open(p string, flags int) *fsxHandle {
	x.t.Helper()
	h := &fsxHandle{opened: p, flags: flags}
	var errs [2]error
	for _, s := range fsxSides {
		h.f[s], errs[s] = os.OpenFile(filepath.Join(x.root[s], p), flags, 0o644)
	}
	if (errs[fsxMnt] == nil) != (errs[fsxRef] == nil) {
		for _, f := range h.f {
			if f != nil {
				f.Close()
			}
		}
	}
	if !x.sameErr("open", errs) {
		return nil
	}
	for _, s := range fsxSides {
		h.fd[s] = int(h.f[s].Fd())
	}
	h.node = x.files[p]
	if h.node == nil {
		x.nodes++
		h.node = &fsxNode{id: x.nodes}
		x.files[p] = h.node
	}
	x.nhandle++
	h.id = x.nhandle
	x.handles = append(x.handles, h)
	return h
}

// closeHandle closes h on both sides; close reports the errors of the
// flush to the servers, so they must match too.
func (x *fsx) closeHandle(h *fsxHandle) {
	x.t.Helper()
	x.handles = slices.DeleteFunc(x.handles, func(o *fsxHandle) bool { return o == h })
	var errs [2]error
	for _, s := range fsxSides {
		errs[s] = h.f[s].Close()
	}
	x.sameErr("close", errs)
}

// closeQuietly closes whatever is open when the test stops early.
func (x *fsx) closeQuietly() {
	for _, h := range x.handles {
		for _, f := range h.f {
			f.Close()
		}
	}
	x.handles = nil
}

// Operations.

func (x *fsx) opWrite() {
	h := x.handleFor()
	if h == nil {
		return
	}
	n := x.ioSize()
	off := min(x.offset(fsxMaxFile, x.size(h)), fsxMaxFile-n)
	x.begin("write %s [%d, %d) %d bytes", h, off, off+n, n)
	buf := make([]byte, n)
	x.fill(buf, x.op, off)
	var cnt [2]int
	var errs [2]error
	for _, s := range fsxSides {
		cnt[s], errs[s] = fsxRetry(func() (int, error) { return syscall.Pwrite(h.fd[s], buf, off) })
	}
	if x.sameErr("pwrite", errs) && cnt[fsxMnt] != cnt[fsxRef] {
		x.failf("pwrite: stripefs wrote %d bytes, local disk %d", cnt[fsxMnt], cnt[fsxRef])
	}
}

func (x *fsx) opRead() {
	h := x.handleFor()
	if h == nil {
		return
	}
	size := x.size(h)
	n := x.ioSize()
	off := x.offset(size+fsxSmallUnit, size) // some reads start past the end
	x.begin("read %s [%d, %d) %d bytes, file size %d", h, off, off+n, n, size)
	var bufs [2][]byte
	var errs [2]error
	for _, s := range fsxSides {
		bufs[s] = make([]byte, n)
		var got int
		got, errs[s] = fsxRetry(func() (int, error) { return syscall.Pread(h.fd[s], bufs[s], off) })
		bufs[s] = bufs[s][:max(got, 0)]
	}
	if x.sameErr("pread", errs) {
		x.checkData("pread", off, bufs[fsxMnt], bufs[fsxRef], x.layoutOf(h))
	}
}

// truncate sets h's file size on both sides.
func (x *fsx) truncate(what string, h *fsxHandle, size int64) bool {
	x.t.Helper()
	var errs [2]error
	for _, s := range fsxSides {
		_, errs[s] = fsxRetry(func() (int, error) { return 0, syscall.Ftruncate(h.fd[s], size) })
	}
	return x.sameErr(what, errs)
}

func (x *fsx) opTruncate() {
	h := x.handleFor()
	if h == nil {
		return
	}
	size := x.size(h)
	var to int64
	switch r := x.rng.IntN(10); {
	case r < 2:
		to = 0
	case r < 5:
		to = x.rng.Int64N(size + 1) // down
	case r < 8:
		to = size + x.rng.Int64N(fsxBigUnit) // up
	default: // onto a stripe boundary
		unit := [...]int64{fsxSmallUnit, fsxBigUnit}[x.rng.IntN(2)]
		to = x.rng.Int64N(fsxMaxFile/unit+1) * unit
	}
	to = min(to, fsxMaxFile)
	if p := x.pathOf(h.node); p != "" && x.rng.IntN(4) == 0 {
		x.begin("truncate %s (file of %s) by name from %d to %d", p, h, size, to)
		var errs [2]error
		for _, s := range fsxSides {
			_, errs[s] = fsxRetry(func() (int, error) { return 0, syscall.Truncate(filepath.Join(x.root[s], p), to) })
		}
		x.sameErr("truncate", errs)
		return
	}
	x.begin("truncate %s from %d to %d", h, size, to)
	x.truncate("ftruncate", h, to)
}

// mapped maps [off, off+n) of h's file on side s, with the offset rounded
// down to a page, and runs f on the requested bytes; a fault touching the
// mapping fails the test instead of crashing it.
func (x *fsx) mapped(s fsxSide, h *fsxHandle, off, n int64, prot int, f func(b []byte)) error {
	pg := off &^ (fsxPage - 1)
	m, err := syscall.Mmap(h.fd[s], pg, int(off+n-pg), prot, syscall.MAP_SHARED)
	if err != nil {
		return err
	}
	func() {
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		defer func() {
			if r := recover(); r != nil {
				x.failf("%s: fault touching the mapping of [%d, %d): %v", s, off, off+n, r)
			}
		}()
		f(m[off-pg:])
	}()
	return syscall.Munmap(m)
}

func (x *fsx) opMapWrite() {
	h := x.handleFor()
	if h == nil {
		return
	}
	size := x.size(h)
	n := x.ioSize()
	off := min(x.offset(fsxMaxFile, size), fsxMaxFile-n)
	x.begin("mapwrite %s [%d, %d) %d bytes, file size %d", h, off, off+n, n, size)
	if off+n > size && !x.truncate("ftruncate to extend for mapwrite", h, off+n) {
		return
	}
	buf := make([]byte, n)
	x.fill(buf, x.op, off)
	var errs [2]error
	for _, s := range fsxSides {
		errs[s] = x.mapped(s, h, off, n, syscall.PROT_READ|syscall.PROT_WRITE, func(b []byte) { copy(b, buf) })
	}
	x.sameErr("mmap", errs)
}

func (x *fsx) opMapRead() {
	h := x.handleFor()
	if h == nil {
		return
	}
	size := x.size(h)
	if size == 0 {
		x.begin("mapread %s: empty file, skipped", h)
		return
	}
	off := x.offset(size, size)
	n := min(x.ioSize(), size-off)
	x.begin("mapread %s [%d, %d) %d bytes, file size %d", h, off, off+n, n, size)
	var bufs [2][]byte
	var errs [2]error
	for _, s := range fsxSides {
		errs[s] = x.mapped(s, h, off, n, syscall.PROT_READ, func(b []byte) { bufs[s] = bytes.Clone(b[:n]) })
	}
	if x.sameErr("mmap", errs) {
		x.checkData("mapread", off, bufs[fsxMnt], bufs[fsxRef], x.layoutOf(h))
	}
}

func (x *fsx) opOpen() {
	p := x.poolPath()
	var flags int
	switch r := x.rng.IntN(20); {
	case r < 9:
		flags = os.O_RDWR | os.O_CREATE
	case r < 12:
		flags = os.O_RDWR | os.O_CREATE | os.O_EXCL
	case r < 15:
		flags = os.O_RDWR | os.O_CREATE | os.O_TRUNC
	case r < 17:
		flags = os.O_RDWR
	case r < 19:
		flags = os.O_RDONLY
	default:
		flags = os.O_WRONLY | os.O_CREATE
	}
	if len(x.handles) >= fsxMaxHandles {
		h := x.handles[x.rng.IntN(len(x.handles))]
		x.begin("close %s to make room", h)
		x.closeHandle(h)
	}
	x.begin("open %s %s", p, fsxFlags(flags))
	x.open(p, flags)
}

func (x *fsx) opClose() {
	if len(x.handles) == 0 {
		x.begin("close: nothing open")
		return
	}
	h := x.handles[x.rng.IntN(len(x.handles))]
	x.begin("close %s", h)
	x.closeHandle(h)
}

// opReopen closes a handle and opens its file again by its current name,
// as fsx's close/open does.
func (x *fsx) opReopen() {
	if len(x.handles) == 0 {
		x.begin("reopen: nothing open")
		return
	}
	h := x.handles[x.rng.IntN(len(x.handles))]
	p := x.pathOf(h.node)
	x.begin("reopen %s as %q", h, p)
	x.closeHandle(h)
	if p != "" {
		x.open(p, h.flags&(os.O_RDONLY|os.O_WRONLY|os.O_RDWR))
	}
}

func (x *fsx) opRename() {
	src := x.existingPath()
	if src == "" || x.rng.IntN(5) == 0 {
		src = x.poolPath()
	}
	var dst string
	switch r := x.rng.IntN(20); {
	case r < 9:
		dst = x.existingPath() // over an existing file
	case r < 19:
		dst = x.poolPath()
	default:
		dst = fsxDirs[x.rng.IntN(len(fsxDirs))] // onto a directory: EISDIR
	}
	if dst == "" {
		dst = x.poolPath()
	}
	x.begin("rename %s -> %s", src, dst)
	var errs [2]error
	for _, s := range fsxSides {
		errs[s] = syscall.Rename(filepath.Join(x.root[s], src), filepath.Join(x.root[s], dst))
	}
	if x.sameErr("rename", errs) && src != dst {
		x.files[dst] = x.files[src]
		delete(x.files, src)
	}
}

func (x *fsx) opUnlink() {
	var p string
	switch r := x.rng.IntN(20); {
	case r < 17:
		p = x.existingPath()
	case r < 19:
		p = x.poolPath()
	default:
		p = fsxDirs[x.rng.IntN(len(fsxDirs))] // a directory: EISDIR
	}
	if p == "" {
		p = x.poolPath()
	}
	x.begin("unlink %s", p)
	var errs [2]error
	for _, s := range fsxSides {
		errs[s] = syscall.Unlink(filepath.Join(x.root[s], p))
	}
	if x.sameErr("unlink", errs) {
		delete(x.files, p)
	}
}

func (x *fsx) opFsync() {
	h := x.handleFor()
	if h == nil {
		return
	}
	call, name := syscall.Fsync, "fsync"
	if x.rng.IntN(3) == 0 {
		call, name = syscall.Fdatasync, "fdatasync"
	}
	x.begin("%s %s", name, h)
	var errs [2]error
	for _, s := range fsxSides {
		_, errs[s] = fsxRetry(func() (int, error) { return 0, call(h.fd[s]) })
	}
	x.sameErr(name, errs)
}

// opStat compares the size, link count and mode from fstat of a handle or
// stat of a name.
func (x *fsx) opStat() {
	var st [2]syscall.Stat_t
	var errs [2]error
	var what string
	if x.rng.IntN(2) == 0 {
		h := x.handleFor()
		if h == nil {
			return
		}
		what = "fstat"
		x.begin("fstat %s", h)
		for _, s := range fsxSides {
			_, errs[s] = fsxRetry(func() (int, error) { return 0, syscall.Fstat(h.fd[s], &st[s]) })
		}
	} else {
		p := x.existingPath()
		if p == "" || x.rng.IntN(4) == 0 {
			p = x.poolPath()
		}
		what = "stat"
		x.begin("stat %s", p)
		for _, s := range fsxSides {
			_, errs[s] = fsxRetry(func() (int, error) { return 0, syscall.Stat(filepath.Join(x.root[s], p), &st[s]) })
		}
	}
	if !x.sameErr(what, errs) {
		return
	}
	m, r := &st[fsxMnt], &st[fsxRef]
	if m.Size != r.Size || m.Nlink != r.Nlink || m.Mode != r.Mode {
		x.failf("%s: stripefs has size %d nlink %d mode %#o, local disk size %d nlink %d mode %#o",
			what, m.Size, m.Nlink, m.Mode, r.Size, r.Nlink, r.Mode)
	}
}

// opDropCache asks the kernel to drop the file's clean cached pages, so
// that later reads go to the servers.
func (x *fsx) opDropCache() {
	h := x.handleFor()
	if h == nil {
		return
	}
	x.begin("dropcache %s", h)
	var errs [2]error
	for _, s := range fsxSides {
		errs[s] = unix.Fadvise(h.fd[s], 0, 0, unix.FADV_DONTNEED)
	}
	x.sameErr("fadvise(DONTNEED)", errs)
}

// opVerify compares a whole file, through an open handle or by name.
func (x *fsx) opVerify() {
	if p := x.existingPath(); p != "" && x.rng.IntN(3) == 0 {
		x.begin("verify %s by name", p)
		x.compareFile(p)
		return
	}
	h := x.handleFor()
	if h == nil {
		return
	}
	x.begin("verify %s", h)
	var data [2][]byte
	var errs [2]error
	for _, s := range fsxSides {
		data[s], errs[s] = fsxReadAll(h.fd[s])
	}
	if x.sameErr("pread", errs) {
		x.checkData("whole-file pread", 0, data[fsxMnt], data[fsxRef], x.layoutOf(h))
	}
}

// fsxReadAll reads a file from offset 0 to its end with pread.
func fsxReadAll(fd int) ([]byte, error) {
	var out []byte
	buf := make([]byte, 1<<20)
	for {
		n, err := fsxRetry(func() (int, error) { return syscall.Pread(fd, buf, int64(len(out))) })
		if err != nil || n == 0 {
			return out, err
		}
		out = append(out, buf[:n]...)
	}
}

func (x *fsx) opReaddir() {
	x.begin("readdir")
	x.compareDirs()
}

// compareDirs checks that both sides list the model's files.
func (x *fsx) compareDirs() {
	for _, d := range fsxDirs {
		var want []string
		for p := range x.files {
			if path.Dir(p) == d {
				want = append(want, path.Base(p))
			}
		}
		slices.Sort(want)
		for _, s := range fsxSides {
			ents, err := os.ReadDir(filepath.Join(x.root[s], d))
			if err != nil {
				x.failf("readdir %s on %s: %v", d, s, err)
			}
			var got []string
			for _, e := range ents {
				got = append(got, e.Name())
			}
			if !slices.Equal(got, want) {
				x.failf("readdir %s on %s lists %q, want %q", d, s, got, want)
			}
		}
	}
}

// compareFile compares the file named p (relative to the roots) in full.
func (x *fsx) compareFile(p string) {
	x.t.Helper()
	var data [2][]byte
	var errs [2]error
	for _, s := range fsxSides {
		data[s], errs[s] = os.ReadFile(filepath.Join(x.root[s], p))
	}
	if x.sameErr("read "+p, errs) {
		x.checkData("whole-file read of "+p, 0, data[fsxMnt], data[fsxRef], fsxPathLayout(filepath.Join(x.root[fsxMnt], p)))
	}
}

// compareTree compares the directory rel of both trees recursively: the
// names and types of the entries, and every file's size and content.
func (x *fsx) compareTree(rel string) {
	x.t.Helper()
	var lists [2][]string
	var ents [2][]os.DirEntry
	for _, s := range fsxSides {
		var err error
		ents[s], err = os.ReadDir(filepath.Join(x.root[s], rel))
		if err != nil {
			x.failf("readdir %q on %s: %v", rel, s, err)
		}
		for _, e := range ents[s] {
			lists[s] = append(lists[s], e.Name()+" "+e.Type().String())
		}
	}
	if !slices.Equal(lists[fsxMnt], lists[fsxRef]) {
		x.failf("directory %q: stripefs lists %q, local disk %q", rel, lists[fsxMnt], lists[fsxRef])
	}
	for _, e := range ents[fsxRef] {
		p := path.Join(rel, e.Name())
		switch {
		case e.IsDir():
			x.compareTree(p)
		case e.Type().IsRegular():
			var st [2]syscall.Stat_t
			for _, s := range fsxSides {
				if err := syscall.Stat(filepath.Join(x.root[s], p), &st[s]); err != nil {
					x.failf("stat %s on %s: %v", p, s, err)
				}
			}
			if st[fsxMnt].Size != st[fsxRef].Size {
				x.failf("%s: stripefs size %d, local disk %d", p, st[fsxMnt].Size, st[fsxRef].Size)
			}
			x.compareFile(p)
		}
	}
}

func fsxFlags(flags int) string {
	s := [...]string{"O_RDONLY", "O_WRONLY", "O_RDWR"}[flags&(os.O_RDONLY|os.O_WRONLY|os.O_RDWR)]
	for _, f := range []struct {
		bit  int
		name string
	}{{os.O_CREATE, "O_CREAT"}, {os.O_EXCL, "O_EXCL"}, {os.O_TRUNC, "O_TRUNC"}} {
		if flags&f.bit != 0 {
			s += "|" + f.name
		}
	}
	return s
}

// fsxParams reads STRIPEFS_FSX_SEED (default: the clock) and
// STRIPEFS_FSX_OPS (default defOps) and logs how to replay the run.
func fsxParams(t *testing.T, defOps int) (seed uint64, nops int) {
	t.Helper()
	seed = uint64(time.Now().UnixNano())
	if s := os.Getenv("STRIPEFS_FSX_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 0, 64)
		if err != nil {
			t.Fatalf("STRIPEFS_FSX_SEED=%q: %v", s, err)
		}
		seed = v
	}
	nops = defOps
	if s := os.Getenv("STRIPEFS_FSX_OPS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 {
			t.Fatalf("STRIPEFS_FSX_OPS=%q: not a count", s)
		}
		nops = v
	}
	t.Logf("fsx: seed %d, %d operations (replay with STRIPEFS_FSX_SEED=%d)", seed, nops, seed)
	return seed, nops
}
