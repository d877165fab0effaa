package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/stripefs/stripefs/stats"
)

// ScaleConfig is a run of Scale.
type ScaleConfig struct {
	Dir   string `json:"dir"`   // on a stripefs mount: the files go in a new directory under it
	Files int    `json:"files"` // how many to create
	Step  int    `json:"step"`  // files per reported step
	Procs int    `json:"procs"` // creators at once
	Keep  bool   `json:"keep"`  // leave the files (else they are removed, and timed)
	// Lookups is how many files, picked at random among those made so
	// far, are stat'ed after each step with the kernel's dentries dropped
	// first (as root): the MDT's lookup cost as the directory grows.
	Lookups int `json:"lookups"`
	// Progress, if set, is told each step as it ends (a run of millions
	// of files takes many minutes).
	Progress func(ScaleStep) `json:"-"`
}

// ProcessMemory is one process of the filesystem as a step left it:
// the targets it serves (or "client", the mount), its resident set and Go
// heap, and its MDTs' Pebble block cache and memtables.
type ProcessMemory struct {
	Process       string `json:"process"`
	RSSBytes      int64  `json:"rss_bytes"`
	HeapBytes     int64  `json:"go_heap_bytes"`
	BlockCache    int64  `json:"block_cache_bytes,omitempty"`
	BlockCacheMax int64  `json:"block_cache_bytes_max,omitempty"`
	Memtables     int64  `json:"memtable_bytes,omitempty"`
}

// ScaleStep is one step of creates.
type ScaleStep struct {
	Files   int             `json:"files"` // created so far
	Seconds float64         `json:"seconds"`
	Rate    float64         `json:"creates_s"`
	Lookups float64         `json:"lookups_s,omitempty"`
	Memory  []ProcessMemory `json:"memory"`
}

// ScaleResult is what Scale measured.
type ScaleResult struct {
	Time   time.Time   `json:"time"`
	Config ScaleConfig `json:"config"`
	Steps  []ScaleStep `json:"steps"`
	// LastToFirst is the last step's create rate over the first's: the
	// MDT's create cost growing with its entries shows here.
	LastToFirst   float64 `json:"last_to_first"`
	ReaddirSecs   float64 `json:"readdir_seconds"`
	ReaddirRate   float64 `json:"readdir_entries_s"`
	RemoveSeconds float64 `json:"remove_seconds,omitempty"`
	RemoveRate    float64 `json:"removes_s,omitempty"`
}

