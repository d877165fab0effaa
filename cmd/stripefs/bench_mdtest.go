package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/stripefs/stripefs/bench"
)

func benchMdtestCmd() *cobra.Command {
	var cfg bench.MdtestConfig
	var asJSON bool
	var plotFile string
	cmd := &cobra.Command{
		Use:   "mdtest -d DIR -n ITEMS [-i ITERATIONS] [-u] [--procs N] [-D | -F] [-C] [-T] [-r] [-w BYTES] [-e BYTES] [--mdt-index K]",
		Short: "mdtest-style metadata benchmark: create, stat and remove directories and files",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("mdt-index") {
				cfg.MDTIndex = -2
			}
			if !cmd.Flags().Changed("tree-mdt-index") {
				cfg.TreeMDTIndex = -2
			}
			cfg.Meter = new(bench.Meter)
			done := showProgress(cfg.Meter, "mdtest", false, asJSON)
			r, err := bench.Mdtest(cmd.Context(), cfg)
			done()
			if err != nil {
				return err
			}
			if plotFile != "" {
				labels, values := make([]string, len(r.Phases)), make([]float64, len(r.Phases))
				for i, ph := range r.Phases {
					labels[i], values[i] = ph.Phase, ph.OpsPerS
				}
				title := fmt.Sprintf("mdtest: %d task(s) x %d items", cfg.Procs, cfg.Items)
				if err := bench.PlotBars(plotFile, title, "ops/s", labels, values); err != nil {
					return err
				}
			}
			if asJSON {
				return r.WriteJSON(os.Stdout)
			}
			return r.WriteTable(os.Stdout)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&cfg.Dir, "dir", "d", "", "test directory")
	f.StringVar(&plotFile, "plot", "", "also draw each phase's rate in this file (.svg, .png or .pdf)")
	f.IntVarP(&cfg.Items, "items", "n", 1000, "items per task")
	f.IntVarP(&cfg.Iterations, "iterations", "i", 1, "iterations")
	f.IntVar(&cfg.Procs, "procs", 1, "parallel tasks")
	f.BoolVarP(&cfg.Unique, "unique", "u", false, "a directory per task")
	f.IntVarP(&cfg.WriteBytes, "write-bytes", "w", 0, "bytes each file's creation writes (mdtest-hard: 3901)")
	f.IntVarP(&cfg.ReadBytes, "read-bytes", "e", 0, "bytes a file read phase reads back from each file")
	f.BoolVarP(&cfg.DirsOnly, "dirs-only", "D", false, "directories only")
	f.BoolVarP(&cfg.FilesOnly, "files-only", "F", false, "files only")
	f.BoolVar(&cfg.DropCaches, "drop-caches", false, "drop the kernel's dentries and inodes before each stat and removal phase (root)")
	f.BoolVarP(&cfg.Create, "create-only", "C", false, "only the creation phases (the items stay)")
	f.BoolVarP(&cfg.Stat, "stat-only", "T", false, "only the stat phases (of items a -C run left)")
	f.BoolVarP(&cfg.Remove, "remove-only", "r", false, "only the removal phases (of items a -C run left)")
	f.IntVar(&cfg.MDTIndex, "mdt-index", -2, "MDT for the directories the tasks create (-1: round-robin)")
	f.IntVar(&cfg.TreeMDTIndex, "tree-mdt-index", -2, "MDT for each task's own directory (-1: round-robin)")
	f.BoolVar(&asJSON, "json", false, "one JSON object")
	return cmd
}

