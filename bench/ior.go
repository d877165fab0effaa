package bench

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/pkg/xattr"

	"github.com/stripefs/stripefs/stats"
)

// IOR limits: every task holds one transfer buffer.
const (
	MaxTasks      = 1024
	maxIORBuffers = 4 << 30 // tasks × transfer size
)

// IORConfig is one IOR-style run. The flags of IOR that it mirrors are
// given with each field.
type IORConfig struct {
	Path        string `json:"path"`          // -o: test file; with -F, PATH.00000000 and so on
	Write       bool   `json:"write"`         // -w
	Read        bool   `json:"read"`          // -r
	Xfer        int64  `json:"xfer"`          // -t: bytes per read or write call
	Block       int64  `json:"block"`         // -b: bytes per task per segment
	Segments    int    `json:"segments"`      // -s
	Tasks       int    `json:"tasks"`         // -N / --procs: goroutines, each with its own descriptor
	FilePerProc bool   `json:"file_per_proc"` // -F
	Reorder     bool   `json:"reorder_tasks"` // -C: task i reads task (i+1)%N's data
	Fsync       bool   `json:"fsync"`         // -e: fsync before closing after writing
	Random      bool   `json:"random_offsets"`
	CheckWrite  bool   `json:"check_write"` // -W: read back and verify after the write phase
	CheckRead   bool   `json:"check_read"`  // -R: verify the data of the read phase
	Keep        bool   `json:"keep_file"`   // -k: do not remove the files written
	// Seed (-G) makes the data pattern reproducible, so a later read-only
	// run with -R can check a file kept with -k; HaveSeed says it was given.
	Seed     uint64 `json:"-"`
	HaveSeed bool   `json:"-"`
	// DropCaches empties the machine's page cache before each read pass
	// (needs root); without it only the test files' pages are dropped.
	DropCaches bool `json:"drop_caches"`
	// Via are the same test path through other mounts of the filesystem
	// (other clients, as MPI ranks on other nodes would be): task t uses
	// the (t mod (1+len(Via)))-th of Path, Via[0], Via[1]…
	Via []string `json:"via,omitempty"`
	// Meter, if set, counts the bytes moved, for a progress bar.
	Meter *Meter `json:"-"`
}

// pathOf is the test path task t uses: Path or one of Via.
func (c *IORConfig) pathOf(t int) string {
	if k := t % (1 + len(c.Via)); k > 0 {
		return c.Via[k-1]
	}
	return c.Path
}

// Validate checks the configuration the way IOR's option parser does,
// with an error that names the flag.
func (c *IORConfig) Validate() error {
	switch {
	case c.Path == "":
		return errors.New("ior: -o PATH (the test file) is required")
	case !c.Write && !c.Read:
		return errors.New("ior: nothing to do: give -w, -r or both")
	case c.Xfer <= 0:
		return fmt.Errorf("ior: transfer size (-t) must be positive, got %d", c.Xfer)
	case c.Xfer > MaxXfer:
		return fmt.Errorf("ior: transfer size (-t) %s is above the %s limit", FormatSize(c.Xfer), FormatSize(MaxXfer))
	case c.Block <= 0:
		return fmt.Errorf("ior: block size (-b) must be positive, got %d", c.Block)
	case c.Block%c.Xfer != 0:
		return fmt.Errorf("ior: block size (-b) %s is not a multiple of the transfer size (-t) %s", FormatSize(c.Block), FormatSize(c.Xfer))
	case c.Segments < 1:
		return fmt.Errorf("ior: segment count (-s) must be at least 1, got %d", c.Segments)
	case c.Tasks < 1 || c.Tasks > MaxTasks:
		return fmt.Errorf("ior: task count (--procs) must be 1 to %d, got %d", MaxTasks, c.Tasks)
	case int64(c.Tasks)*c.Xfer > maxIORBuffers:
		return fmt.Errorf("ior: %d tasks × %s transfer buffers exceed %s of memory", c.Tasks, FormatSize(c.Xfer), FormatSize(maxIORBuffers))
	case c.CheckWrite && !c.Write:
		return errors.New("ior: -W checks the data written: it needs -w")
	case c.CheckRead && !c.Read:
		return errors.New("ior: -R checks the data read: it needs -r")
	case c.CheckRead && !c.Write && !c.HaveSeed:
		return errors.New("ior: -R without -w needs -G SEED, the seed printed by the run that wrote the file (with -k)")
	}
	hi, perTask := bits.Mul64(uint64(c.Segments), uint64(c.Block))
	hi2, total := bits.Mul64(perTask, uint64(c.Tasks))
	if hi != 0 || hi2 != 0 || total > math.MaxInt64 {
		return fmt.Errorf("ior: %d segments × %d tasks × %s blocks overflow a file offset", c.Segments, c.Tasks, FormatSize(c.Block))
	}
	if st, err := os.Stat(c.Path); err == nil && st.IsDir() {
		return fmt.Errorf("ior: -o %s is a directory; give the path of a test file in it, e.g. %s", c.Path, filepath.Join(c.Path, "ior"))
	}
	for _, p := range append([]string{c.Path}, c.Via...) {
		if st, err := os.Stat(filepath.Dir(p)); err != nil {
			return fmt.Errorf("ior: %w", err)
		} else if !st.IsDir() {
			return fmt.Errorf("ior: %s is not a directory", filepath.Dir(p))
		}
	}
	return nil
}

