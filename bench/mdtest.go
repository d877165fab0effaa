package bench

import (
	"context"
	"encoding/json"
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
)

// MdtestConfig is an mdtest-style run: each of Procs tasks creates, stats
// and removes Items directories and/or files, Iterations times.
type MdtestConfig struct {
	Dir        string // the test directory (created if missing)
	Items      int    // per task
	Iterations int
	Procs      int
	Unique     bool // -u: each task works in a directory of its own
	DirsOnly   bool // -D
	FilesOnly  bool // -F
	// MDTIndex, when >= 0, makes the directories the tasks create go to
	// that MDT (a default directory layout on each task's directory, as
	// `stripefs setdirstripe -D -i K`); -1 round-robin; -2 leaves it alone.
	MDTIndex int
	// TreeMDTIndex places the tasks' own directories the same way (a
	// default on the test directory): -1 spreads the tasks over the MDTs.
	TreeMDTIndex int
	// DropCaches drops the kernel's dentries and inodes before each stat
	// and removal phase (root only), so that those phases reach the
	// metadata servers instead of the client's one-second attribute
	// cache, which otherwise serves a share that depends on how long the
	// creation took.
	DropCaches bool `json:"drop_caches"`
	// Create, Stat and Remove (mdtest's -C, -T, -r) run only those
	// phases; none set runs all three. Items made by a -C run stay for a
	// later -T or -r run with the same -d, -n, -i, --procs and -u.
	Create bool `json:"create_only,omitempty"`
	Stat   bool `json:"stat_only,omitempty"`
	Remove bool `json:"remove_only,omitempty"`
	// WriteBytes and ReadBytes (mdtest's -w and -e) are what each file's
	// creation writes and a "file read" phase, after the stats, reads
	// back (mdtest-hard writes and reads 3901 bytes).
	WriteBytes int `json:"write_bytes,omitempty"`
	ReadBytes  int `json:"read_bytes,omitempty"`
	// Meter, if set, counts the items done, for a progress bar.
	Meter *Meter `json:"-"`
}

// MdtestPhase is one phase's rate over all iterations.
type MdtestPhase struct {
	Phase   string  `json:"phase"`
	Ops     int     `json:"ops"`
	Seconds float64 `json:"seconds"`
	OpsPerS float64 `json:"ops_per_s"`
	MinOpsS float64 `json:"min_ops_per_s"`
	MaxOpsS float64 `json:"max_ops_per_s"`
	// RPCs is what the phase cost the stripefs mount under Dir, per
	// item and by method (counted from the mount's own counters, so
	// writes still cached when a phase ends count in the next one);
	// absent on other filesystems.
	RPCs map[string]float64 `json:"rpcs_per_op,omitempty"`
}

// MdtestResult is a whole run.
type MdtestResult struct {
	Config MdtestConfig  `json:"config"`
	Phases []MdtestPhase `json:"phases"`
}

// The xattr that sets a directory's default for new subdirectories (the
// mount answers it; see mds.DirDefaultXattr).
const dirDefaultXattr = "lustre.lmv.default"

// Validate checks a config before anything is created.
func (c *MdtestConfig) Validate() error {
	switch {
	case c.Dir == "":
		return fmt.Errorf("mdtest: -d DIR is required")
	case c.Items < 1 || c.Items > MaxFiles:
		return fmt.Errorf("mdtest: -n must be 1 to %d, got %d", MaxFiles, c.Items)
	case c.Iterations < 1:
		return fmt.Errorf("mdtest: -i must be at least 1, got %d", c.Iterations)
	case c.Procs < 1 || c.Procs > 4096:
		return fmt.Errorf("mdtest: --procs must be 1 to 4096, got %d", c.Procs)
	case c.DirsOnly && c.FilesOnly:
		return fmt.Errorf("mdtest: -D and -F exclude each other")
	case c.WriteBytes < 0 || c.ReadBytes < 0 || c.WriteBytes > 1<<30 || c.ReadBytes > 1<<30:
		return fmt.Errorf("mdtest: -w and -e must be 0 to 1 GiB")
	case c.ReadBytes > 0 && c.DirsOnly:
		return fmt.Errorf("mdtest: -e reads files; -D has none")
	case c.MDTIndex < -2 || c.TreeMDTIndex < -2:
		return fmt.Errorf("mdtest: MDT indexes must be an index, -1 (round-robin) or unset")
	}
	return nil
}

