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
	"slices"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stripefs/stripefs/internal/targets"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// Survey is an obdfilter-survey-style benchmark: it drives OSTs directly
// over RPC, without a client, its cache or a mount, so what it measures is
// the OST's write path (allocated-range check, grant, quota, accounting,
// the object file) and the wire. Each selected OST gets Objects objects of
// Size/Objects bytes, written by Threads workers (worker t works on object
// t mod Objects; workers sharing an object interleave its records) in
// RSize records. The tests run in order over the same objects: write
// (first allocation), rewrite (the same offsets again: the case of the
// second field report, which must cost no more than write) and read. With
// Sync, each write pass ends with an OST sync of its objects, inside the
// timing. The same pattern written straight to files in RefDir (on the
// same disk) is the reference an OST's throughput is judged against.
type SurveyConfig struct {
	MGS     string
	OSTs    []int // indexes; empty means every OST
	Threads int   // per OST
	Objects int   // per OST
	RSize   int64
	Size    int64 // per OST
	Tests   []string
	Sync    bool
	// RefDir, if set, is where the raw-file reference run writes.
	RefDir string
	// FiemapFail makes the OSTs' FIEMAP fail for the run (set_param
	// fiemap_fail), so the SEEK_DATA/SEEK_HOLE fallback is measured.
	FiemapFail bool
	// DropCaches empties the page cache before read passes (root).
	DropCaches bool
	// Through, if set, adds the through-the-mount rewrite test
	// (ThroughRewrite) in a directory of a mount of the same cluster,
	// while FiemapFail holds.
	Through *ThroughConfig
}

// SurveyTests are the tests Survey knows, in the order they run.
var SurveyTests = []string{"write", "rewrite", "read"}

// MaxSurveyRSize bounds a record: one RPC's bulk.
const MaxSurveyRSize = 16 << 20

// Validate checks c and fills defaults.
func (c *SurveyConfig) Validate() error {
	switch {
	case c.MGS == "":
		return fmt.Errorf("survey: no MGS address")
	case c.Threads < 1 || c.Threads > 256:
		return fmt.Errorf("survey: threads must be 1 to 256, got %d", c.Threads)
	case c.Objects < 1 || c.Objects > 4096:
		return fmt.Errorf("survey: objects must be 1 to 4096, got %d", c.Objects)
	case c.RSize < 4096 || c.RSize > MaxSurveyRSize || c.RSize%4096 != 0:
		return fmt.Errorf("survey: rsize must be a multiple of 4KiB from 4KiB to %s, got %d", FormatSize(MaxSurveyRSize), c.RSize)
	case c.Size < c.RSize*int64(c.Objects):
		return fmt.Errorf("survey: size %s per OST is less than one %s record per object", FormatSize(c.Size), FormatSize(c.RSize))
	}
	if len(c.Tests) == 0 {
		c.Tests = SurveyTests
	}
	for _, t := range c.Tests {
		if !slices.Contains(SurveyTests, t) {
			return fmt.Errorf("survey: unknown test %q (write, rewrite, read)", t)
		}
	}
	if !slices.Contains(c.Tests, "write") && len(c.Tests) > 0 {
		return fmt.Errorf("survey: rewrite and read need the write test first")
	}
	// Run in the canonical order whatever order was given.
	slices.SortFunc(c.Tests, func(a, b string) int { return slices.Index(SurveyTests, a) - slices.Index(SurveyTests, b) })
	c.Tests = slices.Compact(c.Tests)
	return nil
}

// SurveyPass is one test on the OSTs or on the reference files.
type SurveyPass struct {
	Test    string  `json:"test"`
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
	MiBps   float64 `json:"mib_s"`
	// PerOST is each OST's MiB/s over the same pass (the slowest bounds
	// the aggregate).
	PerOST map[string]float64 `json:"per_ost_mib_s,omitempty"`
	// Counters are the OSTs' own counters over the pass, summed (gauges,
	// named *_now, are their values at its end).
	Counters map[string]int64 `json:"counters,omitempty"`
}

