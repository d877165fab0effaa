package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
)

// DNEConfig is bench dne's: on a stripefs mount with two MDTs or more,
// mkdir of directories on MDT0 (local) against directories on MDT1 under
// a parent on MDT0 (remote), with and without remote_sync, in
// alternating rounds; then file metadata of tasks whose directories are
// all on one MDT against directories spread round-robin.
type DNEConfig struct {
	Mount  string
	Dirs   int // directories of each kind per round
	Rounds int
	Files  int // files per task
	Procs  int // tasks
	// SetRemoteSync sets mdt.remote_sync ("0" or "1") on every MDT.
	SetRemoteSync func(ctx context.Context, v string) error
	// DropCaches drops the kernel's dentries and inodes before the file
	// stat and removal phases (root only).
	DropCaches bool

	mdtest func(context.Context, MdtestConfig) (*MdtestResult, error) // Mdtest; tests replace it
}

// DNEResult is what DNE measured.
type DNEResult struct {
	Dirs            int                `json:"dirs"`
	Rounds          int                `json:"rounds"`
	LocalMkdir      float64            `json:"local_mkdir_per_s"`
	RemoteMkdir     float64            `json:"remote_mkdir_per_s"`
	Ratio           float64            `json:"remote_local_ratio"`
	RoundRatios     []float64          `json:"remote_local_ratio_by_round"` // the spread within this run
	RemoteSyncMkdir float64            `json:"remote_sync_mkdir_per_s"`
	RemoteSyncRatio float64            `json:"remote_sync_local_ratio"`
	Files           int                `json:"files_per_task"`
	Procs           int                `json:"procs"`
	OneMDT          map[string]float64 `json:"files_one_mdt_per_s"`
	RoundRobin      map[string]float64 `json:"files_round_robin_per_s"`
	DroppedCaches   bool               `json:"dropped_caches"`
}

var filePhases = []string{"file creation", "file stat", "file removal"}

// DNE runs the comparison in a temporary directory of cfg.Mount, which
// it removes. remote_sync is set back to 0 after each round that set it,
// whatever happened.
func DNE(ctx context.Context, cfg DNEConfig) (*DNEResult, error) {
	if cfg.Dirs < 1 || cfg.Rounds < 1 || cfg.Files < 1 || cfg.Procs < 1 {
		return nil, fmt.Errorf("dne: dirs, rounds, files and procs must be at least 1")
	}
	mdtest := cfg.mdtest
	if mdtest == nil {
		mdtest = Mdtest
	}
	work, err := os.MkdirTemp(cfg.Mount, "dnebench.")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	run := func(name string, c MdtestConfig) (*MdtestResult, error) {
		c.Dir = filepath.Join(work, name)
		c.Iterations = 1
		return mdtest(ctx, c)
	}
	res := &DNEResult{Dirs: cfg.Dirs, Rounds: cfg.Rounds, Files: cfg.Files, Procs: cfg.Procs}
	// Local, remote and remote_sync mkdirs alternate in rounds, so the
	// machine's noise falls on all three alike.
	rate := map[string][2]float64{} // ops, seconds
	for r := 0; r < cfg.Rounds; r++ {
		round := map[string]float64{} // ops/s
		for _, k := range []struct {
			name string
			mdt  int
			sync bool
		}{{"local", 0, false}, {"remote", 1, false}, {"remote-sync", 1, true}} {
			if k.sync {
				if err := cfg.SetRemoteSync(ctx, "1"); err != nil {
					return nil, err
				}
			}
			m, err := run(fmt.Sprintf("%s-%d", k.name, r), MdtestConfig{Items: cfg.Dirs, Procs: 1, DirsOnly: true, MDTIndex: k.mdt, TreeMDTIndex: 0})
			if k.sync {
				if rerr := cfg.SetRemoteSync(ctx, "0"); err == nil {
					err = rerr
				}
			}
			if err != nil {
				return nil, err
			}
			for _, p := range m.Phases {
				if p.Phase == "directory creation" {
					a := rate[k.name]
					rate[k.name] = [2]float64{a[0] + float64(p.Ops), a[1] + p.Seconds}
					round[k.name] = float64(p.Ops) / p.Seconds
				}
			}
		}
		res.RoundRatios = append(res.RoundRatios, round["remote"]/round["local"])
	}
	perS := func(k string) float64 { return rate[k][0] / rate[k][1] }
	res.LocalMkdir, res.RemoteMkdir, res.RemoteSyncMkdir = perS("local"), perS("remote"), perS("remote-sync")
	res.Ratio = res.RemoteMkdir / res.LocalMkdir
	res.RemoteSyncRatio = res.RemoteSyncMkdir / res.LocalMkdir
	// Stat and removal from cold client caches compare the MDTs rather
	// than the kernel's attribute cache.
	res.DroppedCaches = cfg.DropCaches
	files := MdtestConfig{Items: cfg.Files, Procs: cfg.Procs, Unique: true, FilesOnly: true, MDTIndex: -2, DropCaches: cfg.DropCaches}
	files.TreeMDTIndex = 0
	one, err := run("one-mdt", files)
	if err != nil {
		return nil, err
	}
	files.TreeMDTIndex = -1
	rr, err := run("round-robin", files)
	if err != nil {
		return nil, err
	}
	res.OneMDT, res.RoundRobin = map[string]float64{}, map[string]float64{}
	for _, p := range filePhases {
		res.OneMDT[p], res.RoundRobin[p] = one.Phase(p), rr.Phase(p)
	}
	return res, nil
}

// WriteJSON writes r as one JSON object.
func (r *DNEResult) WriteJSON(w io.Writer) error { return json.NewEncoder(w).Encode(r) }

// WriteTable writes r for a reader.
func (r *DNEResult) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "mkdir of %d subdirectories of a directory on mdt0, %d rounds\tops/s\tratio to local\n", r.Dirs, r.Rounds)
	fmt.Fprintf(tw, "  children on mdt0 (local)\t%.0f\t1.00\n", r.LocalMkdir)
	fmt.Fprintf(tw, "  children on mdt1 (remote)\t%.0f\t%.3f\n", r.RemoteMkdir, r.Ratio)
	fmt.Fprintf(tw, "  children on mdt1, remote_sync=1\t%.0f\t%.3f\n", r.RemoteSyncMkdir, r.RemoteSyncRatio)
	byRound := make([]string, len(r.RoundRatios))
	for i, x := range r.RoundRatios {
		byRound[i] = fmt.Sprintf("%.2f", x)
	}
	fmt.Fprintf(tw, "  remote/local by round\t\t%s\n", strings.Join(byRound, " "))
	cold := ""
	if r.DroppedCaches {
		cold = ", stat and removal from cold caches"
	}
	fmt.Fprintf(tw, "files, %d tasks x %d, own directories%s\tone MDT\tround-robin\tratio\n", r.Procs, r.Files, cold)
	for _, p := range filePhases {
		fmt.Fprintf(tw, "  %s\t%.0f\t%.0f\t%.2f\n", p, r.OneMDT[p], r.RoundRobin[p], r.RoundRobin[p]/r.OneMDT[p])
	}
	return tw.Flush()
}