// FSCounters are the stripefs counters that moved during one phase,
// filesystem-wide (every client and OST of the filesystem).
type FSCounters struct {
	OSTWriteRPCs     int64 `json:"ost_write_rpcs"`
	OSTReadRPCs      int64 `json:"ost_read_rpcs"`
	ReadModifyWrites int64 `json:"client_read_modify_writes"`
	OSTWriteBytes    int64 `json:"ost_write_bytes"` // bulk data the OSTs received
	OSTReadBytes     int64 `json:"ost_read_bytes"`  // bulk data the OSTs sent
}

// IORPhase is one timed pass of every task, IOR's result line.
type IORPhase struct {
	Access       string      `json:"access"` // write, write-check (-W) or read
	Bytes        int64       `json:"bytes"`
	Ops          int64       `json:"ops"`
	MiBps        float64     `json:"bw_mib_s"`  // bytes / total time, as IOR
	IOPS         float64     `json:"iops"`      // ops / total time
	LatencySec   float64     `json:"latency_s"` // mean duration of one read or write call
	OpenSec      float64     `json:"open_s"`
	XferSec      float64     `json:"xfer_s"` // IOR's wr/rd: the calls, and the fsync with -e
	CloseSec     float64     `json:"close_s"`
	TotalSec     float64     `json:"total_s"`
	Verified     bool        `json:"verified"` // every byte read was checked against the pattern
	Stripefs     *FSCounters `json:"stripefs,omitempty"`
	DroppedCache bool        `json:"dropped_caches,omitempty"` // the global drop worked before this read pass
}

// IORResult is a whole run: one JSON object with --json.
type IORResult struct {
	Benchmark string     `json:"benchmark"`
	Time      time.Time  `json:"time"`
	Config    IORConfig  `json:"config"`
	Seed      string     `json:"seed"` // -G value that reproduces the data
	Files     []string   `json:"files"`
	FileBytes int64      `json:"file_bytes"`      // size of each file
	Aggregate int64      `json:"aggregate_bytes"` // over all tasks
	Phases    []IORPhase `json:"phases"`
	Notes     []string   `json:"notes,omitempty"`
}

// iorHooks are test seams.
type iorHooks struct {
	afterWrite func(files []string) error // between the write phase and any read
}