// SurveyResult is one survey run.
type SurveyResult struct {
	Benchmark  string       `json:"benchmark"`
	Time       time.Time    `json:"time"`
	OSTs       []int        `json:"osts"`
	Threads    int          `json:"threads_per_ost"`
	Objects    int          `json:"objects_per_ost"`
	RSize      int64        `json:"rsize"`
	Size       int64        `json:"size_per_ost"`
	Sync       bool         `json:"sync"`
	FiemapFail bool         `json:"fiemap_fail"`
	OST        []SurveyPass `json:"ost"`
	// Through is the same comparison through a mount (--through).
	Through   *ThroughResult `json:"through,omitempty"`
	Reference []SurveyPass   `json:"reference,omitempty"`
	RefDir    string         `json:"reference_dir,omitempty"`
	// RewriteOverWrite is rewrite MiB/s over write MiB/s on the OSTs (the
	// figure the second field report is about: 1.0 or more is right).
	RewriteOverWrite    float64            `json:"rewrite_over_write,omitempty"`
	RefRewriteOverWrite float64            `json:"reference_rewrite_over_write,omitempty"`
	OSTOverReference    map[string]float64 `json:"ost_over_reference,omitempty"`
	Notes               []string           `json:"notes,omitempty"`
}

// surveySeq is the FID sequence of survey objects: MDT 255's last local
// sequence, which no real file uses before 2^24 sequences are spent.
var surveySeq = proto.MDTSeq(255, proto.MaxLocalSeq)

// record is one RSize record of the pattern: object j of an OST, offset.
type record struct {
	obj int
	off int64
}

// plan lists each worker's records.
func (c *SurveyConfig) plan() [][]record {
	per := c.Size / int64(c.Objects) / c.RSize // records per object
	out := make([][]record, c.Threads)
	for t := 0; t < c.Threads; t++ {
		j := t % c.Objects
		// Workers on object j: j, j+Objects, …; this is the k-th of m.
		m := (c.Threads - j + c.Objects - 1) / c.Objects
		k := t / c.Objects
		for r := int64(k); r < per; r += int64(m) {
			out[t] = append(out[t], record{obj: j, off: r * c.RSize})
		}
	}
	// Objects without a worker (more objects than threads) go round-robin.
	for j := c.Threads; j < c.Objects; j++ {
		t := j % c.Threads
		for r := int64(0); r < per; r++ {
			out[t] = append(out[t], record{obj: j, off: r * c.RSize})
		}
	}
	return out
}

// stamp marks a record's first 16 bytes with where it belongs, so reads
// are checked without paying to fill or compare whole records.
func stamp(b []byte, run uint64, ost, obj int, off int64) {
	binary.LittleEndian.PutUint64(b[0:], run^uint64(ost)<<48^uint64(obj)<<32)
	binary.LittleEndian.PutUint64(b[8:], uint64(off))
}

func checkStamp(b []byte, run uint64, ost, obj int, off int64) error {
	if len(b) < 16 || binary.LittleEndian.Uint64(b[0:]) != run^uint64(ost)<<48^uint64(obj)<<32 || binary.LittleEndian.Uint64(b[8:]) != uint64(off) {
		return fmt.Errorf("survey: %w: object %d of ost%d at %d", ErrCorrupt, obj, ost, off)
	}
	return nil
}

