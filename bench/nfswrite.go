package bench

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The vector kernel nfsd hands over for a 1 MiB WRITE whose RPC header
// shares the first page: a partial page, full pages, a partial page.
const (
	nfsHead     = 3500
	nfsPages    = 255
	nfsTail     = 596
	pageSize    = 4096
	nfsChunk    = 1 << 20
	nfsHeadSkip = pageSize - nfsHead // where the head starts in its page
)

// NFSWriteConfig is one bench nfswrite run.
type NFSWriteConfig struct {
	Path string `json:"path"` // files PATH.nfs and PATH.aligned (and PATH.direct)
	Size int64  `json:"size"` // bytes per file, a whole number of MiB
	Keep bool   `json:"keep"` // leave the files behind
	// AlignedDirect adds a third phase: 1 MiB O_DIRECT pwrites from an
	// aligned buffer, which separates the cost of O_DIRECT from the cost
	// of the vector's shape.
	AlignedDirect bool `json:"aligned_direct"`
	// Through, if set, adds (or with no Path, is) the through-the-mount
	// comparison of aligned and nfsd-shaped O_DIRECT writes (ThroughNFS).
	Through *ThroughConfig `json:"through,omitempty"`
}

// NFSWritePhase is one file written one way.
type NFSWritePhase struct {
	Name    string  `json:"name"` // nfs, aligned or aligned-direct
	File    string  `json:"file"`
	Call    string  `json:"call"` // what each MiB was written with
	Calls   int64   `json:"calls"`
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"` // open, writes, fsync and close (not filling buffers)
	MiBps   float64 `json:"mib_s"`
	ODirect bool    `json:"o_direct"`
	// Fallback says why O_DIRECT was dropped, if it was.
	Fallback string      `json:"fallback,omitempty"`
	Stripefs *FSCounters `json:"stripefs,omitempty"` // nil: not on stripefs
}

// NFSWriteResult is the whole run: one JSON object with --json.
type NFSWriteResult struct {
	Benchmark string          `json:"benchmark"`
	Time      time.Time       `json:"time"`
	Config    NFSWriteConfig  `json:"config"`
	Iovec     string          `json:"iovec"`
	Phases    []NFSWritePhase `json:"phases"`
	// Ratio is the nfs pattern's MiB/s over the aligned writes'.
	Ratio    float64  `json:"nfs_over_aligned"`
	Verified bool     `json:"verified"`
	Notes    []string `json:"notes,omitempty"`
	// Through is the O_DIRECT against O_DIRECT comparison (--through).
	Through *ThroughResult `json:"through_result,omitempty"`
}

// nfsHooks are test seams.
type nfsHooks struct {
	afterWrite   func(files []string) error // before verification
	refuseDirect bool                       // fail O_DIRECT writes with EINVAL, as ext4 does
}

// NFSWrite reproduces the third field report of the design: a 1 MiB
// write reaching the filesystem as a vector [3500-byte head, 255 pages,
// 596-byte tail], as kernel nfsd passes it on. It writes cfg.Size bytes
// to PATH.nfs with one such O_DIRECT pwritev per MiB, then the same to
// PATH.aligned with plain 1 MiB pwrites, each followed by fsync, and
// reports both rates, their ratio and, on stripefs, the OST read and
// write RPCs and client read-modify-writes of each phase (a pure write
// workload should cause no reads). Both files are read back and checked,
// then removed unless cfg.Keep. If O_DIRECT is refused (EINVAL from the
// open or from the first pwritev, as on filesystems that want aligned
// vectors) the nfs phase is redone with buffered writes and says so.
func NFSWrite(ctx context.Context, cfg NFSWriteConfig) (*NFSWriteResult, error) {
	var res *NFSWriteResult
	if cfg.Path != "" || cfg.Through == nil {
		var err error
		if res, err = nfsWrite(ctx, cfg, nfsHooks{}); err != nil {
			return res, err
		}
	} else {
		res = &NFSWriteResult{Benchmark: "nfswrite", Config: cfg}
	}
	if cfg.Through != nil {
		t, err := ThroughNFS(ctx, *cfg.Through)
		if err != nil {
			return res, err
		}
		res.Through = t
	}
	return res, nil
}

