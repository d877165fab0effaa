package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stripefs/stripefs/stats"
)

// Through-the-mount comparisons: the checks a user makes with plain
// programs on a mounted filesystem, beside the OST-level survey and the
// nfswrite benchmark. Each runs two ways of writing the same bytes in
// rounds and takes their ratio within each round, so a machine whose speed
// drifts moves both sides alike:
//
//   - rewrite: Streams new files written with 1 MiB pwrites and fsync'd
//     (write), then the same ranges written again and fsync'd (rewrite),
//     buffered and with O_DIRECT. The second field report: a rewrite must
//     cost no more than a first write.
//   - nfs: O_DIRECT 1 MiB pwrites from an aligned buffer (aligned) against
//     one O_DIRECT pwritev per MiB of nfsd's vector [3500-byte head, 255
//     pages, 596-byte tail] (nfs), in alternating order. The third field
//     report: the vector's shape must not cost reads or much time.
//
// A warm-up pass, not counted, runs first: the first file written after a
// mount or a quiet spell pays for cold caches and connections, which would
// otherwise favour whichever side runs second in round 0.
//
// Each MiB carries its offset in its first word and the rest of a per-pass
// pattern, so filling buffers costs nothing inside the timing, and every
// file is read back and checked after its round (outside the timing).

// ThroughConfig is one through-the-mount comparison.
type ThroughConfig struct {
	Dir     string `json:"dir"`     // where the files go; its layout (setstripe) is theirs
	Size    int64  `json:"size"`    // bytes per stream and pass, a whole number of MiB
	Streams int    `json:"streams"` // files written at once, one thread each
	Rounds  int    `json:"rounds"`
	// Modes of the rewrite test: "buffered", "direct" (both by default).
	Modes []string `json:"modes,omitempty"`
}

// ThroughModes are the write modes of the rewrite test.
var ThroughModes = []string{"buffered", "direct"}