// Survey runs the benchmark. progress, if set, gets one line per pass.
func Survey(ctx context.Context, c SurveyConfig, progress func(string)) (*SurveyResult, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if progress == nil {
		progress = func(string) {}
	}
	cfg, err := targets.Map(ctx, c.MGS, "survey", 10*time.Second)
	if err != nil {
		return nil, fmt.Errorf("survey: %w", err)
	}
	addrs := map[int]string{}
	for _, t := range cfg.OSTs {
		addrs[int(t.Index)] = t.Addr
	}
	if len(c.OSTs) == 0 {
		for i := range addrs {
			c.OSTs = append(c.OSTs, i)
		}
		sort.Ints(c.OSTs)
	}
	if len(c.OSTs) == 0 {
		return nil, fmt.Errorf("survey: the cluster has no OSTs")
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	run := binary.LittleEndian.Uint64(b[:])
	res := &SurveyResult{Benchmark: "survey", OSTs: c.OSTs, Threads: c.Threads, Objects: c.Objects, RSize: c.RSize,
		Size: c.Size, Sync: c.Sync, FiemapFail: c.FiemapFail}

	osts := make([]*surveyOST, len(c.OSTs))
	for i, idx := range c.OSTs {
		addr, ok := addrs[idx]
		if !ok {
			return nil, fmt.Errorf("survey: ost%d is not in the cluster map", idx)
		}
		o := &surveyOST{idx: idx, ctl: rpc.NewClient(addr, "survey"), base: uint32(run>>32) &^ 0xffff}
		o.ctl.RetryFor = 10 * time.Second
		for t := 0; t < c.Threads; t++ {
			w := rpc.NewClient(addr, "survey")
			w.RetryFor = 10 * time.Second
			o.workers = append(o.workers, w)
		}
		osts[i] = o
	}
	defer func() {
		for _, o := range osts {
			o.close()
		}
	}()
	if c.FiemapFail {
		if err := setFiemapFail(ctx, osts, true); err != nil {
			return nil, err
		}
		defer setFiemapFail(context.Background(), osts, false)
		res.Notes = append(res.Notes, "FIEMAP made to fail (EFAULT) on the OSTs: the allocated-range check used SEEK_DATA/SEEK_HOLE")
	}
	defer func() {
		for _, o := range osts {
			o.destroy(context.Background(), c.Objects)
		}
	}()
	plan := c.plan()
	client := run | 1
	owner := proto.Owner{Uid: uint32(os.Getuid()), Gid: uint32(os.Getgid())}
	for _, test := range c.Tests {
		if test == "read" && c.DropCaches {
			dropAllCaches()
		}
		before, err := ostCounters(ctx, osts)
		if err != nil {
			return nil, err
		}
		pass, err := runPass(ctx, test, len(osts), c, func(ctx context.Context, oi, t int, buf []byte) error {
			o := osts[oi]
			for _, r := range plan[t] {
				obj := proto.ObjID{FID: proto.FID{Seq: surveySeq, Oid: o.base + uint32(r.obj)}}
				if test == "read" {
					var rep proto.OReadReply
					call := &rpc.Call{Method: proto.ORead, Req: &proto.OReadReq{Obj: obj, Off: uint64(r.off), Len: uint32(c.RSize)}, Resp: &rep, BulkIn: buf}
					if err := o.workers[t].Do(ctx, call); err != nil {
						return fmt.Errorf("ost%d: read: %w", o.idx, err)
					}
					if err := checkStamp(buf[:call.NBulkIn], run, o.idx, r.obj, r.off); err != nil {
						return err
					}
					continue
				}
				stamp(buf, run, o.idx, r.obj, r.off)
				req := &proto.OWriteReq{Obj: obj, Off: uint64(r.off), Grant: proto.WriteGrant{Client: client, Owner: owner, Want: uint64(2 * int64(c.Threads) * c.RSize)}}
				if err := o.workers[t].Do(ctx, &rpc.Call{Method: proto.OWrite, Req: req, BulkOut: [][]byte{buf}, Resp: &proto.OWriteReply{}}); err != nil {
					return fmt.Errorf("ost%d: %s: %w", o.idx, test, err)
				}
			}
			return nil
		}, func(ctx context.Context, oi int) error {
			if test == "read" || !c.Sync {
				return nil
			}
			return osts[oi].sync(ctx, c.Objects)
		}, func(oi int) string { return fmt.Sprintf("ost%d", osts[oi].idx) })
		if err != nil {
			return nil, err
		}
		after, err := ostCounters(ctx, osts)
		if err != nil {
			return nil, err
		}
		pass.Counters = diffCounters(after, before)
		res.OST = append(res.OST, pass)
		progress(fmt.Sprintf("ost %s: %.1f MiB/s", test, pass.MiBps))
	}
	if c.RefDir != "" {
		ref, err := surveyReference(ctx, c, plan, run, len(osts), progress)
		if err != nil {
			return nil, err
		}
		res.Reference, res.RefDir = ref, c.RefDir
	}
	if c.Through != nil {
		progress("through the mount: write and rewrite in " + c.Through.Dir)
		t, err := ThroughRewrite(ctx, *c.Through)
		if err != nil {
			return nil, err
		}
		res.Through = t
	}
	res.ratios()
	return res, nil
}

// surveyOST is one OST's connections: a control one and one per worker,
// so workers' RPCs travel side by side as separate clients' would.
type surveyOST struct {
	idx     int
	ctl     *rpc.Client
	workers []*rpc.Client
	base    uint32 // first object id of this run
}

func (o *surveyOST) objs(n int) []proto.ObjID {
	ids := make([]proto.ObjID, n)
	for j := range ids {
		ids[j] = proto.ObjID{FID: proto.FID{Seq: surveySeq, Oid: o.base + uint32(j)}}
	}
	return ids
}

func (o *surveyOST) sync(ctx context.Context, n int) error {
	if _, err := rpc.Invoke[proto.Empty](ctx, o.ctl, proto.OSync, &proto.OSyncReq{Objs: o.objs(n)}); err != nil {
		return fmt.Errorf("ost%d: sync: %w", o.idx, err)
	}
	return nil
}

func (o *surveyOST) destroy(ctx context.Context, n int) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, id := range o.objs(n) {
		_, _ = rpc.Invoke[proto.Empty](ctx, o.ctl, proto.ODestroy, &proto.ODestroyReq{Obj: id})
	}
}