func nfsWrite(ctx context.Context, cfg NFSWriteConfig, h nfsHooks) (res *NFSWriteResult, err error) {
	switch {
	case cfg.Path == "":
		return nil, errors.New("nfswrite: -o PATH is required")
	case cfg.Size < nfsChunk || cfg.Size%nfsChunk != 0:
		return nil, fmt.Errorf("nfswrite: size (-s) must be a positive whole number of MiB, got %d bytes", cfg.Size)
	}
	if st, err := os.Stat(filepath.Dir(cfg.Path)); err != nil {
		return nil, fmt.Errorf("nfswrite: %w", err)
	} else if !st.IsDir() {
		return nil, fmt.Errorf("nfswrite: %s is not a directory", filepath.Dir(cfg.Path))
	}
	var sb [8]byte
	_, _ = rand.Read(sb[:])
	seed := binary.LittleEndian.Uint64(sb[:])
	res = &NFSWriteResult{Benchmark: "nfswrite", Config: cfg,
		Iovec: fmt.Sprintf("[%d-byte head, %d×%d-byte pages, %d-byte tail] per MiB", nfsHead, nfsPages, pageSize, nfsTail)}

	type job struct {
		name, file string
		seed       uint64
		run        func(context.Context, string, uint64) (NFSWritePhase, error)
	}
	jobs := []job{
		{"nfs", cfg.Path + ".nfs", seed ^ 0x6e6673, func(ctx context.Context, f string, s uint64) (NFSWritePhase, error) {
			return nfsPattern(ctx, f, cfg.Size, s, h.refuseDirect)
		}},
		{"aligned", cfg.Path + ".aligned", seed ^ 0x616c69676e6564, func(ctx context.Context, f string, s uint64) (NFSWritePhase, error) {
			return alignedWrites(ctx, f, cfg.Size, s, false, h.refuseDirect)
		}},
	}
	if cfg.AlignedDirect {
		jobs = append(jobs, job{"aligned-direct", cfg.Path + ".direct", seed ^ 0x646972656374, func(ctx context.Context, f string, s uint64) (NFSWritePhase, error) {
			return alignedWrites(ctx, f, cfg.Size, s, true, h.refuseDirect)
		}})
	}
	var files []string
	defer func() {
		if cfg.Keep {
			return
		}
		for _, f := range files {
			if rerr := os.Remove(f); rerr != nil && !errors.Is(rerr, os.ErrNotExist) && err == nil {
				err = fmt.Errorf("nfswrite: %w", rerr)
			}
		}
	}()
	cw := newCounterWatch(filepath.Dir(cfg.Path))
	for _, j := range jobs {
		files = append(files, j.file)
		before := cw.snap(ctx)
		ph, err := j.run(ctx, j.file, j.seed)
		if err != nil {
			return res, err
		}
		ph.Name = j.name
		ph.Stripefs = cw.delta(before, cw.snap(ctx))
		res.Phases = append(res.Phases, ph)
	}
	if cw.err != nil {
		res.Notes = append(res.Notes, "stripefs counters unavailable: "+cw.err.Error())
	}
	if a := res.Phases[1].MiBps; a > 0 {
		res.Ratio = res.Phases[0].MiBps / a
	}
	if h.afterWrite != nil {
		if err := h.afterWrite(files); err != nil {
			return res, err
		}
	}
	for _, j := range jobs {
		if err := verifyFile(ctx, j.file, cfg.Size, j.seed); err != nil {
			return res, err
		}
	}
	res.Verified = true
	return res, nil
}