// IOR runs an IOR-style benchmark: Tasks goroutines, each with its own file
// descriptor, write (-w) and/or read (-r) Segments × Block bytes each in
// Xfer-byte pwrite/pread calls. With FilePerProc each task has a file;
// otherwise they share one, laid out as IOR's segmented layout: task t's
// k-th transfer of segment s is at (s*Tasks + t)*Block + k*Xfer. Every
// 8-byte word written holds its file offset XOR a seed that depends on
// the run and on the writing task, so -W and -R catch lost, stale and
// misplaced data and say whose data they found instead.
//
// Each phase opens every file (timed: open), runs the calls (xfer, with
// the fsync of -e), then closes (close), with a barrier between each
// step: every task opens before any transfers, and so on. Between the
// write and the read phases the files' cached pages are dropped. When the
// path is on a stripefs mount, each phase also reports the filesystem's
// OST write and read RPCs and client read-modify-writes during it.
func IOR(ctx context.Context, cfg IORConfig) (*IORResult, error) {
	return runIOR(ctx, cfg, iorHooks{})
}

type iorRun struct {
	cfg       IORConfig
	seed      uint64
	files     []string
	fileBytes int64
	perTask   int64 // transfers per task over the run
	perBlock  int64 // transfers per block
	bufs      [][]byte
}

func runIOR(ctx context.Context, cfg IORConfig, h iorHooks) (res *IORResult, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &iorRun{cfg: cfg, seed: cfg.Seed, perBlock: cfg.Block / cfg.Xfer}
	if !cfg.HaveSeed {
		var b [8]byte
		_, _ = rand.Read(b[:])
		r.seed = binary.LittleEndian.Uint64(b[:])
	}
	r.perTask = int64(cfg.Segments) * r.perBlock
	if cfg.FilePerProc {
		r.fileBytes = int64(cfg.Segments) * cfg.Block
		for t := 0; t < cfg.Tasks; t++ {
			r.files = append(r.files, fmt.Sprintf("%s.%08d", cfg.Path, t))
		}
	} else {
		r.fileBytes = int64(cfg.Segments) * int64(cfg.Tasks) * cfg.Block
		r.files = []string{cfg.Path}
	}
	res = &IORResult{
		Benchmark: "ior", Config: cfg, Seed: fmt.Sprintf("%#x", r.seed), Files: r.files,
		FileBytes: r.fileBytes, Aggregate: int64(cfg.Segments) * int64(cfg.Tasks) * cfg.Block,
	}
	if !cfg.Write {
		for _, f := range r.files {
			st, err := os.Stat(f)
			if err != nil {
				return nil, fmt.Errorf("ior: read-only run: %w (write it first with -w -k)", err)
			}
			if st.Size() < r.fileBytes {
				return nil, fmt.Errorf("ior: %s holds %d bytes; this layout reads %d", f, st.Size(), r.fileBytes)
			}
		}
	}
	r.bufs = make([][]byte, cfg.Tasks)
	for t := range r.bufs {
		r.bufs[t] = make([]byte, cfg.Xfer)
	}
	if cfg.Tasks == 1 && cfg.Reorder {
		res.Notes = append(res.Notes, "-C with one task: the task reads its own data")
	}

	passes := int64(0)
	for _, on := range []bool{cfg.Write, cfg.CheckWrite, cfg.Read} {
		if on {
			passes++
		}
	}
	cfg.Meter.setTotal(passes * res.Aggregate)
	cw := newCounterWatch(filepath.Dir(cfg.Path))
	defer func() {
		if cw.err != nil {
			res.Notes = append(res.Notes, "stripefs counters unavailable: "+cw.err.Error())
		}
	}()
	if cfg.Write {
		defer func() {
			if cfg.Keep {
				return
			}
			for _, f := range r.files {
				if rerr := os.Remove(f); rerr != nil && !errors.Is(rerr, os.ErrNotExist) && err == nil {
					err = fmt.Errorf("ior: %w", rerr)
				}
			}
		}()
		ph, err := r.phase(ctx, "write", cw)
		if err != nil {
			return res, err
		}
		res.Phases = append(res.Phases, ph)
		if h.afterWrite != nil {
			if err := h.afterWrite(r.files); err != nil {
				return res, err
			}
		}
	}
	reads := []string{}
	if cfg.CheckWrite {
		reads = append(reads, "write-check")
	}
	if cfg.Read {
		reads = append(reads, "read")
	}

	for _, access := range reads {
		dropped := false
		for i, f := range r.files {
			if dropCaches(f, cfg.DropCaches && i == 0) {
				dropped = true
			}
		}
		ph, err := r.phase(ctx, access, cw)
		if err != nil {
			return res, err
		}
		ph.DroppedCache = dropped
		res.Phases = append(res.Phases, ph)
	}
	if !cfg.DropCaches {
		res.Notes = append(res.Notes, "before each read pass only the test files' cached pages were dropped (posix_fadvise DONTNEED)")
	}
	return res, nil
}