func (o *surveyOST) close() {
	o.ctl.Close()
	for _, w := range o.workers {
		w.Close()
	}
}

func setFiemapFail(ctx context.Context, osts []*surveyOST, fail bool) error {
	v := "0"
	if fail {
		v = "1"
	}
	for _, o := range osts {
		if _, err := rpc.Invoke[proto.Empty](ctx, o.ctl, proto.OSetParam, &proto.OSetParamReq{Name: "fiemap_fail", Value: v}); err != nil {
			return fmt.Errorf("ost%d: set_param fiemap_fail=%s: %w", o.idx, v, err)
		}
	}
	return nil
}

// ostCounters reads every OST's own counters.
func ostCounters(ctx context.Context, osts []*surveyOST) (map[string]int64, error) {
	sum := map[string]int64{}
	for _, o := range osts {
		r, err := rpc.QueryStats(ctx, o.ctl)
		if err != nil {
			return nil, err
		}
		for _, c := range r.Counters {
			sum[c.Name] += c.Value
		}
	}
	return sum, nil
}

func diffCounters(after, before map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range after {
		if strings.HasSuffix(k, "_now") {
			out[k] = v
		} else {
			out[k] = v - before[k]
		}
	}
	return out
}

// runPass runs work on every (target, worker) at once, then finish on
// every target, and times the whole.
func runPass(ctx context.Context, test string, targets int, c SurveyConfig,
	work func(ctx context.Context, target, worker int, buf []byte) error,
	finish func(ctx context.Context, target int) error, name func(int) string) (SurveyPass, error) {
	bufs := make([][]byte, targets*c.Threads)
	for i := range bufs {
		bufs[i] = make([]byte, c.RSize)
		_, _ = rand.Read(bufs[i])
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	var first error
	fail := func(err error) {
		mu.Lock()
		if first == nil {
			first = err
			cancel()
		}
		mu.Unlock()
	}
	perTarget := make([]float64, targets)
	start := time.Now()
	var wg sync.WaitGroup
	for ti := 0; ti < targets; ti++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var tw sync.WaitGroup
			for t := 0; t < c.Threads; t++ {
				tw.Add(1)
				go func() {
					defer tw.Done()
					if err := work(ctx, ti, t, bufs[ti*c.Threads+t]); err != nil {
						fail(err)
					}
				}()
			}
			tw.Wait()
			if err := finish(ctx, ti); err != nil {
				fail(err)
			}
			perTarget[ti] = time.Since(start).Seconds()
		}()
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	if first != nil {
		return SurveyPass{}, first
	}
	per := c.Size / int64(c.Objects) / c.RSize * c.RSize * int64(c.Objects)
	p := SurveyPass{Test: test, Bytes: per * int64(targets), Seconds: secs, MiBps: mibps(per*int64(targets), secs), PerOST: map[string]float64{}}
	for ti, s := range perTarget {
		p.PerOST[name(ti)] = mibps(per, s)
	}
	return p, nil
}