// nfsPattern writes size bytes to path with one pwritev of the nfsd
// vector per MiB, with O_DIRECT unless the filesystem refuses it.
func nfsPattern(ctx context.Context, path string, size int64, seed uint64, refuseDirect bool) (ph NFSWritePhase, err error) {
	// Three separate buffers, as nfsd's pages are: the head ends its
	// page (the RPC header filled the start), the tail begins its page.
	headPage, body, tailPage := alignedBuf(pageSize), alignedBuf(nfsPages*pageSize), alignedBuf(pageSize)
	head, tail := headPage[nfsHeadSkip:], tailPage[:nfsTail]
	iov := [][]byte{head, body, tail}
	ph = NFSWritePhase{File: path, Call: "pwritev(3 iovecs: 3500 + 255×4096 + 596 bytes)", Bytes: size}

	direct := true
	fallback := func(why string) {
		direct = false
		ph.Fallback = why + "; wrote with buffered pwritev instead"
	}
	for {
		var elapsed time.Duration
		t0 := time.Now()
		fd, err := openForWrite(path, direct)
		elapsed += time.Since(t0)
		if errors.Is(err, unix.EINVAL) && direct {
			fallback("open with O_DIRECT: EINVAL")
			continue
		}
		if err != nil {
			return ph, fmt.Errorf("nfswrite: %s: %w", path, err)
		}
		ph.ODirect, ph.Calls = direct, 0
		retry := false
		for off := int64(0); off < size; off += nfsChunk {
			if err := ctx.Err(); err != nil {
				unix.Close(fd)
				return ph, err
			}
			fillPattern(head, off, seed)
			fillPattern(body, off+nfsHead, seed)
			fillPattern(tail, off+nfsHead+nfsPages*pageSize, seed)
			t0 := time.Now()
			var err error = unix.EINVAL
			if !direct || !refuseDirect {
				err = pwritevAll(fd, iov, off)
			}
			elapsed += time.Since(t0)
			if err != nil && off == 0 && direct && errors.Is(err, unix.EINVAL) {
				unix.Close(fd)
				fallback("O_DIRECT pwritev with an unaligned first iovec: EINVAL")
				retry = true
				break
			}
			if err != nil {
				unix.Close(fd)
				return ph, fmt.Errorf("nfswrite: pwritev %s at %d: %w", path, off, err)
			}
			ph.Calls++
		}
		if retry {
			continue
		}
		err = ph.finish(fd, path, elapsed)
		return ph, err
	}
}

// alignedWrites writes size bytes to path with 1 MiB pwrites from a
// page-aligned buffer, buffered or (direct) with O_DIRECT.
func alignedWrites(ctx context.Context, path string, size int64, seed uint64, direct, refuseDirect bool) (ph NFSWritePhase, err error) {
	buf := alignedBuf(nfsChunk)
	ph = NFSWritePhase{File: path, Call: "pwrite(1 MiB)", Bytes: size}
	var elapsed time.Duration
	t0 := time.Now()
	fd, err := openForWrite(path, direct)
	if err == nil && direct && refuseDirect {
		unix.Close(fd)
		fd, err = -1, unix.EINVAL
	}
	if errors.Is(err, unix.EINVAL) && direct {
		direct = false
		ph.Fallback = "open with O_DIRECT: EINVAL; wrote with buffered pwrite instead"
		fd, err = openForWrite(path, false)
	}
	elapsed += time.Since(t0)
	if err != nil {
		return ph, fmt.Errorf("nfswrite: %s: %w", path, err)
	}
	ph.ODirect = direct
	for off := int64(0); off < size; off += nfsChunk {
		if err := ctx.Err(); err != nil {
			unix.Close(fd)
			return ph, err
		}
		fillPattern(buf, off, seed)
		t0 := time.Now()
		err := pwritevAll(fd, [][]byte{buf}, off)
		elapsed += time.Since(t0)
		if err != nil {
			unix.Close(fd)
			return ph, fmt.Errorf("nfswrite: pwrite %s at %d: %w", path, off, err)
		}
		ph.Calls++
	}
	err = ph.finish(fd, path, elapsed)
	return ph, err
}

// finish fsyncs and closes the phase's file, counting the fsync in the
// phase's time, and sets its rate.
func (ph *NFSWritePhase) finish(fd int, path string, elapsed time.Duration) error {
	t0 := time.Now()
	err := fsyncClose(fd, path)
	elapsed += time.Since(t0)
	if err != nil {
		return err
	}
	ph.Seconds = elapsed.Seconds()
	ph.MiBps = mibps(ph.Bytes, ph.Seconds)
	return nil
}