// dneResult is the distributed-namespace target measurement.
type dneResult struct {
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

func benchDNECmd() *cobra.Command {
	var dirs, rounds, files, procs int
	var asJSON bool
	var plotFile string
	cmd := &cobra.Command{
		Use:   "dne --mount MNT [--dirs 1000] [--rounds 5] [--files 1000] [--procs 4]",
		Short: "Remote vs local mkdir (and with remote_sync=1), and file metadata on one MDT vs round-robin, in one run",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			mnt, _ := cmd.Flags().GetString("mount")
			mgs, err := mountMGS(mnt)
			if err != nil {
				return err
			}
			work, err := os.MkdirTemp(mnt, "dnebench.")
			if err != nil {
				return err
			}
			defer os.RemoveAll(work)
			ctx := cmd.Context()
			run := func(name string, c bench.MdtestConfig) (*bench.MdtestResult, error) {
				c.Dir = filepath.Join(work, name)
				c.Iterations = 1
				return bench.Mdtest(ctx, c)
			}
			if dirs < 1 || rounds < 1 || files < 1 || procs < 1 {
				return fmt.Errorf("--dirs, --rounds, --files and --procs must be at least 1")
			}
			res := dneResult{Dirs: dirs, Rounds: rounds, Files: files, Procs: procs}
			// Local, remote and remote_sync mkdirs alternate in rounds of
			// --dirs each, so the machine's noise falls on all three alike.
			rate := map[string][2]float64{} // ops, seconds
			for r := 0; r < rounds; r++ {
				round := map[string]float64{} // ops/s
				for _, k := range []struct {
					name string
					mdt  int
					sync string
				}{{"local", 0, ""}, {"remote", 1, ""}, {"remote-sync", 1, "1"}} {
					if k.sync != "" {
						if err := setRemoteSync(ctx, mgs, k.sync); err != nil {
							return err
						}
					}
					m, err := run(fmt.Sprintf("%s-%d", k.name, r), bench.MdtestConfig{Items: dirs, Procs: 1, DirsOnly: true, MDTIndex: k.mdt, TreeMDTIndex: 0})
					if k.sync != "" {
						if rerr := setRemoteSync(ctx, mgs, "0"); err == nil {
							err = rerr
						}
					}
					if err != nil {
						return err
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
			res.LocalMkdir = rate["local"][0] / rate["local"][1]
			res.RemoteMkdir = rate["remote"][0] / rate["remote"][1]
			res.RemoteSyncMkdir = rate["remote-sync"][0] / rate["remote-sync"][1]
			res.Ratio = res.RemoteMkdir / res.LocalMkdir
			res.RemoteSyncRatio = res.RemoteSyncMkdir / res.LocalMkdir
			// Stat and removal start from cold client caches, so they
			// compare the MDTs rather than the kernel's attribute cache.
			drop := os.Geteuid() == 0
			res.DroppedCaches = drop
			one, err := run("one-mdt", bench.MdtestConfig{Items: files, Procs: procs, Unique: true, FilesOnly: true, MDTIndex: -2, TreeMDTIndex: 0, DropCaches: drop})
			if err != nil {
				return err
			}
			rr, err := run("round-robin", bench.MdtestConfig{Items: files, Procs: procs, Unique: true, FilesOnly: true, MDTIndex: -2, TreeMDTIndex: -1, DropCaches: drop})
			if err != nil {
				return err
			}
			res.OneMDT, res.RoundRobin = map[string]float64{}, map[string]float64{}
			for _, p := range []string{"file creation", "file stat", "file removal"} {
				res.OneMDT[p], res.RoundRobin[p] = one.Phase(p), rr.Phase(p)
			}
			if plotFile != "" {
				title := fmt.Sprintf("dne: remote/local mkdir by round (%d directories each)", dirs)
				if err := bench.PlotSeries(plotFile, title, "remote / local", []string{"mkdir"}, [][]float64{res.RoundRatios}); err != nil {
					return err
				}
			}
			if asJSON {
				return json.NewEncoder(os.Stdout).Encode(res)
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintf(tw, "mkdir of %d subdirectories of a directory on mdt0, %d rounds\tops/s\tratio to local\n", dirs, rounds)
			fmt.Fprintf(tw, "  children on mdt0 (local)\t%.0f\t1.00\n", res.LocalMkdir)
			fmt.Fprintf(tw, "  children on mdt1 (remote)\t%.0f\t%.3f\n", res.RemoteMkdir, res.Ratio)
			fmt.Fprintf(tw, "  children on mdt1, remote_sync=1\t%.0f\t%.3f\n", res.RemoteSyncMkdir, res.RemoteSyncRatio)
			byRound := make([]string, len(res.RoundRatios))
			for i, r := range res.RoundRatios {
				byRound[i] = fmt.Sprintf("%.2f", r)
			}
			fmt.Fprintf(tw, "  remote/local by round\t\t%s\n", strings.Join(byRound, " "))
			cold := ""
			if res.DroppedCaches {
				cold = ", stat and removal from cold caches"
			}
			fmt.Fprintf(tw, "files, %d tasks x %d, own directories%s\tone MDT\tround-robin\tratio\n", procs, files, cold)
			for _, p := range []string{"file creation", "file stat", "file removal"} {
				fmt.Fprintf(tw, "  %s\t%.0f\t%.0f\t%.2f\n", p, res.OneMDT[p], res.RoundRobin[p], res.RoundRobin[p]/res.OneMDT[p])
			}
			return tw.Flush()
		},
	}
	f := cmd.Flags()
	f.String("mount", "", "a stripefs mount with at least 2 MDTs")
	f.IntVar(&dirs, "dirs", 1000, "directories each round of the mkdir comparison creates, of each kind")
	f.StringVar(&plotFile, "plot", "", "also draw the remote/local mkdir ratio of each round in this file (.svg, .png or .pdf)")
	f.IntVar(&rounds, "rounds", 5, "rounds of the mkdir comparison")
	f.IntVar(&files, "files", 1000, "files per task for the file comparison")
	f.IntVar(&procs, "procs", 4, "tasks for the file comparison")
	f.BoolVar(&asJSON, "json", false, "one JSON object")
	return cmd
}

// setRemoteSync sets mdt.remote_sync on every MDT.
func setRemoteSync(ctx context.Context, mgs, v string) error {
	_, err := setMDTParam(ctx, mgs, "mdt.remote_sync", v)
	return err
}