func (c *ThroughConfig) validate() error {
	switch {
	case c.Dir == "":
		return errors.New("through: no directory")
	case c.Size < nfsChunk || c.Size%nfsChunk != 0:
		return fmt.Errorf("through: size must be a positive whole number of MiB, got %d bytes", c.Size)
	case c.Streams < 1 || c.Streams > 64:
		return fmt.Errorf("through: streams must be 1 to 64, got %d", c.Streams)
	case c.Rounds < 1 || c.Rounds > 100:
		return fmt.Errorf("through: rounds must be 1 to 100, got %d", c.Rounds)
	}
	if len(c.Modes) == 0 {
		c.Modes = ThroughModes
	}
	for _, m := range c.Modes {
		if !slices.Contains(ThroughModes, m) {
			return fmt.Errorf("through: unknown mode %q (buffered, direct)", m)
		}
	}
	st, err := os.Stat(c.Dir)
	if err != nil {
		return fmt.Errorf("through: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("through: %s is not a directory", c.Dir)
	}
	return nil
}

// ThroughPass is one timed pass: every stream's file written one way.
type ThroughPass struct {
	Name    string  `json:"name"` // write, rewrite, aligned or nfs
	Mode    string  `json:"mode"` // buffered or direct
	Round   int     `json:"round"`
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"` // first open to last fsync and close
	MiBps   float64 `json:"mib_s"`
	// Counters are the filesystem's counters over the pass (stripefs
	// only): OST RPCs, client read-modify-writes and the OSTs' write-path
	// counters, summed over targets.
	Counters map[string]int64 `json:"counters,omitempty"`
}

// ThroughComparison is B against A over the rounds of one mode.
type ThroughComparison struct {
	Name   string    `json:"name"` // e.g. "rewrite/write"
	Mode   string    `json:"mode"`
	Ratios []float64 `json:"ratios_by_round"`
	Median float64   `json:"median"`
	Min    float64   `json:"min"`
	// Best is B's fastest pass over A's fastest: a pass slowed by
	// something else on a shared machine moves it least.
	Best float64 `json:"best_over_best"`
}

// ThroughResult is a whole through-the-mount run.
type ThroughResult struct {
	Benchmark   string              `json:"benchmark"`
	Test        string              `json:"test"` // rewrite or nfs
	Config      ThroughConfig       `json:"config"`
	Passes      []ThroughPass       `json:"passes"`
	Comparisons []ThroughComparison `json:"comparisons"`
	Verified    bool                `json:"verified"`
	Notes       []string            `json:"notes,omitempty"`
}

// throughCounters are the counters each pass records, as
// (target prefix or "client", counter or method name).
var throughCounters = []struct{ key, prefix, name string }{
	{"ost_read_rpcs", "ost", "ost_read"},
	{"ost_write_rpcs", "ost", "ost_write"},
	{"client_read_modify_writes", "client", "read_modify_writes"},
	{"rewrites_skipped_accounting", "ost", "rewrites_skipped_accounting"},
	{"new_allocations", "ost", "new_allocations"},
	{"fiemap_fallbacks", "ost", "fiemap_fallbacks"},
	{"early_writebacks", "ost", "early_writebacks"},
}

func throughDelta(before, after *stats.Snapshot) map[string]int64 {
	if before == nil || after == nil {
		return nil
	}
	d := after.Sub(before)
	out := map[string]int64{}
	for _, c := range throughCounters {
		switch {
		case c.prefix == "client":
			out[c.key] = d.ClientCounter(c.name)
		case strings.HasPrefix(c.name, "ost_"):
			out[c.key] = d.Calls(c.prefix, c.name)
		default:
			out[c.key] = d.Counter(c.prefix, c.name)
		}
	}
	return out
}

// ThroughRewrite runs the rewrite test: write then rewrite, per mode and
// round.
func ThroughRewrite(ctx context.Context, c ThroughConfig) (*ThroughResult, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	res := &ThroughResult{Benchmark: "through", Test: "rewrite", Config: c}
	t := newThroughRun(c)
	defer t.cleanup()
	if err := t.warmUp(ctx, c.Modes[0] == "direct", aligned1MiB); err != nil {
		return res, err
	}
	for _, mode := range c.Modes {
		direct := mode == "direct"
		var ratios []float64
		var best [2]float64
		for round := range c.Rounds {
			if err := t.unlinkAll(); err != nil {
				return res, err
			}
			var mibs [2]float64
			for i, name := range []string{"write", "rewrite"} {
				p, err := t.pass(ctx, name, mode, round, direct, i == 0, aligned1MiB)
				if err != nil {
					return res, err
				}
				res.Passes = append(res.Passes, p)
				mibs[i] = p.MiBps
			}
			if err := t.verify(ctx); err != nil {
				return res, err
			}
			ratios = append(ratios, ratio(mibs[1], mibs[0]))
			best[0], best[1] = max(best[0], mibs[0]), max(best[1], mibs[1])
		}
		cmp := compare("rewrite/write", mode, ratios)
		cmp.Best = ratio(best[1], best[0])
		res.Comparisons = append(res.Comparisons, cmp)
	}
	res.Verified = true
	res.Notes = t.notes()
	return res, nil
}

// ThroughNFS runs the nfs test: aligned and nfsd-shaped O_DIRECT writes,
// each round in the other order. Modes are ignored: both are O_DIRECT.
func ThroughNFS(ctx context.Context, c ThroughConfig) (*ThroughResult, error) {
	c.Modes = []string{"direct"}
	if err := c.validate(); err != nil {
		return nil, err
	}
	res := &ThroughResult{Benchmark: "through", Test: "nfs", Config: c}
	t := newThroughRun(c)
	defer t.cleanup()
	if err := t.warmUp(ctx, true, nfsdVector); err != nil {
		if errors.Is(err, unix.EINVAL) {
			return res, fmt.Errorf("%w (this filesystem refuses O_DIRECT vectors whose first iovec is not aligned, as ext4 and xfs do; the test is for stripefs or kernel nfsd's backends that take them)", err)
		}
		return res, err
	}
	var ratios []float64
	best := map[string]float64{}
	for round := range c.Rounds {
		order := []string{"aligned", "nfs"}
		if round%2 == 1 {
			order = []string{"nfs", "aligned"}
		}
		mib := map[string]float64{}
		for _, name := range order {
			if err := t.unlinkAll(); err != nil {
				return res, err
			}
			shape := aligned1MiB
			if name == "nfs" {
				shape = nfsdVector
			}
			p, err := t.pass(ctx, name, "direct", round, true, true, shape)
			if err != nil {
				return res, err
			}
			res.Passes = append(res.Passes, p)
			mib[name] = p.MiBps
			best[name] = max(best[name], p.MiBps)
			if err := t.verify(ctx); err != nil {
				return res, err
			}
		}
		ratios = append(ratios, ratio(mib["nfs"], mib["aligned"]))
	}
	cmp := compare("nfs/aligned", "direct", ratios)
	cmp.Best = ratio(best["nfs"], best["aligned"])
	res.Comparisons = append(res.Comparisons, cmp)
	res.Verified = true
	res.Notes = t.notes()
	return res, nil
}

func ratio(b, a float64) float64 {
	if a <= 0 {
		return 0
	}
	return b / a
}

func compare(name, mode string, ratios []float64) ThroughComparison {
	s := slices.Clone(ratios)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return ThroughComparison{Name: name, Mode: mode, Ratios: ratios, Median: med, Min: s[0]}
}

// vectorShape lays one MiB of pattern out in the iovecs of one write call,
// in buffers of its own; the MiB's first word is the first iovec's.
type vectorShape func(pattern []byte) [][]byte

func aligned1MiB(pattern []byte) [][]byte {
	b := alignedBuf(nfsChunk)
	copy(b, pattern)
	return [][]byte{b}
}

// nfsdVector is nfsd's vector for one MiB: a head that ends its page,
// whole pages, and a tail that starts its page, each in pages of its own
// as nfsd's are. The bytes are the MiB's in order, so the file holds what
// an aligned write would.
func nfsdVector(pattern []byte) [][]byte {
	headPage, body, tailPage := alignedBuf(pageSize), alignedBuf(nfsPages*pageSize), alignedBuf(pageSize)
	head, tail := headPage[nfsHeadSkip:], tailPage[:nfsTail]
	copy(head, pattern)
	copy(body, pattern[nfsHead:])
	copy(tail, pattern[nfsHead+nfsPages*pageSize:])
	return [][]byte{head, body, tail}
}

// throughRun is the state of one run: its files, counters and seeds.
type throughRun struct {
	c     ThroughConfig
	files []string
	seed  uint64
	pass_ uint64 // the pattern of the files as last written
	cw    *counterWatch
}

func newThroughRun(c ThroughConfig) *throughRun {
	var sb [8]byte
	_, _ = rand.Read(sb[:])
	t := &throughRun{c: c, seed: binary.LittleEndian.Uint64(sb[:]), cw: newCounterWatch(c.Dir)}
	for s := range c.Streams {
		t.files = append(t.files, filepath.Join(c.Dir, fmt.Sprintf("through.%d.%d", os.Getpid(), s)))
	}
	return t
}

func (t *throughRun) notes() []string {
	if t.cw.err != nil {
		return []string{"stripefs counters unavailable: " + t.cw.err.Error()}
	}
	if !t.cw.on {
		return []string{"not a stripefs mount: no counters"}
	}
	return nil
}

func (t *throughRun) unlinkAll() error {
	for _, f := range t.files {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("through: %w", err)
		}
	}
	return nil
}