// surveyReference writes, rewrites and reads the same pattern to plain
// files in c.RefDir: one file per object, the same workers and records,
// fdatasync where the OSTs sync.
func surveyReference(ctx context.Context, c SurveyConfig, plan [][]record, run uint64, targets int, progress func(string)) ([]SurveyPass, error) {
	dir, err := os.MkdirTemp(c.RefDir, "survey-ref-")
	if err != nil {
		return nil, fmt.Errorf("survey: reference: %w", err)
	}
	defer os.RemoveAll(dir)
	files := make([][]*os.File, targets)
	for ti := range files {
		for j := 0; j < c.Objects; j++ {
			f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("t%d.o%d", ti, j)), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return nil, fmt.Errorf("survey: reference: %w", err)
			}
			defer f.Close()
			files[ti] = append(files[ti], f)
		}
	}
	var out []SurveyPass
	for _, test := range c.Tests {
		if test == "read" && c.DropCaches {
			dropAllCaches()
		}
		pass, err := runPass(ctx, test, targets, c, func(ctx context.Context, ti, t int, buf []byte) error {
			for _, r := range plan[t] {
				if err := ctx.Err(); err != nil {
					return err
				}
				f := files[ti][r.obj]
				if test == "read" {
					n, err := f.ReadAt(buf, r.off)
					if err != nil && !errors.Is(err, io.EOF) {
						return fmt.Errorf("survey: reference read: %w", err)
					}
					if err := checkStamp(buf[:n], run, ti, r.obj, r.off); err != nil {
						return err
					}
					continue
				}
				stamp(buf, run, ti, r.obj, r.off)
				if _, err := f.WriteAt(buf, r.off); err != nil {
					return fmt.Errorf("survey: reference %s: %w", test, err)
				}
			}
			return nil
		}, func(ctx context.Context, ti int) error {
			if test == "read" || !c.Sync {
				return nil
			}
			for _, f := range files[ti] {
				if err := unix.Fdatasync(int(f.Fd())); err != nil {
					return fmt.Errorf("survey: reference fdatasync: %w", err)
				}
			}
			return nil
		}, func(ti int) string { return fmt.Sprintf("ref%d", ti) })
		if err != nil {
			return nil, err
		}
		pass.PerOST = nil
		out = append(out, pass)
		progress(fmt.Sprintf("reference %s: %.1f MiB/s", test, pass.MiBps))
	}
	return out, nil
}

func dropAllCaches() {
	unix.Sync()
	_ = os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0)
}

func passOf(ps []SurveyPass, test string) (SurveyPass, bool) {
	for _, p := range ps {
		if p.Test == test {
			return p, true
		}
	}
	return SurveyPass{}, false
}