func openForWrite(path string, direct bool) (int, error) {
	flags := unix.O_CREAT | unix.O_WRONLY | unix.O_TRUNC | unix.O_CLOEXEC
	if direct {
		flags |= unix.O_DIRECT
	}
	for {
		fd, err := unix.Open(path, flags, 0o644)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// pwritevAll writes the whole vector at off (one pwrite for a single
// buffer, one pwritev otherwise), continuing after short writes.
func pwritevAll(fd int, iov [][]byte, off int64) error {
	for len(iov) > 0 {
		var n int
		var err error
		if len(iov) == 1 {
			n, err = unix.Pwrite(fd, iov[0], off)
		} else {
			n, err = unix.Pwritev(fd, iov, off)
		}
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return io.ErrShortWrite
		}
		off += int64(n)
		for n > 0 {
			if n >= len(iov[0]) {
				n -= len(iov[0])
				iov = iov[1:]
			} else {
				iov = append([][]byte{iov[0][n:]}, iov[1:]...)
				n = 0
			}
		}
	}
	return nil
}

func fsyncClose(fd int, path string) error {
	if err := unix.Fsync(fd); err != nil {
		unix.Close(fd)
		return fmt.Errorf("nfswrite: fsync %s: %w", path, err)
	}
	if err := unix.Close(fd); err != nil {
		return fmt.Errorf("nfswrite: close %s: %w", path, err)
	}
	return nil
}

// verifyFile reads path back (its cached pages dropped first) and checks
// its size and every byte against the pattern.
func verifyFile(ctx context.Context, path string, size int64, seed uint64) error {
	dropCaches(path, false)
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("nfswrite: verify: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("nfswrite: verify: %w", err)
	}
	if st.Size() != size {
		return fmt.Errorf("nfswrite: verify: %s is %d bytes, want %d", path, st.Size(), size)
	}
	buf := make([]byte, nfsChunk)
	for off := int64(0); off < size; off += nfsChunk {
		if err := ctx.Err(); err != nil {
			return err
		}
		if _, err := f.ReadAt(buf, off); err != nil {
			return fmt.Errorf("nfswrite: verify: read %s at %d: %w", path, off, err)
		}
		if verifyPattern(buf, off, seed) != nil {
			i := 0
			for buf[i] == patternByte(off+int64(i), seed) {
				i++
			}
			pos := off + int64(i)
			return fmt.Errorf("nfswrite: verify: %w: %s offset %d holds %#02x, want %#02x (word at %d reads %s)",
				ErrCorrupt, path, pos, buf[i], patternByte(pos, seed), pos&^7, wordHint(buf, off, pos, seed))
		}
	}
	return nil
}

// alignedBuf returns n bytes starting on a page boundary (Go's heap does
// not move objects).
func alignedBuf(n int) []byte {
	b := make([]byte, n+pageSize)
	skip := int(-uintptr(unsafe.Pointer(&b[0])) & (pageSize - 1))
	return b[skip : skip+n : skip+n]
}

// WriteJSON writes the result as one indented JSON object.
func (res *NFSWriteResult) WriteJSON(w io.Writer) error {
	return writeJSON(w, res)
}

// WriteTable writes the result for people.
func (res *NFSWriteResult) WriteTable(w io.Writer) error {
	if len(res.Phases) == 0 && res.Through != nil {
		return res.Through.WriteTable(w)
	}
	fmt.Fprintf(w, "nfswrite: %s per file, nfsd's vector %s, fsync before close\n\n", FormatSize(res.Config.Size), res.Iovec)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "phase\tfile\tcalls\tO_DIRECT\tseconds\tMiB/s\tost_read\tost_write\trmw")
	for _, p := range res.Phases {
		cnt := []string{"n/a", "n/a", "n/a"}
		if s := p.Stripefs; s != nil {
			cnt = []string{fmt.Sprint(s.OSTReadRPCs), fmt.Sprint(s.OSTWriteRPCs), fmt.Sprint(s.ReadModifyWrites)}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%.3f\t%.1f\t%s\t%s\t%s\n", p.Name, filepath.Base(p.File), p.Calls,
			map[bool]string{true: "yes", false: "no"}[p.ODirect], p.Seconds, p.MiBps, cnt[0], cnt[1], cnt[2])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nnfs/aligned: %.2f\n", res.Ratio)
	if res.Verified {
		fmt.Fprintln(w, "verification: ok (every file read back and matched what was written)")
	} else {
		fmt.Fprintln(w, "verification: not done")
	}
	for _, p := range res.Phases {
		if p.Fallback != "" {
			fmt.Fprintf(w, "note: %s: %s\n", p.Name, p.Fallback)
		}
	}
	fmt.Fprintln(w, "note: ost_read, ost_write: OST RPCs during the phase (whole filesystem); rmw: client read-modify-writes; n/a: not on stripefs")
	for _, n := range res.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	if res.Through != nil {
		fmt.Fprintln(w)
		return res.Through.WriteTable(w)
	}
	return nil
}