func (t *throughRun) cleanup() { _ = t.unlinkAll() }

// warmUp writes every file once, uncounted, and removes them.
func (t *throughRun) warmUp(ctx context.Context, direct bool, shape vectorShape) error {
	if err := t.unlinkAll(); err != nil {
		return err
	}
	if _, err := t.pass(ctx, "warm-up", "", -1, direct, true, shape); err != nil {
		return err
	}
	return t.unlinkAll()
}

// stampMiB puts the first word of stream s's MiB at file offset off, the
// only one that differs from the pass's pattern.
func stampMiB(first []byte, seed uint64, s int, off int64) {
	binary.LittleEndian.PutUint64(first, seed^uint64(off)^uint64(s)<<56)
}

// pass writes every stream's file once, all streams at once, and times
// it from the first open to the last close.
func (t *throughRun) pass(ctx context.Context, name, mode string, round int, direct, create bool, shape vectorShape) (ThroughPass, error) {
	t.pass_++
	seed := t.seed ^ t.pass_*0x9e3779b97f4a7c15
	p := ThroughPass{Name: name, Mode: mode, Round: round, Bytes: t.c.Size * int64(t.c.Streams)}
	before := t.cw.snap(ctx)
	pattern := make([]byte, nfsChunk)
	fillPattern(pattern, 0, seed)
	iovs := make([][][]byte, t.c.Streams)
	for s := range iovs {
		iovs[s] = shape(pattern)
	}
	var wg sync.WaitGroup
	errs := make([]error, t.c.Streams)
	start := time.Now()
	for s, path := range t.files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[s] = t.writeFile(ctx, path, s, seed, direct, create, iovs[s])
		}()
	}
	wg.Wait()
	p.Seconds = time.Since(start).Seconds()
	if err := errors.Join(errs...); err != nil {
		return p, err
	}
	p.MiBps = mibps(p.Bytes, p.Seconds)
	p.Counters = throughDelta(before, t.cw.snap(ctx))
	return p, nil
}