// phase runs one barrier-separated open / transfer / close pass of every task.
func (r *iorRun) phase(ctx context.Context, access string, cw *counterWatch) (ph IORPhase, err error) {
	n := r.cfg.Tasks
	write := access == "write"
	ph = IORPhase{Access: access, Verified: access == "write-check" || access == "read" && r.cfg.CheckRead}
	before := cw.snap(ctx)

	fds := make([]*os.File, n)
	defer func() {
		for _, f := range fds {
			if f != nil {
				f.Close()
			}
		}
	}()
	fileOf := func(t int) string {
		if r.cfg.FilePerProc {
			return fmt.Sprintf("%s.%08d", r.cfg.pathOf(t), r.owner(t, access))
		}
		return r.cfg.pathOf(t)
	}
	flags := os.O_RDONLY
	if write {
		flags = os.O_WRONLY | os.O_CREATE
	}
	start := time.Now()
	first := 0
	if write && !r.cfg.FilePerProc {
		// Task 0 creates and truncates the shared file; the others open it.
		f, err := os.OpenFile(fileOf(0), flags|os.O_TRUNC, 0o644)
		if err != nil {
			return ph, fmt.Errorf("ior: %s: task 0: %w", access, err)
		}
		fds[0], first = f, 1
	} else if write {
		flags |= os.O_TRUNC
	}
	if err := parallel(ctx, first, n, func(_ context.Context, t int) error {
		f, err := os.OpenFile(fileOf(t), flags, 0o644)
		if err != nil {
			return fmt.Errorf("ior: %s: task %d: %w", access, t, err)
		}
		fds[t] = f
		return nil
	}); err != nil {
		return ph, err
	}
	opened := time.Now()

	ops := make([]int64, n)
	lat := make([]time.Duration, n)
	if err := parallel(ctx, 0, n, func(ctx context.Context, t int) error {
		var err error
		ops[t], lat[t], err = r.task(ctx, t, fds[t], access)
		return err
	}); err != nil {
		return ph, err
	}
	moved := time.Now()

	if err := parallel(ctx, 0, n, func(_ context.Context, t int) error {
		f := fds[t]
		fds[t] = nil
		if err := f.Close(); err != nil {
			return fmt.Errorf("ior: %s: task %d: close: %w", access, t, err)
		}
		return nil
	}); err != nil {
		return ph, err
	}
	closed := time.Now()

	var sumLat time.Duration
	for t := range ops {
		ph.Ops += ops[t]
		sumLat += lat[t]
	}
	ph.Bytes = ph.Ops * r.cfg.Xfer
	ph.OpenSec = opened.Sub(start).Seconds()
	ph.XferSec = moved.Sub(opened).Seconds()
	ph.CloseSec = closed.Sub(moved).Seconds()
	ph.TotalSec = closed.Sub(start).Seconds()
	ph.MiBps = mibps(ph.Bytes, ph.TotalSec)
	ph.IOPS = opsps(int(ph.Ops), ph.TotalSec)
	if ph.Ops > 0 {
		ph.LatencySec = sumLat.Seconds() / float64(ph.Ops)
	}
	ph.Stripefs = cw.delta(before, cw.snap(ctx))
	return ph, nil
}

