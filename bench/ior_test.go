package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// smallIOR is a fast configuration: 3 tasks, 2 segments of 64 KiB blocks
// in 16 KiB transfers.
func smallIOR(dir string) IORConfig {
	return IORConfig{
		Path: filepath.Join(dir, "ior"), Write: true, Read: true,
		Xfer: 16 << 10, Block: 64 << 10, Segments: 2, Tasks: 3,
		CheckWrite: true, CheckRead: true, Fsync: true,
	}
}

func mustIOR(t *testing.T, cfg IORConfig, h iorHooks) *IORResult {
	t.Helper()
	res, err := runIOR(context.Background(), cfg, h)
	if err != nil {
		t.Fatalf("%+v: %v", cfg, err)
	}
	return res
}

func checkPhases(t *testing.T, res *IORResult, want ...string) {
	t.Helper()
	var got []string
	for _, p := range res.Phases {
		got = append(got, p.Access)
		if p.Bytes != res.Aggregate || p.Ops != res.Aggregate/res.Config.Xfer {
			t.Errorf("%s moved %d bytes in %d ops; want %d bytes", p.Access, p.Bytes, p.Ops, res.Aggregate)
		}
		if p.MiBps <= 0 || p.IOPS <= 0 || p.TotalSec <= 0 || p.LatencySec <= 0 || p.TotalSec < p.XferSec {
			t.Errorf("%s: implausible timing %+v", p.Access, p)
		}
		if p.Stripefs != nil {
			t.Errorf("%s: stripefs counters on a local directory: %+v", p.Access, p.Stripefs)
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("phases %v, want %v", got, want)
	}
}

func checkGone(t *testing.T, dir string) {
	t.Helper()
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("%d files left behind, e.g. %s", len(left), left[0].Name())
	}
}

func TestIORFilePerProc(t *testing.T) {
	dir := t.TempDir()
	cfg := smallIOR(dir)
	cfg.FilePerProc = true
	res := mustIOR(t, cfg, iorHooks{afterWrite: func(files []string) error {
		if len(files) != 3 || filepath.Base(files[2]) != "ior.00000002" {
			t.Errorf("files %v", files)
		}
		for _, f := range files {
			if st, err := os.Stat(f); err != nil || st.Size() != 2*64<<10 {
				t.Errorf("%s: %v, %v", f, st, err)
			}
		}
		return nil
	}})
	checkPhases(t, res, "write", "write-check", "read")
	if res.FileBytes != 128<<10 || res.Aggregate != 3*128<<10 {
		t.Errorf("sizes: file %d aggregate %d", res.FileBytes, res.Aggregate)
	}
	checkGone(t, dir)
}

// checkSharedLayout reads what a kept IOR run left and checks that each block
// holds its owner's data at IOR's segmented offsets.
func checkSharedLayout(t *testing.T, path string, cfg IORConfig) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(b)) != int64(cfg.Segments*cfg.Tasks)*cfg.Block {
		t.Fatalf("shared file is %d bytes", len(b))
	}
	r := &iorRun{seed: cfg.Seed}
	for s := 0; s < cfg.Segments; s++ {
		for task := 0; task < cfg.Tasks; task++ {
			off := (int64(s)*int64(cfg.Tasks) + int64(task)) * cfg.Block
			if err := verifyPattern(b[off:off+cfg.Block], off, r.taskSeed(task)); err != nil {
				t.Errorf("segment %d task %d block at %d: %v", s, task, off, err)
			}
		}
	}
}

func TestIORSharedFile(t *testing.T) {
	dir := t.TempDir()
	for _, random := range []bool{false, true} {
		cfg := smallIOR(dir)
		cfg.Random, cfg.Keep, cfg.Seed, cfg.HaveSeed = random, true, 0xfeed, true
		res := mustIOR(t, cfg, iorHooks{})
		checkPhases(t, res, "write", "write-check", "read")
		if len(res.Files) != 1 || res.Files[0] != cfg.Path || res.FileBytes != res.Aggregate {
			t.Errorf("shared file: %v, %d bytes of %d", res.Files, res.FileBytes, res.Aggregate)
		}
		checkSharedLayout(t, cfg.Path, cfg)
		os.Remove(cfg.Path)
	}
}