func (t *throughRun) writeFile(ctx context.Context, path string, s int, seed uint64, direct, create bool, iov [][]byte) error {
	flags := unix.O_WRONLY | unix.O_CLOEXEC
	if create {
		flags |= unix.O_CREAT | unix.O_EXCL
	}
	if direct {
		flags |= unix.O_DIRECT
	}
	fd, err := unix.Open(path, flags, 0o644)
	if err != nil {
		return fmt.Errorf("through: open %s: %w", path, err)
	}
	for off := int64(0); off < t.c.Size; off += nfsChunk {
		if err := ctx.Err(); err != nil {
			unix.Close(fd)
			return err
		}
		stampMiB(iov[0], seed, s, off)
		if err := pwritevAll(fd, iov, off); err != nil {
			unix.Close(fd)
			return fmt.Errorf("through: write %s at %d: %w", path, off, err)
		}
	}
	if err := unix.Fsync(fd); err != nil {
		unix.Close(fd)
		return fmt.Errorf("through: fsync %s: %w", path, err)
	}
	if err := unix.Close(fd); err != nil {
		return fmt.Errorf("through: close %s: %w", path, err)
	}
	return nil
}

// verify reads every file back (its cached pages dropped first) and
// checks it holds what the last pass wrote.
func (t *throughRun) verify(ctx context.Context) error {
	seed := t.seed ^ t.pass_*0x9e3779b97f4a7c15
	pattern := make([]byte, nfsChunk)
	fillPattern(pattern, 0, seed)
	want := make([]byte, nfsChunk)
	got := make([]byte, nfsChunk)
	for s, path := range t.files {
		dropCaches(path, false)
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("through: verify: %w", err)
		}
		st, err := f.Stat()
		if err == nil && st.Size() != t.c.Size {
			err = fmt.Errorf("%s is %d bytes, want %d", path, st.Size(), t.c.Size)
		}
		for off := int64(0); err == nil && off < t.c.Size; off += nfsChunk {
			if err = ctx.Err(); err != nil {
				break
			}
			if _, err = io.ReadFull(io.NewSectionReader(f, off, nfsChunk), got); err != nil {
				err = fmt.Errorf("read %s at %d: %w", path, off, err)
				break
			}
			copy(want, pattern)
			stampMiB(want, seed, s, off)
			if !bytes.Equal(got, want) {
				i := 0
				for got[i] == want[i] {
					i++
				}
				err = fmt.Errorf("%w: %s offset %d holds %#02x, want %#02x", ErrCorrupt, path, off+int64(i), got[i], want[i])
			}
		}
		f.Close()
		if err != nil {
			return fmt.Errorf("through: verify: %w", err)
		}
	}
	return nil
}

// WriteJSON writes the result as one JSON object.
func (r *ThroughResult) WriteJSON(w io.Writer) error { return writeJSON(w, r) }

// WriteTable prints the result for people.
func (r *ThroughResult) WriteTable(w io.Writer) error {
	c := r.Config
	fmt.Fprintf(w, "through the mount (%s test): %s, %d stream(s) of %s, %d round(s), fsync before close\n",
		r.Test, c.Dir, c.Streams, FormatSize(c.Size), c.Rounds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "round\tmode\tpass\tMiB/s\t")
	for _, k := range throughCounters {
		fmt.Fprintf(tw, "%s\t", strings.TrimSuffix(strings.TrimPrefix(k.key, "client_"), "_accounting"))
	}
	fmt.Fprintln(tw)
	for _, p := range r.Passes {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%.1f\t", p.Round, p.Mode, p.Name, p.MiBps)
		for _, k := range throughCounters {
			if p.Counters == nil {
				fmt.Fprint(tw, "n/a\t")
			} else {
				fmt.Fprintf(tw, "%d\t", p.Counters[k.key])
			}
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, cmp := range r.Comparisons {
		rs := make([]string, len(cmp.Ratios))
		for i, v := range cmp.Ratios {
			rs[i] = fmt.Sprintf("%.2f", v)
		}
		fmt.Fprintf(w, "%s %s: median %.2f, min %.2f, best/best %.2f (rounds: %s)\n", cmp.Name, cmp.Mode, cmp.Median, cmp.Min, cmp.Best, strings.Join(rs, " "))
	}
	if r.Verified {
		fmt.Fprintln(w, "verification: ok (every file read back after its round and matched)")
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	return nil
}