// owner is the task whose data task t accesses: itself when writing,
// the next one when reading with -C.
func (r *iorRun) owner(t int, access string) int {
	if access != "write" && r.cfg.Reorder {
		return (t + 1) % r.cfg.Tasks
	}
	return t
}

// offset is where the owner's transfer number j (in segment order) lies
// in the file it is in.
func (r *iorRun) offset(owner int, j int64) int64 {
	seg, k := j/r.perBlock, j%r.perBlock
	if r.cfg.FilePerProc {
		return seg*r.cfg.Block + k*r.cfg.Xfer
	}
	return (seg*int64(r.cfg.Tasks)+int64(owner))*r.cfg.Block + k*r.cfg.Xfer
}

// taskSeed is the pattern seed of the data task t writes.
func (r *iorRun) taskSeed(t int) uint64 {
	return r.seed ^ (uint64(t)+1)*0x9e3779b97f4a7c15
}

// task runs one task's transfers and returns their count and summed duration.
func (r *iorRun) task(ctx context.Context, t int, f *os.File, access string) (int64, time.Duration, error) {
	write := access == "write"
	owner := r.owner(t, access)
	seed := r.taskSeed(owner)
	verify := access == "write-check" || access == "read" && r.cfg.CheckRead
	buf := r.bufs[t]
	var perm *permutation
	if r.cfg.Random {
		// A different order for each task and pass.
		perm = newPermutation(uint64(r.perTask), r.seed^uint64(t)<<32^uint64(len(access)))
	}
	var ops int64
	var lat time.Duration
	for i := int64(0); i < r.perTask; i++ {
		if ctx.Err() != nil {
			return ops, lat, ctx.Err()
		}
		j := i
		if perm != nil {
			j = int64(perm.at(uint64(i)))
		}
		off := r.offset(owner, j)
		if write {
			fillPattern(buf, off, seed)
			t0 := time.Now()
			_, err := f.WriteAt(buf, off) // pwrite(2)
			lat += time.Since(t0)
			if err != nil {
				return ops, lat, fmt.Errorf("ior: write: task %d: %s offset %d: %w", t, f.Name(), off, err)
			}
		} else {
			t0 := time.Now()
			n, err := f.ReadAt(buf, off) // pread(2)
			lat += time.Since(t0)
			if errors.Is(err, io.EOF) {
				end := "?"
				if st, serr := f.Stat(); serr == nil {
					end = fmt.Sprint(st.Size())
				}
				return ops, lat, fmt.Errorf("ior: %s: task %d: %s ends at offset %s: read %d of the %d bytes at offset %d",
					access, t, f.Name(), end, n, r.cfg.Xfer, off)
			}
			if err != nil {
				return ops, lat, fmt.Errorf("ior: %s: task %d: %s offset %d: %w", access, t, f.Name(), off, err)
			}
			if verify {
				if err := r.verify(buf, off, owner, t, access, f.Name()); err != nil {
					return ops, lat, err
				}
			}
		}
		ops++
		r.cfg.Meter.Add(int64(len(buf)))
	}
	if write && r.cfg.Fsync {
		if err := f.Sync(); err != nil {
			return ops, lat, fmt.Errorf("ior: write: task %d: fsync %s: %w", t, f.Name(), err)
		}
	}
	return ops, lat, nil
}

// verify checks one transfer against the owner's pattern and describes the
// first wrong byte: its file offset, what it holds and whose data the
// word around it is.
func (r *iorRun) verify(b []byte, off int64, owner, t int, access, name string) error {
	seed := r.taskSeed(owner)
	if verifyPattern(b, off, seed) == nil {
		return nil
	}
	i := 0
	for i < len(b) && b[i] == patternByte(off+int64(i), seed) {
		i++
	}
	pos := off + int64(i)
	return fmt.Errorf("ior: %s: task %d: %w: %s offset %d holds %#02x, want %#02x (task %d's data); the word at %d is %s",
		access, t, ErrCorrupt, name, pos, b[i], patternByte(pos, seed), owner, pos&^7, r.describeWord(b, off, pos))
}