// -z changes the order of the calls, not where the data goes, and each
// transfer is made exactly once.
func TestIORRandomOrder(t *testing.T) {
	r := &iorRun{cfg: IORConfig{Tasks: 4, Block: 8 << 10, Xfer: 1 << 10, Segments: 3}, perBlock: 8, perTask: 24}
	for _, n := range []uint64{1, 2, 3, 5, 24, 100, 1000, 4097} {
		p := newPermutation(n, n*7)
		seen := make([]bool, n)
		moved := 0
		for i := uint64(0); i < n; i++ {
			j := p.at(i)
			if j >= n || seen[j] {
				t.Fatalf("n %d: %d -> %d repeats or escapes", n, i, j)
			}
			seen[j] = true
			if j != i {
				moved++
			}
		}
		if n >= 24 && moved < int(n)/2 {
			t.Errorf("n %d: only %d of %d moved: hardly random", n, moved, n)
		}
	}
	// Task 2's transfers in a shared file: its own blocks only.
	offs := map[int64]bool{}
	for j := int64(0); j < r.perTask; j++ {
		off := r.offset(2, j)
		if blk := off / r.cfg.Block; blk%4 != 2 || offs[off] {
			t.Errorf("transfer %d at %d: block %d is not task 2's, or repeats", j, off, blk)
		}
		offs[off] = true
	}
	if r.offset(2, 9) != (1*4+2)*8<<10+1<<10 {
		t.Errorf("segment 1 transfer 1 of task 2 at %d", r.offset(2, 9))
	}
}

// With -C, task i reads task (i+1)%N's data: a byte corrupted in task 2's
// file is found by task 1, which says whose data it expected.
func TestIORReorder(t *testing.T) {
	for _, fpp := range []bool{true, false} {
		dir := t.TempDir()
		cfg := smallIOR(dir)
		cfg.FilePerProc, cfg.Reorder, cfg.CheckWrite = fpp, true, false
		res := mustIOR(t, cfg, iorHooks{})
		checkPhases(t, res, "write", "read")

		// Task 2's second block (segment 1).
		at := int64(64<<10) + 1000
		file := cfg.Path + ".00000002"
		if !fpp {
			at, file = (1*3+2)*64<<10+1000, cfg.Path
		}
		_, err := runIOR(context.Background(), cfg, iorHooks{afterWrite: func([]string) error { return flipByte(file, at) }})
		want := fmt.Sprintf("read: task 1: %s: %s offset %d holds", ErrCorrupt, file, at)
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "(task 2's data)") {
			t.Errorf("fpp %v: got %v\nwant it to contain %q", fpp, err, want)
		}
		checkGone(t, dir)
	}
}

func flipByte(path string, at int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, at); err != nil {
		return err
	}
	b[0] ^= 0x20
	_, err = f.WriteAt(b, at)
	return err
}

func TestIORCatchesCorruption(t *testing.T) {
	const at = 3*64<<10 + 16<<10 + 77 // segment 1, task 0, second transfer
	for _, c := range []struct {
		name, phase string
		checkWrite  bool
		corrupt     func(path string) error
		want        string
	}{
		{"-W flipped byte", "write-check", true, func(p string) error { return flipByte(p, at) }, fmt.Sprintf("offset %d holds", at)},
		{"-R flipped byte", "read", false, func(p string) error { return flipByte(p, at) }, fmt.Sprintf("offset %d holds", at)},
		{"-R zeroed word", "read", false, func(p string) error { return zeroWord(p, at&^7) }, "zero (a hole"},
	} {
		dir := t.TempDir()
		cfg := smallIOR(dir)
		cfg.CheckWrite = c.checkWrite
		_, err := runIOR(context.Background(), cfg, iorHooks{afterWrite: func(files []string) error { return c.corrupt(files[0]) }})
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: corruption not caught: %v", c.name, err)
		}
		if msg := err.Error(); !strings.HasPrefix(msg, "ior: "+c.phase+": ") || !strings.Contains(msg, c.want) {
			t.Errorf("%s: got %v\nwant phase %s and %q", c.name, err, c.phase, c.want)
		}
		checkGone(t, dir)
	}
}

func zeroWord(path string, at int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteAt(make([]byte, 8), at)
	return err
}

// A block written where another task's belongs is named as that task's.
func TestIORCatchesMisplacedData(t *testing.T) {
	dir := t.TempDir()
	cfg := smallIOR(dir)
	const blk = 64 << 10
	_, err := runIOR(context.Background(), cfg, iorHooks{afterWrite: func(files []string) error {
		b, err := os.ReadFile(files[0])
		if err != nil {
			return err
		}
		copy(b[4*blk:5*blk], b[0:blk]) // task 0's segment-0 block over task 1's segment-1 block
		return os.WriteFile(files[0], b, 0o644)
	}})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), fmt.Sprintf("offset %d holds", 4*blk)) ||
		!strings.Contains(err.Error(), "(task 1's data)") || !strings.Contains(err.Error(), "the data task 0 wrote for offset 0") {
		t.Errorf("misplaced block: %v", err)
	}
}

func TestIORShortFile(t *testing.T) {
	dir := t.TempDir()
	cfg := smallIOR(dir)
	cfg.CheckWrite = false
	_, err := runIOR(context.Background(), cfg, iorHooks{afterWrite: func(files []string) error {
		return os.Truncate(files[0], 100000)
	}})
	if err == nil || !strings.Contains(err.Error(), "ends at offset 100000") {
		t.Errorf("truncated file: %v", err)
	}
	checkGone(t, dir)
}

