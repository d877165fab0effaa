package main

import (
	"context"
	"fmt"
	"os"

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

func benchDNECmd() *cobra.Command {
	var cfg bench.DNEConfig
	var asJSON bool
	var plotFile string
	cmd := &cobra.Command{
		Use:   "dne --mount MNT [--dirs 1000] [--rounds 5] [--files 1000] [--procs 4]",
		Short: "Remote vs local mkdir (and with remote_sync=1), and file metadata on one MDT vs round-robin, in one run",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Mount, _ = cmd.Flags().GetString("mount")
			mgs, err := mountMGS(cfg.Mount)
			if err != nil {
				return err
			}
			cfg.SetRemoteSync = func(ctx context.Context, v string) error {
				_, err := setMDTParam(ctx, mgs, "mdt.remote_sync", v)
				return err
			}
			cfg.DropCaches = os.Geteuid() == 0
			res, err := bench.DNE(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			if plotFile != "" {
				title := fmt.Sprintf("dne: remote/local mkdir by round (%d directories each)", cfg.Dirs)
				if err := bench.PlotSeries(plotFile, title, "remote / local", []string{"mkdir"}, [][]float64{res.RoundRatios}); err != nil {
					return err
				}
			}
			if asJSON {
				return res.WriteJSON(os.Stdout)
			}
			return res.WriteTable(os.Stdout)
		},
	}
	f := cmd.Flags()
	f.String("mount", "", "a stripefs mount with at least 2 MDTs")
	f.IntVar(&cfg.Dirs, "dirs", 1000, "directories each round of the mkdir comparison creates, of each kind")
	f.StringVar(&plotFile, "plot", "", "also draw the remote/local mkdir ratio of each round in this file (.svg, .png or .pdf)")
	f.IntVar(&cfg.Rounds, "rounds", 5, "rounds of the mkdir comparison")
	f.IntVar(&cfg.Files, "files", 1000, "files per task for the file comparison")
	f.IntVar(&cfg.Procs, "procs", 4, "tasks for the file comparison")
	f.BoolVar(&asJSON, "json", false, "one JSON object")
	return cmd
}