// describeWord says what the 8-byte word around pos holds: zeros, or the
// data some task wrote for some offset (a misplaced or stale write), or
// neither.
func (r *iorRun) describeWord(b []byte, off, pos int64) string {
	s := int(pos&^7 - off)
	if s < 0 || s+8 > len(b) {
		return "partly outside this transfer"
	}
	w := binary.LittleEndian.Uint64(b[s:])
	if w == 0 {
		return "zero (a hole or a lost write?)"
	}
	for t := 0; t < r.cfg.Tasks; t++ {
		if o := w ^ r.taskSeed(t); o&7 == 0 && o < uint64(r.fileBytes) {
			return fmt.Sprintf("the data task %d wrote for offset %d", t, o)
		}
	}
	return fmt.Sprintf("%#016x, no task's data", w)
}

// parallel runs fn for tasks [from, n) each in a goroutine; the first
// error cancels the others' context and is returned with any others that
// are not just the cancellation.
func parallel(ctx context.Context, from, n int, fn func(context.Context, int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for t := from; t < n; t++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if errs[t] = fn(ctx, t); errs[t] != nil {
				cancel()
			}
		}()
	}
	wg.Wait()
	// A real failure is more telling than the cancellations it caused.
	var real []error
	var first error
	for _, err := range errs {
		if err == nil {
			continue
		}
		if first == nil {
			first = err
		}
		if !errors.Is(err, context.Canceled) {
			real = append(real, err)
		}
	}
	if len(real) > 0 {
		return errors.Join(real...)
	}
	return first
}

// permutation is a pseudo-random bijection of [0, n): a 4-round Feistel
// network over the next even power of two, walked until it lands below
// n. It needs no memory however many transfers a task makes.
type permutation struct {
	n    uint64
	half uint
	mask uint64
	keys [4]uint64
}

func newPermutation(n, seed uint64) *permutation {
	k := uint(bits.Len64(n - 1))
	if k < 2 {
		k = 2
	}
	k += k & 1
	p := &permutation{n: n, half: k / 2, mask: 1<<(k/2) - 1}
	for i := range p.keys {
		seed = splitmix(seed)
		p.keys[i] = seed
	}
	return p
}