// Mdtest runs the phases: directory create, stat, remove; then file
// create, stat, remove (mdtest's order), each timed over all tasks.
func Mdtest(ctx context.Context, cfg MdtestConfig) (*MdtestResult, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("mdtest: %w", err)
	}
	if err := placeSubdirs(cfg.Dir, cfg.TreeMDTIndex); err != nil {
		return nil, err
	}
	res := &MdtestResult{Config: cfg}
	type phase struct {
		name string
		dirs bool
		op   func(path string) error
	}
	var phases []phase
	data := make([]byte, cfg.WriteBytes) // what each file's creation writes: zeros, as mdtest's
	if !cfg.FilesOnly {
		phases = append(phases,
			phase{"directory creation", true, func(p string) error { return unix.Mkdir(p, 0o755) }},
			phase{"directory stat", true, func(p string) error { var st unix.Stat_t; return unix.Lstat(p, &st) }},
			phase{"directory removal", true, func(p string) error { return unix.Rmdir(p) }})
	}
	if !cfg.DirsOnly {
		phases = append(phases,
			phase{"file creation", false, func(p string) error {
				fd, err := unix.Open(p, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o644)
				if err != nil {
					return err
				}
				if cfg.WriteBytes > 0 {
					err = writeAll(fd, data)
				}
				if cerr := unix.Close(fd); err == nil {
					err = cerr
				}
				return err
			}},
			phase{"file stat", false, func(p string) error { var st unix.Stat_t; return unix.Lstat(p, &st) }})
		// As mdtest's, the read phase runs whatever -e says: with none
		// it opens and closes each file, the base a read of -e bytes is
		// measured against.
		phases = append(phases, phase{"file read", false, func(p string) error {
			fd, err := unix.Open(p, unix.O_RDONLY, 0)
			if err != nil {
				return err
			}
			n := 0
			if cfg.ReadBytes > 0 {
				n, err = unix.Read(fd, make([]byte, cfg.ReadBytes))
			}
			if cerr := unix.Close(fd); err == nil {
				err = cerr
			}
			if err == nil && n != min(cfg.ReadBytes, cfg.WriteBytes) {
				err = fmt.Errorf("read %d bytes, want %d", n, min(cfg.ReadBytes, cfg.WriteBytes))
			}
			return err
		}})
		phases = append(phases, phase{"file removal", false, func(p string) error { return unix.Unlink(p) }})
	}
	if cfg.Create || cfg.Stat || cfg.Remove {
		phases = slices.DeleteFunc(phases, func(ph phase) bool {
			switch {
			case strings.HasSuffix(ph.name, "creation"):
				return !cfg.Create
			case strings.HasSuffix(ph.name, "stat"), strings.HasSuffix(ph.name, "read"):
				return !cfg.Stat
			}
			return !cfg.Remove
		})
	}
	cfg.Meter.setTotal(int64(cfg.Iterations * len(phases) * cfg.Procs * cfg.Items))
	stats := map[string]*MdtestPhase{}
	for _, ph := range phases {
		stats[ph.name] = &MdtestPhase{Phase: ph.name}
	}
	taskDir := func(task, iter int) string {
		if cfg.Unique {
			return filepath.Join(cfg.Dir, fmt.Sprintf("mdtest_tree.%d.%d", iter, task))
		}
		return filepath.Join(cfg.Dir, fmt.Sprintf("mdtest_tree.%d", iter))
	}
	for iter := 0; iter < cfg.Iterations; iter++ {
		for t := 0; t < cfg.Procs; t++ {
			if err := os.MkdirAll(taskDir(t, iter), 0o755); err != nil {
				return nil, fmt.Errorf("mdtest: %w", err)
			}
			if err := placeSubdirs(taskDir(t, iter), cfg.MDTIndex); err != nil {
				return nil, err
			}
		}
		for _, ph := range phases {
			kind := "file"
			if ph.dirs {
				kind = "dir"
			}
			if cfg.DropCaches && !strings.HasSuffix(ph.name, "creation") {
				if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("2"), 0); err != nil {
					return nil, fmt.Errorf("mdtest: drop the dentry cache (needs root): %w", err)
				}
			}
			before, _, rpcErr := mountCalls(cfg.Dir)
			start := time.Now()
			var wg sync.WaitGroup
			errs := make(chan error, cfg.Procs)
			for t := 0; t < cfg.Procs; t++ {
				wg.Add(1)
				go func(t int) {
					defer wg.Done()
					dir := taskDir(t, iter)
					for i := 0; i < cfg.Items; i++ {
						if ctx.Err() != nil {
							errs <- ctx.Err()
							return
						}
						p := filepath.Join(dir, fmt.Sprintf("mdtest.%s.%d.%d", kind, t, i))
						if err := ph.op(p); err != nil {
							errs <- fmt.Errorf("mdtest: %s of %s: %w", ph.name, p, err)
							return
						}
						cfg.Meter.Add(1)
					}
				}(t)
			}
			wg.Wait()
			close(errs)
			if err := <-errs; err != nil {
				return nil, err
			}
			secs := time.Since(start).Seconds()
			n := cfg.Items * cfg.Procs
			s := stats[ph.name]
			rate := float64(n) / secs
			if s.Ops == 0 || rate < s.MinOpsS {
				s.MinOpsS = rate
			}
			s.MaxOpsS = max(s.MaxOpsS, rate)
			s.Ops += n
			s.Seconds += secs
			if rpcErr == nil {
				if after, _, err := mountCalls(cfg.Dir); err == nil {
					s.addRPCs(before, after)
				}
			}
		}
		for t := 0; t < cfg.Procs; t++ {
			_ = os.Remove(taskDir(t, iter)) // fails, as it should, while items are left (-C)
		}
	}
	for _, ph := range phases {
		s := stats[ph.name]
		s.OpsPerS = float64(s.Ops) / s.Seconds
		for m := range s.RPCs {
			s.RPCs[m] /= float64(s.Ops)
		}
		res.Phases = append(res.Phases, *s)
	}
	return res, nil
}