func (r *SurveyResult) ratios() {
	ratio := func(ps []SurveyPass) float64 {
		w, ok1 := passOf(ps, "write")
		rw, ok2 := passOf(ps, "rewrite")
		if ok1 && ok2 && w.MiBps > 0 {
			return rw.MiBps / w.MiBps
		}
		return 0
	}
	r.RewriteOverWrite = ratio(r.OST)
	r.RefRewriteOverWrite = ratio(r.Reference)
	if len(r.Reference) > 0 {
		r.OSTOverReference = map[string]float64{}
		for _, p := range r.OST {
			if q, ok := passOf(r.Reference, p.Test); ok && q.MiBps > 0 {
				r.OSTOverReference[p.Test] = p.MiBps / q.MiBps
			}
		}
	}
}

// WriteJSON writes the result as one JSON object.
func (r *SurveyResult) WriteJSON(w io.Writer) error {
	return writeJSON(w, r)
}

// surveyCounters are the counters the table shows, in order.
var surveyCounters = []struct{ name, label string }{
	{"fiemap_calls", "fiemap"},
	{"fiemap_fallbacks", "fallback"},
	{"rewrites_skipped_accounting", "rewrite_skip"},
	{"new_allocations", "new_alloc"},
	{"allocated_bytes", "alloc_MiB"},
	{"grant_used_bytes", "grant_used_MiB"},
	{"grant_given_bytes", "grant_given_MiB"},
	{"quota_acquires", "quota_acq"},
	{"enospc_errors", "enospc"},
	{"quota_edquot_errors", "edquot"},
}

// WriteTable prints the result for people.
func (r *SurveyResult) WriteTable(w io.Writer) error {
	osts := make([]string, len(r.OSTs))
	for i, o := range r.OSTs {
		osts[i] = fmt.Sprintf("ost%d", o)
	}
	fmt.Fprintf(w, "survey: %s; %d threads and %d objects per OST, rsize %s, %s per OST, sync %s, fiemap %s\n",
		strings.Join(osts, ","), r.Threads, r.Objects, FormatSize(r.RSize), FormatSize(r.Size), yesNoShort(r.Sync),
		map[bool]string{true: "failing (fallback measured)", false: "working"}[r.FiemapFail])
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', tabwriter.AlignRight)
	hasRef := len(r.Reference) > 0
	if hasRef {
		fmt.Fprintf(tw, "test\tost MiB/s\tmin ost\tfiles MiB/s\tost/files\t\n")
	} else {
		fmt.Fprintf(tw, "test\tost MiB/s\tmin ost\t\n")
	}
	for _, p := range r.OST {
		minOST := 0.0
		for _, v := range p.PerOST {
			if minOST == 0 || v < minOST {
				minOST = v
			}
		}
		if hasRef {
			q, _ := passOf(r.Reference, p.Test)
			fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.1f\t%.2f\t\n", p.Test, p.MiBps, minOST, q.MiBps, r.OSTOverReference[p.Test])
		} else {
			fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t\n", p.Test, p.MiBps, minOST)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.RewriteOverWrite > 0 {
		fmt.Fprintf(w, "rewrite/write: ost %.2f", r.RewriteOverWrite)
		if r.RefRewriteOverWrite > 0 {
			fmt.Fprintf(w, ", files %.2f", r.RefRewriteOverWrite)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "OST counters per test (summed over OSTs):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "test\t")
	for _, c := range surveyCounters {
		fmt.Fprintf(tw, "%s\t", c.label)
	}
	fmt.Fprintln(tw)
	for _, p := range r.OST {
		fmt.Fprintf(tw, "%s\t", p.Test)
		for _, c := range surveyCounters {
			v := p.Counters[c.name]
			if strings.HasSuffix(c.label, "_MiB") {
				fmt.Fprintf(tw, "%.1f\t", float64(v)/(1<<20))
			} else {
				fmt.Fprintf(tw, "%d\t", v)
			}
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.RefDir != "" {
		fmt.Fprintf(w, "files: the same pattern written to plain files under %s\n", r.RefDir)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	if r.Through != nil {
		fmt.Fprintln(w)
		return r.Through.WriteTable(w)
	}
	return nil
}

func yesNoShort(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