func (p *permutation) at(i uint64) uint64 {
	if p.n <= 1 {
		return i
	}
	x := i
	for {
		l, r := x>>p.half, x&p.mask
		for _, key := range p.keys {
			l, r = r, l^(splitmix(r^key)&p.mask)
		}
		x = l<<p.half | r
		if x < p.n {
			return x
		}
	}
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// counterWatch reads the stripefs counters around phases. On a path that
// is not on stripefs it does nothing; a failure to read them on stripefs
// is kept in err and reported as a note, not as a failed benchmark.
type counterWatch struct {
	path string
	on   bool
	err  error
}

func newCounterWatch(path string) *counterWatch {
	_, err := xattr.Get(path, stats.ClientXattr)
	return &counterWatch{path: path, on: err == nil}
}

func (w *counterWatch) snap(ctx context.Context) *stats.Snapshot {
	if !w.on || w.err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s, err := stats.FromMount(ctx, w.path)
	if err != nil {
		w.err = err
		return nil
	}
	return s
}

func (w *counterWatch) delta(before, after *stats.Snapshot) *FSCounters {
	if before == nil || after == nil {
		return nil
	}
	d := after.Sub(before)
	out := &FSCounters{
		OSTWriteRPCs:     d.Calls("ost", "ost_write"),
		OSTReadRPCs:      d.Calls("ost", "ost_read"),
		ReadModifyWrites: d.ClientCounter("read_modify_writes"),
	}
	for _, t := range d.Targets {
		if strings.HasPrefix(t.Name, "ost") {
			for _, m := range t.Methods {
				switch m.Name {
				case "ost_write":
					out.OSTWriteBytes += m.BytesIn
				case "ost_read":
					out.OSTReadBytes += m.BytesOut
				}
			}
		}
	}
	return out
}

// WriteJSON writes the result as one indented JSON object.
func (res *IORResult) WriteJSON(w io.Writer) error {
	return writeJSON(w, res)
}

// WriteTable writes the result the way IOR prints its summary.
func (res *IORResult) WriteTable(w io.Writer) error {
	c := res.Config
	mode := "single shared file"
	if c.FilePerProc {
		mode = "file per process"
	}
	fmt.Fprintf(w, "ior: api POSIX, %d tasks (goroutines, one descriptor each), %s\n", c.Tasks, mode)
	files := res.Files[0]
	if len(res.Files) > 1 {
		files += " … " + filepath.Base(res.Files[len(res.Files)-1])
	}
	each := ""
	if len(res.Files) > 1 {
		each = " each"
	}
	fmt.Fprintf(w, "  test file   %s (%s%s)\n", files, FormatSize(res.FileBytes), each)
	fmt.Fprintf(w, "  xfer %s, block %s, segments %d, aggregate %s\n",
		FormatSize(c.Xfer), FormatSize(c.Block), c.Segments, FormatSize(res.Aggregate))
	flag := func(on bool, s string) string {
		if on {
			return s
		}
		return ""
	}
	opts := strings.Fields(strings.Join([]string{flag(c.Fsync, "fsync(-e)"), flag(c.Reorder, "reorder-tasks(-C)"),
		flag(c.Random, "random-offsets(-z)"), flag(c.CheckWrite, "check-write(-W)"), flag(c.CheckRead, "check-read(-R)"),
		flag(c.Keep, "keep-file(-k)")}, " "))
	if len(opts) == 0 {
		opts = []string{"none"}
	}
	fmt.Fprintf(w, "  options     %s; seed (-G) %s\n\n", strings.Join(opts, " "), res.Seed)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "access     \tbw(MiB/s)\tIOPS\tLatency(s)\tblock(KiB)\txfer(KiB)\topen(s)\twr/rd(s)\tclose(s)\ttotal(s)\tcheck\tost_write\tost_read\tost_rd(MiB)\trmw\t")
	fmt.Fprintln(tw, "------     \t---------\t----\t----------\t----------\t---------\t-------\t--------\t--------\t--------\t-----\t---------\t--------\t-----------\t---\t")
	for _, p := range res.Phases {
		check := "-"
		if p.Verified {
			check = "ok"
		}
		cnt := []string{"n/a", "n/a", "n/a", "n/a"}
		if s := p.Stripefs; s != nil {
			cnt = []string{fmt.Sprint(s.OSTWriteRPCs), fmt.Sprint(s.OSTReadRPCs),
				fmt.Sprintf("%.1f", float64(s.OSTReadBytes)/(1<<20)), fmt.Sprint(s.ReadModifyWrites)}
		}
		fmt.Fprintf(tw, "%-11s\t%.2f\t%.2f\t%.6f\t%s\t%s\t%.4f\t%.4f\t%.4f\t%.4f\t%s\t%s\t%s\t%s\t%s\t\n",
			p.Access, p.MiBps, p.IOPS, p.LatencySec, kib(c.Block), kib(c.Xfer),
			p.OpenSec, p.XferSec, p.CloseSec, p.TotalSec, check, cnt[0], cnt[1], cnt[2], cnt[3])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nost_write, ost_read: OST RPCs during the phase (whole filesystem); ost_rd(MiB): data the OSTs sent;")
	fmt.Fprintln(w, "rmw: client read-modify-writes; n/a: not on stripefs")
	for _, n := range res.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	return nil
}

func kib(n int64) string {
	if n%1024 == 0 {
		return fmt.Sprint(n >> 10)
	}
	return fmt.Sprintf("%.2f", float64(n)/1024)
}