// A file kept with -k and a fixed -G verifies in a later read-only run; a
// wrong seed does not.
func TestIORReadOnly(t *testing.T) {
	dir := t.TempDir()
	cfg := smallIOR(dir)
	cfg.FilePerProc, cfg.Keep, cfg.Seed, cfg.HaveSeed = true, true, 42, true
	mustIOR(t, cfg, iorHooks{})
	ro := cfg
	ro.Write, ro.CheckWrite, ro.Keep = false, false, false
	res := mustIOR(t, ro, iorHooks{})
	checkPhases(t, res, "read")
	if !res.Phases[0].Verified {
		t.Error("read-only -R run did not verify")
	}
	if left, _ := os.ReadDir(dir); len(left) != 3 {
		t.Errorf("a read-only run removed files: %d left", len(left))
	}
	ro.Seed = 43
	if _, err := runIOR(context.Background(), ro, iorHooks{}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("wrong seed: %v", err)
	}
	ro.Segments = 3
	if _, err := runIOR(context.Background(), ro, iorHooks{}); err == nil || !strings.Contains(err.Error(), "holds 131072 bytes; this layout reads 196608") {
		t.Errorf("layout larger than the file: %v", err)
	}
	ro.Path = filepath.Join(dir, "missing")
	if _, err := runIOR(context.Background(), ro, iorHooks{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestIORValidate(t *testing.T) {
	dir := t.TempDir()
	ok := smallIOR(dir)
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		mod  func(*IORConfig)
		want string
	}{
		{func(c *IORConfig) { c.Path = "" }, "-o PATH"},
		{func(c *IORConfig) { c.Path = dir }, "is a directory"},
		{func(c *IORConfig) { c.Path = filepath.Join(dir, "no/such/ior") }, "no such file"},
		{func(c *IORConfig) { c.Write, c.Read = false, false }, "nothing to do"},
		{func(c *IORConfig) { c.Xfer = 0 }, "transfer size (-t) must be positive"},
		{func(c *IORConfig) { c.Xfer = -4096 }, "transfer size (-t) must be positive"},
		{func(c *IORConfig) { c.Xfer = 2 << 30; c.Block = 4 << 30 }, "above the 1GiB limit"},
		{func(c *IORConfig) { c.Block = 0 }, "block size (-b) must be positive"},
		{func(c *IORConfig) { c.Block = 100 << 10 }, "block size (-b) 100KiB is not a multiple of the transfer size (-t) 16KiB"},
		{func(c *IORConfig) { c.Segments = 0 }, "segment count (-s)"},
		{func(c *IORConfig) { c.Tasks = 0 }, "task count (--procs) must be 1 to"},
		{func(c *IORConfig) { c.Tasks = -2 }, "task count (--procs) must be 1 to"},
		{func(c *IORConfig) { c.Tasks = MaxTasks + 1 }, "task count"},
		{func(c *IORConfig) { c.Tasks, c.Xfer, c.Block = 1000, 1<<30, 1<<30 }, "exceed 4GiB of memory"},
		{func(c *IORConfig) { c.Segments, c.Block = 1<<30, 1<<40 }, "overflow"},
		{func(c *IORConfig) { c.Write = false }, "-W checks the data written: it needs -w"},
		{func(c *IORConfig) { c.Read = false }, "-R checks the data read: it needs -r"},
		{func(c *IORConfig) { c.Write, c.CheckWrite = false, false }, "-R without -w needs -G SEED"},
	} {
		cfg := ok
		c.mod(&cfg)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want %q", cfg, err, c.want)
		}
		if _, rerr := IOR(context.Background(), cfg); rerr == nil {
			t.Errorf("%+v: IOR accepted it", cfg)
		}
	}
	checkGone(t, dir)
}

func TestIORCancel(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cfg := smallIOR(dir)
	cfg.FilePerProc = true
	if _, err := IOR(ctx, cfg); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled run: %v", err)
	}
	checkGone(t, dir)
}

func TestIOROutput(t *testing.T) {
	dir := t.TempDir()
	cfg := smallIOR(dir)
	cfg.FilePerProc, cfg.Reorder = true, true
	res := mustIOR(t, cfg, iorHooks{})
	var buf bytes.Buffer
	if err := res.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	table := buf.String()
	for _, want := range []string{"bw(MiB/s)", "Latency(s)", "write-check", "file per process", "ior.00000000 … ior.00000002",
		"xfer 16KiB, block 64KiB, segments 2, aggregate 384KiB", "reorder-tasks(-C)", "n/a", "seed (-G) 0x"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	t.Logf("\n%s", table)
	buf.Reset()
	if err := res.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Benchmark string
		Config    struct{ Tasks int }
		Phases    []map[string]any
	}
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil || got.Benchmark != "ior" || got.Config.Tasks != 3 || len(got.Phases) != 3 {
		t.Errorf("JSON %v: %s", err, buf.String())
	}
	if _, ok := got.Phases[0]["bw_mib_s"]; !ok {
		t.Errorf("phase lacks bw_mib_s: %v", got.Phases[0])
	}
}