// addRPCs adds the calls made between two counts (summed; divided by
// the items at the end).
func (s *MdtestPhase) addRPCs(before, after map[string]int64) {
	if s.RPCs == nil {
		s.RPCs = map[string]float64{}
	}
	for m, n := range after {
		if d := n - before[m]; d > 0 {
			s.RPCs[m] += float64(d)
		}
	}
}

// writeAll writes b to fd, however the kernel splits it.
func writeAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// placeSubdirs sets where new subdirectories of dir go (idx -2: leave it).
func placeSubdirs(dir string, idx int) error {
	if idx < -1 {
		return nil
	}
	v := fmt.Sprintf("mdt_index=%d mdt_count=1", idx)
	if err := unix.Setxattr(dir, dirDefaultXattr, []byte(v), 0); err != nil {
		return fmt.Errorf("mdtest: place subdirectories of %s on mdt%d (is it on stripefs?): %w", dir, idx, err)
	}
	return nil
}

// Phase returns the named phase's rate (0 if it did not run).
func (r *MdtestResult) Phase(name string) float64 {
	for _, p := range r.Phases {
		if p.Phase == name {
			return p.OpsPerS
		}
	}
	return 0
}

// WriteTable prints the result the way mdtest's SUMMARY does.
func (r *MdtestResult) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "mdtest: %d tasks, %d items each, %d iterations, dir %s\n", r.Config.Procs, r.Config.Items, r.Config.Iterations, r.Config.Dir)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "Operation\tMax\tMin\tMean\t")
	for _, p := range r.Phases {
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.1f\t\n", p.Phase, p.MaxOpsS, p.MinOpsS, p.OpsPerS)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, p := range r.Phases {
		if p.RPCs != nil {
			fmt.Fprintf(w, "%s: RPCs per item %s\n", p.Phase, formatCalls(p.RPCs))
		}
	}
	return nil
}

// WriteJSON prints one JSON object.
func (r *MdtestResult) WriteJSON(w io.Writer) error {
	return json.NewEncoder(w).Encode(r)
}