// Scale creates cfg.Files empty files in one new directory under cfg.Dir
// (open O_CREAT|O_EXCL and close, cfg.Procs at once), reporting each
// cfg.Step files the step's rate, the rate of cfg.Lookups stats of files
// made so far, and the memory of every process of the filesystem (from
// the mount's and the servers' stats); then lists the directory once and
// removes the files, unless cfg.Keep.
func Scale(ctx context.Context, cfg ScaleConfig) (res *ScaleResult, err error) {
	switch {
	case cfg.Files <= 0 || cfg.Files > MaxFiles:
		return nil, fmt.Errorf("scale: file count must be 1 to %d, got %d", MaxFiles, cfg.Files)
	case cfg.Step <= 0 || cfg.Procs <= 0:
		return nil, fmt.Errorf("scale: step and procs must be positive")
	}
	if _, err := stats.FromMount(ctx, cfg.Dir); err != nil {
		return nil, fmt.Errorf("scale: %w", err)
	}
	work, err := os.MkdirTemp(cfg.Dir, fmt.Sprintf("stripefs-bench-scale.%d.", os.Getpid()))
	if err != nil {
		return nil, fmt.Errorf("scale: %w", err)
	}
	res = &ScaleResult{Config: cfg}
	created := 0
	defer func() {
		if cfg.Keep && err == nil {
			return
		}
		start := time.Now()
		if rerr := forEach(context.WithoutCancel(ctx), cfg.Procs, 0, created, func(i int) error { return removeMissing(os.Remove(scaleName(work, i))) }); rerr != nil && err == nil {
			err = fmt.Errorf("scale: remove: %w", rerr)
		}
		if rerr := os.Remove(work); rerr != nil && err == nil {
			err = fmt.Errorf("scale: %w", rerr)
		}
		if err == nil {
			res.RemoveSeconds = time.Since(start).Seconds()
			res.RemoveRate = float64(created) / res.RemoveSeconds
		}
	}()
	for created < cfg.Files {
		n := min(cfg.Step, cfg.Files-created)
		start := time.Now()
		err := forEach(ctx, cfg.Procs, created, created+n, func(i int) error {
			f, err := os.OpenFile(scaleName(work, i), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			if err != nil {
				return err
			}
			return f.Close()
		})
		secs := time.Since(start).Seconds()
		if err != nil {
			created += n // those made are removed: a missing one is skipped
			return res, fmt.Errorf("scale: create: %w", err)
		}
		created += n
		step := ScaleStep{Files: created, Seconds: secs, Rate: float64(n) / secs}
		if cfg.Lookups > 0 {
			if step.Lookups, err = lookups(ctx, work, cfg.Procs, cfg.Lookups, created); err != nil {
				return res, fmt.Errorf("scale: %w", err)
			}
		}
		if step.Memory, err = processMemory(ctx, cfg.Dir); err != nil {
			return res, fmt.Errorf("scale: %w", err)
		}
		res.Steps = append(res.Steps, step)
		if cfg.Progress != nil {
			cfg.Progress(step)
		}
	}
	if len(res.Steps) > 1 {
		res.LastToFirst = res.Steps[len(res.Steps)-1].Rate / res.Steps[0].Rate
	}
	start := time.Now()
	d, err := os.Open(work)
	if err != nil {
		return res, fmt.Errorf("scale: %w", err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil || len(names) != created {
		return res, fmt.Errorf("scale: readdir found %d of %d files: %v", len(names), created, err)
	}
	res.ReaddirSecs = time.Since(start).Seconds()
	res.ReaddirRate = float64(created) / res.ReaddirSecs
	return res, nil
}

// removeMissing makes a remove of a file that is not there no error: a
// failed create step leaves a gap.
func removeMissing(err error) error {
	if os.IsNotExist(err) {
		return nil
	}
	return err
}

func scaleName(dir string, i int) string { return filepath.Join(dir, "f"+strconv.Itoa(i)) }

// lookups stats n files picked at random among the first created in
// work, procs at a time, after dropping the kernel's dentries and inodes
// when it may (root), and returns the rate.
func lookups(ctx context.Context, work string, procs, n, created int) (float64, error) {
	_ = os.WriteFile("/proc/sys/vm/drop_caches", []byte("2"), 0) // not root: the kernel's cache may answer some
	pick := rand.Perm(created)[:min(n, created)]
	start := time.Now()
	err := forEach(ctx, procs, 0, len(pick), func(i int) error {
		_, err := os.Lstat(scaleName(work, pick[i]))
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("lookup: %w", err)
	}
	return float64(len(pick)) / time.Since(start).Seconds(), nil
}

// forEach runs f(i) for every i in [from, to), procs at a time, and
// stops at the first error (or ctx's end).
func forEach(ctx context.Context, procs, from, to int, f func(int) error) error {
	var next atomic.Int64
	next.Store(int64(from))
	return parallel(ctx, 0, procs, func(ctx context.Context, _ int) error {
		for i := int(next.Add(1) - 1); i < to; i = int(next.Add(1) - 1) {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := f(i); err != nil {
				return err
			}
		}
		return nil
	})
}

// processMemory groups the stats of the mount at dir and of every target
// by process.
func processMemory(ctx context.Context, dir string) ([]ProcessMemory, error) {
	s, err := stats.FromMount(ctx, dir)
	if err != nil {
		return nil, err
	}
	byPID := map[int64]*ProcessMemory{}
	var order []int64
	add := func(name string, c map[string]int64) {
		pid := c["process_pid"]
		p := byPID[pid]
		if p == nil {
			p = &ProcessMemory{RSSBytes: c["process_rss_bytes"], HeapBytes: c["go_heap_bytes"]}
			byPID[pid] = p
			order = append(order, pid)
		}
		if p.Process != "" {
			p.Process += "+"
		}
		p.Process += name
		p.BlockCache += c["block_cache_bytes_now"]
		p.BlockCacheMax += c["block_cache_bytes_max_now"]
		p.Memtables += c["memtable_bytes_now"]
	}
	if s.Client != nil {
		add("client", s.Client.Counters)
	}
	for _, t := range s.Targets {
		add(t.Name, t.Counters)
	}
	out := make([]ProcessMemory, 0, len(order))
	for _, pid := range order {
		out = append(out, *byPID[pid])
	}
	return out, nil
}

// WriteJSON prints the result as one JSON object.
func (r *ScaleResult) WriteJSON(w io.Writer) error { return writeJSON(w, r) }

// WriteTable prints the result for people.
func (r *ScaleResult) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "scale: %d empty files in one directory under %s, %d creators\n", r.Config.Files, r.Config.Dir, r.Config.Procs)
	for _, s := range r.Steps {
		mem := make([]string, len(s.Memory))
		for i, m := range s.Memory {
			mem[i] = fmt.Sprintf("%s %s", m.Process, mib(m.RSSBytes))
			if m.BlockCacheMax > 0 {
				mem[i] += fmt.Sprintf(" (cache %s of %s, memtables %s)", mib(m.BlockCache), mib(m.BlockCacheMax), mib(m.Memtables))
			}
		}
		look := ""
		if s.Lookups > 0 {
			look = fmt.Sprintf("  %8.0f lookups/s", s.Lookups)
		}
		fmt.Fprintf(w, "  %9d files  %8.0f creates/s%s  rss: %s\n", s.Files, s.Rate, look, strings.Join(mem, ", "))
	}
	if r.LastToFirst > 0 {
		fmt.Fprintf(w, "  last step / first step: %.2f\n", r.LastToFirst)
	}
	fmt.Fprintf(w, "  readdir: %.0f entries/s (%.2f s)\n", r.ReaddirRate, r.ReaddirSecs)
	if r.RemoveSeconds > 0 {
		fmt.Fprintf(w, "  remove:  %.0f files/s (%.2f s)\n", r.RemoveRate, r.RemoveSeconds)
	}
	return nil
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }
